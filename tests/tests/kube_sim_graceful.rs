//! Graceful pod deletion in the simulated cluster, through the unmodified `kube::Client`:
//! a DELETE or an eviction of a pod a node runs leaves it Terminating
//! (`deletionTimestamp`, `deletionGracePeriodSeconds`) until its grace has run out on the
//! simulation clock; a grace of 0, an unbound pod or a pod whose node is gone go at once.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, EvictParams};
use nodewright_world::kube_sim::{SimClock, SimCluster, SimConfig};
use serde_json::{Value, json};

async fn cluster() -> (SimCluster, Api<Pod>) {
    let sim = SimCluster::start(SimConfig {
        clock: SimClock::manual(),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let mut config = sim.config().await.expect("config");
    config.default_retry = false;
    let client = kube::Client::try_from(config).expect("client");
    sim.apply_json(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                   "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("node");
    (sim, Api::namespaced(client, "default"))
}

fn running(sim: &SimCluster, name: &str, node: Option<&str>, grace: Option<i64>) {
    let mut spec = json!({"containers": [{"name": "c", "image": "pause"}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    if let Some(g) = grace {
        spec["terminationGracePeriodSeconds"] = json!(g);
    }
    sim.apply_json(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" },
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("pod");
}

fn stored(sim: &SimCluster, name: &str) -> Option<Value> {
    sim.get_json("v1", "Pod", "default", name)
}

async fn advance(sim: &SimCluster, secs: u64) {
    sim.clock().advance(Duration::from_secs(secs));
    sim.step().await;
}

#[tokio::test]
async fn a_deleted_running_pod_terminates_for_its_grace_period_then_goes() {
    let (sim, pods) = cluster().await;
    running(&sim, "web", Some("n1"), Some(20));
    let answered = pods
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = answered.left().expect("the pod, still there");
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(20));
    assert!(terminating.metadata.deletion_timestamp.is_some());
    advance(&sim, 10).await;
    assert!(
        stored(&sim, "web").is_some(),
        "still Terminating at 10 of 20 s"
    );
    advance(&sim, 10).await;
    assert!(stored(&sim, "web").is_none(), "gone once its grace ran out");
}

#[tokio::test]
async fn a_second_delete_shortens_the_grace_and_never_lengthens_it() {
    let (sim, pods) = cluster().await;
    running(&sim, "web", Some("n1"), None);
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    let first = stored(&sim, "web").unwrap()["metadata"]["deletionTimestamp"].clone();
    assert_eq!(
        stored(&sim, "web").unwrap()["metadata"]["deletionGracePeriodSeconds"],
        30
    );
    pods.delete("web", &DeleteParams::default().grace_period(60))
        .await
        .unwrap();
    assert_eq!(
        stored(&sim, "web").unwrap()["metadata"]["deletionTimestamp"],
        first,
        "a longer grace does not move it later"
    );
    pods.delete("web", &DeleteParams::default().grace_period(5))
        .await
        .unwrap();
    advance(&sim, 5).await;
    assert!(stored(&sim, "web").is_none(), "the shorter grace held");
}

#[tokio::test]
async fn zero_grace_unbound_pods_and_pods_of_a_vanished_node_go_at_once() {
    let (sim, pods) = cluster().await;
    running(&sim, "now", Some("n1"), None);
    running(&sim, "unbound", None, None);
    running(&sim, "orphan", Some("gone-node"), None);
    running(&sim, "zero-in-spec", Some("n1"), Some(0));
    pods.delete("now", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    pods.delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    pods.delete("orphan", &DeleteParams::default())
        .await
        .unwrap();
    pods.delete("zero-in-spec", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["now", "unbound", "orphan", "zero-in-spec"] {
        assert!(stored(&sim, name).is_none(), "{name} is gone at once");
    }
}

#[tokio::test]
async fn an_allowed_eviction_terminates_the_pod_gracefully_too() {
    let (sim, pods) = cluster().await;
    running(&sim, "web", Some("n1"), Some(15));
    pods.evict("web", &EvictParams::default())
        .await
        .expect("evicted");
    let pod = stored(&sim, "web").expect("Terminating, not gone");
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 15);
    // Evicting a Terminating pod again is allowed and changes nothing.
    pods.evict("web", &EvictParams::default())
        .await
        .expect("again");
    advance(&sim, 15).await;
    assert!(stored(&sim, "web").is_none());
}
