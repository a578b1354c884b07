//! The provisioner against what a real cluster and a real account do that the happy path
//! does not: nodes that join but are not Ready yet, CreateFleet errors that call
//! for a fallback, NodePools deleted while the CRDs stay, repeated polls' API load, and
//! Kubernetes API faults.
//!
//! Emulated here: AWS is moto's server behind the AWS front (which answers CreateFleet
//! with injected errors where a test says so) and Kubernetes is the simulated cluster; the
//! provisioner handler, the AWS SDK and `kube::Client` are real.

use std::sync::Arc;

use nodewright::clock::{Clock, SkippingClock};
use std::time::Duration;

use nodewright_world::kit::{
    app_pods, apply_getting_started, log_to_test_output, manual_cluster, quick_batch,
    running_on_a_node,
};
use nodewright_world::kube_sim::SimConfig;
use nodewright_world::world::provisioner::{invoke, quick, skipped};
use nodewright_world::world::{Instance, World};

/// The handler's idle waits skipped ([`SkippingClock`]): an invocation takes as long as its
/// polls, not its whole budget. Tests where something happens while the handler waits
/// keep the system clock.
fn skipping() -> Arc<dyn Clock> {
    Arc::new(SkippingClock::default())
}

async fn owned_instances(world: &World) -> Vec<Instance> {
    world
        .instances()
        .await
        .expect("DescribeInstances against moto")
}

async fn start(cluster: &str, config: SimConfig) -> World {
    log_to_test_output();
    World::start(cluster, config)
        .await
        .expect("the local world starts")
}

/// Pods of the example's Deployment `inflate`: (all, Running on a node).
fn inflate_pods(world: &World) -> (usize, usize) {
    let pods = app_pods(world, "inflate");
    let running = pods.iter().filter(|p| running_on_a_node(p)).count();
    (pods.len(), running)
}

