//! The JSONPath subset CRD printer columns use: field steps (`.spec.weight`) and one
//! equality filter on a list (`.status.conditions[?(@.type=="Ready")].status`).

use serde_json::Value;

#[derive(Debug, PartialEq, Eq)]
enum Step<'a> {
    Field(&'a str),
    /// `[?(@.key=="value")]`: the first element whose `key` equals `value`.
    Filter(&'a str, &'a str),
}

fn steps(path: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    let mut rest = path.strip_prefix('.')?;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[?(@.") {
            let (cond, tail) = after.split_once(")]")?;
            let (key, value) = cond.split_once("==")?;
            let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
            out.push(Step::Filter(key.trim(), value));
            rest = tail.strip_prefix('.').unwrap_or(tail);
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        out.push(Step::Field(&rest[..end]));
        rest = &rest[end..];
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    Some(out)
}

/// The value at `path` in `obj`, or `None` when a step finds nothing (or the path is not
/// in the supported subset).
pub fn first(obj: &Value, path: &str) -> Option<Value> {
    let mut cur = obj;
    for step in steps(path)? {
        cur = match step {
            Step::Field(f) => cur.get(f)?,
            Step::Filter(k, v) => cur
                .as_array()?
                .iter()
                .find(|e| e.get(k).and_then(Value::as_str) == Some(v))?,
        };
    }
    Some(cur.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn printer_column_paths_find_fields_and_filtered_conditions() {
        let obj = json!({"spec": {"weight": 10, "template": {"spec": {"nodeClassRef": {"name": "default"}}}},
                         "status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(first(&obj, ".spec.weight"), Some(json!(10)));
        assert_eq!(
            first(&obj, ".spec.template.spec.nodeClassRef.name"),
            Some(json!("default"))
        );
        assert_eq!(
            first(&obj, r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(json!("True"))
        );
        assert_eq!(
            first(&obj, r#".status.conditions[?(@.type=="Gone")].status"#),
            None
        );
        assert_eq!(first(&obj, ".status.resources.nodes"), None);
        assert_eq!(first(&obj, "spec.weight"), None, "a path starts with a dot");
    }
}
