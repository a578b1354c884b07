//! An audit of every pod a client took away from a node, by eviction or by DELETE: when,
//! with what grace, and whether its PodDisruptionBudgets would have refused an eviction
//! then. The soak's invariant checker reads it; the API server itself keeps no such record
//! (an audit log is the nearest thing a real cluster has).

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::Value;

use super::clock::parse_ts;
use super::resources::PODS;
use super::status::ApiError;
use super::store::Store;

/// How the pod was asked to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Eviction,
    /// An eviction the pod's PodDisruptionBudgets refused (429): asked, not removed.
    RefusedEviction,
    Delete,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodRemoval {
    pub at: Timestamp,
    pub namespace: String,
    pub name: String,
    /// The node the pod ran on; `None` for a pod never bound (not audited: nothing ran).
    pub node: Option<String>,
    pub via: Via,
    /// The grace the pod was given: 0 when it went at once.
    pub grace: i64,
    /// Its own `terminationGracePeriodSeconds` (30 s, the API default, when unset).
    pub own_grace: i64,
    /// A DELETE the pod's budgets would have refused as an eviction at that instant.
    pub budget_forbade: bool,
    /// Already Terminating before this request (a second DELETE may only shorten the grace).
    pub was_terminating: bool,
    /// The node's annotations at that instant (what the remover had recorded on it).
    pub node_annotations: BTreeMap<String, String>,
}

impl PodRemoval {
    /// The removal of `before` (the pod as stored before the request) that left `after`
    /// (the pod as the request answered: Terminating, or as it was when removed at once)
    /// from `node` (as stored at that instant, if it still is).
    pub fn of(
        before: &Value,
        after: &Value,
        node: Option<&Value>,
        now: &str,
        via: Via,
        budget_forbade: bool,
    ) -> PodRemoval {
        let s = |v: &Value, k: &str| v.pointer(k).and_then(Value::as_str).map(str::to_string);
        let terminating = after.pointer("/metadata/deletionTimestamp").is_some()
            && after
                .pointer("/metadata/deletionGracePeriodSeconds")
                .is_some();
        PodRemoval {
            at: parse_ts(Some(now)).unwrap_or_else(Timestamp::now),
            namespace: s(before, "/metadata/namespace").unwrap_or_default(),
            name: s(before, "/metadata/name").unwrap_or_default(),
            node: s(before, "/spec/nodeName"),
            via,
            grace: if terminating {
                after
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            } else {
                0
            },
            own_grace: before
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30),
            budget_forbade,
            was_terminating: before.pointer("/metadata/deletionTimestamp").is_some(),
            node_annotations: node
                .and_then(|n| n.pointer("/metadata/annotations"))
                .and_then(|a| serde_json::from_value(a.clone()).ok())
                .unwrap_or_default(),
        }
    }
}

/// The node `pod` is bound to, as stored now.
fn node_of(store: &Store, pod: &Value) -> Option<Value> {
    let node = pod.pointer("/spec/nodeName")?.as_str()?;
    store.get(super::resources::NODES, "", node).ok().cloned()
}

/// Deletes the pod `ns/name` gracefully (`graceful::delete_pod`) and, when the audit is
/// on, records the removal; `budget_forbade` is asked only then.
pub fn delete(
    store: &mut Store,
    (ns, name): (&str, &str),
    grace: Option<i64>,
    now: &str,
    via: Via,
    budget_forbade: impl FnOnce(&Store) -> bool,
) -> Result<Value, ApiError> {
    if !store.audits_pod_removals() {
        return super::graceful::delete_pod(store, ns, name, grace, now);
    }
    let forbade = budget_forbade(store);
    let before = store.get(PODS, ns, name)?.clone();
    let node = node_of(store, &before);
    let after = super::graceful::delete_pod(store, ns, name, grace, now)?;
    let removal = PodRemoval::of(&before, &after, node.as_ref(), now, via, forbade);
    store.audit_pod_removal(removal);
    Ok(after)
}

/// Records an eviction of `ns/name` its budgets refused, when the audit is on.
pub fn refused(store: &mut Store, ns: &str, name: &str, now: &str) {
    if !store.audits_pod_removals() {
        return;
    }
    let Ok(pod) = store.get(PODS, ns, name).cloned() else {
        return;
    };
    let node = node_of(store, &pod);
    let asked = PodRemoval::of(&pod, &pod, node.as_ref(), now, Via::RefusedEviction, true);
    store.audit_pod_removal(asked);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_removal_reads_the_grace_given_the_pods_own_and_its_node() {
        let before = json!({"metadata": {"namespace": "a", "name": "p"},
                            "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 90}});
        let mut after = before.clone();
        after["metadata"]["deletionTimestamp"] = json!("2026-11-27T10:01:30Z");
        after["metadata"]["deletionGracePeriodSeconds"] = json!(45);
        let node = json!({"metadata": {"name": "n1", "annotations": {"a": "b"}}});
        let r = PodRemoval::of(
            &before,
            &after,
            Some(&node),
            "2026-11-27T10:00:45Z",
            Via::Delete,
            true,
        );
        assert_eq!(
            (r.grace, r.own_grace, r.node.as_deref()),
            (45, 90, Some("n1"))
        );
        assert_eq!(r.node_annotations.get("a").map(String::as_str), Some("b"));
        assert!(r.budget_forbade && !r.was_terminating);
        // Removed at once: grace 0; an unset grace is the API's 30 s.
        let bare = json!({"metadata": {"namespace": "a", "name": "q"}, "spec": {"nodeName": "n1"}});
        let r = PodRemoval::of(
            &bare,
            &bare,
            None,
            "2026-11-27T10:00:45Z",
            Via::Eviction,
            false,
        );
        assert_eq!((r.grace, r.own_grace, r.via), (0, 30, Via::Eviction));
    }
}
