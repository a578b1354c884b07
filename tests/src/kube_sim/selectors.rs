//! Label selectors (equality- and set-based, as in `labels.Parse`) and field selectors.

use std::collections::BTreeMap;

use serde_json::Value;

use super::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed `labelSelector`: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

impl LabelSelector {
    pub fn parse(input: &str) -> Result<LabelSelector, ApiError> {
        let bad = |why: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: {why} in labelSelector {input:?}"
            ))
        };
        let mut reqs = Vec::new();
        for term in split_top_level(input) {
            let t = term.trim();
            if t.is_empty() {
                continue;
            }
            let req = if let Some(key) = t.strip_prefix('!') {
                Requirement::DoesNotExist(valid_key(key.trim()).map_err(|e| bad(&e))?)
            } else if let Some((k, rest)) = split_word(t, " notin ") {
                Requirement::NotIn(
                    valid_key(k).map_err(|e| bad(&e))?,
                    set_values(rest).map_err(|e| bad(&e))?,
                )
            } else if let Some((k, rest)) = split_word(t, " in ") {
                Requirement::In(
                    valid_key(k).map_err(|e| bad(&e))?,
                    set_values(rest).map_err(|e| bad(&e))?,
                )
            } else if let Some((k, v)) = t.split_once("!=") {
                Requirement::NotEq(
                    valid_key(k.trim()).map_err(|e| bad(&e))?,
                    v.trim().to_string(),
                )
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                Requirement::Eq(
                    valid_key(k.trim()).map_err(|e| bad(&e))?,
                    v.trim().to_string(),
                )
            } else {
                Requirement::Exists(valid_key(t).map_err(|e| bad(&e))?)
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Eq(k, v) => labels.get(k) == Some(v),
            Requirement::NotEq(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Splits on commas that are not inside `( )`.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&input[start..]);
    out
}

fn split_word<'a>(t: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let lower = t.to_ascii_lowercase();
    let i = lower.find(word)?;
    Some((t[..i].trim(), t[i + word.len()..].trim()))
}

fn set_values(rest: &str) -> Result<Vec<String>, String> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| "expected a parenthesised set of values".to_string())?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn valid_key(k: &str) -> Result<String, String> {
    let ok = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key {k:?}"))
    }
}

/// A parsed `fieldSelector`: `path=value`, `path==value`, `path!=value`, comma-separated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    /// `allowed` lists the paths the resource supports besides `metadata.name` and
    /// `metadata.namespace`; `None` allows any path.
    pub fn parse(input: &str, allowed: Option<&[&str]>) -> Result<FieldSelector, ApiError> {
        let mut out = Vec::new();
        for t in input.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, eq, value) = if let Some((p, v)) = t.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{t}'"
                )));
            };
            let path = path.trim();
            let supported = path == "metadata.name"
                || path == "metadata.namespace"
                || allowed.is_none_or(|a| a.contains(&path));
            if !supported {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {path}"
                )));
            }
            out.push((path.to_string(), eq, value.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// A missing field counts as the empty string, so `spec.nodeName=` selects unbound pods.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let got = path
                .split('.')
                .try_fold(obj, |v, seg| v.get(seg))
                .map(scalar)
                .unwrap_or_default();
            (got == *want) == *eq
        })
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Labels of a stored object.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a `metav1.LabelSelector` selects these labels (an empty selector selects all).
pub fn selector_matches(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    labels: &BTreeMap<String, String>,
) -> bool {
    let by_labels = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_exprs = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        let req = match e.operator.as_str() {
            "In" => Requirement::In(e.key.clone(), values),
            "NotIn" => Requirement::NotIn(e.key.clone(), values),
            "Exists" => Requirement::Exists(e.key.clone()),
            "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
            // An unknown operator selects nothing, as LabelSelectorAsSelector fails upstream.
            _ => return false,
        };
        LabelSelector(vec![req]).matches(labels)
    });
    by_labels && by_exprs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_forms_match_as_kubernetes_defines_them() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("missing notin (web)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier in (front),!missing", true),
            ("app=web,tier=back", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).map(|s| s.matches(&l)),
                Ok(want),
                "{sel}"
            );
        }
    }

    #[test]
    fn malformed_label_selector_is_a_bad_request() {
        let err = LabelSelector::parse("app in web").err().map(|e| e.code);
        assert_eq!(err, Some(400));
        assert_eq!(
            LabelSelector::parse("a b=c").err().map(|e| e.code),
            Some(400)
        );
    }

    #[test]
    fn field_selector_treats_missing_node_name_as_empty() {
        let pending =
            json!({"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}});
        let bound = json!({"metadata": {"name": "q"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let sel =
            FieldSelector::parse("spec.nodeName=", Some(&["spec.nodeName"])).unwrap_or_default();
        assert!(sel.matches(&pending));
        assert!(!sel.matches(&bound));
        let sel = FieldSelector::parse(
            "spec.nodeName!=n1,status.phase=Running",
            Some(&["spec.nodeName", "status.phase"]),
        )
        .unwrap_or_default();
        assert!(!sel.matches(&bound));
        assert!(!sel.matches(&pending));
    }

    #[test]
    fn unsupported_field_label_is_rejected() {
        let err = FieldSelector::parse("spec.foo=bar", Some(&["spec.nodeName"])).err();
        assert_eq!(
            err.map(|e| e.message),
            Some("field label not supported: spec.foo".to_string())
        );
    }
}
