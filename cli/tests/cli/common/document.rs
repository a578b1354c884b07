//! Documents built from a field path and a value, as the support matrix's rows describe them.

use serde_json::{Map, Value, json};

/// One step of a field path: `a.b[].c[key]` is `Key(a)`, `Key(b)`, `Item`, `Key(c)`, `Key(key)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    /// The first item of a list.
    Item,
}

/// Splits `spec.template.spec.requirements[].minValues` or
/// `metadata.annotations[nodewright.io/rebalance]` into steps.
pub fn steps(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').expect("a closing ]");
            let inside = &after[..end];
            out.push(if inside.is_empty() {
                Step::Item
            } else {
                Step::Key(inside.to_string())
            });
            rest = &after[end + 1..];
        } else {
            rest = rest.strip_prefix('.').unwrap_or(rest);
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            out.push(Step::Key(rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    out
}

/// The path as validation names it: `[]` is the first item, `[0]`.
pub fn concrete(path: &str) -> String {
    path.replace("[]", "[0]")
}

/// Deep merge: objects key by key, anything else replaced.
pub fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Sets `value` at `path` in `doc`. Objects on the way are created or kept; a list on the way
/// is replaced by one item, `item_for(list path)` (a valid item to start from) merged under
/// what follows, so each row describes one field of one fresh item.
pub fn set(doc: &mut Value, path: &str, value: Value, item_for: &dyn Fn(&str) -> Value) {
    let steps = steps(path);
    let mut at = doc;
    let mut walked = String::new();
    for (i, step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        match step {
            Step::Key(k) => {
                if !walked.is_empty() {
                    walked.push('.');
                }
                walked.push_str(k);
                if !at.is_object() {
                    *at = Value::Object(Map::new());
                }
                let map = at.as_object_mut().expect("an object");
                if last {
                    map.insert(k.clone(), value);
                    return;
                }
                at = map.entry(k.clone()).or_insert(Value::Null);
            }
            Step::Item => {
                let item = item_for(&walked);
                walked.push_str("[]");
                *at = json!([item]);
                let slot = &mut at.as_array_mut().expect("a list")[0];
                if last {
                    merge(slot, value);
                    return;
                }
                at = slot;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_keys_items_and_bracketed_keys() {
        assert_eq!(
            steps("spec.requirements[].minValues"),
            [
                Step::Key("spec".into()),
                Step::Key("requirements".into()),
                Step::Item,
                Step::Key("minValues".into())
            ]
        );
        assert_eq!(
            steps("metadata.annotations[nodewright.io/rebalance]"),
            [
                Step::Key("metadata".into()),
                Step::Key("annotations".into()),
                Step::Key("nodewright.io/rebalance".into())
            ]
        );
    }

    #[test]
    fn a_list_on_the_way_becomes_one_item_from_its_template() {
        let mut doc = json!({"spec": {"requirements": [{"key": "old"}], "weight": 1}});
        set(
            &mut doc,
            "spec.requirements[].minValues",
            json!(2),
            &|list| {
                assert_eq!(list, "spec.requirements");
                json!({"key": "k", "operator": "In", "values": ["a", "b"]})
            },
        );
        assert_eq!(
            doc,
            json!({"spec": {"requirements": [{"key": "k", "operator": "In", "values": ["a", "b"], "minValues": 2}], "weight": 1}})
        );
    }
}
