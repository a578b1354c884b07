//! The interruption function end to end: events sent through moto's EventBridge
//! (PutEvents) reach the interruption queue by the seeded rules, and the real handler is
//! invoked with each SQS batch as Lambda invokes it, against moto and the simulated cluster.
//!
//! Emulated here: AWS is moto's server, Kubernetes the simulated cluster
//! (`nodewright_world::kube_sim`), and the SQS event source mapping is
//! `World::deliver` over the world's queue (a failed message comes back after the queue's
//! visibility timeout on the world's manual clock). EC2 itself never
//! sends these events in moto: the scenarios send what EC2 would. The handler, its
//! adapters, the AWS SDK and `kube::Client` are real.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use nodewright_world::interruption::InterruptionState;
use nodewright_world::kit::{app_pods, manual_world, quick_batch};
use nodewright_world::kube_sim::Fault;
use nodewright_world::world::provisioner::{ProvisionerState, invoke, quick};
use nodewright_world::world::{Instance, World};
use serde_json::{Value, json};

const SPOT_WARNING: &str = "EC2 Spot Instance Interruption Warning";

async fn start(cluster: &str) -> World {
    manual_world(cluster).await.expect("the local world starts")
}

async fn step(world: &World, seconds: u64) {
    world.clock().advance(Duration::from_secs(seconds));
    world.sim.step().await;
}

/// The getting-started pool on spot, its `inflate` pods running on nodes the provisioner
/// launched.
async fn running_spot_workload(world: &World) -> ProvisionerState {
    running_spot_workload_with(world, &[]).await
}

