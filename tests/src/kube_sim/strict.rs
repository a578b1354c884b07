//! `fieldValidation=Strict` (kubectl's default since 1.27): a create, update or patch whose
//! object has a field its kind does not know is refused with 400, naming the field, as the
//! real server's strict decoding does.
//!
//! Built-in kinds are checked against their Rust types (k8s-openapi): a field the typed
//! round trip drops is unknown. Kinds with a schema ([`super::openapi::strict_schema`]) are
//! checked against it.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::{
    apps::v1 as apps, coordination::v1 as coordination, core::v1 as core, events::v1 as events,
    policy::v1 as policy, rbac::v1 as rbac, storage::v1 as storage,
};

use super::openapi::strict_schema;
use super::resources::ResourceType;
use super::status::ApiError;

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Fields of `given` that `kept` (the typed round trip) lacks.
fn dropped(given: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    match (given, kept) {
        (Value::Object(g), Value::Object(k)) => {
            for (key, v) in g {
                match k.get(key) {
                    Some(kv) => dropped(v, kv, &join(path, key), out),
                    None if v.is_null() => {}
                    None => out.push(join(path, key)),
                }
            }
        }
        (Value::Array(g), Value::Array(k)) => {
            for (i, (gv, kv)) in g.iter().zip(k).enumerate() {
                dropped(gv, kv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn by_type<T: DeserializeOwned + Serialize>(obj: &Value) -> Vec<String> {
    let Ok(typed) = serde_json::from_value::<T>(obj.clone()) else {
        return Vec::new(); // the decoding check that follows reports a body that does not decode
    };
    let kept = serde_json::to_value(typed).unwrap_or(Value::Null);
    let mut out = Vec::new();
    dropped(obj, &kept, "", &mut out);
    out
}

/// Fields of `obj` the structural `schema` does not declare.
fn by_schema(obj: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match obj {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties");
            for (key, v) in m {
                match (props.and_then(|p| p.get(key)), extra) {
                    (Some(s), _) => by_schema(v, s, &join(path, key), out),
                    (None, Some(s)) => by_schema(v, s, &join(path, key), out),
                    (None, None) if props.is_some() => out.push(join(path, key)),
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    by_schema(v, s, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// The unknown fields of an object of kind `rt`, in document order.
pub fn unknown_fields(rt: &ResourceType, obj: &Value) -> Vec<String> {
    if let Some(schema) = strict_schema(rt) {
        let mut out = Vec::new();
        by_schema(obj, &schema, "", &mut out);
        return out;
    }
    match (rt.group, rt.plural) {
        ("", "pods") => by_type::<core::Pod>(obj),
        ("", "nodes") => by_type::<core::Node>(obj),
        ("", "namespaces") => by_type::<core::Namespace>(obj),
        ("", "configmaps") => by_type::<core::ConfigMap>(obj),
        ("", "events") => by_type::<core::Event>(obj),
        ("events.k8s.io", "events") => by_type::<events::Event>(obj),
        ("apps", "deployments") => by_type::<apps::Deployment>(obj),
        ("apps", "replicasets") => by_type::<apps::ReplicaSet>(obj),
        ("apps", "daemonsets") => by_type::<apps::DaemonSet>(obj),
        ("policy", "poddisruptionbudgets") => by_type::<policy::PodDisruptionBudget>(obj),
        ("coordination.k8s.io", "leases") => by_type::<coordination::Lease>(obj),
        ("rbac.authorization.k8s.io", "clusterroles") => by_type::<rbac::ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            by_type::<rbac::ClusterRoleBinding>(obj)
        }
        ("rbac.authorization.k8s.io", "roles") => by_type::<rbac::Role>(obj),
        ("rbac.authorization.k8s.io", "rolebindings") => by_type::<rbac::RoleBinding>(obj),
        ("", "persistentvolumeclaims") => by_type::<core::PersistentVolumeClaim>(obj),
        ("", "persistentvolumes") => by_type::<core::PersistentVolume>(obj),
        ("storage.k8s.io", "storageclasses") => by_type::<storage::StorageClass>(obj),
        _ => Vec::new(),
    }
}

/// The refusal for unknown fields under `fieldValidation=Strict`:
/// `Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.x"`.
pub fn check(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let unknown = unknown_fields(rt, obj);
    if unknown.is_empty() {
        return Ok(());
    }
    let fields: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    Err(ApiError::bad_request(format!(
        "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
        rt.kind,
        rt.version,
        rt.kind,
        fields.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_sim::resources::{PODS, RESOURCES, find};
    use serde_json::json;

    #[test]
    fn a_misspelt_field_of_a_built_in_kind_is_unknown_and_a_null_is_not() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labelz": {}},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always"}],
                     "nodeName": null}});
        assert_eq!(
            unknown_fields(&RESOURCES[PODS], &pod),
            ["metadata.labelz", "spec.containers[0].imagePullPolicyy"]
        );
    }

    #[test]
    fn a_nodepool_is_checked_against_its_schema_and_free_parts_stay_free() {
        let np = RESOURCES.get(find("karpenter.sh", "v1", "nodepools").unwrap_or(0));
        let obj = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a", "anything": 1},
            "spec": {"weight": 1, "limits": {"cpu": "100"}, "disruption": {"consolidateAftr": "1m"},
                     "template": {"spec": {"nodeClassRef": {"name": "x", "kind": "EC2NodeClass", "group": "karpenter.k8s.aws"},
                                           "requirements": [{"key": "k", "operator": "In", "valuez": []}]}}}});
        let unknown = np.map(|rt| unknown_fields(rt, &obj)).unwrap_or_default();
        assert_eq!(
            unknown,
            [
                "spec.disruption.consolidateAftr",
                "spec.template.spec.requirements[0].valuez"
            ]
        );
    }
}
