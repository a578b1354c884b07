//! Subresources with behaviour of their own: `pods/eviction` and the scale of Deployments,
//! ReplicaSets and NodePools (Karpenter's CRD: `specpath .spec.replicas`, `statuspath
//! .status.nodes`, no selector).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

use super::eviction;
use super::pod_removals::{self, Via};
use super::resources::{DEPLOYMENTS, PDBS, PODS, REPLICASETS, RESOURCES};
use super::server::{Answer, check_preconditions, parse_body};
use super::status::{self, ApiError};
use super::store::Store;

pub fn scale_of(obj: &Value) -> Value {
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let nodepool = obj.get("kind").and_then(Value::as_str) == Some("NodePool");
    let status_replicas = obj
        .pointer(if nodepool {
            "/status/nodes"
        } else {
            "/status/replicas"
        })
        .cloned()
        .unwrap_or(json!(0));
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": obj.pointer("/metadata/name"), "namespace": obj.pointer("/metadata/namespace"),
            "uid": obj.pointer("/metadata/uid"), "resourceVersion": obj.pointer("/metadata/resourceVersion"),
            "creationTimestamp": obj.pointer("/metadata/creationTimestamp"),
        },
        "spec": { "replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1)) },
        "status": { "replicas": status_replicas, "selector": selector },
    })
}

pub fn evict(store: &mut Store, now: &str, ns: &str, name: &str, body: &[u8]) -> Answer {
    let eviction = parse_body(body)?;
    let kind = eviction
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("Eviction");
    if kind != "Eviction" {
        return Err(ApiError::bad_request(format!(
            "expected an Eviction, got a {kind}"
        )));
    }
    if let Some(n) = eviction.pointer("/metadata/name").and_then(Value::as_str)
        && n != name
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    // The pod the caller read, not another under the same name (a StatefulSet's next one).
    let options = eviction
        .get("deleteOptions")
        .cloned()
        .unwrap_or(Value::Null);
    check_preconditions(&RESOURCES[PODS], name, store.get(PODS, ns, name)?, &options)?;
    if let Err(refused) = budget_check(store, ns, name) {
        pod_removals::refused(store, ns, name, now);
        return Err(refused);
    }
    // An allowed eviction is a DELETE with the eviction's DeleteOptions: graceful.
    let grace = eviction
        .pointer("/deleteOptions/gracePeriodSeconds")
        .and_then(Value::as_i64);
    pod_removals::delete(store, (ns, name), grace, now, Via::Eviction, |_| false)?;
    Ok((201, status::success(201, json!({}))))
}

/// What the eviction API answers for the pod `ns/name` under its namespace's
/// PodDisruptionBudgets: `Ok` when one may go now, the 429 (or 500) an eviction gets if not.
pub fn budget_check(store: &Store, ns: &str, name: &str) -> Result<(), ApiError> {
    let pod: Pod = serde_json::from_value(store.get(PODS, ns, name)?.clone())
        .map_err(|e| ApiError::internal(format!("stored pod does not decode: {e}")))?;
    let pdbs: Vec<PodDisruptionBudget> = store
        .list(PDBS, Some(ns))
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    let pods: Vec<Pod> = store
        .list(PODS, Some(ns))
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    let scale = |p: &Pod| controller_scale(store, p);
    eviction::check(&pod, &pdbs, &pods, &scale)
}

/// The controller of a pod and the replicas it wants, following ReplicaSet → Deployment
/// as the disruption controller's finders do.
pub(super) fn controller_scale(store: &Store, pod: &Pod) -> Option<(String, i32)> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))?;
    let replicas = |v: &Value| {
        v.pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1) as i32
    };
    match owner.kind.as_str() {
        "ReplicaSet" => {
            let rs = store.get(REPLICASETS, ns, &owner.name).ok()?;
            let deploy = rs
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|os| os.iter().find(|o| o["kind"] == "Deployment"))
                .and_then(|o| o["name"].as_str())
                .and_then(|d| store.get(DEPLOYMENTS, ns, d).ok());
            match deploy {
                Some(d) => Some((
                    d["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                    replicas(d),
                )),
                None => Some((owner.uid.clone(), replicas(rs))),
            }
        }
        // A StatefulSet or another scalable controller this sim does not store: count its pods.
        _ => None,
    }
}
