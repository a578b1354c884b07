//! Every field error of a document, not only the first.
//!
//! serde stops at the first field it cannot read, so a user fixing a NodePool would learn of
//! its mistakes one run at a time, and a bad field would hide what only validation sees (a
//! `nodeClassRef` naming no EC2NodeClass). Here a failed field is set aside and the document
//! read again, until it reads or nothing more can be set aside:
//! - a bad value inside a list sets aside that whole list item (an item half read means
//!   nothing), and later errors in the list are reported at their original index;
//! - any other bad value sets aside its key;
//! - a missing required field sets aside the object that lacks it; the "missing" error that
//!   setting something aside causes is not reported, since the user did not cause it.
//!
//! An object read after something was set aside is still returned, so that validation can
//! look at the rest of it; the errors recorded against its document keep it from ever being
//! used (see `kube::usable` and the CLI, which refuse documents with errors).

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use super::diagnostics::FieldError;
use super::load::explain_serde;

/// Enough for any document a person writes; a bound so a pathological one cannot loop long.
const MAX_ERRORS: usize = 50;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Reads `value` as `T`, setting aside each field that fails. Returns the object when it
/// could be read at all, and every error met on the way, in document order of discovery.
pub fn parse_every<T: DeserializeOwned>(mut value: Value) -> (Option<T>, Vec<FieldError>) {
    let mut errors = Vec::new();
    // Items set aside: (path of the list in original indices, original index of the item).
    let mut removed_items: Vec<(Vec<Step>, usize)> = Vec::new();
    // Paths (in original indices) of what was set aside, as the user would read them.
    let mut set_aside: Vec<String> = Vec::new();
    loop {
        let error = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(parsed) => return (Some(parsed), errors),
            Err(e) => e,
        };
        let Some(now) = steps(error.path()) else {
            // An enum variant or an unknown segment: nothing we can address to set aside.
            errors.push(explain(&error));
            return (None, errors);
        };
        let original = to_original(&now, &removed_items);
        let raw = error.into_inner().to_string();
        let explained = explain_serde(&render(&original), &raw);
        let missing = raw.starts_with("missing field");
        if !(missing && set_aside.contains(&explained.field)) {
            errors.push(explained);
        }
        if errors.len() >= MAX_ERRORS {
            return (None, errors);
        }
        // What to set aside: the innermost list item holding the error, else the bad key,
        // else (a missing field) the object that lacks it.
        let target = match now.iter().rposition(|s| matches!(s, Step::Index(_))) {
            Some(item) => item + 1,
            None => now.len(),
        };
        if target == 0 || !remove(&mut value, &now[..target]) {
            return (None, errors);
        }
        let original_target = &original[..target];
        set_aside.push(render(original_target));
        if let Some((Step::Index(i), list)) = original_target.split_last() {
            removed_items.push((list.to_vec(), *i));
        }
    }
}

fn explain(error: &serde_path_to_error::Error<serde_json::Error>) -> FieldError {
    let path = error.path().to_string();
    let path = if path == "." { String::new() } else { path };
    explain_serde(&path, &error.inner().to_string())
}

fn steps(path: &serde_path_to_error::Path) -> Option<Vec<Step>> {
    path.iter()
        .map(|s| match s {
            Segment::Seq { index } => Some(Step::Index(*index)),
            Segment::Map { key } => Some(Step::Key(key.clone())),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect()
}

/// The path as serde_path_to_error prints it: `spec.requirements[2].operator`.
fn render(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Maps indices of the document as it is now back to the document as the user wrote it.
fn to_original(now: &[Step], removed_items: &[(Vec<Step>, usize)]) -> Vec<Step> {
    let mut original: Vec<Step> = Vec::with_capacity(now.len());
    for step in now {
        let mapped = match step {
            Step::Key(k) => Step::Key(k.clone()),
            Step::Index(current) => {
                let mut gone: Vec<usize> = removed_items
                    .iter()
                    .filter(|(list, _)| *list == original)
                    .map(|(_, i)| *i)
                    .collect();
                gone.sort_unstable();
                // The current index counts only the items still there.
                let mut index = *current;
                for g in gone {
                    if g <= index {
                        index += 1;
                    }
                }
                Step::Index(index)
            }
        };
        original.push(mapped);
    }
    original
}

/// Removes the value at `path` (not empty); false when the path does not lead anywhere.
fn remove(value: &mut Value, path: &[Step]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut at = value;
    for step in parents {
        let next = match (step, at) {
            (Step::Key(k), Value::Object(map)) => map.get_mut(k),
            (Step::Index(i), Value::Array(items)) => items.get_mut(*i),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return false,
        }
    }
    match (last, at) {
        (Step::Key(k), Value::Object(map)) => map.remove(k).is_some(),
        (Step::Index(i), Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::NodePool;
    use serde_json::json;

    fn pool(spec: Value) -> Value {
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
               "metadata": {"name": "default"}, "spec": spec})
    }

    fn fields(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn every_bad_field_of_a_node_pool_is_reported_at_the_index_the_user_wrote() {
        let doc = pool(json!({
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "a", "operator": "Inn", "values": ["x"]},
                    {"key": "b", "operator": "In", "values": ["y"]},
                    {"key": "c", "operator": "Bogus"},
                ],
                "expireAfter": "forever",
            }},
            "weight": "heavy",
        }));
        let (parsed, errors) = parse_every::<NodePool>(doc);
        let got = fields(&errors);
        assert!(
            got.contains(&"spec.template.spec.requirements[0].operator"),
            "{got:?}"
        );
        assert!(
            got.contains(&"spec.template.spec.requirements[2].operator"),
            "{got:?}"
        );
        assert!(got.contains(&"spec.template.spec.expireAfter"), "{got:?}");
        assert!(got.contains(&"spec.weight"), "{got:?}");
        assert_eq!(errors.len(), 4, "{errors:?}");
        // The rest of the pool is still read, so validation can look at its reference.
        let parsed = parsed.expect("the pool reads once the bad fields are set aside");
        assert_eq!(parsed.spec.template.spec.node_class_ref.name, "default");
        assert_eq!(parsed.spec.template.spec.requirements.len(), 1);
    }

    #[test]
    fn a_missing_required_field_is_reported_once_not_again_for_what_it_sets_aside() {
        let doc = pool(json!({"template": {"spec": {"requirements": []}}}));
        let (parsed, errors) = parse_every::<NodePool>(doc);
        assert!(parsed.is_none());
        assert_eq!(
            fields(&errors),
            ["spec.template.spec.nodeClassRef"],
            "{errors:?}"
        );
    }

    #[test]
    fn a_document_without_errors_reads_as_plain_serde_would() {
        let doc = pool(json!({"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"}}}}));
        let (parsed, errors) = parse_every::<NodePool>(doc.clone());
        assert!(errors.is_empty(), "{errors:?}");
        let plain: NodePool = serde_json::from_value(doc).unwrap();
        assert_eq!(
            parsed.unwrap().spec.template.spec.node_class_ref.name,
            plain.spec.template.spec.node_class_ref.name
        );
    }
}
