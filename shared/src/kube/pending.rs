//! Which pods the provisioner acts on, and grouping bound pods by node. The API server does
//! the coarse filtering (field selectors); these predicates decide the rest on the objects.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

/// Field selector for pods not yet bound and not finished: the API server returns only these.
pub const PENDING_FIELD_SELECTOR: &str = "spec.nodeName=,status.phase=Pending";
/// Field selector for pods bound to a node that still hold their resources.
pub const BOUND_FIELD_SELECTOR: &str =
    "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// True for a pod the provisioner should find capacity for. Follows Karpenter's
/// `pod.IsProvisionable`: the scheduler tried and failed (`PodScheduled=False`, reason
/// `Unschedulable`), it is not bound, not being deleted, not preempting (a nominated node means
/// the scheduler expects room after evicting lower-priority pods), and not owned by a
/// DaemonSet or a Node (those are placed by their own controllers, never on new capacity).
pub fn is_provisionable(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let spec = pod.spec.as_ref();
    let phase_pending = status.and_then(|s| s.phase.as_deref()) == Some("Pending");
    let unbound = spec
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    let not_terminating = pod.metadata.deletion_timestamp.is_none();
    let not_preempting = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_none_or(str::is_empty);
    let owned_elsewhere = pod.metadata.owner_references.iter().flatten().any(|o| {
        (o.kind == "DaemonSet" && o.api_version.starts_with("apps/"))
            || (o.kind == "Node" && o.api_version == "v1")
    });
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
    phase_pending
        && unbound
        && not_terminating
        && not_preempting
        && !owned_elsewhere
        && unschedulable
}

/// True for a pod that occupies room on its node: bound, and not finished.
pub fn holds_resources(pod: &Pod) -> bool {
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    bound && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Groups bound pods by `spec.nodeName`, keeping only those that hold resources (the field
/// selector already did; checking again keeps a server that ignores it harmless).
pub fn group_by_node(pods: Vec<Pod>) -> HashMap<String, Vec<Pod>> {
    let mut out: HashMap<String, Vec<Pod>> = HashMap::new();
    for pod in pods.into_iter().filter(holds_resources) {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        out.entry(node).or_default().push(pod);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(patch: Value) -> Pod {
        let mut base = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop"},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/3 nodes are available: 3 Insufficient cpu."}
            ]}
        });
        merge(&mut base, patch);
        serde_json::from_value(base).unwrap_or_else(|e| panic!("test pod JSON: {e}"))
    }

    /// JSON merge patch (RFC 7386), enough for building test objects.
    fn merge(target: &mut Value, patch: Value) {
        match (target, patch) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(&k);
                    } else {
                        merge(t.entry(k).or_insert(Value::Null), v);
                    }
                }
            }
            (t, p) => *t = p,
        }
    }

    #[test]
    fn only_unschedulable_unbound_live_pods_are_provisionable() {
        let cases: &[(&str, Value, bool)] = &[
            ("an unschedulable pending pod", json!({}), true),
            (
                "a pod bound to a node",
                json!({"spec": {"nodeName": "ip-10-0-0-1"}}),
                false,
            ),
            (
                "a pod with an empty nodeName",
                json!({"spec": {"nodeName": ""}}),
                true,
            ),
            (
                "a running pod",
                json!({"status": {"phase": "Running"}}),
                false,
            ),
            (
                "a pod being deleted",
                json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}}),
                false,
            ),
            (
                "a pod the scheduler has not looked at yet",
                json!({"status": {"conditions": null}}),
                false,
            ),
            (
                "a pod waiting on a scheduling gate",
                json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}),
                false,
            ),
            (
                "a pod already scheduled",
                json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}),
                false,
            ),
            (
                "a pod preempting others",
                json!({"status": {"nominatedNodeName": "ip-10-0-0-2"}}),
                false,
            ),
            (
                "a DaemonSet pod",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "fluent-bit", "uid": "u1"}]}}),
                false,
            ),
            (
                "a mirror pod owned by its node",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "ip-10-0-0-1", "uid": "u2"}]}}),
                false,
            ),
            (
                "a ReplicaSet pod",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8", "uid": "u3"}]}}),
                true,
            ),
            ("a pod without status", json!({"status": null}), false),
        ];
        for (what, patch, want) in cases {
            assert_eq!(is_provisionable(&pod(patch.clone())), *want, "{what}");
        }
    }

    #[test]
    fn bound_pods_are_grouped_by_node_and_finished_ones_dropped() {
        let on = |node: &str, name: &str, phase: &str| {
            pod(
                json!({"metadata": {"name": name}, "spec": {"nodeName": node}, "status": {"phase": phase}}),
            )
        };
        let grouped = group_by_node(vec![
            on("a", "p1", "Running"),
            on("a", "p2", "Pending"),
            on("b", "p3", "Running"),
            on("b", "done", "Succeeded"),
            on("a", "crashed", "Failed"),
            pod(json!({"metadata": {"name": "unbound"}})),
        ]);
        let names = |node: &str| -> Vec<String> {
            grouped
                .get(node)
                .into_iter()
                .flatten()
                .filter_map(|p| p.metadata.name.clone())
                .collect()
        };
        assert_eq!(names("a"), ["p1", "p2"]);
        assert_eq!(names("b"), ["p3"]);
        assert_eq!(grouped.len(), 2);
    }
}
