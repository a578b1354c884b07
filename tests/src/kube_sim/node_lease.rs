//! The kubelet's node heartbeat: a Lease `kube-node-lease/<node>` held by the node, renewed
//! every [`RENEW_INTERVAL`] while the kubelet runs (its Ready condition is True), owned by
//! the Node so that it goes when the node does. `kubectl describe node` shows it
//! (`Lease: HolderIdentity / RenewTime`).

use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::clock::{elapsed, format_ts, parse_ts};
use super::resources::{LEASES, NODES};
use super::store::{Store, Write};

/// The kubelet's default `nodeLeaseDurationSeconds`.
pub const LEASE_DURATION_SECONDS: i64 = 40;
/// The kubelet renews at a quarter of the lease duration (pkg/kubelet/nodelease).
pub const RENEW_INTERVAL: Duration = Duration::from_secs(10);
pub const NAMESPACE: &str = "kube-node-lease";

/// metav1.MicroTime: RFC 3339 with microseconds.
fn micro(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn node_lease(node: &Value, now: Timestamp) -> Value {
    let name = node
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": { "name": name, "namespace": NAMESPACE, "ownerReferences": [{
            "apiVersion": "v1", "kind": "Node", "name": name,
            "uid": node.pointer("/metadata/uid").cloned().unwrap_or(Value::Null) }] },
        "spec": { "holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                  "renewTime": micro(now) },
    })
}

fn kubelet_running(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Creates or renews the Lease of every node whose kubelet runs; returns the nodes whose
/// Lease was written.
pub fn renew(store: &mut Store, now: Timestamp) -> Vec<String> {
    let nodes: Vec<Value> = store
        .list(NODES, None)
        .filter(|n| kubelet_running(n))
        .cloned()
        .collect();
    let mut renewed = Vec::new();
    for node in nodes {
        let name = node["metadata"]["name"].as_str().unwrap_or("").to_string();
        let fresh = node_lease(&node, now);
        let written = match store.get(LEASES, NAMESPACE, &name) {
            Ok(current) => {
                let last = current.pointer("/spec/renewTime").and_then(Value::as_str);
                if parse_ts(last).is_some_and(|t| !elapsed(t, RENEW_INTERVAL, now)) {
                    continue;
                }
                let mut lease = current.clone();
                lease["spec"]["renewTime"] = fresh["spec"]["renewTime"].clone();
                lease["spec"]["holderIdentity"] = fresh["spec"]["holderIdentity"].clone();
                store.replace(LEASES, NAMESPACE, &name, lease, Write::Internal)
            }
            Err(_) => store.create(LEASES, NAMESPACE, fresh, &format_ts(now), Write::Internal),
        };
        if written.is_ok() {
            renewed.push(name);
        }
    }
    renewed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "status": {"conditions": [{"type": "Ready", "status": ready}]}})
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_735_689_600 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_ready_node_holds_a_lease_renewed_every_ten_seconds_and_a_dead_one_does_not() {
        let mut s = Store::new();
        for n in [node("up", "True"), node("down", "Unknown")] {
            assert!(
                s.create(NODES, "", n, "2025-01-01T00:00:00Z", Write::Internal)
                    .is_ok()
            );
        }
        assert_eq!(renew(&mut s, at(0)), ["up"]);
        assert!(s.get(LEASES, NAMESPACE, "down").is_err());
        let lease = s.get(LEASES, NAMESPACE, "up").cloned().unwrap_or_default();
        assert_eq!(lease["spec"]["holderIdentity"], "up");
        assert_eq!(lease["spec"]["renewTime"], "2025-01-01T00:00:00.000000Z");
        assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");
        assert!(
            renew(&mut s, at(9)).is_empty(),
            "renewed before the interval"
        );
        assert_eq!(renew(&mut s, at(10)), ["up"]);
        let renewed = s.get(LEASES, NAMESPACE, "up").cloned().unwrap_or_default();
        assert_eq!(renewed["spec"]["renewTime"], "2025-01-01T00:00:10.000000Z");
        assert_eq!(renewed["metadata"]["uid"], lease["metadata"]["uid"]);
    }

    #[test]
    fn deleting_a_node_collects_its_lease() {
        let mut s = Store::new();
        assert!(
            s.create(
                NODES,
                "",
                node("up", "True"),
                "2025-01-01T00:00:00Z",
                Write::Internal
            )
            .is_ok()
        );
        renew(&mut s, at(0));
        assert!(s.delete_cascade(NODES, "", "up").is_ok());
        assert!(s.get(LEASES, NAMESPACE, "up").is_err());
    }
}
