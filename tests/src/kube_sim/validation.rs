//! What the API server checks and defaults on a write, as the real one does for these kinds.

use serde_json::{Value, json};

use super::resources::ResourceType;
use super::status::ApiError;

/// Fills in `apiVersion`/`kind`, rejecting a body of another type (400 as upstream).
pub fn check_type_meta(rt: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(format!(
            "{} body must be a JSON object",
            rt.kind
        )));
    }
    let want = rt.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v != want => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({want})"
            )));
        }
        _ => obj["apiVersion"] = json!(want),
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some(k) if k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        _ => obj["kind"] = json!(rt.kind),
    }
    Ok(())
}

pub fn namespace_for(rt: &ResourceType, path_ns: &str, obj: &Value) -> Result<String, ApiError> {
    if !rt.namespaced {
        return Ok(String::new());
    }
    let body_ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    match (path_ns, body_ns) {
        ("", "") => Ok("default".to_string()),
        ("", b) => Ok(b.to_string()),
        (p, "") => Ok(p.to_string()),
        (p, b) if p == b => Ok(p.to_string()),
        _ => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
}

/// RFC 1123 subdomain, as metadata.name of these kinds must be.
pub fn validate_name(rt: &ResourceType, name: &str) -> Result<(), ApiError> {
    let ok = name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if ok {
        return Ok(());
    }
    Err(ApiError::invalid(
        rt.kind,
        name,
        "metadata.name",
        &format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
             characters, '-' or '.', and must start and end with an alphanumeric character"
        ),
    ))
}

pub fn validate_pod(obj: &Value, name: &str) -> Result<(), ApiError> {
    let containers = obj.pointer("/spec/containers").and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        return Err(ApiError::invalid(
            "Pod",
            name,
            "spec.containers",
            "Required value",
        ));
    }
    Ok(())
}

/// Defaults the real server applies to a new pod, and the status it always starts with.
pub fn default_pod(obj: &mut Value) {
    let spec = &mut obj["spec"];
    for (k, v) in [
        ("schedulerName", json!("default-scheduler")),
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("priority", json!(0)),
    ] {
        if spec.get(k).is_none_or(Value::is_null) {
            spec[k] = v;
        }
    }
    obj["status"] = json!({ "phase": "Pending" });
}