/// Moves the manual clock up to real time: instances carry moto's real launch times.
fn catch_up(world: &World) {
    let lag = jiff::Timestamp::now().duration_since(world.clock().now());
    if let Ok(lag) = Duration::try_from(lag) {
        world.clock().advance(lag);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_joined_but_is_not_ready_yet_counts_as_capacity_and_is_not_launched_again() {
    // Nodes register 40 s after launch and then stay NotReady (CNI not up) for an hour.
    let world = start(
        "e2e-not-ready",
        SimConfig {
            ready_delay: Duration::from_secs(3600),
            ..manual_cluster()
        },
    )
    .await;
    apply_getting_started(&world, 10).await.unwrap();
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.unwrap();
    let first = owned_instances(&world).await;
    assert!(!first.is_empty(), "nothing launched: {summary}");

    catch_up(&world);
    world.clock().advance(Duration::from_secs(50));
    let step = world.sim.step().await;
    assert_eq!(
        step.nodes_registered.len(),
        first.len(),
        "every instance registers its node: {step:?}"
    );
    let (total, running) = inflate_pods(&world);
    assert!(
        total > 0 && running == 0,
        "{running}/{total} pods run on NotReady nodes"
    );
    for n in world.sim.list_json("v1", "Node") {
        assert!(
            n["metadata"]["labels"]["nodewright.io/nodeclaim"].is_null(),
            "the node registers without the claim label (it is no longer in the user data): {n}"
        );
    }

    // One pod fewer: a new pod set, so a new decision would get new node claim ids and
    // ClientTokens (with the same set, EC2's answer to the old token would hide a second
    // launch). The pods are still pending and the nodes are not Ready: their capacity is
    // on the way, so nothing is launched again.
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(world.sim.client().await.unwrap(), "default");
    deployments
        .patch(
            "inflate",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 9}})),
        )
        .await
        .expect("scaling the Deployment down");
    world.sim.step().await;
    assert_eq!(inflate_pods(&world), (9, 0));
    let summary = invoke(&state).await.unwrap();
    let after = owned_instances(&world).await;
    assert_eq!(
        after.len(),
        first.len(),
        "the capacity of registered, not yet Ready nodes was launched again: {summary}"
    );
    for n in world.sim.list_json("v1", "Node") {
        assert!(
            n["metadata"]["labels"]["nodewright.io/nodeclaim"]
                .as_str()
                .is_some_and(|c| c.starts_with("nw-")),
            "the poll labels the node from its instance's tag: {n}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_spot_service_linked_role_the_same_poll_falls_back_to_on_demand_and_spot_rests()
{
    use nodewright_world::aws_front::Handling;
    use nodewright_world::fleet_faults::FleetFault;

    let world = start("e2e-no-spot-role", manual_cluster()).await;
    let pool = world
        .example_edited(
            "getting-started.yaml",
            &[(
                r#"values: ["on-demand"]"#,
                r#"values: ["spot", "on-demand"]"#,
            )],
        )
        .unwrap();
    world.apply_yaml(&pool).unwrap();
    world.sim.step().await;
    // As EC2 answers every spot launch in an account without AWSServiceRoleForEC2Spot
    // whose callers may not create it.
    world.front.fail_fleet(FleetFault {
        capacity_type: Some("spot".into()),
        instance_types: vec![],
        code: "AuthFailure.ServiceLinkedRoleCreationNotPermitted".into(),
        message: "The provided credentials do not have permission to create the \
                  service-linked role for EC2 Spot Instances."
            .into(),
    });
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.unwrap();
    let launched = owned_instances(&world).await;
    assert!(!launched.is_empty(), "nothing launched: {summary}");
    assert!(
        launched.iter().all(|i| i.lifecycle == "on-demand"),
        "{launched:?}"
    );
    let fleets: Vec<Handling> = world
        .front
        .calls("CreateFleet")
        .iter()
        .map(|c| c.handling)
        .collect();
    let refused = fleets
        .iter()
        .filter(|h| **h == Handling::FleetErrors)
        .count();
    assert!(refused > 0, "spot was never tried: {fleets:?}");
    assert!(
        fleets[refused..]
            .iter()
            .all(|h| *h == Handling::Forwarded(200)),
        "every spot attempt comes first, then on-demand launches: {fleets:?}"
    );

    // More pods a minute later: spot stays excluded, so no spot launch is tried again.
    world.clock().advance(Duration::from_secs(60));
    let more = documents_of_kind(
        &world.example("getting-started.yaml").unwrap(),
        "Deployment",
    )
    .replace("inflate", "inflate-more")
    .replace("replicas: 10", "replicas: 3");
    world.apply_yaml(&more).unwrap();
    world.sim.step().await;
    let summary = invoke(&state).await.unwrap();
    let after: Vec<Handling> = world
        .front
        .calls("CreateFleet")
        .iter()
        .map(|c| c.handling)
        .collect();
    assert!(
        after.len() > fleets.len(),
        "nothing launched for the new pods: {summary}"
    );
    assert!(
        after[fleets.len()..]
            .iter()
            .all(|h| *h == Handling::Forwarded(200)),
        "spot was asked for again within its exclusion: {after:?}"
    );
    assert!(
        owned_instances(&world)
            .await
            .iter()
            .all(|i| i.lifecycle == "on-demand")
    );
}

/// The example's documents of one kind.
fn documents_of_kind(text: &str, kind: &str) -> String {
    text.split("\n---\n")
        .filter(|doc| doc.lines().any(|l| l == format!("kind: {kind}")))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_karpenters_crds_and_no_nodepool_nothing_is_provisioned_and_without_them_the_default_pool_is()
 {
    let world = start("e2e-no-nodepool", manual_cluster()).await;
    let example = world.example("getting-started.yaml").unwrap();
    let deployment = documents_of_kind(&example, "Deployment");
    assert!(deployment.contains("name: inflate"), "{deployment}");
    world.apply_yaml(&deployment).unwrap();
    world.sim.step().await;
    let state = world
        .provisioner(skipped(Duration::from_secs(2)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.unwrap();
    assert!(
        owned_instances(&world).await.is_empty(),
        "launched without any NodePool: {summary}"
    );
    assert!(world.front.calls("CreateFleet").is_empty(), "{summary}");
    // nodewright writes events.k8s.io/v1 Events, whose text is `note`.
    let events: Vec<String> = world
        .sim
        .list_json("events.k8s.io/v1", "Event")
        .into_iter()
        .filter(|e| e["reason"] == "FailedScheduling")
        .filter_map(|e| e["note"].as_str().map(str::to_string))
        .collect();
    assert!(
        events
            .iter()
            .any(|m| m.contains("no usable NodePool") && m.contains("CRDs are installed")),
        "the pods are told why: {events:?}"
    );

    // The same cluster without Karpenter's CRDs (and without nodewright's ConfigMap): the
    // stack's default pool provisions. A new container, as the configuration is cached.
    world.sim.set_crds_installed(false);
    let state = world
        .provisioner(skipped(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state).await.unwrap();
    let launched = owned_instances(&world).await;
    assert!(
        !launched.is_empty(),
        "the default pool launched nothing: {summary}"
    );
    assert!(
        launched
            .iter()
            .all(|i| i.tags.get("nodewright.io/nodepool").map(String::as_str) == Some("default")),
        "{launched:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_api_faults_fail_a_poll_the_next_one_launches_once_and_nothing_twice() {
    use nodewright_world::kube_sim::Fault;

    let world = start("e2e-kube-faults", manual_cluster()).await;
    apply_getting_started(&world, 10).await.unwrap();
    // Pages of 3 items whatever the client asks; the first later page of the pod list
    // finds its continue token expired; the NodePool list is throttled and the node list
    // fails, each more often than the client's own retries absorb.
    world.sim.short_pages(3);
    world.sim.inject(Fault::resource("pods", 410).continued());
    world.sim.inject(Fault::resource("nodepools", 429).times(3));
    world.sim.inject(Fault::resource("nodes", 500).times(3));
    // Time for two failed polls, the pod list started over and a cold catalog: on a loaded
    // 2-core CI machine 8 s ran out before the poll that launches.
    let state = world
        .provisioner(skipped(Duration::from_secs(20)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());
    let summary = invoke(&state)
        .await
        .expect("a failed poll does not fail the invocation");
    // The throttled NodePool list fails one poll and the failing node list the next; the
    // expired continue token fails none (the pod list starts over within the poll).
    assert_eq!(
        summary["failedPolls"].as_u64(),
        Some(2),
        "one failed poll per fault the client's retries cannot absorb: {summary}"
    );
    let launched = owned_instances(&world).await;
    assert!(!launched.is_empty(), "a later poll launched: {summary}");

    // Nothing twice: another invocation, with the pods still pending, adds nothing.
    let again = invoke(&state).await.unwrap();
    assert_eq!(
        owned_instances(&world).await.len(),
        launched.len(),
        "{again}"
    );

    // And what was launched is enough: every pod runs once the nodes are Ready.
    world.sim.clear_faults();
    catch_up(&world);
    for _ in 0..8 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
    }
    let (total, running) = inflate_pods(&world);
    assert_eq!((total, running), (10, 10));
}

/// Calls per action made since `before`, AWS (through the front) and Kubernetes.
fn calls_since(
    world: &World,
    before: &(std::collections::BTreeMap<String, usize>, usize),
) -> (
    std::collections::BTreeMap<String, usize>,
    std::collections::BTreeMap<String, usize>,
) {
    let mut aws = world.front.action_counts();
    for (action, n) in &before.0 {
        if let Some(now) = aws.get_mut(action) {
            *now -= n;
        }
    }
    aws.retain(|_, n| *n > 0);
    let mut kube = std::collections::BTreeMap::new();
    for r in world.sim.requests().into_iter().skip(before.1) {
        *kube.entry(r).or_insert(0usize) += 1;
    }
    (aws, kube)
}

fn mark(world: &World) -> (std::collections::BTreeMap<String, usize>, usize) {
    (world.front.action_counts(), world.sim.requests().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_while_pods_stay_unschedulable_reuse_subnets_and_count_their_api_calls() {
    let world = start("e2e-api-load", manual_cluster()).await;
    let example = world.example("getting-started.yaml").unwrap();
    for kind in ["NodePool", "EC2NodeClass"] {
        world
            .apply_yaml(&documents_of_kind(&example, kind))
            .unwrap();
    }
    world.sim.step().await;
    // Invocations long enough for many polls after the first (which builds the catalog).
    let state = world
        .provisioner(skipped(Duration::from_secs(8)), quick_batch())
        .await
        .unwrap()
        .with_clock(skipping());

    let before = mark(&world);
    let idle = invoke(&state).await.unwrap();
    let (idle_aws, idle_kube) = calls_since(&world, &before);

    // 100 pods no NodePool can place (a zone that does not exist): every poll solves
    // again and finds them unschedulable.
    let stuck = documents_of_kind(&example, "Deployment")
        .replace("name: inflate", "name: stuck")
        .replace("app: inflate", "app: stuck")
        .replace("replicas: 10", "replicas: 100")
        .replace(
            "      terminationGracePeriodSeconds: 0",
            "      terminationGracePeriodSeconds: 0\n      nodeSelector:\n        topology.kubernetes.io/zone: us-east-1-nowhere",
        );
    assert!(stuck.contains("us-east-1-nowhere"), "{stuck}");
    world.apply_yaml(&stuck).unwrap();
    world.sim.step().await;
    // A first invocation builds the catalog and tells each pod why once; the second one
    // is what every later minute looks like.
    let first = invoke(&state).await.unwrap();
    assert_eq!(first["unschedulablePods"], 100, "{first}");
    let before = mark(&world);
    let busy = invoke(&state).await.unwrap();
    let (busy_aws, busy_kube) = calls_since(&world, &before);
    // Read by BENCHMARKS.md ("API calls per poll"); run with --nocapture to see them.
    println!("idle: {idle}\n  aws {idle_aws:?}\n  kube {idle_kube:?}");
    println!("100 unschedulable: {busy}\n  aws {busy_aws:?}\n  kube {busy_kube:?}");

    let polls = busy["polls"].as_u64().unwrap_or(0);
    assert!(polls >= 5, "enough polls to see repetition: {busy}");
    assert_eq!(busy["unschedulablePods"], 100, "{busy}");
    assert!(owned_instances(&world).await.is_empty());
    assert!(
        busy_aws.get("DescribeSubnets").copied().unwrap_or(0) <= 1,
        "subnets are asked for once per minute, not once per poll ({polls} polls): {busy_aws:?}"
    );
}

/// A holder's listing between polls, when the kept one is too old to plan with, is
/// finished even if a pod wakes the holder meanwhile: the pod's poll would otherwise list
/// again from scratch. While the kept one can still be planned with, a wake drops the new
/// listing at once. DescribeInstances is slowed by the AWS front, as a large
/// fleet slows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_waking_the_holder_drops_its_listing_only_while_the_kept_one_can_be_planned_with() {
    use nodewright::provision::Turn;
    use nodewright_provisioner::standby::refresh_between_polls;
    use std::time::{Instant, SystemTime};

    const SLOW: Duration = Duration::from_secs(2);
    let world = start("e2e-listing-wake", manual_cluster()).await;
    let state = world
        .provisioner(quick(Duration::from_secs(30)), quick_batch())
        .await
        .unwrap();
    world.front.delay("DescribeInstances", SLOW);
    // (age of the kept listing in seconds, whether the wake lets the new listing finish)
    for (age, finished) in [(30, true), (12, false)] {
        let now = SystemTime::now();
        let turn = Turn {
            since: Some(now - Duration::from_secs(60)),
            ..Turn::OUTSIDE
        };
        {
            let mut p = state.provisioner().lock().await;
            p.refresh_owned_listing(now - Duration::from_secs(age))
                .await
                .unwrap_or_else(|e| panic!("listing: {e}"));
            assert!(p.owned_listing_due(&turn, false, now), "age {age}");
            assert_eq!(p.plans_with_listing(&turn, now), !finished, "age {age}");
        }
        let started = Instant::now();
        let woken = tokio::time::sleep(Duration::from_millis(300));
        let between = refresh_between_polls(state.provisioner(), &turn, woken, false).await;
        let took = started.elapsed();
        let p = state.provisioner().lock().await;
        let now = SystemTime::now();
        if finished {
            assert!(took >= SLOW, "age {age}: returned after {took:?}");
            assert!(between.ran, "age {age}");
            assert!(
                p.plans_with_listing(&turn, now),
                "age {age}: a fresh listing is kept"
            );
            assert!(!p.owned_listing_due(&turn, false, now), "age {age}");
        } else {
            assert!(took < SLOW, "age {age}: waited {took:?} for the listing");
            assert!(
                p.owned_listing_due(&turn, false, now),
                "age {age}: the new listing was dropped"
            );
            assert!(
                p.plans_with_listing(&turn, now),
                "age {age}: the kept one is still planned with"
            );
        }
    }
}
