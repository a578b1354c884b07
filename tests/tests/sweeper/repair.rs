//! Node repair end to end: a node whose kubelet stopped while its instance runs on is
//! replaced once its `Ready` condition has been Unknown for thirty minutes, and one whose
//! instance fails an EC2 status check once it has for ten, whatever its NodePool's budget
//! says; its pods run again on the replacement and the instance is terminated.
//!
//! Emulated besides moto and the simulated cluster: the stopped kubelet
//! (`SimCluster::stop_kubelet`: the node lifecycle controller's Ready Unknown and
//! unreachable taints; the pods on it can no longer stop, so they stay Terminating until the
//! Node is deleted, as on a real cluster), and the failed status check (the AWS front
//! rewrites moto's DescribeInstanceStatus answer, `nodewright_world::status_checks`). The
//! simulated cluster has no taint-based eviction, so nothing but the sweeper moves the pods.

use nodewright_world::status_checks::Check;

use super::*;

/// The notes of the Events about `node` with `reason` (core or events.k8s.io Events).
fn events(world: &World, node: &str, reason: &str) -> Vec<String> {
    let mut all = world.sim.list_json("v1", "Event");
    all.extend(world.sim.list_json("events.k8s.io/v1", "Event"));
    all.into_iter()
        .filter(|e| e["reason"] == reason)
        .filter(|e| e["involvedObject"]["name"] == node || e["regarding"]["name"] == node)
        .filter_map(|e| {
            e["note"]
                .as_str()
                .or_else(|| e["message"].as_str())
                .map(str::to_string)
        })
        .collect()
}

/// Four one-CPU pods on two xlarge nodes (three fit on one), so the pods of either node do
/// not fit on the other; a budget of zero nodes stops every voluntary disruption.
async fn two_full_nodes(world: &World) -> ProvisionerState {
    let provisioner = running(
        world,
        4,
        &[
            (
                "    consolidateAfter: 1m",
                "    consolidateAfter: 1m\n    budgets:\n      - nodes: \"0\"",
            ),
            (
                "      nodeClassRef:",
                "        - key: karpenter.k8s.aws/instance-size\n          operator: In\n          values: [\"xlarge\"]\n      nodeClassRef:",
            ),
        ],
    )
    .await;
    let nodes = node_names(world);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    provisioner
}

/// Sweeps (the world stepping in between) until `node` is removed; the last report.
async fn swept_until_removed<R>(
    sweeper: &State<KubeCluster, Ec2Adapter, R>,
    world: &World,
    node: &str,
) -> Value
where
    R: Replacement + nodewright::removal::Capacity + LaunchResolver + GroupReplacement,
{
    for _ in 0..8 {
        step(world, 10).await;
    }
    let mut last = Value::Null;
    for _ in 0..3 {
        last = sweep(sweeper).await;
        if names(&last["removed"]).iter().any(|n| n == node) {
            break;
        }
        step(world, 30).await;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_kubelet_stopped_is_replaced_after_thirty_minutes_past_a_zero_budget() {
    let world = start("sweep-repair").await;
    let provisioner = two_full_nodes(&world).await;
    let sick = running_on(&world)[0].clone();
    let sick_id = instance_of(&world, &sick);
    let held = running_on(&world).iter().filter(|n| **n == sick).count();
    world.sim.stop_kubelet(&sick).unwrap();
    let sweeper = sweeper(&world)
        .await
        .with_node_repair(true)
        .with_replacer(provisioner.provisioner());

    // Within the toleration nothing happens to it.
    world.clock().advance(Duration::from_secs(29 * 60));
    let early = sweep(&sweeper).await;
    assert!(names(&early["started"]).is_empty(), "{early}");
    assert_eq!(world.instances().await.unwrap().len(), 2);

    // Past it, with node repair off (the template's default, as Karpenter's feature gate):
    // still nothing.
    world.clock().advance(Duration::from_secs(2 * 60));
    let off = super::sweeper(&world).await;
    let untouched = sweep(&off).await;
    assert!(names(&untouched["started"]).is_empty(), "{untouched}");

    // On: taken, its pods deleted (nothing holds a repair), a replacement launched.
    let first = sweep(&sweeper).await;
    assert_eq!(names(&first["started"]), vec![sick.clone()], "{first}");
    assert_eq!(names(&first["replacements_launched"]).len(), 1, "{first}");
    let told = events(&world, &sick, "NodeRepair");
    assert_eq!(told.len(), 1, "one Event says why the node goes: {told:?}");
    assert!(told[0].contains("unhealthy"), "{told:?}");
    let terminating = world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| p["spec"]["nodeName"] == sick.as_str())
        .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
        .count();
    assert_eq!(terminating, held, "every pod of the node is being deleted");

    // The replacement joins and the pods' successors run on it; the stopped kubelet
    // cannot confirm its pods gone, so the drain ends once they are stuck (a minute).
    let last = swept_until_removed(&sweeper, &world, &sick).await;
    assert!(names(&last["removed"]).contains(&sick), "{last}");
    assert_eq!(state_of(&world, &sick_id).await, "terminated");
    step(&world, 10).await;
    assert!(!node_names(&world).contains(&sick));
    assert_eq!(inflate_running(&world), 4);
    assert!(!running_on(&world).contains(&sick));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_instance_fails_a_status_check_is_replaced_after_ten_minutes() {
    let world = start("sweep-repair-status").await;
    let provisioner = two_full_nodes(&world).await;
    let sick = running_on(&world)[0].clone();
    let sick_id = instance_of(&world, &sick);
    // Its kubelet still reports Ready: only EC2 knows the host is failing.
    world
        .front
        .impair(&sick_id, Check::System, world.clock().now());
    let sweeper = sweeper(&world)
        .await
        .with_node_repair(true)
        .with_replacer(provisioner.provisioner());

    world.clock().advance(Duration::from_secs(9 * 60));
    let early = sweep(&sweeper).await;
    assert!(names(&early["started"]).is_empty(), "{early}");

    world.clock().advance(Duration::from_secs(2 * 60));
    let first = sweep(&sweeper).await;
    assert_eq!(names(&first["started"]), vec![sick.clone()], "{first}");
    assert_eq!(names(&first["replacements_launched"]).len(), 1, "{first}");
    let told = events(&world, &sick, "NodeRepair");
    assert_eq!(told.len(), 1, "{told:?}");

    let last = swept_until_removed(&sweeper, &world, &sick).await;
    assert!(names(&last["removed"]).contains(&sick), "{last}");
    assert_eq!(state_of(&world, &sick_id).await, "terminated");
    step(&world, 10).await;
    assert_eq!(inflate_running(&world), 4);
    assert!(!running_on(&world).contains(&sick));
}
