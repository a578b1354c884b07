//! A many-to-many consolidation end to end: two oversized nodes whose pods must stay apart
//! become two smaller nodes in ONE command (Karpenter would replace them one sweep at a
//! time, each by its own command), launched through the real provisioning core, and both
//! are Ready nodes before either old node is tainted for draining.

use std::collections::BTreeMap;

use super::*;

/// `inflate`'s pods on separate nodes (required anti-affinity on the hostname).
const APART: (&str, &str) = (
    "      terminationGracePeriodSeconds: 0",
    "      terminationGracePeriodSeconds: 0\n      affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: inflate}}}]}}",
);

/// The nodes the `inflate` pods run on, sorted.
fn inflate_nodes(world: &World) -> Vec<String> {
    let mut on: Vec<String> = world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| {
            p["metadata"]["labels"]["app"] == "inflate" && p["status"]["phase"] == "Running"
        })
        .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
        .collect();
    on.sort();
    on
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_oversized_nodes_kept_apart_become_two_smaller_nodes_in_one_command_ready_before_either_drains()
 {
    let world = start("sweep-many").await;
    let size = (
        "      nodeClassRef:",
        "        - key: karpenter.k8s.aws/instance-size\n          operator: In\n          values: [\"2xlarge\"]\n      nodeClassRef:",
    );
    let provisioner = running(&world, 2, &[size, APART]).await;
    let mut old = node_names(&world);
    old.sort();
    assert_eq!(old.len(), 2, "{old:?}");
    assert_eq!(inflate_nodes(&world), old, "one pod on each node");
    // Older than consolidateAfter (1m), pods included; then every size is allowed, and the
    // budget lets both nodes go at once.
    step(&world, 70).await;
    let pool = world
        .example_edited(
            "getting-started.yaml",
            &[
                ("replicas: 10", "replicas: 2"),
                APART,
                (
                    "consolidateAfter: 1m",
                    "consolidateAfter: 1m\n    budgets: [{nodes: \"100%\"}]",
                ),
            ],
        )
        .unwrap();
    world.apply_yaml(&pool).unwrap();
    world.sim.step().await;
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());

    let first = sweep(&sweeper).await;
    let commands = first["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{first}");
    assert_eq!(commands[0]["action"], "replace", "{first}");
    assert_eq!(
        sorted(&commands[0]["nodes"]),
        old,
        "both in one command: {first}"
    );
    let before = first["price_before"].as_f64().unwrap();
    let after = first["price_after"].as_f64().unwrap();
    assert!(after <= before * 0.9, "{first}");
    // Two new nodes, asked for once for both old ones, before anything is evicted.
    let mut launched = names(&first["replacements_launched"]);
    launched.sort();
    assert_eq!(launched.len(), 2, "{first}");
    assert_eq!(sorted(&first["awaiting_replacement"]), old, "{first}");
    assert!(names(&first["draining"]).is_empty(), "{first}");
    for node in &old {
        let n = world.sim.get_json("v1", "Node", "", node).unwrap();
        let annotations: BTreeMap<String, String> =
            serde_json::from_value(n["metadata"]["annotations"].clone()).unwrap();
        let mut recorded = nodewright::removal::recorded_replacement(&annotations);
        recorded.sort();
        assert_eq!(recorded, launched, "{node}: {n}");
    }
    assert_eq!(world.instances().await.unwrap().len(), 4);

    // While the new nodes join, no pod leaves its node.
    for _ in 0..4 {
        step(&world, 10).await;
        assert_eq!(
            inflate_nodes(&world),
            old,
            "no pod moved before both were Ready"
        );
    }
    let mut joined: Vec<String> = node_names(&world)
        .into_iter()
        .filter(|n| !old.contains(n))
        .collect();
    joined.sort();
    assert_eq!(joined.len(), 2, "both replacements joined: {joined:?}");

    // Both Ready: both old nodes drain and go; the pods land one on each new node, with no
    // provisioner poll and no other launch.
    drain_and_remove(&sweeper, &world, &old).await;
    let mut left = node_names(&world);
    left.sort();
    assert_eq!(left, joined);
    assert_eq!(inflate_nodes(&world), joined, "one pod on each new node");
    assert_eq!(world.instances().await.unwrap().len(), 2);
    let fourth = sweep(&sweeper).await;
    let fleet = fourth["price_before"].as_f64().unwrap();
    assert!(
        fleet <= before * 0.9,
        "the fleet costs less: {before} -> {fleet}"
    );
}
