//! A capacity floor counts nodes, not room: another node's replacement is a node of its
//! pool on its way, so the floor's placeholders stand on it, while a real pod's request
//! leaves its room to the pods it was launched for.

use super::*;

/// A Ready node of the default pool on `instance`, with nothing on it.
fn pool_node(
    name: &str,
    instance: &str,
    annotations: serde_json::Value,
    taints: serde_json::Value,
) -> Node {
    let value = serde_json::json!({
        "metadata": {"name": name, "annotations": annotations, "labels": {
            labels::NODEPOOL: "default",
            labels::CAPACITY_TYPE: "on-demand",
            labels::ZONE: ZONES[0],
            labels::INSTANCE_TYPE: "m5.large",
        }},
        "spec": {"providerID": format!("aws:///{}/{instance}", ZONES[0]), "taints": taints},
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    });
    match serde_json::from_value(value) {
        Ok(n) => n,
        Err(e) => panic!("test node: {e}"),
    }
}

/// Floor placeholder `i` of the default pool, as the sweeper asks for it.
fn placeholder(i: u32) -> Pod {
    let value = serde_json::json!({
        "metadata": {"name": format!("capacity-floor-default-{i}"), "namespace": "kube-system",
            "uid": format!("capacity-floor/default/493000/{i}"),
            "labels": {labels::CAPACITY_FLOOR: "default"}},
        "spec": {
            "containers": [{"name": "floor", "image": "placeholder",
                "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}],
            "nodeSelector": {labels::NODEPOOL: "default"},
            "tolerations": [{"operator": "Exists"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {labels::CAPACITY_FLOOR: "default"}},
                "topologyKey": "kubernetes.io/hostname",
            }]}},
        },
        "status": {"phase": "Pending"},
    });
    match serde_json::from_value(value) {
        Ok(p) => p,
        Err(e) => panic!("test placeholder: {e}"),
    }
}

#[tokio::test]
async fn a_floor_counts_another_nodes_replacement_as_a_node_of_its_pool_and_a_pod_does_not_take_its_room()
 {
    // One node of the pool drains, its replacement registered; the floor of one node is
    // held by the replacement. A real pod asked for elsewhere may not take the
    // replacement's room: that belongs to the draining node's pods.
    let replacement = "i-0aaaaaaaaaaaaaaa2";
    let cases = [
        ("the floor's placeholder", placeholder(0), 0),
        ("a pod of a third node", pod("web-1", "500m"), 1),
    ];
    for (what, asked, launches) in cases {
        let aws = FakeAws::new(&["m5.large"], vec![Answer::Launch]);
        let mut p = provisioner(vec![], aws);
        p.kube.nodes = vec![
            pool_node(
                "draining",
                "i-0aaaaaaaaaaaaaaa1",
                serde_json::json!({labels::REPLACEMENT_ANNOTATION: replacement}),
                serde_json::json!([{"key": labels::DISRUPTED_TAINT, "effect": "NoSchedule"}]),
            ),
            pool_node(
                "replacement",
                replacement,
                serde_json::json!({}),
                serde_json::json!([]),
            ),
        ];
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let report = match p.replace("asker", &[asked], None, now).await {
            Ok(r) => r,
            Err(e) => panic!("{what}: replace: {e}"),
        };
        assert_eq!(
            report.launched_instances.len(),
            launches,
            "{what}: {report:?} {:?}",
            p.aws().calls()
        );
    }
}
