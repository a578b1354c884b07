//! A many-to-many consolidation end to end: two oversized nodes whose pods must stay apart
//! become two smaller nodes in ONE command (Karpenter would replace them one sweep at a
//! time, each by its own command), launched through the real provisioning core, and both
//! are Ready nodes before either old node is tainted for draining.

use std::collections::BTreeMap;

use nodewright_world::fleet_faults::FleetFault;

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

/// Two 2xlarge nodes holding one `inflate` pod each, kept apart; then every size allowed
/// and a budget that lets both go at once, past `consolidateAfter`. The world, the
/// provisioner that launched them and their names, sorted.
async fn two_oversized_kept_apart(cluster: &str) -> (World, ProvisionerState, Vec<String>) {
    let world = start(cluster).await;
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
    (world, provisioner, old)
}

/// `node` as the API server has it, and the replacement instances its removal record
/// names, sorted.
fn recorded_on(world: &World, node: &str) -> (Value, Vec<String>) {
    let n = world.sim.get_json("v1", "Node", "", node).unwrap();
    let annotations: BTreeMap<String, String> =
        serde_json::from_value(n["metadata"]["annotations"].clone()).unwrap_or_default();
    let mut recorded = nodewright::removal::recorded_replacement(&annotations);
    recorded.sort();
    (n, recorded)
}

/// 40 s of the world while new nodes join, no `inflate` pod leaving `old`.
async fn no_pod_moves_while_joining(world: &World, old: &[String]) {
    for _ in 0..4 {
        step(world, 10).await;
        assert_eq!(inflate_nodes(world), old, "no pod moved while joining");
    }
}

/// The fleet's price per hour as the sweep that wrote `report` saw it.
fn fleet_price(report: &Value) -> f64 {
    report["price_before"].as_f64().expect("a price")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_oversized_nodes_kept_apart_become_two_smaller_nodes_in_one_command_ready_before_either_drains()
 {
    let (world, provisioner, old) = two_oversized_kept_apart("sweep-many").await;
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
    let before = fleet_price(&first);
    let after = first["price_after"].as_f64().unwrap();
    assert!(after <= before * 0.9, "{first}");
    // Two new nodes, asked for once for both old ones, before anything is evicted.
    let mut launched = names(&first["replacements_launched"]);
    launched.sort();
    assert_eq!(launched.len(), 2, "{first}");
    assert_eq!(sorted(&first["awaiting_replacement"]), old, "{first}");
    assert!(names(&first["draining"]).is_empty(), "{first}");
    for node in &old {
        let (n, recorded) = recorded_on(&world, node);
        assert_eq!(recorded, launched, "{node}: {n}");
    }
    assert_eq!(world.instances().await.unwrap().len(), 4);

    // While the new nodes join, no pod leaves its node.
    no_pod_moves_while_joining(&world, &old).await;
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
    let fleet = fleet_price(&fourth);
    assert!(
        fleet <= before * 0.9,
        "the fleet costs less: {before} -> {fleet}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_launched_in_part_drains_nothing_and_the_next_sweep_plans_with_what_did_launch()
 {
    let (world, provisioner, old) = two_oversized_kept_apart("sweep-partial").await;
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());
    // EC2 launches the first of the command's two new nodes, and has no capacity left for
    // the second.
    world.front.fail_fleet_after(
        1,
        FleetFault {
            capacity_type: None,
            instance_types: vec![],
            code: "InsufficientInstanceCapacity".into(),
            message: "There is no Spot capacity available that matches your request.".into(),
        },
    );
    let first = sweep(&sweeper).await;
    let commands = first["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{first}");
    assert_eq!(sorted(&commands[0]["nodes"]), old, "{first}");
    let before = fleet_price(&first);
    let launched = names(&first["replacements_launched"]);
    assert_eq!(launched.len(), 1, "one of two launched: {first}");
    assert_eq!(sorted(&first["awaiting_replacement"]), old, "{first}");
    assert!(names(&first["draining"]).is_empty(), "{first}");
    // Nothing taken: no replacement recorded on either node, neither tainted.
    for node in &old {
        let (n, recorded) = recorded_on(&world, node);
        assert!(recorded.is_empty(), "{node}: {n}");
        assert!(
            n["spec"]["taints"].as_array().is_none_or(|t| t.is_empty()),
            "{node}: {n}"
        );
    }
    assert_eq!(world.instances().await.unwrap().len(), 3);
    world.front.clear_fleet_faults();

    // While what launched joins, no pod leaves its node.
    no_pod_moves_while_joining(&world, &old).await;
    // The sweeps after decide again, with the node that launched as capacity: the old
    // nodes go, and it is kept, not thrown away and launched again.
    for _ in 0..8 {
        sweep(&sweeper).await;
        for _ in 0..2 {
            step(&world, 10).await;
        }
        if node_names(&world).iter().all(|n| !old.contains(n)) {
            break;
        }
    }
    let left = node_names(&world);
    assert!(
        left.iter().all(|n| !old.contains(n)),
        "old nodes left: {left:?}"
    );
    assert_eq!(left.len(), 2, "{left:?}");
    let instances: Vec<String> = world
        .instances()
        .await
        .unwrap()
        .iter()
        .map(|i| i.id.clone())
        .collect();
    assert_eq!(instances.len(), 2, "{instances:?}");
    assert!(
        instances.contains(&launched[0]),
        "{instances:?} keeps {launched:?}"
    );
    assert_eq!(inflate_nodes(&world).len(), 2);
    let last = sweep(&sweeper).await;
    assert!(fleet_price(&last) <= before * 0.9, "{before} -> {last}");
}
