//! Scale-up end to end: pending pods in the simulated cluster -> the real provisioner
//! handler (invoked as Lambda invokes it) -> CreateFleet in moto with nodewright's tags ->
//! the simulated kubelet registers the instances as nodes -> the pods run.
//!
//! Emulated here: AWS is moto's server and Kubernetes is the simulated cluster
//! (`nodewright_world::kube_sim`); the provisioner, the AWS SDK and `kube::Client` are real.

use std::sync::Arc;
use std::time::Duration;

use nodewright::clock::{Clock, SkippingClock};
use nodewright_world::kit::{
    apply_getting_started, getting_started, log_to_test_output, manual_world, quick_batch,
};
use nodewright_world::world::provisioner::{invoke, skipped};
use nodewright_world::world::{Instance, World};
use serde_json::Value;

/// The handler's idle waits skipped ([`SkippingClock`]): an invocation takes as long as its
/// polls, not its whole budget. Tests where something must happen while the handler
/// waits use [`SkippingClock::disarmed`], armed once it has.
fn skipping() -> Arc<dyn Clock> {
    Arc::new(SkippingClock::default())
}

async fn owned_instances(world: &World) -> Vec<Instance> {
    world
        .instances()
        .await
        .expect("DescribeInstances against moto")
}

/// Pods of the Deployment `app` in `ns` and how many are Running on a node.
fn pods_of(world: &World, ns: &str, app: &str) -> (usize, usize) {
    let pods: Vec<Value> = world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| p["metadata"]["namespace"] == ns && p["metadata"]["labels"]["app"] == app)
        .collect();
    let running = pods
        .iter()
        .filter(|p| p["status"]["phase"] == "Running" && p["spec"]["nodeName"].is_string())
        .count();
    (pods.len(), running)
}

/// Advances the simulated clock past boot and readiness, stepping the simulations.
async fn let_nodes_join(world: &World) {
    world.catch_up_clock();
    for _ in 0..8 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
    }
}