/// As [`running_spot_workload`], with more edits to the example.
async fn running_spot_workload_with(world: &World, edits: &[(&str, &str)]) -> ProvisionerState {
    let mut all = vec![(r#"values: ["on-demand"]"#, r#"values: ["spot"]"#)];
    all.extend_from_slice(edits);
    let pool = world.example_edited("getting-started.yaml", &all).unwrap();
    world.apply_yaml(&pool).unwrap();
    world.sim.step().await;
    let provisioner = world
        .provisioner(quick(Duration::from_secs(2)), quick_batch())
        .await
        .unwrap();
    invoke(&provisioner).await.unwrap();
    world.catch_up_clock();
    for _ in 0..8 {
        step(world, 10).await;
    }
    let (total, running) = inflate(world);
    assert!(total > 0 && running == total, "{running}/{total} running");
    provisioner
}

/// (pods of `inflate`, of which Running on a node).
fn inflate(world: &World) -> (usize, usize) {
    let pods = inflate_pods(world);
    let running = pods
        .iter()
        .filter(|p| p["status"]["phase"] == "Running" && p["spec"]["nodeName"].is_string())
        .count();
    (pods.len(), running)
}

fn inflate_pods(world: &World) -> Vec<Value> {
    app_pods(world, "inflate")
}

/// The node running the most `inflate` pods, and its instance id.
fn busiest_node(world: &World) -> (String, String) {
    let pods = inflate_pods(world);
    let node = world
        .sim
        .list_json("v1", "Node")
        .into_iter()
        .max_by_key(|n| {
            pods.iter()
                .filter(|p| p["spec"]["nodeName"] == n["metadata"]["name"])
                .count()
        })
        .expect("a node");
    let name = node["metadata"]["name"].as_str().unwrap().to_string();
    let id = node["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string();
    (name, id)
}

fn node(world: &World, name: &str) -> Option<Value> {
    world.sim.get_json("v1", "Node", "", name)
}

const DISRUPTION_TAINTS: [&str; 2] = ["nodewright.io/disrupted", "karpenter.sh/disrupted"];

fn carries(node: &Value, key: &str) -> bool {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == key && t["effect"] == "NoSchedule")
}

/// Tainted as nodewright taints: its own taint and Karpenter's, both NoSchedule.
fn tainted(node: &Value) -> bool {
    DISRUPTION_TAINTS.iter().all(|key| carries(node, key))
}

async fn owned(world: &World) -> Vec<Instance> {
    world
        .instances()
        .await
        .expect("DescribeInstances against moto")
}

async fn spot_warning(world: &World, instance_id: &str, emitted: Timestamp) {
    world
        .put_event(
            "aws.ec2",
            SPOT_WARNING,
            json!({"instance-id": instance_id, "instance-action": "terminate"}),
            emitted,
        )
        .await
        .expect("PutEvents");
}

/// Delivers batches until the queue has nothing for `wait`.
async fn deliver_all(world: &World, state: &InterruptionState<'_>, wait: Duration) -> usize {
    let mut n = 0;
    loop {
        let d = world.deliver(state, wait).await.expect("a delivery");
        if d.received == 0 {
            return n;
        }
        n += d.received;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_of_a_spot_interrupted_node_run_on_replacement_capacity_before_the_deadline() {
    let world = start("e2e-spot-warning").await;
    let provisioner = running_spot_workload(&world).await;
    let state = world.interruption(&provisioner).await.unwrap();
    let (victim, instance_id) = busiest_node(&world);
    let victim_instance = owned(&world)
        .await
        .into_iter()
        .find(|i| i.id == instance_id)
        .expect("the victim's instance");
    let before: Vec<String> = owned(&world).await.into_iter().map(|i| i.id).collect();

    // Emitted 75 s ago (EventBridge and the queue took their time): 45 s are left, the
    // first 15 of them for eviction.
    let emitted = world.clock().now() - SignedDuration::from_secs(75);
    let deadline = emitted + SignedDuration::from_secs(120);
    spot_warning(&world, &instance_id, emitted).await;
    let first = world.deliver(&state, Duration::from_secs(5)).await.unwrap();
    assert_eq!((first.received, first.failed.len()), (1, 0), "{first:?}");
    assert_eq!(first.bodies[0]["detail-type"], SPOT_WARNING);

    let tainted_node = node(&world, &victim).expect("the node is still there");
    assert!(tainted(&tainted_node), "{tainted_node}");
    let replacements: Vec<Instance> = owned(&world)
        .await
        .into_iter()
        .filter(|i| !before.contains(&i.id))
        .collect();
    assert!(!replacements.is_empty(), "no replacement launched");
    for r in &replacements {
        assert_eq!(
            r.tags.get("nodewright.io/cluster"),
            Some(&world.seeded.cluster)
        );
        assert_eq!(
            r.tags.get("nodewright.io/nodepool").map(String::as_str),
            Some("default")
        );
        assert_ne!(
            (&r.instance_type, &r.zone),
            (&victim_instance.instance_type, &victim_instance.zone),
            "the reclaimed offering was launched again"
        );
    }
    let annotations: std::collections::BTreeMap<String, String> =
        serde_json::from_value(tainted_node["metadata"]["annotations"].clone()).unwrap();
    let mut recorded = nodewright::removal::recorded_replacement(&annotations);
    recorded.sort();
    let mut launched: Vec<String> = replacements.iter().map(|i| i.id.clone()).collect();
    launched.sort();
    assert_eq!(recorded, launched, "the removal records what it launched");

    // The replacement boots and joins while the follow-ups finish the drain.
    let mut moved_at = None;
    for _ in 0..40 {
        step(&world, 10).await;
        world.deliver(&state, Duration::from_secs(1)).await.unwrap();
        let pods = inflate_pods(&world);
        let all_moved = pods.iter().all(|p| {
            p["status"]["phase"] == "Running"
                && p["spec"]["nodeName"].is_string()
                && p["spec"]["nodeName"] != victim.as_str()
        });
        if all_moved && !pods.is_empty() {
            moved_at = Some(world.clock().now());
            break;
        }
    }
    let moved_at = moved_at.expect("the pods never all ran elsewhere");
    assert!(
        moved_at < deadline,
        "moved at {moved_at}, deadline {deadline}"
    );

    // At the deadline the Node is deleted and the instance terminated.
    let mut gone = false;
    for _ in 0..90 {
        world.deliver(&state, Duration::from_secs(1)).await.unwrap();
        step(&world, 1).await;
        if node(&world, &victim).is_none() && world.clock().now() >= deadline {
            gone = true;
            break;
        }
    }
    assert!(
        gone,
        "the interrupted node is still there after its deadline"
    );
    assert!(
        !owned(&world).await.iter().any(|i| i.id == instance_id),
        "the interrupted instance still runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_removes_the_node_at_once_and_its_pods_are_recreated() {
    let world = start("e2e-terminated").await;
    let provisioner = running_spot_workload(&world).await;
    let state = world.interruption(&provisioner).await.unwrap();
    let (victim, instance_id) = busiest_node(&world);
    // EC2 took the instance (emulated: the harness terminates it in moto).
    aws_sdk_ec2::Client::new(&world.sdk)
        .terminate_instances()
        .instance_ids(&instance_id)
        .send()
        .await
        .unwrap();
    world
        .put_event(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": instance_id, "state": "terminated"}),
            world.clock().now(),
        )
        .await
        .unwrap();
    let d = world.deliver(&state, Duration::from_secs(5)).await.unwrap();
    assert_eq!((d.received, d.failed.len()), (1, 0));
    assert!(node(&world, &victim).is_none(), "the node is still there");
    assert!(
        !inflate_pods(&world)
            .iter()
            .any(|p| p["spec"]["nodeName"] == victim.as_str()),
        "pods are still bound to the deleted node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_and_overlapping_events_launch_one_replacement_and_never_fail() {
    let world = start("e2e-duplicates").await;
    let provisioner = running_spot_workload(&world).await;
    let state = world.interruption(&provisioner).await.unwrap();
    let (_, instance_id) = busiest_node(&world);
    let before = owned(&world).await.len();
    // A rebalance recommendation, then the same spot warning twice (at-least-once delivery).
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
    let after_rebalance = owned(&world).await.len();
    assert!(
        after_rebalance > before,
        "the rebalance launched no replacement"
    );
    let emitted = world.clock().now();
    spot_warning(&world, &instance_id, emitted).await;
    spot_warning(&world, &instance_id, emitted).await;
    for _ in 0..3 {
        let d = world.deliver(&state, Duration::from_secs(2)).await.unwrap();
        assert!(d.failed.is_empty(), "{d:?}");
    }
    assert_eq!(
        owned(&world).await.len(),
        after_rebalance,
        "a second replacement was launched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_comes_back_in_seconds_is_dead_lettered_and_holds_back_nothing() {
    let world = start("e2e-poison").await;
    let provisioner = running_spot_workload(&world).await;
    let state = world.interruption(&provisioner).await.unwrap();
    let nodes: Vec<Value> = world.sim.list_json("v1", "Node");
    // An unparsable message naming no instance of this cluster is dropped at once; a spot
    // warning whose node cannot be taken (its writes fail) is retried and then
    // dead-lettered; a good message in the same batch is handled.
    world.send_raw("{\"not\": \"an event\"").await.unwrap();
    let (victim, instance_id) = busiest_node(&world);
    world.sim.inject(
        Fault::path(format!("/api/v1/nodes/{victim}"), 500)
            .method("PATCH")
            .times(1000),
    );
    spot_warning(&world, &instance_id, world.clock().now()).await;
    let other = nodes
        .iter()
        .find(|n| n["metadata"]["name"] != victim.as_str())
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                n["spec"]["providerID"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
            )
        });
    if let Some((_, other_id)) = &other {
        world
            .put_event(
                "aws.ec2",
                "EC2 Instance State-change Notification",
                json!({"instance-id": other_id, "state": "stopping"}),
                world.clock().now(),
            )
            .await
            .unwrap();
    }
    let first = world.deliver(&state, Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        first.failed.len(),
        1,
        "only the poisoned message fails: {first:?}"
    );
    if let Some((other_node, _)) = &other {
        assert!(
            node(&world, other_node).is_none(),
            "the good message waited on the bad one"
        );
    }
    // With its node's deadline two minutes out, the failed warning comes back in seconds
    // (ChangeMessageVisibility), not after the queue's visibility timeout; the
    // maxReceiveCount of 5 then moves it to the dead-letter queue on the sixth receive.
    let visibility = world.queue.with(|q, _| q.settings().visibility_timeout);
    assert!(visibility > Duration::from_secs(120));
    // The warning's first look, queued before the node could be taken, fails the same way
    // and goes the same way.
    let started = world.clock().now();
    while world.dead_letters().await.unwrap().len() < 2 {
        assert!(
            world.clock().now() < started + SignedDuration::from_secs(300),
            "not dead-lettered within five minutes: {:?}",
            world.dead_letters().await.unwrap()
        );
        step(&world, 5).await;
        world
            .deliver(&state, Duration::from_millis(200))
            .await
            .unwrap();
    }
    let dead: Vec<(String, u32)> = world.queue.with(|q, _| {
        q.dead_letters()
            .iter()
            .map(|(m, _)| (m.sent.body.clone(), m.receive_count))
            .collect()
    });
    assert_eq!(dead.len(), 2, "{dead:?}");
    for (body, receives) in &dead {
        assert!(body.contains(&instance_id), "{body}");
        assert_eq!(
            *receives, 5,
            "five receives, then the dead-letter queue: {body}"
        );
    }
    assert_eq!(
        deliver_all(&world, &state, Duration::from_millis(200)).await,
        0
    );
}

/// `inflate` pods that a PodDisruptionBudget counts as healthy: Ready and not deleting.
fn healthy_inflate(world: &World) -> usize {
    inflate_pods(world)
        .iter()
        .filter(|p| {
            p["metadata"]["deletionTimestamp"].is_null()
                && p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_allowing_one_disruption_at_a_time_is_respected_while_time_allows() {
    let world = start("e2e-spot-pdb").await;
    let provisioner = running_spot_workload(&world).await;
    world
        .apply_yaml(
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate, namespace: default}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {app: inflate}}\n",
        )
        .unwrap();
    let state = world.interruption(&provisioner).await.unwrap();
    let (victim, instance_id) = busiest_node(&world);
    let replicas = inflate_pods(&world).len();
    let on_victim = |world: &World| {
        inflate_pods(world)
            .iter()
            .filter(|p| p["spec"]["nodeName"] == victim.as_str())
            .count()
    };
    assert!(
        on_victim(&world) >= 2,
        "the test needs a drain of several pods"
    );

    // The full two minutes: time for the budget to let the pods go one by one.
    let emitted = world.clock().now();
    let deadline = emitted + SignedDuration::from_secs(120);
    spot_warning(&world, &instance_id, emitted).await;
    // Whatever is left 30 s before the deadline is deleted regardless of the budget
    // (DELETE_BEFORE_DEADLINE); until then the budget holds.
    let budget_holds_until = deadline - SignedDuration::from_secs(30);
    let mut worst = 0;
    let mut drained = false;
    while world.clock().now() < budget_holds_until {
        let d = world.deliver(&state, Duration::from_secs(1)).await.unwrap();
        assert!(d.failed.is_empty(), "{d:?}");
        worst = worst.max(replicas - healthy_inflate(&world));
        if on_victim(&world) == 0 && healthy_inflate(&world) == replicas {
            drained = true;
            break;
        }
        step(&world, 5).await;
        worst = worst.max(replicas - healthy_inflate(&world));
    }
    assert!(
        worst <= 1,
        "{worst} pods were unavailable at once under a budget of one"
    );
    assert!(
        drained,
        "the drain did not finish before the budget had to give way: {} pods still on {victim}",
        on_victim(&world)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_that_dies_once_its_first_look_is_queued_is_resumed_by_that_look() {
    let world = start("e2e-spot-crash").await;
    let provisioner = running_spot_workload(&world).await;
    let state = world.interruption(&provisioner).await.unwrap();
    let (victim, instance_id) = busiest_node(&world);
    let before: Vec<String> = owned(&world).await.into_iter().map(|i| i.id).collect();
    let emitted = world.clock().now() - SignedDuration::from_secs(60);
    let deadline = emitted + SignedDuration::from_secs(120);
    spot_warning(&world, &instance_id, emitted).await;

    // The first look is queued before the node is touched; the container dies the moment
    // SQS has it, before the taint, the evictions and the replacement launch.
    let crash = world.front.crash_after("SendMessage");
    tokio::select! {
        done = world.deliver(&state, Duration::from_secs(5)) => panic!("the handler finished without its SendMessage answer: {done:?}"),
        at = crash.happened() => { at.unwrap(); }
    }
    let untouched = node(&world, &victim).expect("the node is still there");
    assert!(
        !DISRUPTION_TAINTS.iter().any(|key| carries(&untouched, key)),
        "{untouched}"
    );
    assert!(
        inflate_pods(&world)
            .iter()
            .any(|p| p["spec"]["nodeName"] == victim.as_str()),
        "pods left before the crash"
    );
    assert_eq!(
        owned(&world).await.len(),
        before.len(),
        "a replacement was launched before the crash"
    );

    // A fresh container takes the look five seconds later (the warning itself stays
    // hidden for the visibility timeout, past this node's deadline).
    let provisioner = world
        .provisioner(quick(Duration::from_secs(2)), quick_batch())
        .await
        .unwrap();
    let state = world.interruption(&provisioner).await.unwrap();
    let mut moved = false;
    for _ in 0..40 {
        step(&world, 5).await;
        world
            .deliver(&state, Duration::from_millis(300))
            .await
            .unwrap();
        let pods = inflate_pods(&world);
        if !pods.is_empty()
            && pods.iter().all(|p| {
                p["status"]["phase"] == "Running"
                    && p["spec"]["nodeName"].is_string()
                    && p["spec"]["nodeName"] != victim.as_str()
            })
        {
            moved = true;
            break;
        }
    }
    assert!(moved, "the look did not finish the drain");
    assert!(
        world.clock().now() < deadline,
        "finished after the deadline"
    );
    let replacements: Vec<Instance> = owned(&world)
        .await
        .into_iter()
        .filter(|i| !before.contains(&i.id))
        .collect();
    assert_eq!(
        replacements.len(),
        1,
        "the look launches the replacement the dead invocation did not: {replacements:?}"
    );
}

/// The node names running `inflate` pods, busiest first, with their instance ids.
fn inflate_nodes(world: &World) -> Vec<(String, String)> {
    let pods = inflate_pods(world);
    let mut nodes: Vec<(usize, String, String)> = world
        .sim
        .list_json("v1", "Node")
        .into_iter()
        .filter_map(|n| {
            let name = n["metadata"]["name"].as_str()?.to_string();
            let id = n["spec"]["providerID"]
                .as_str()?
                .rsplit('/')
                .next()?
                .to_string();
            let on = pods
                .iter()
                .filter(|p| p["spec"]["nodeName"] == name.as_str())
                .count();
            (on > 0).then_some((on, name, id))
        })
        .collect();
    nodes.sort_by_key(|n| std::cmp::Reverse(n.0));
    nodes.into_iter().map(|(_, n, i)| (n, i)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_spot_warnings_in_one_nodepool_each_get_capacity_for_their_pods() {
    let world = start("e2e-spot-two").await;
    // 4-vCPU nodes hold three of the ten 1-CPU pods each: several nodes in one NodePool.
    let four_cpus = concat!(
        "values: [\"2\"]\n",
        "        - key: karpenter.k8s.aws/instance-cpu\n",
        "          operator: In\n",
        "          values: [\"4\"]"
    );
    let provisioner = running_spot_workload_with(&world, &[(r#"values: ["2"]"#, four_cpus)]).await;
    let state = world.interruption(&provisioner).await.unwrap();
    let victims = inflate_nodes(&world);
    assert!(
        victims.len() >= 2,
        "the test needs two nodes running inflate pods: {victims:?}"
    );
    let victims = &victims[..2];

    // Both warnings before either replacement registers: the first node's replacement is
    // capacity in flight, already spoken for by the first node's pods.
    let emitted = world.clock().now();
    let deadline = emitted + SignedDuration::from_secs(120);
    for (_, id) in victims {
        spot_warning(&world, id, emitted).await;
    }
    let mut received = 0;
    while received < 2 {
        let d = world.deliver(&state, Duration::from_secs(5)).await.unwrap();
        assert!(d.received > 0, "the second warning never arrived");
        assert!(d.failed.is_empty(), "{d:?}");
        received += d.received;
    }

    // No provisioner runs from here on: the pods of both nodes must find room on what the
    // interruption function launched for them.
    let on_victims = |world: &World| {
        inflate_pods(world)
            .iter()
            .filter(|p| {
                victims
                    .iter()
                    .any(|(n, _)| p["spec"]["nodeName"] == n.as_str())
            })
            .count()
    };
    let mut moved_at = None;
    for _ in 0..40 {
        step(&world, 10).await;
        world.deliver(&state, Duration::from_secs(1)).await.unwrap();
        let (total, running) = inflate(&world);
        if on_victims(&world) == 0 && running == total {
            moved_at = Some(world.clock().now());
            break;
        }
    }
    let (total, running) = inflate(&world);
    let moved_at = moved_at.unwrap_or_else(|| {
        let nodes: Vec<String> = world
            .sim
            .list_json("v1", "Node")
            .iter()
            .map(|n| {
                let name = &n["metadata"]["name"];
                let on = inflate_pods(&world)
                    .iter()
                    .filter(|p| &p["spec"]["nodeName"] == name)
                    .count();
                format!("{name} {} ({on} pods)", n["metadata"]["labels"]["node.kubernetes.io/instance-type"])
            })
            .collect();
        panic!(
            "{running}/{total} inflate pods running, {} still on the warned nodes; nodes: {nodes:?}",
            on_victims(&world)
        )
    });
    assert!(
        moved_at < deadline,
        "moved at {moved_at}, deadline {deadline}"
    );
}
