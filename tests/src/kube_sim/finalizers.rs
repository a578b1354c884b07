//! Finalizers, as the API server keeps them: a DELETE of an object that carries any only
//! marks it (`deletionTimestamp`), and the object goes once a write leaves its finalizer
//! list empty ([`released`], checked by every store write). Pods are left to `graceful.rs`
//! (their end is the grace period's, and no simulated controller puts a finalizer on one).
//! Not kept: the real server's refusal to add a finalizer to an object already marked.

use serde_json::{Value, json};

use super::resources::PODS;
use super::status::ApiError;
use super::store::{Store, Write};

/// What a DELETE did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deletion {
    /// Gone, with its dependents (background propagation); the object as it was.
    Gone(Value),
    /// Kept, marked for deletion, until its finalizers are removed; the object as it is.
    Finalizing(Value),
}

pub fn pending(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// Deletes the object, or marks it when finalizers hold it. Repeating a DELETE of a
/// marked object changes nothing.
pub fn delete(
    store: &mut Store,
    r: usize,
    ns: &str,
    name: &str,
    now: &str,
    orphan: bool,
) -> Result<Deletion, ApiError> {
    let current = store.get(r, ns, name)?.clone();
    if r == PODS || !pending(&current) {
        let gone = if orphan {
            store.delete(r, ns, name)?
        } else {
            store.delete_cascade(r, ns, name)?
        };
        return Ok(Deletion::Gone(gone));
    }
    if current.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Deletion::Finalizing(current));
    }
    let mut marked = current;
    marked["metadata"]["deletionTimestamp"] = json!(now);
    marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    let marked = store.replace(r, ns, name, marked, Write::Internal)?;
    Ok(Deletion::Finalizing(marked))
}

/// Whether `written`, marked for deletion, has no finalizer left: the store then deletes it.
pub fn released(r: usize, written: &Value) -> bool {
    r != PODS && written.pointer("/metadata/deletionTimestamp").is_some() && !pending(written)
}

#[cfg(test)]
mod tests {
    use super::super::resources::NODES;
    use super::*;

    fn node(finalizers: &[&str]) -> Value {
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "n1", "finalizers": finalizers}})
    }

    #[test]
    fn a_node_without_finalizers_goes_at_once() {
        let mut s = Store::new();
        s.create(NODES, "", node(&[]), "2025-01-01T00:00:00Z", Write::Main)
            .unwrap();
        let d = delete(&mut s, NODES, "", "n1", "2025-01-01T00:01:00Z", false).unwrap();
        assert!(matches!(d, Deletion::Gone(_)));
        assert!(s.get(NODES, "", "n1").is_err());
    }

    #[test]
    fn a_finalizer_keeps_the_node_marked_until_a_write_removes_it() {
        let mut s = Store::new();
        s.create(
            NODES,
            "",
            node(&["karpenter.sh/termination"]),
            "2025-01-01T00:00:00Z",
            Write::Main,
        )
        .unwrap();
        let first = delete(&mut s, NODES, "", "n1", "2025-01-01T00:01:00Z", false).unwrap();
        let Deletion::Finalizing(marked) = first else {
            panic!("{first:?}")
        };
        assert_eq!(
            marked["metadata"]["deletionTimestamp"],
            "2025-01-01T00:01:00Z"
        );
        // A second DELETE keeps the first mark; a write cannot take the mark away.
        let again = delete(&mut s, NODES, "", "n1", "2025-01-01T00:05:00Z", false).unwrap();
        assert_eq!(again, Deletion::Finalizing(marked.clone()));
        let mut relabelled = marked.clone();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        relabelled["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("deletionTimestamp");
        let w = s.replace(NODES, "", "n1", relabelled, Write::Main).unwrap();
        assert_eq!(w["metadata"]["deletionTimestamp"], "2025-01-01T00:01:00Z");
        assert!(s.get(NODES, "", "n1").is_ok());
        let mut released = w;
        released["metadata"]["finalizers"] = json!([]);
        s.replace(NODES, "", "n1", released, Write::Main).unwrap();
        assert!(s.get(NODES, "", "n1").is_err());
    }
}
