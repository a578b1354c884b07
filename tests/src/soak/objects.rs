//! Reading the simulated cluster's objects as the soak needs them: plain JSON pointers,
//! so the checker does not lean on the code it checks.

use serde_json::Value;

/// The string at `pointer`, if there is one.
pub fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// The instance id a node's `providerID` names.
pub fn instance_of(node: &Value) -> Option<String> {
    text(node, "/spec/providerID")?
        .rsplit('/')
        .next()
        .map(str::to_string)
}

/// The node carries nodewright's disruption taint.
pub fn tainted(node: &Value) -> bool {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .is_some_and(|ts| ts.iter().any(|t| t["key"] == "nodewright.io/disrupted"))
}

/// A DaemonSet's pod (any owner of that kind).
pub fn daemon(pod: &Value) -> bool {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|o| o.iter().any(|r| r["kind"] == "DaemonSet"))
}

/// `namespace/name`.
pub fn pod_key(pod: &Value) -> String {
    format!(
        "{}/{}",
        text(pod, "/metadata/namespace").unwrap_or(""),
        text(pod, "/metadata/name").unwrap_or("")
    )
}