async fn start(cluster: &str) -> World {
    manual_world(cluster).await.expect("the local world starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_become_tagged_instances_then_ready_nodes_then_running_pods() {
    let world = start("e2e-getting-started").await;
    // The Deployment's pods are created and found unschedulable.
    apply_getting_started(&world, 10).await.unwrap();
    let (total, running) = pods_of(&world, "default", "inflate");
    assert!(
        total > 0 && running == 0,
        "{total} pods, {running} running before any node exists"
    );

    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.expect("the handler succeeds");
    let launched = owned_instances(&world).await;
    assert!(!launched.is_empty(), "nothing launched: {summary}");
    for i in &launched {
        assert_eq!(
            i.tags.get("nodewright.io/cluster"),
            Some(&world.seeded.cluster),
            "{}",
            i.id
        );
        assert_eq!(
            i.tags.get("nodewright.io/nodepool").map(String::as_str),
            Some("default")
        );
        assert!(
            i.tags
                .get("nodewright.io/nodeclaim")
                .is_some_and(|c| c.starts_with("nw-"))
        );
        assert_eq!(
            i.tags
                .get(&format!("kubernetes.io/cluster/{}", world.seeded.cluster))
                .map(String::as_str),
            Some("owned")
        );
        let family = i.instance_type.split('.').next().unwrap();
        assert!(
            family.starts_with(['c', 'm', 'r']),
            "{} is outside the pool's categories",
            i.instance_type
        );
        assert!(i.zone.starts_with("us-east-1"));
    }

    let_nodes_join(&world).await;
    let (total, running) = pods_of(&world, "default", "inflate");
    assert_eq!(
        running, total,
        "every pod runs once the nodes are Ready ({running}/{total}); handler said {summary}"
    );
    let nodes = world.sim.list_json("v1", "Node");
    assert_eq!(nodes.len(), launched.len());
    for n in &nodes {
        assert_eq!(
            n["metadata"]["labels"]["karpenter.sh/nodepool"], "default",
            "labels come from the user data: {n}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consecutive_and_retried_invocations_do_not_launch_twice() {
    let world = start("e2e-idempotent").await;
    apply_getting_started(&world, 10).await.unwrap();
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    invoke(&state).await.unwrap();
    let first = owned_instances(&world).await.len();
    assert!(first > 0);
    // The instances are in flight (no Node yet): a second invocation counts them.
    invoke(&state).await.unwrap();
    assert_eq!(
        owned_instances(&world).await.len(),
        first,
        "the in-flight capacity was launched again"
    );
    // A cold container (new state, as after a crash) must not launch again either.
    let cold = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    invoke(&cold).await.unwrap();
    assert_eq!(
        owned_instances(&world).await.len(),
        first,
        "a retried invocation launched again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_provisioner2_launches_two_c5_xlarge_on_demand_for_five_one_cpu_pods() {
    let world = start("e2e-provisioner2").await;
    // The seed pins ap-northeast-1a; the local world's account is us-east-1.
    let seed = world
        .example_edited(
            "seed-provisioner2-cpu.yaml",
            &[("ap-northeast-1a", "us-east-1a")],
        )
        .unwrap();
    world.apply_yaml(&seed).unwrap();
    world.sim.step().await;
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.unwrap();
    let launched = owned_instances(&world).await;
    assert_eq!(launched.len(), 2, "{summary}");
    // Same NodePool, class and AMI: both launches share one launch template.
    let templates = aws_sdk_ec2::Client::new(&world.sdk)
        .describe_launch_templates()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:nodewright.io/cluster")
                .values(&world.seeded.cluster)
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(templates.launch_templates().len(), 1, "{templates:?}");
    for i in &launched {
        assert_eq!(
            (
                i.instance_type.as_str(),
                i.zone.as_str(),
                i.lifecycle.as_str()
            ),
            ("c5.xlarge", "us-east-1a", "on-demand")
        );
        assert_eq!(
            i.tags.get("nodewright.io/nodepool").map(String::as_str),
            Some("provisioner2")
        );
    }
    let_nodes_join(&world).await;
    assert_eq!(pods_of(&world, "karpenter-inflate", "inflate2"), (5, 5));
    for n in world.sim.list_json("v1", "Node") {
        let taints = n["spec"]["taints"].to_string();
        assert!(
            taints.contains("cpuIntensive"),
            "the NodePool taint is registered: {taints}"
        );
        assert_eq!(n["metadata"]["labels"]["nodeType"], "cpu-node");
    }
    // Once the nodes have joined, the next solving poll labels them with their claim ids.
    world
        .sim
        .apply_json(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "one-more", "namespace": "karpenter-inflate"},
            "spec": {"nodeSelector": {"nodeType": "never-matches"},
                     "containers": [{"name": "c", "image": "pause"}]}
        }))
        .unwrap();
    world.sim.step().await;
    invoke(&state).await.unwrap();
    for n in world.sim.list_json("v1", "Node") {
        let claim = n["metadata"]["labels"]["nodewright.io/nodeclaim"].as_str();
        assert!(
            claim.is_some_and(|c| c.starts_with("nw-")),
            "{}",
            n["metadata"]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodepool_limit_leaves_pods_pending_with_an_event_saying_why() {
    let world = start("e2e-limits").await;
    let limited = world
        .example_edited("getting-started.yaml", &[("cpu: 1000", "cpu: 4")])
        .unwrap();
    world.apply_yaml(&limited).unwrap();
    world.sim.step().await;
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    invoke(&state).await.unwrap();
    let launched = owned_instances(&world).await;
    let catalog = nodewright::catalog::bundled_instance_types().unwrap();
    let vcpus: u32 = launched
        .iter()
        .map(|i| {
            catalog
                .iter()
                .find(|(t, _)| t.name == i.instance_type)
                .map(|(t, _)| t.vcpu)
                .unwrap_or(0)
        })
        .sum();
    assert!(vcpus <= 4, "launched {vcpus} vCPU over a limit of 4");
    let events: Vec<Value> = world
        .sim
        .list_json("events.k8s.io/v1", "Event")
        .into_iter()
        .chain(world.sim.list_json("v1", "Event"))
        .filter(|e| e["reason"] == "FailedScheduling")
        .collect();
    assert!(!events.is_empty(), "no FailedScheduling event was written");
    let text = events
        .iter()
        .map(|e| {
            e.get("note")
                .or(e.get("message"))
                .cloned()
                .unwrap_or_default()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains("limits"),
        "the event does not name the limit: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_capacity_on_the_cheapest_type_launches_the_next_type_in_the_same_invocation()
{
    use nodewright::catalog::CapacityType;
    use nodewright_world::aws_faults::{CapacityFaults, WithFaults};

    let world = start("e2e-ice").await;
    // provisioner2 allows only c5.xlarge in one zone; widen it to two types so there is a
    // next-cheapest type to fall back to (the seed itself pins one type).
    let seed = world
        .example_edited(
            "seed-provisioner2-cpu.yaml",
            &[
                ("ap-northeast-1a", "us-east-1a"),
                (
                    r#"values: ["c5.xlarge"]"#,
                    r#"values: ["c5.xlarge", "c6i.xlarge"]"#,
                ),
            ],
        )
        .unwrap();
    world.apply_yaml(&seed).unwrap();
    world.sim.step().await;
    let faults = CapacityFaults::default();
    faults.exhaust("c5.xlarge", "us-east-1a", CapacityType::OnDemand);
    let state = world
        .provisioner_over(skipped(Duration::from_secs(3)), quick_batch(), |ec2| {
            WithFaults {
                inner: ec2,
                faults: faults.clone(),
            }
        })
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.unwrap();
    let launched = owned_instances(&world).await;
    assert_eq!(launched.len(), 2, "{summary}");
    assert!(
        launched.iter().all(|i| i.instance_type == "c6i.xlarge"),
        "{:?}",
        launched
            .iter()
            .map(|i| &i.instance_type)
            .collect::<Vec<_>>()
    );
}

/// getting-started with two replicas: one node serves them, so exactly one instance is
/// the right answer and any second one is a double launch.
async fn two_pods_for_one_node(cluster: &str) -> World {
    log_to_test_output();
    getting_started(cluster, 2)
        .await
        .expect("the local world starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_fleet_throttled_past_the_sdk_retries_is_tried_again_by_the_next_poll_and_launches_once()
 {
    use nodewright_world::aws_front::Handling;

    let world = two_pods_for_one_node("e2e-throttle").await;
    // The SDK's standard retry policy makes three attempts: three throttles exhaust it, so
    // the error reaches nodewright, which stops launching for that poll.
    world.front.throttle("CreateFleet", 3);
    // 20 s: the SDK's backoff over three throttles, then the polls that follow; each poll
    // is slower with moto checking signatures and policies on every call.
    let state = world
        .provisioner(skipped(Duration::from_secs(20)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.unwrap();
    let calls: Vec<Handling> = world
        .front
        .calls("CreateFleet")
        .iter()
        .map(|c| c.handling)
        .collect();
    assert_eq!(
        calls,
        [
            Handling::Throttled,
            Handling::Throttled,
            Handling::Throttled,
            Handling::Forwarded(200)
        ],
        "{summary}"
    );
    assert!(summary["throttledPolls"].as_u64() >= Some(1), "{summary}");
    assert_eq!(owned_instances(&world).await.len(), 1, "{summary}");
    let_nodes_join(&world).await;
    assert_eq!(pods_of(&world, "default", "inflate"), (2, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_that_dies_right_after_create_fleet_is_not_followed_by_a_second_launch() {
    let world = two_pods_for_one_node("e2e-crash").await;
    let crash = world.front.crash_after("CreateFleet");
    let state = world
        .provisioner(skipped(Duration::from_secs(10)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    // The handler never learns what CreateFleet did: its future is dropped the moment moto
    // has answered, as a container killed mid-invocation would be.
    tokio::select! {
        done = invoke(&state) => panic!("the handler finished without its CreateFleet answer: {done:?}"),
        at = crash.happened() => { at.unwrap(); }
    }
    drop(state);
    assert_eq!(
        owned_instances(&world).await.len(),
        1,
        "moto launched the withheld request's instance"
    );

    // Lambda retries in a cold container: nothing of the first one's memory survives.
    let cold = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&cold).await.unwrap();
    assert_eq!(
        owned_instances(&world).await.len(),
        1,
        "the cold container launched again: {summary}"
    );
    let_nodes_join(&world).await;
    assert_eq!(pods_of(&world, "default", "inflate"), (2, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_turns_unschedulable_between_polls_wakes_the_provisioner_through_its_watch() {
    let world = start("e2e-watch").await;
    let example = world
        .example_edited("getting-started.yaml", &[("replicas: 10", "replicas: 2")])
        .unwrap();
    let (deployment, config): (Vec<&str>, Vec<&str>) = example
        .split("\n---\n")
        .partition(|doc| doc.contains("kind: Deployment"));
    assert_eq!(
        deployment.len(),
        1,
        "the example's Deployment is one document"
    );
    world.apply_yaml(&config.join("\n---\n")).unwrap();
    // One poll at the start, the next one 60 s later: only the watch can act in between.
    let config = nodewright_provisioner::HandlerConfig {
        poll_interval: Duration::from_secs(60),
        budget: Duration::from_secs(6),
    };
    // Real waits until the watch's wake-up has launched; then the rest of the budget is
    // skipped.
    let clock = Arc::new(SkippingClock::disarmed());
    let state = std::sync::Arc::new(
        world
            .provisioner(config, quick_batch())
            .await
            .unwrap()
            .with_clock(clock.clone()),
    );
    let handler = {
        let state = state.clone();
        tokio::spawn(async move { invoke(&state).await })
    };
    // Past the first poll, which found nothing: the handler now waits.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(owned_instances(&world).await.is_empty());
    world.apply_yaml(deployment[0]).unwrap();
    world.sim.step().await; // the pods are created and found unschedulable
    let waited = std::time::Instant::now();
    while owned_instances(&world).await.is_empty() && waited.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    clock.arm();
    let summary = handler.await.unwrap().unwrap();
    assert!(summary["watchWakeups"].as_u64() >= Some(1), "{summary}");
    assert_eq!(owned_instances(&world).await.len(), 1, "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_pod_watch_leaves_the_provisioner_polling_and_still_launching() {
    let world = two_pods_for_one_node("e2e-dropped-watch").await;
    // Real waits until the watch is dropped; then the rest of the budget is skipped.
    let clock = Arc::new(SkippingClock::disarmed());
    let state = std::sync::Arc::new(
        world
            .provisioner(skipped(Duration::from_secs(8)), quick_batch())
            .await
            .unwrap()
            .with_clock(clock.clone()),
    );
    let handler = {
        let state = state.clone();
        tokio::spawn(async move { invoke(&state).await })
    };
    let waited = std::time::Instant::now();
    while world.sim.open_watches() == 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the handler opened no watch"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    world.sim.drop_watches();
    clock.arm();
    let summary = handler.await.unwrap().unwrap();
    assert_eq!(summary["watch"], "ended", "{summary}");
    assert_eq!(summary["failedPolls"], 0, "{summary}");
    assert_eq!(owned_instances(&world).await.len(), 1, "{summary}");
}

/// Instances on their way are capacity: a second invocation before any node joins asks
/// EC2 for nothing, not even a CreateFleet that its ClientToken would answer with the
/// first launch (counting instances alone cannot tell those replays from no call at all).
async fn second_invocation_asks_for_nothing(cluster: &str, examples: &[&str]) {
    let world = start(cluster).await;
    for example in examples {
        let mut text = world.example(example).unwrap();
        // The seed's provisioner2 pins ap-northeast-1a; the local account is us-east-1.
        if text.contains("ap-northeast-1a") {
            text = world
                .example_edited(example, &[("ap-northeast-1a", "us-east-1a")])
                .unwrap();
        }
        world.apply_yaml(&text).unwrap();
    }
    world.sim.step().await;
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    invoke(&state).await.unwrap();
    let launched = owned_instances(&world).await;
    assert!(!launched.is_empty(), "nothing launched for {examples:?}");
    let asked = world.front.calls("CreateFleet").len();
    assert_eq!(
        asked,
        launched.len(),
        "one CreateFleet per instance in the first invocation: {launched:?}"
    );
    let summary = invoke(&state).await.unwrap();
    assert_eq!(
        world.front.calls("CreateFleet").len(),
        asked,
        "the second invocation asked CreateFleet again for capacity already on its way: {summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_demand_capacity_on_its_way_is_not_asked_for_again() {
    second_invocation_asks_for_nothing("e2e-in-flight-od", &["getting-started.yaml"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_capacity_on_its_way_is_not_asked_for_again() {
    second_invocation_asks_for_nothing("e2e-in-flight-spot", &["seed-provisioner1-spot.yaml"])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_on_its_way_for_three_pools_at_once_is_not_asked_for_again() {
    second_invocation_asks_for_nothing(
        "e2e-in-flight-three",
        &[
            "getting-started.yaml",
            "seed-provisioner1-spot.yaml",
            "seed-provisioner2-cpu.yaml",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_following_pods_of_namespaces_selected_by_label_is_launched_in_their_zone() {
    let world = start("e2e-namespace-selector").await;
    apply_getting_started(&world, 0).await.unwrap();
    // A db pod pinned to us-east-1b in a namespace labelled team=storage, and another in
    // us-east-1c in an unlabelled one.
    world
        .apply_yaml(
            r#"
apiVersion: v1
kind: Namespace
metadata: {name: data, labels: {team: storage}}
---
apiVersion: v1
kind: Namespace
metadata: {name: scratch}
---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: data, labels: {app: db}}
spec:
  nodeSelector: {topology.kubernetes.io/zone: us-east-1b}
  containers: [{name: db, image: db, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: scratch, labels: {app: db}}
spec:
  nodeSelector: {topology.kubernetes.io/zone: us-east-1c}
  containers: [{name: db, image: db, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"#,
        )
        .unwrap();
    world.sim.step().await;
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    invoke(&state).await.expect("the handler succeeds");
    let_nodes_join(&world).await;
    assert_eq!(pods_of(&world, "data", "db"), (1, 1));
    assert_eq!(pods_of(&world, "scratch", "db"), (1, 1));
    let before: Vec<String> = owned_instances(&world)
        .await
        .into_iter()
        .map(|i| i.id)
        .collect();

    // Too big for the db nodes; it must share a zone with a db pod of a team=storage
    // namespace: us-east-1b, never 1c (its own namespace has no db pod at all).
    world
        .apply_yaml(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  containers: [{name: web, image: web, resources: {requests: {cpu: "6", memory: 4Gi}}}]
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: topology.kubernetes.io/zone
          labelSelector: {matchLabels: {app: db}}
          namespaceSelector: {matchLabels: {team: storage}}
"#,
        )
        .unwrap();
    world.sim.step().await;
    let summary = invoke(&state).await.expect("the handler succeeds");
    let new: Vec<_> = owned_instances(&world)
        .await
        .into_iter()
        .filter(|i| !before.contains(&i.id))
        .collect();
    assert_eq!(new.len(), 1, "{summary}");
    assert_eq!(new[0].zone, "us-east-1b", "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_overlay_s_price_decides_which_type_the_provisioner_launches() {
    // A savings plan covering r6i, written as Karpenter users write it: the provisioner
    // reads the NodeOverlay from the cluster and launches what is cheapest after it.
    let world = start("e2e-overlay").await;
    let overlay = r#"
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: savings-plan
spec:
  priceAdjustment: "-95%"
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: ["r6i"]
"#;
    world.apply_yaml(overlay).unwrap();
    apply_getting_started(&world, 1).await.unwrap();
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.expect("the handler succeeds");
    let launched = owned_instances(&world).await;
    assert_eq!(launched.len(), 1, "{summary}");
    assert!(
        launched[0].instance_type.starts_with("r6i."),
        "{} launched: the overlay makes r6i the cheapest",
        launched[0].instance_type
    );
}
