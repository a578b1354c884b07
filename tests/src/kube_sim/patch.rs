//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and an emulation of
//! strategic merge patch.
//!
//! Strategic merge patch is **emulated**, not implemented from the Go struct tags: it is a
//! merge patch except that the lists the real types mark `patchStrategy:"merge"` are merged
//! element by element on their merge key (containers and initContainers by `name`,
//! conditions by `type`, ownerReferences by `uid`, env/volumes/volumeMounts/ports and node
//! addresses on their keys), honouring `$patch: delete` inside such a list and
//! `$patch: replace` on a map. Every other list — notably `spec.taints` and
//! `spec.tolerations`, which have no patch strategy upstream — is replaced whole, as the
//! real server does. `$retainKeys`, `$setElementOrder` and `$deleteFromPrimitiveList` are
//! dropped.

use serde_json::{Map, Value};

use super::status::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Strategic,
    Json,
    /// Server-side apply; emulated as a merge patch that may create the object.
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> Result<PatchKind, ApiError> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/apply-patch+yaml" => Ok(PatchKind::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// Applies `body` to `doc` in place.
pub fn apply(kind: PatchKind, doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    match kind {
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding JSON patch: {e}")))?;
            json_patch::patch(doc, &ops).map_err(|e| {
                ApiError::invalid_patch(format!(
                    "the server rejected our request due to an error in our request: {e}"
                ))
            })
        }
        PatchKind::Merge | PatchKind::Apply => {
            let p = parse_object(body, kind)?;
            json_patch::merge(doc, &p);
            Ok(())
        }
        PatchKind::Strategic => {
            let p = parse_object(body, kind)?;
            strategic_merge(doc, &p);
            Ok(())
        }
    }
}

fn parse_object(body: &[u8], kind: PatchKind) -> Result<Value, ApiError> {
    let v: Value = if kind == PatchKind::Apply {
        serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
    };
    if v.is_object() {
        Ok(v)
    } else {
        Err(ApiError::bad_request("a merge patch must be a JSON object"))
    }
}

/// Merge key of the lists the real API types mark `patchStrategy:"merge"`.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "env"
        | "resourceClaims" => "name",
        "conditions" | "addresses" => "type",
        "ownerReferences" => "uid",
        "volumeMounts" => "mountPath",
        "ports" => "containerPort",
        _ => return None,
    })
}

fn strategic_merge(doc: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *doc = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut clean = p.clone();
        clean.remove("$patch");
        *doc = Value::Object(clean);
        return;
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Some(d) = doc.as_object_mut() else { return };
    for (k, v) in p {
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                d.remove(k);
            }
            Value::Object(_) => strategic_merge(d.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => match (merge_key(k), d.get_mut(k)) {
                (Some(key), Some(Value::Array(existing))) => merge_list(existing, items, key),
                _ => {
                    let kept: Vec<Value> = items
                        .iter()
                        .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete"))
                        .cloned()
                        .collect();
                    d.insert(k.clone(), Value::Array(kept));
                }
            },
            other => {
                d.insert(k.clone(), other.clone());
            }
        }
    }
}

fn merge_list(existing: &mut Vec<Value>, items: &[Value], key: &str) {
    for item in items {
        let id = item.get(key).cloned();
        let pos = id
            .as_ref()
            .and_then(|id| existing.iter().position(|e| e.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge(&mut existing[i], item),
            (None, false) => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, item);
                existing.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strategic(mut doc: Value, p: Value) -> Value {
        strategic_merge(&mut doc, &p);
        doc
    }

    #[test]
    fn strategic_patch_replaces_taints_but_merges_conditions_by_type() {
        let node = json!({
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}
        });
        let out = strategic(
            node,
            json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
                   "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "b", "effect": "NoExecute"}])
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}])
        );
    }

    #[test]
    fn strategic_patch_deletes_a_container_by_name_and_null_removes_a_label() {
        let pod = json!({"metadata": {"labels": {"a": "1", "b": "2"}},
                         "spec": {"containers": [{"name": "app"}, {"name": "sidecar"}]}});
        let out = strategic(
            pod,
            json!({"metadata": {"labels": {"a": null}},
                   "spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["spec"]["containers"], json!([{"name": "app"}]));
    }

    #[test]
    fn json_patch_that_tests_a_wrong_value_is_rejected() {
        let mut doc = json!({"spec": {"unschedulable": false}});
        let body = br#"[{"op":"test","path":"/spec/unschedulable","value":true}]"#;
        assert_eq!(
            apply(PatchKind::Json, &mut doc, body).err().map(|e| e.code),
            Some(422)
        );
    }

    #[test]
    fn unknown_patch_content_type_is_unsupported_media() {
        assert_eq!(
            PatchKind::from_content_type("text/plain")
                .err()
                .map(|e| e.code),
            Some(415)
        );
    }
}
