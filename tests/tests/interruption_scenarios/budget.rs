//! A rebalance recommendation's removal waits for its NodePool's disruption budget: while
//! the budget allows no more disruptions nothing happens to the node (no taint, no
//! replacement launched, an Event saying why); once it allows one, the removal begins:
//! replacement first, then the drain.
//!
//! Emulated here: AWS is moto behind the AWS front, Kubernetes the simulated cluster, the
//! SQS event source mapping `World::deliver` (follow-ups keep their real `DelaySeconds`).
//! The handlers, the AWS SDK and `kube::Client` are real.

use std::time::Duration;

use nodewright_world::kit::{manual_world, quick_batch};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick};
use serde_json::{Value, json};

fn pool(budget: &str, world: &World) -> String {
    world
        .example_edited(
            "getting-started.yaml",
            &[
                (r#"values: ["on-demand"]"#, r#"values: ["spot"]"#),
                (
                    "consolidateAfter: 1m",
                    &format!("consolidateAfter: 1m\n    budgets:\n      - nodes: \"{budget}\""),
                ),
            ],
        )
        .unwrap()
}

async fn step(world: &World, seconds: u64) {
    world.clock().advance(Duration::from_secs(seconds));
    world.sim.step().await;
}

fn node(world: &World, name: &str) -> Option<Value> {
    world.sim.get_json("v1", "Node", "", name)
}

fn tainted(node: &Value) -> bool {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == "nodewright.io/disrupted")
}

fn pods_on(world: &World, name: &str) -> usize {
    world
        .sim
        .list_json("v1", "Pod")
        .iter()
        .filter(|p| p["metadata"]["labels"]["app"] == "inflate" && p["spec"]["nodeName"] == name)
        .count()
}

/// The notes of the Events nodewright wrote about `name`.
fn node_notes(world: &World, name: &str) -> Vec<String> {
    world
        .sim
        .list_json("events.k8s.io/v1", "Event")
        .into_iter()
        .filter(|e| e["regarding"]["name"] == name)
        .filter_map(|e| e["note"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebalance_drain_waits_for_the_nodepools_disruption_budget_then_goes() {
    let world = manual_world("e2e-rebalance-budget")
        .await
        .expect("the local world starts");
    world.apply_yaml(&pool("0", &world)).unwrap();
    world.sim.step().await;
    let batch = quick_batch();
    let provisioner = world
        .provisioner(quick(Duration::from_secs(2)), batch)
        .await
        .unwrap();
    invoke(&provisioner).await.unwrap();
    world.catch_up_clock();
    for _ in 0..8 {
        step(&world, 10).await;
    }
    let state = world.interruption(&provisioner).await.unwrap();
    let nodes = world.sim.list_json("v1", "Node");
    let victim = nodes
        .iter()
        .max_by_key(|n| pods_on(&world, n["metadata"]["name"].as_str().unwrap_or("")))
        .expect("a node");
    let name = victim["metadata"]["name"].as_str().unwrap().to_string();
    let instance_id = victim["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string();
    let pods_before = pods_on(&world, &name);
    assert!(pods_before > 0);
    let instances_before = world.instances().await.unwrap().len();

    world
        .put_event(
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            json!({"instance-id": instance_id}),
            world.clock().now(),
        )
        .await
        .unwrap();
    let d = world.deliver(&state, Duration::from_secs(5)).await.unwrap();
    assert_eq!((d.received, d.failed.len()), (1, 0), "{d:?}");
    // Held: looked at again and again, nothing done.
    for _ in 0..3 {
        step(&world, 30).await;
        world
            .deliver(&state, Duration::from_millis(500))
            .await
            .unwrap();
    }
    assert!(
        node_notes(&world, &name)
            .iter()
            .any(|n| n.contains("waits") && n.contains("disruption budget")),
        "no Event says why: {:?}",
        node_notes(&world, &name)
    );
    let still = node(&world, &name).expect("the node stays");
    assert!(!tainted(&still), "a held removal does not taint: {still}");
    assert_eq!(
        world.instances().await.unwrap().len(),
        instances_before,
        "nothing is launched while the budget holds"
    );
    assert_eq!(pods_on(&world, &name), pods_before, "no pod was evicted");

    // The budget allows one disruption: the next look begins the removal, replacement
    // first, and drains the node once it is Ready.
    world.apply_yaml(&pool("1", &world)).unwrap();
    let mut drained = false;
    for _ in 0..20 {
        world
            .deliver(&state, Duration::from_millis(500))
            .await
            .unwrap();
        step(&world, 10).await;
        let gone_or_tainted = node(&world, &name).is_none_or(|n| tainted(&n));
        if gone_or_tainted && pods_on(&world, &name) == 0 {
            drained = true;
            break;
        }
    }
    assert!(
        drained,
        "the drain did not go once the budget allowed it: {:?}",
        node_notes(&world, &name)
    );
}
