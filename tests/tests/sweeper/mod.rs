//! The sweeper function end to end: the real handler, invoked as Lambda invokes it on its
//! schedule, against moto and the simulated cluster, signed as the template's role of
//! `SweeperFunction` (IAM is enforced).
//!
//! Emulated here: AWS is moto's server, Kubernetes the simulated cluster. The handler's
//! clock is the simulated cluster's (`SimNow`), so "fifteen minutes later" is a clock
//! advance, not a sleep; moto's launch times are wall-clock, which the manual clock starts
//! from. The handler, its adapters, the AWS SDK and `kube::Client` are real.
//!
//! What keeps a node or calls its removal off is in `guards.rs`; orphan Nodes in
//! `hygiene.rs`; node repair in `repair.rs`; static NodePools in `static_pool.rs`; all use
//! this file's set-up.

mod guards;
mod hygiene;
mod many_to_many;
mod pool_status;
mod repair;
mod static_pool;

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use lambda_runtime::{Context, LambdaEvent};
use nodewright::aws::Ec2Adapter;
use nodewright::kube::KubeCluster;
use nodewright::lease::{Elector, KubeLeases};
use nodewright::provision::{BatchWindow, Replacement};
use nodewright_sweeper::{
    GroupReplacement, LEASE_DURATION, LEASE_NAME, LEASE_NAMESPACE, LaunchResolver, State, handler,
};
use nodewright_world::kit::{SimNow, names, node_names, sweeper_state};
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{ProvisionerState, invoke, quick};
use serde_json::{Value, json};

async fn start(cluster: &str) -> World {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nodewright=info,nodewright_sweeper=info")
        .try_init();
    let config = SimConfig {
        clock: SimClock::manual(),
        crds_installed: true,
        ..SimConfig::default()
    };
    World::start(cluster, config)
        .await
        .expect("the local world starts")
}

async fn sweeper(world: &World) -> State<KubeCluster, Ec2Adapter> {
    sweeper_state(world).await.expect("the sweeper's state")
}

async fn sweep<
    R: Replacement + nodewright::removal::Capacity + LaunchResolver + GroupReplacement,
>(
    state: &State<KubeCluster, Ec2Adapter, R>,
) -> Value {
    handler(LambdaEvent::new(json!({}), Context::default()), state)
        .await
        .expect("a sweep")
}

/// One sweep, then 40 s of the world so what it launched joins; its report.
async fn sweep_and_join<
    R: Replacement + nodewright::removal::Capacity + LaunchResolver + GroupReplacement,
>(
    state: &State<KubeCluster, Ec2Adapter, R>,
    world: &World,
) -> Value {
    let report = sweep(state).await;
    for _ in 0..4 {
        step(world, 10).await;
    }
    report
}

/// A report's list of node names, sorted.
fn sorted(v: &Value) -> Vec<String> {
    let mut n = names(v);
    n.sort();
    n
}

/// `nodes`, taken by one command whose replacements are Ready nodes: the next sweep drains
/// them all, the one after removes them all, then 15 s of the world for their pods.
async fn drain_and_remove<
    R: Replacement + nodewright::removal::Capacity + LaunchResolver + GroupReplacement,
>(
    state: &State<KubeCluster, Ec2Adapter, R>,
    world: &World,
    nodes: &[String],
) {
    let second = sweep(state).await;
    assert_eq!(sorted(&second["draining"]), nodes, "{second}");
    step(world, 5).await;
    let third = sweep(state).await;
    assert_eq!(sorted(&third["removed"]), nodes, "{third}");
    for _ in 0..3 {
        step(world, 5).await;
    }
}

async fn step(world: &World, seconds: u64) {
    world.clock().advance(Duration::from_secs(seconds));
    world.sim.step().await;
}

/// The getting-started pool and `inflate` at `replicas`, running on nodes the provisioner
/// launched; `edits` change the example first.
async fn running(world: &World, replicas: u32, edits: &[(&str, &str)]) -> ProvisionerState {
    let mut all = vec![("replicas: 10".to_string(), format!("replicas: {replicas}"))];
    all.extend(edits.iter().map(|(a, b)| (a.to_string(), b.to_string())));
    let pairs: Vec<(&str, &str)> = all.iter().map(|(a, b)| (&a[..], &b[..])).collect();
    world
        .apply_yaml(
            &world
                .example_edited("getting-started.yaml", &pairs)
                .unwrap(),
        )
        .unwrap();
    world.sim.step().await;
    let provisioner = world
        .provisioner(
            quick(Duration::from_secs(2)),
            BatchWindow::fixed(Duration::from_millis(200), Duration::from_secs(2)),
        )
        .await
        .unwrap();
    // On a loaded machine one short invocation may end before it launches: invoke again,
    // as the schedule would a minute later.
    for _ in 0..3 {
        invoke(&provisioner).await.unwrap();
        for _ in 0..8 {
            step(world, 10).await;
        }
        if inflate_running(world) == replicas as usize {
            break;
        }
    }
    assert_eq!(inflate_running(world), replicas as usize, "inflate running");
    provisioner
}

/// `inflate` set to `replicas`.
fn scale_inflate(world: &World, replicas: u32) {
    let mut deployment = world
        .sim
        .get_json("apps/v1", "Deployment", "default", "inflate")
        .unwrap();
    deployment["spec"]["replicas"] = json!(replicas);
    world.sim.apply_json(deployment).unwrap();
}

fn inflate_running(world: &World) -> usize {
    world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| {
            p["metadata"]["labels"]["app"] == "inflate" && p["status"]["phase"] == "Running"
        })
        .count()
}

async fn run_foreign_instance(world: &World, tags: &[(&str, &str)]) -> String {
    let ec2 = aws_sdk_ec2::Client::new(&world.sdk);
    let image = world
        .seeded
        .images
        .iter()
        .find(|i| i.arch == "x86_64")
        .unwrap();
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let out = ec2
        .run_instances()
        .image_id(&image.image_id)
        .instance_type(InstanceType::M5Large)
        .subnet_id(&world.seeded.subnets[0].id)
        .min_count(1)
        .max_count(1)
        .tag_specifications(spec.build())
        .send()
        .await
        .expect("RunInstances");
    out.instances()[0].instance_id().unwrap().to_string()
}

/// The instance id in `node`'s provider id.
fn instance_of(world: &World, node: &str) -> String {
    let n = world.sim.get_json("v1", "Node", "", node).unwrap();
    n["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string()
}

async fn state_of(world: &World, id: &str) -> String {
    nodewright_world::kit::described_instance(world, id).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_node_goes_after_consolidate_after_and_a_foreign_look_alike_stays() {
    let world = start("sweep-empty").await;
    running(&world, 2, &[]).await;
    let ours: Vec<String> = node_names(&world);
    assert!(!ours.is_empty());
    // A Node that looks like nodewright's (pool and nodeclaim labels) in front of an
    // instance without this cluster's ownership tag: never nodewright's to remove.
    let foreign_id = run_foreign_instance(&world, &[("Name", "not-ours")]).await;
    let zone = &world.seeded.subnets[0].zone;
    let foreign_name = "ip-10-9-9-9.ec2.internal".to_string();
    let now = world.clock().now().to_string();
    world
        .sim
        .apply_json(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": foreign_name, "labels": {
                "karpenter.sh/nodepool": "default",
                "nodewright.io/nodeclaim": "look-alike",
                "node.kubernetes.io/instance-type": "m5.large",
                "karpenter.sh/capacity-type": "on-demand"}},
            "spec": {"providerID": format!("aws:///{zone}/{foreign_id}")},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": now, "lastTransitionTime": now}]}
        }))
        .unwrap();

    let sweeper = sweeper(&world).await;
    let first = sweep(&sweeper).await;
    assert!(
        names(&first["removed"]).is_empty(),
        "busy nodes stay: {first}"
    );

    // Scale inflate to zero: the nodes empty out.
    let mut deployment = world
        .sim
        .get_json("apps/v1", "Deployment", "default", "inflate")
        .unwrap();
    deployment["spec"]["replicas"] = json!(0);
    world.sim.apply_json(deployment).unwrap();
    step(&world, 5).await;
    step(&world, 5).await;
    let marked = sweep(&sweeper).await;
    assert_eq!(names(&marked["marked_empty"]).len(), ours.len(), "{marked}");
    assert!(
        names(&marked["removed"]).is_empty(),
        "the first sight never removes: {marked}"
    );

    // consolidateAfter is 1m in the example: not yet at 30 s, done after 60 s.
    step(&world, 30).await;
    let early = sweep(&sweeper).await;
    assert!(names(&early["removed"]).is_empty(), "{early}");
    assert!(
        early["kept"]
            .to_string()
            .contains("not yet for consolidateAfter"),
        "{early}"
    );
    let mut removed = Vec::new();
    for _ in 0..ours.len() {
        step(&world, 31).await;
        let r = sweep(&sweeper).await;
        removed.extend(names(&r["removed"]));
    }
    removed.sort();
    let mut want = ours.clone();
    want.sort();
    assert_eq!(
        removed, want,
        "every emptied node of ours went, one per sweep (10% budget)"
    );
    assert!(
        world.instances().await.unwrap().is_empty(),
        "their instances are terminated"
    );
    assert!(
        node_names(&world).contains(&foreign_name),
        "the foreign look-alike Node stays"
    );
    assert_eq!(
        state_of(&world, &foreign_id).await,
        "running",
        "the foreign instance runs on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_never_joins_is_terminated_after_fifteen_minutes_and_a_foreign_one_is_not()
{
    let world = start("sweep-never-joined").await;
    world
        .apply_yaml(&world.example("getting-started.yaml").unwrap())
        .unwrap();
    let cluster = world.seeded.cluster.clone();
    // Launched as nodewright launches (its ownership tag), but the simulated cluster is
    // never stepped, so no Node ever registers for it.
    let ghost = run_foreign_instance(&world, &[("nodewright.io/cluster", cluster.as_str())]).await;
    let foreign = run_foreign_instance(&world, &[("Name", "not-ours")]).await;
    let sweeper = sweeper(&world).await;
    world.clock().advance(Duration::from_secs(10 * 60));
    let early = sweep(&sweeper).await;
    assert!(
        names(&early["never_joined_terminated"]).is_empty(),
        "{early}"
    );
    world.clock().advance(Duration::from_secs(6 * 60));
    let late = sweep(&sweeper).await;
    assert_eq!(
        names(&late["never_joined_terminated"]),
        vec![ghost.clone()],
        "{late}"
    );
    assert!(matches!(
        state_of(&world, &ghost).await.as_str(),
        "shutting-down" | "terminated"
    ));
    assert_eq!(state_of(&world, &foreign).await, "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_do_not_disrupt_pod_keeps_its_expired_node_and_the_reason_is_an_event_on_the_node() {
    let world = start("sweep-do-not-disrupt").await;
    running(
        &world,
        1,
        &[
            ("expireAfter: 720h", "expireAfter: 10m"),
            ("      labels:\n        app: inflate\n    spec:", "      labels:\n        app: inflate\n      annotations:\n        karpenter.sh/do-not-disrupt: \"true\"\n    spec:"),
        ],
    )
    .await;
    let nodes = node_names(&world);
    let sweeper = sweeper(&world).await;
    world.clock().advance(Duration::from_secs(11 * 60));
    let r = sweep(&sweeper).await;
    assert!(
        names(&r["removed"]).is_empty() && names(&r["started"]).is_empty(),
        "{r}"
    );
    assert!(
        r["kept"]
            .to_string()
            .contains("a pod has karpenter.sh/do-not-disrupt"),
        "{r}"
    );
    assert_eq!(node_names(&world), nodes);
    let mut events = world.sim.list_json("v1", "Event");
    events.extend(world.sim.list_json("events.k8s.io/v1", "Event"));
    let told = events.iter().any(|e| {
        e.to_string().contains("DisruptionBlocked")
            && e.to_string().contains("karpenter.sh/do-not-disrupt")
            && nodes.iter().any(|n| e.to_string().contains(n.as_str()))
    });
    assert!(told, "an Event on the node says why: {events:?}");
    // Rate-limited: the next sweep does not repeat it.
    let again = sweep(&sweeper).await;
    assert_eq!(again["kept_events"], 0, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_node_gets_its_replacement_first_and_drains_once_it_is_ready_one_at_a_time() {
    let world = start("sweep-expired").await;
    // xlarge only (3 one-CPU pods per node), so four pods need two nodes, and whichever
    // node goes first, its pods do not all fit on the other: one node must be launched.
    let provisioner = running(
        &world,
        4,
        &[
            ("expireAfter: 720h", "expireAfter: 10m"),
            ("    consolidateAfter: 1m", "    consolidateAfter: 1m\n    budgets:\n      - nodes: \"1\""),
            (
                "      nodeClassRef:",
                "        - key: karpenter.k8s.aws/instance-size\n          operator: In\n          values: [\"xlarge\"]\n      nodeClassRef:",
            ),
        ],
    )
    .await;
    let before = node_names(&world);
    assert_eq!(before.len(), 2, "{before:?}");
    // Replacements launch through the provisioning core, as in main.rs.
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());
    world.clock().advance(Duration::from_secs(11 * 60));
    let first = sweep(&sweeper).await;
    let started = names(&first["started"]);
    assert_eq!(started.len(), 1, "one node at a time: {first}");
    let going = started[0].clone();
    let other = before.iter().find(|n| **n != going).unwrap();
    assert!(
        first["kept"].to_string().contains(&format!(
            "[\"{other}\",\"NodePool default's disruption budget allows no more expired nodes now\"]"
        )),
        "{first}"
    );
    // The replacement is launched first; nothing is evicted yet.
    let launched = names(&first["replacements_launched"]);
    assert_eq!(launched.len(), 1, "{first}");
    assert_eq!(names(&first["awaiting_replacement"]), started, "{first}");
    assert!(names(&first["draining"]).is_empty(), "{first}");
    let on_going = |world: &World| running_on(world).iter().filter(|n| **n == going).count();
    let held = on_going(&world);
    assert!(held > 0, "the expired node holds inflate pods");
    assert_eq!(world.instances().await.unwrap().len(), 3);

    // Until the replacement is a Ready node, sweeps wait and the pods stay where they are.
    let waiting = sweep(&sweeper).await;
    assert_eq!(
        names(&waiting["awaiting_replacement"]),
        started,
        "{waiting}"
    );
    assert!(
        names(&waiting["replacements_launched"]).is_empty(),
        "asked once: {waiting}"
    );
    assert_eq!(on_going(&world), held);
    for _ in 0..4 {
        step(&world, 10).await;
    }
    assert_eq!(node_names(&world).len(), 3, "the replacement joined");
    assert_eq!(
        inflate_running(&world),
        4,
        "no pod left its node before that"
    );

    // Ready: the node drains, and its pods land on the replacement with no provisioner poll.
    let second = sweep(&sweeper).await;
    assert_eq!(names(&second["draining"]), started, "{second}");
    step(&world, 5).await;
    let third = sweep(&sweeper).await;
    assert_eq!(names(&third["removed"]), started, "{third}");
    assert!(
        names(&third["started"]).is_empty(),
        "the budget holds the other: {third}"
    );
    assert!(!node_names(&world).contains(&going));
    for _ in 0..3 {
        step(&world, 5).await;
    }
    assert_eq!(inflate_running(&world), 4);
    assert_eq!(world.instances().await.unwrap().len(), 2);
}

/// AWS publishes a newer Amazon Linux 2023 AMI for x86_64: the `al2023@latest` alias now
/// resolves to it (its SSM parameter, as AWS updates it). Returns the new image id.
async fn publish_newer_al2023(world: &World) -> String {
    let current = world
        .seeded
        .images
        .iter()
        .find(|i| i.family == "al2023" && i.arch == "x86_64")
        .unwrap();
    let ec2 = aws_sdk_ec2::Client::new(&world.sdk);
    let copy = ec2
        .copy_image()
        .source_image_id(&current.image_id)
        .source_region("us-east-1")
        .name(format!("{}-next", current.name))
        .send()
        .await
        .expect("CopyImage");
    let id = copy.image_id().unwrap().to_string();
    aws_sdk_ssm::Client::new(&world.sdk)
        .put_parameter()
        .name(&current.parameters[0])
        .value(&id)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .expect("PutParameter");
    id
}

/// The AMI each of this cluster's live instances runs, as EC2 describes it.
async fn amis(world: &World) -> Vec<String> {
    let out = aws_sdk_ec2::Client::new(&world.sdk)
        .describe_instances()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:nodewright.io/cluster")
                .values(&world.seeded.cluster)
                .build(),
        )
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .build(),
        )
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.image_id().map(str::to_string))
        .collect()
}

/// The nodes a sweeper has begun removing (tainted and annotated).
fn being_removed(world: &World) -> Vec<String> {
    world
        .sim
        .list_json("v1", "Node")
        .iter()
        .filter(|n| !n["metadata"]["annotations"]["nodewright.io/disruption"].is_null())
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_at_latest_ami_change_is_rolled_one_node_at_a_time_within_a_one_node_budget() {
    let world = start("sweep-drift").await;
    let provisioner = running(
        &world,
        4,
        &[
            ("    consolidateAfter: 1m", "    consolidateAfter: 1m\n    budgets:\n      - nodes: \"1\""),
            (
                "      nodeClassRef:",
                "        - key: karpenter.k8s.aws/instance-size\n          operator: In\n          values: [\"xlarge\"]\n      nodeClassRef:",
            ),
        ],
    )
    .await;
    let old = node_names(&world);
    assert_eq!(old.len(), 2, "{old:?}");
    let old_amis = amis(&world).await;
    assert_eq!(old_amis.len(), 2, "{old_amis:?}");
    let old_ami = old_amis[0].clone();
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());
    let quiet = sweep(&sweeper).await;
    assert!(
        quiet["commands"].as_array().unwrap().is_empty(),
        "nothing has drifted: {quiet}"
    );

    let new_ami = publish_newer_al2023(&world).await;
    assert_ne!(new_ami, old_ami);
    let first = sweep(&sweeper).await;
    let commands = first["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{first}");
    assert_eq!(commands[0]["reason"], "drifted", "{first}");
    assert_eq!(commands[0]["action"], "replace", "{first}");
    assert!(
        first["kept"]
            .to_string()
            .contains("disruption budget allows no more drifted nodes now"),
        "{first}"
    );
    assert_eq!(names(&first["replacements_launched"]).len(), 1, "{first}");

    // Sweep on, as the schedule would: never more than one old node at a time, until
    // every node runs the new AMI.
    let mut started = names(&first["started"]);
    for _ in 0..20 {
        if !node_names(&world).iter().any(|n| old.contains(n)) {
            break;
        }
        for _ in 0..3 {
            step(&world, 10).await;
        }
        let r = sweep(&sweeper).await;
        started.extend(names(&r["started"]));
        let removing = being_removed(&world);
        assert!(removing.len() <= 1, "within the budget: {removing:?} {r}");
    }
    assert!(
        !node_names(&world).iter().any(|n| old.contains(n)),
        "every old node went: {:?}",
        node_names(&world)
    );
    started.sort();
    let mut want = old.clone();
    want.sort();
    assert_eq!(started, want, "each old node was started once");
    for _ in 0..3 {
        step(&world, 5).await;
    }
    assert_eq!(inflate_running(&world), 4);
    let amis = amis(&world).await;
    assert!(
        !amis.is_empty() && amis.iter().all(|a| *a == new_ami),
        "{amis:?}"
    );
    // Rolled: nothing drifts any more.
    let after = sweep(&sweeper).await;
    assert!(after["commands"].as_array().unwrap().is_empty(), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_window_launches_its_floor_ahead_of_time_and_keeps_it_until_the_window_ends() {
    let world = start("sweep-floor").await;
    // A window firing ten minutes from now (UTC), one hour long, with a fifteen-minute
    // lead: it holds already, with no pod pending.
    let fire = world.clock().now() + jiff::SignedDuration::from_mins(10);
    let fire = fire.to_zoned(jiff::tz::TimeZone::UTC);
    let annotation = format!(
        "  name: default\n  annotations:\n    nodewright.io/capacity-windows: |\n      - schedule: \"{} {} * * *\"\n        duration: 1h\n        lead: 15m\n        nodes: 2\nspec:\n  template:",
        fire.minute(),
        fire.hour()
    );
    let provisioner = running(
        &world,
        0,
        &[
            ("  name: default\nspec:\n  template:", annotation.as_str()),
            (
                "    consolidateAfter: 1m",
                "    consolidateAfter: 1m\n    budgets: [{nodes: \"100%\"}]",
            ),
        ],
    )
    .await;
    assert!(node_names(&world).is_empty(), "no demand, no node");
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());
    let first = sweep_and_join(&sweeper, &world).await;
    assert_eq!(names(&first["floor_launched"]).len(), 2, "{first}");
    let floor = node_names(&world);
    assert_eq!(floor.len(), 2, "{floor:?}");
    // Launched once: the next sweeps count the nodes that are there.
    let again = sweep(&sweeper).await;
    assert!(names(&again["floor_launched"]).is_empty(), "{again}");
    // Empty for longer than consolidateAfter, inside the window: kept, and told why.
    step(&world, 90).await;
    let kept = sweep(&sweeper).await;
    assert!(names(&kept["started"]).is_empty(), "{kept}");
    assert!(
        kept["kept"]
            .to_string()
            .contains("NodePool default keeps at least 2 nodes now"),
        "{kept}"
    );
    // After the window (ten minutes to its start, an hour long), the empty nodes go.
    world.clock().advance(Duration::from_secs(75 * 60));
    let mut removed = Vec::new();
    for _ in 0..4 {
        let r = sweep(&sweeper).await;
        assert!(names(&r["floor_launched"]).is_empty(), "{r}");
        removed.extend(names(&r["removed"]));
        step(&world, 5).await;
    }
    removed.sort();
    let mut want = floor.clone();
    want.sort();
    assert_eq!(removed, want);
}

fn set_unschedulable(world: &World, node: &str, cordoned: bool) {
    let mut n = world.sim.get_json("v1", "Node", "", node).unwrap();
    n["spec"]["unschedulable"] = json!(cordoned);
    world.sim.apply_json(n).unwrap();
}

/// The nodes the `inflate` and `second` pods run on (DaemonSet pods left out).
fn running_on(world: &World) -> Vec<String> {
    world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .filter(|p| {
            matches!(
                p["metadata"]["labels"]["app"].as_str(),
                Some("inflate" | "second")
            )
        })
        .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
        .collect()
}

/// Two 2xlarge nodes with one 1-CPU pod each (the first node cordoned while the second
/// pod's node is launched), both older than `consolidateAfter`. Returns the provisioner
/// and the nodes.
async fn two_half_empty_nodes(world: &World) -> (ProvisionerState, Vec<String>) {
    let size = (
        "      nodeClassRef:",
        "        - key: karpenter.k8s.aws/instance-size\n          operator: In\n          values: [\"2xlarge\"]\n      nodeClassRef:",
    );
    let provisioner = running(world, 1, &[size]).await;
    let first = node_names(world);
    assert_eq!(first.len(), 1, "{first:?}");
    set_unschedulable(world, &first[0], true);
    let second = world
        .example_edited(
            "getting-started.yaml",
            &[("replicas: 10", "replicas: 1"), ("inflate", "second")],
        )
        .unwrap();
    // Only the Deployment: the NodePool keeps its 2xlarge requirement.
    let deployment = second.split("---").last().unwrap().to_string();
    world.apply_yaml(&deployment).unwrap();
    world.sim.step().await;
    for _ in 0..3 {
        invoke(&provisioner).await.unwrap();
        for _ in 0..8 {
            step(world, 10).await;
        }
        if running_on(world).len() == 2 {
            break;
        }
    }
    set_unschedulable(world, &first[0], false);
    let nodes = node_names(world);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    let mut on = running_on(world);
    on.sort();
    on.dedup();
    assert_eq!(on.len(), 2, "one pod on each node: {on:?}");
    // Older than consolidateAfter (1m), pods included.
    step(world, 70).await;
    (provisioner, nodes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_pod_fits_on_the_other_goes_and_the_pod_moves_there() {
    let world = start("sweep-fits").await;
    let (_provisioner, nodes) = two_half_empty_nodes(&world).await;
    let sweeper = sweeper(&world).await;
    let first = sweep(&sweeper).await;
    let commands = first["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{first}");
    assert_eq!(commands[0]["action"], "delete", "{first}");
    assert_eq!(commands[0]["reason"], "underutilized", "{first}");
    let gone = names(&commands[0]["nodes"]);
    assert_eq!(gone.len(), 1, "{first}");
    let stays = nodes.iter().find(|n| **n != gone[0]).unwrap().clone();
    assert!(commands[0]["savings_per_hour"].as_f64().unwrap() > 0.0);
    for _ in 0..3 {
        step(&world, 5).await;
    }
    let second = sweep(&sweeper).await;
    assert_eq!(names(&second["removed"]), gone, "{second}");
    assert_eq!(node_names(&world), vec![stays.clone()]);
    assert_eq!(world.instances().await.unwrap().len(), 1);
    // The evicted pod runs again, on the node that stayed, with no launch.
    for _ in 0..3 {
        step(&world, 5).await;
    }
    assert_eq!(running_on(&world), vec![stays.clone(), stays]);
}

/// The `inflate` and `second` pods not Running (Pending, or gone and not recreated yet
/// shows as fewer than two).
fn not_running(world: &World) -> Vec<String> {
    world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| {
            matches!(
                p["metadata"]["labels"]["app"].as_str(),
                Some("inflate" | "second")
            ) && p["status"]["phase"] != "Running"
        })
        .map(|p| format!("{} {}", p["metadata"]["name"], p["status"]["phase"]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_half_empty_nodes_become_one_cheaper_node_launched_and_ready_before_they_drain() {
    let world = start("sweep-replace").await;
    let (provisioner, nodes) = two_half_empty_nodes(&world).await;
    // The NodePool now allows every size: one node smaller than either holds both pods. Its
    // budget lets both go in one command (the default 10% of two nodes is one node, and one
    // node alone would be a delete: its pod fits on the other).
    world
        .apply_yaml(
            &world
                .example_edited(
                    "getting-started.yaml",
                    &[
                        ("replicas: 10", "replicas: 1"),
                        (
                            "consolidateAfter: 1m",
                            "consolidateAfter: 1m\n    budgets: [{nodes: \"100%\"}]",
                        ),
                    ],
                )
                .unwrap(),
        )
        .unwrap();
    world.sim.step().await;
    // Replacements launch through the provisioning core, as in main.rs.
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());
    let mut want = nodes.clone();
    want.sort();
    let first = sweep(&sweeper).await;
    let commands = first["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{first}");
    assert_eq!(commands[0]["action"], "replace", "{first}");
    assert_eq!(commands[0]["reason"], "underutilized", "{first}");
    assert_eq!(sorted(&commands[0]["nodes"]), want, "{first}");
    let before = first["price_before"].as_f64().unwrap();
    let after = first["price_after"].as_f64().unwrap();
    assert!(after <= before * 0.9, "{first}");
    // ONE replacement for both nodes, launched before anything is evicted; both nodes
    // record it and wait for it.
    let launched = names(&first["replacements_launched"]);
    assert_eq!(launched.len(), 1, "{first}");
    assert_eq!(sorted(&first["started"]), want, "{first}");
    assert_eq!(sorted(&first["awaiting_replacement"]), want, "{first}");
    assert!(names(&first["draining"]).is_empty(), "{first}");
    for node in &nodes {
        let n = world.sim.get_json("v1", "Node", "", node).unwrap();
        let annotations: std::collections::BTreeMap<String, String> =
            serde_json::from_value(n["metadata"]["annotations"].clone()).unwrap();
        assert_eq!(
            nodewright::removal::recorded_replacement(&annotations),
            vec![launched[0].clone()],
            "{node}: {n}"
        );
    }
    assert_eq!(world.instances().await.unwrap().len(), 3);

    // Until the replacement is a Ready node, sweeps wait and the pods stay where they are.
    let waiting = sweep(&sweeper).await;
    assert_eq!(sorted(&waiting["awaiting_replacement"]), want, "{waiting}");
    assert!(
        names(&waiting["replacements_launched"]).is_empty(),
        "asked once: {waiting}"
    );
    for _ in 0..4 {
        step(&world, 10).await;
        assert!(not_running(&world).is_empty(), "{:?}", not_running(&world));
        let mut on = running_on(&world);
        on.sort();
        assert_eq!(
            on, want,
            "no pod left its node before the replacement was Ready"
        );
    }
    let joined: Vec<String> = node_names(&world)
        .into_iter()
        .filter(|n| !want.contains(n))
        .collect();
    assert_eq!(joined.len(), 1, "the replacement joined: {joined:?}");

    // Ready: both nodes drain, their pods land on the replacement with no provisioner poll
    // and no other launch.
    drain_and_remove(&sweeper, &world, &want).await;
    assert_eq!(node_names(&world), joined);
    assert_eq!(
        running_on(&world),
        vec![joined[0].clone(), joined[0].clone()]
    );
    assert_eq!(world.instances().await.unwrap().len(), 1);
    let fourth = sweep(&sweeper).await;
    let fleet = fourth["price_before"].as_f64().unwrap();
    assert!(
        fleet <= before * 0.9,
        "the fleet costs less: {before} -> {fleet}"
    );
}

/// The provisioning core as it is, asked with a ceiling `factor` times the one the sweeper
/// computed: emulates prices that rose by 1 / `factor` between the plan and the ask (in
/// the local world the plan and the core price from one table, so they cannot move on
/// their own). The core itself, its solve and its refusal, run for real.
struct PricesRoseSinceThePlan<'a, R> {
    core: &'a R,
    factor: f64,
}

impl<R: GroupReplacement> GroupReplacement for PricesRoseSinceThePlan<'_, R> {
    async fn replace_nodes(
        &self,
        nodes: &[String],
        pods: &[k8s_openapi::api::core::v1::Pod],
        ceiling: f64,
        now: std::time::SystemTime,
    ) -> Result<nodewright::provision::ReplaceReport, nodewright::provision::ProvisionError> {
        self.core
            .replace_nodes(nodes, pods, ceiling * self.factor, now)
            .await
    }
}

impl<R: Replacement> Replacement for PricesRoseSinceThePlan<'_, R> {
    async fn replace(
        &self,
        node: &str,
        pods: &[k8s_openapi::api::core::v1::Pod],
        reclaimed: Option<&nodewright::provision::Offering>,
        now: std::time::SystemTime,
    ) -> Result<nodewright::provision::ReplaceReport, nodewright::provision::ProvisionError> {
        self.core.replace(node, pods, reclaimed, now).await
    }
}

impl<R: nodewright::removal::Capacity> nodewright::removal::Capacity
    for PricesRoseSinceThePlan<'_, R>
{
    async fn replace_for(
        &self,
        nodes: &[String],
        pods: &[k8s_openapi::api::core::v1::Pod],
        avoid: &[nodewright::removal::Avoid],
        now: std::time::SystemTime,
    ) -> Result<nodewright::provision::ReplaceReport, nodewright::provision::ProvisionError> {
        self.core.replace_for(nodes, pods, avoid, now).await
    }
}

impl<R: LaunchResolver> LaunchResolver for PricesRoseSinceThePlan<'_, R> {
    async fn images(
        &self,
        class: &nodewright::api::EC2NodeClass,
    ) -> Result<Vec<String>, nodewright::aws::AwsError> {
        self.core.images(class).await
    }
    async fn security_groups(
        &self,
        class: &nodewright::api::EC2NodeClass,
    ) -> Result<Vec<String>, nodewright::aws::AwsError> {
        self.core.security_groups(class).await
    }
    async fn subnets(
        &self,
        class: &nodewright::api::EC2NodeClass,
    ) -> Result<Vec<String>, nodewright::aws::AwsError> {
        self.core.subnets(class).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_that_is_no_longer_cheaper_when_asked_is_dropped_whole_with_its_nodes_untouched()
 {
    let world = start("sweep-dearer").await;
    let (provisioner, nodes) = two_half_empty_nodes(&world).await;
    world
        .apply_yaml(
            &world
                .example_edited(
                    "getting-started.yaml",
                    &[
                        ("replicas: 10", "replicas: 1"),
                        (
                            "consolidateAfter: 1m",
                            "consolidateAfter: 1m\n    budgets: [{nodes: \"100%\"}]",
                        ),
                    ],
                )
                .unwrap(),
        )
        .unwrap();
    world.sim.step().await;
    let dearer = PricesRoseSinceThePlan {
        core: provisioner.provisioner(),
        factor: 0.25,
    };
    let sweeper = sweeper(&world).await.with_replacer(dearer);
    let r = sweep(&sweeper).await;
    // Planned as in the test above (one replacement for both nodes) ...
    let commands = r["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{r}");
    assert_eq!(commands[0]["action"], "replace", "{r}");
    // ... but the core found no replacement under the ceiling: nothing launched, nothing
    // started, and each node says why.
    assert!(names(&r["replacements_launched"]).is_empty(), "{r}");
    assert!(names(&r["started"]).is_empty(), "{r}");
    assert!(names(&r["awaiting_replacement"]).is_empty(), "{r}");
    assert_eq!(world.instances().await.unwrap().len(), 2);
    let kept = r["kept"].to_string();
    for node in &nodes {
        assert!(kept.contains(node.as_str()), "{node} kept: {r}");
        let n = world.sim.get_json("v1", "Node", "", node).unwrap();
        assert!(
            n["metadata"]["annotations"]["nodewright.io/replacement"].is_null(),
            "{node}: {n}"
        );
        assert!(
            n["metadata"]["annotations"]["nodewright.io/disruption"].is_null(),
            "not begun: {n}"
        );
        assert!(
            !n["spec"]["taints"]
                .to_string()
                .contains("nodewright.io/disrupted"),
            "not tainted: {n}"
        );
    }
    assert!(kept.contains("a replacement now costs $"), "{r}");
    let mut events = world.sim.list_json("v1", "Event");
    events.extend(world.sim.list_json("events.k8s.io/v1", "Event"));
    for node in &nodes {
        let told = events.iter().any(|e| {
            let e = e.to_string();
            e.contains("DisruptionBlocked")
                && e.contains("a replacement now costs $")
                && e.contains(node.as_str())
        });
        assert!(told, "an Event on {node} says why: {events:?}");
    }
    // Decided again by the next sweep: at today's prices the replacement goes ahead.
    let sweeper = sweeper_state(&world)
        .await
        .unwrap()
        .with_replacer(provisioner.provisioner());
    let again = sweep(&sweeper).await;
    assert_eq!(names(&again["replacements_launched"]).len(), 1, "{again}");
    assert_eq!(world.instances().await.unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeper_acts_only_while_it_holds_the_lease_and_releases_it_when_done() {
    let world = start("sweep-lease").await;
    running(&world, 1, &[]).await;
    let mut deployment = world
        .sim
        .get_json("apps/v1", "Deployment", "default", "inflate")
        .unwrap();
    deployment["spec"]["replicas"] = json!(0);
    world.sim.apply_json(deployment).unwrap();
    step(&world, 5).await;
    step(&world, 5).await;

    let client = kube::Client::try_from(world.sim.config().await.unwrap()).unwrap();
    let contender = |who: &str| {
        Elector::new(
            KubeLeases::new(client.clone(), LEASE_NAMESPACE),
            LEASE_NAME,
            who,
            LEASE_DURATION,
        )
    };
    let other = contender("other-sweeper");
    let now = || std::time::SystemTime::from(world.clock().now());
    assert!(other.hold(now()).await.unwrap().is_held());
    let ours = sweeper(&world).await.with_lease(contender("this-sweeper"));

    let skipped = sweep(&ours).await;
    assert!(
        skipped["skipped"]
            .as_str()
            .is_some_and(|s| s.contains("other-sweeper")),
        "{skipped}"
    );
    assert!(names(&skipped["marked_empty"]).is_empty(), "{skipped}");

    assert!(other.release(now()).await.unwrap());
    let acted = sweep(&ours).await;
    assert!(acted["skipped"].is_null(), "{acted}");
    assert_eq!(names(&acted["marked_empty"]).len(), 1, "{acted}");
    // Released at the end of the sweep: the other sweeper takes it at once, not after
    // the five-minute duration.
    assert!(other.hold(now()).await.unwrap().is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_instance_type_the_narrowed_nodepool_excludes_is_replaced_as_drifted() {
    let world = start("sweep-narrowed").await;
    let provisioner = running(&world, 2, &[]).await;
    let old = node_names(&world);
    assert!(!old.is_empty());
    let types: Vec<String> = world
        .sim
        .list_json("v1", "Node")
        .iter()
        .filter_map(|n| {
            n["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(types.len(), old.len(), "every node carries its type label");
    // As in the function, the sweeper and its provisioning core share one Kubernetes
    // adapter, so one configuration cache (DEFAULT_CONFIG_TTL): what the sweeper finds
    // drifted, the replacement is planned against.
    let kube = provisioner.provisioner().lock().await.kube().clone();
    let sdk = world.function_sdk("SweeperFunction").unwrap();
    let ec2 = Ec2Adapter::new(aws_sdk_ec2::Client::new(&sdk), world.seeded.cluster.clone());
    let sweeper = State::new(
        kube,
        ec2,
        world.seeded.cluster.clone(),
        Arc::new(SimNow(world.clock())),
    )
    .with_replacer(provisioner.provisioner());
    let quiet = sweep(&sweeper).await;
    assert!(
        quiet["commands"].as_array().unwrap().is_empty(),
        "nothing has drifted: {quiet}"
    );

    // The NodePool no longer allows the type its nodes run: they have drifted (a widened
    // pool, as the AMI test's quiet sweep shows, does not roll anything).
    let excluded = format!(
        "        - key: node.kubernetes.io/instance-type\n          operator: NotIn\n          \
         values: [{}]\n      nodeClassRef:",
        types
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    world
        .apply_yaml(
            &world
                .example_edited(
                    "getting-started.yaml",
                    &[
                        ("replicas: 10", "replicas: 2"),
                        ("      nodeClassRef:", &excluded),
                    ],
                )
                .unwrap(),
        )
        .unwrap();
    world.sim.step().await;
    // The change is seen once the shared cache expires (on the world's clock, as the
    // function's is): sweep until then, as the schedule would.
    let started = world.clock().now();
    let drifted = loop {
        let r = sweep(&sweeper).await;
        if !r["commands"].as_array().unwrap().is_empty() {
            break r;
        }
        assert!(
            world.clock().now()
                < started + nodewright::kube::DEFAULT_CONFIG_TTL + Duration::from_secs(30),
            "no drift seen past the config cache's lifetime: {r}"
        );
        world.clock().advance(Duration::from_secs(10));
    };
    let commands = drifted["commands"].as_array().unwrap();
    assert!(!commands.is_empty(), "{drifted}");
    for c in commands {
        assert_eq!(c["reason"], "drifted", "{drifted}");
        assert_eq!(c["action"], "replace", "{drifted}");
        assert!(
            names(&c["nodes"]).iter().all(|n| old.contains(n)),
            "{drifted}"
        );
    }
    // The replacement (one node or several cheaper ones) runs types the pool still allows.
    let launched = names(&drifted["replacements_launched"]);
    assert!(!launched.is_empty(), "{drifted}");
    let out = aws_sdk_ec2::Client::new(&world.sdk)
        .describe_instances()
        .set_instance_ids(Some(launched.clone()))
        .send()
        .await
        .expect("DescribeInstances");
    let replacement_types: Vec<String> = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_type().map(|t| t.as_str().to_string()))
        .collect();
    assert_eq!(replacement_types.len(), launched.len());
    assert!(
        replacement_types.iter().all(|t| !types.contains(t)),
        "{replacement_types:?} against the excluded {types:?}"
    );
}

/// The CPU the nodes of `world` have free: allocatable less what their running pods request.
fn free_cpu_milli(world: &World) -> i64 {
    let milli = |q: &str| nodewright::resources::parse_milli(q).unwrap_or(0);
    let mut free: std::collections::HashMap<String, i64> = world
        .sim
        .list_json("v1", "Node")
        .iter()
        .filter_map(|n| {
            Some((
                n["metadata"]["name"].as_str()?.to_string(),
                milli(n["status"]["allocatable"]["cpu"].as_str()?),
            ))
        })
        .collect();
    for p in world.sim.list_json("v1", "Pod") {
        let (Some(node), Some("Running" | "Pending")) = (
            p["spec"]["nodeName"].as_str(),
            p["status"]["phase"].as_str(),
        ) else {
            continue;
        };
        for c in p["spec"]["containers"].as_array().into_iter().flatten() {
            if let (Some(f), Some(cpu)) = (
                free.get_mut(node),
                c["resources"]["requests"]["cpu"].as_str(),
            ) {
                *f -= milli(cpu);
            }
        }
    }
    free.values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_headroom_is_launched_ahead_of_demand_kept_free_and_topped_up_when_pods_take_it() {
    let world = start("sweep-headroom").await;
    // Always keep 6 CPUs free in the pool, with no pod pending.
    let provisioner = running(
        &world,
        0,
        &[
            (
                "  name: default\nspec:\n  template:",
                "  name: default\n  annotations:\n    nodewright.io/capacity-windows: |\n      - headroom: {cpu: \"6\"}\nspec:\n  template:",
            ),
            (
                "    consolidateAfter: 1m",
                "    consolidateAfter: 1m\n    budgets: [{nodes: \"100%\"}]",
            ),
        ],
    )
    .await;
    assert!(node_names(&world).is_empty(), "no demand, no node");
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());
    let first = sweep_and_join(&sweeper, &world).await;
    assert!(!names(&first["floor_launched"]).is_empty(), "{first}");
    let free = free_cpu_milli(&world);
    assert!(free >= 6_000, "{free}m free on {:?}", node_names(&world));
    // Launched once: the next sweep books the headroom on the nodes that are there.
    let again = sweep(&sweeper).await;
    assert!(names(&again["floor_launched"]).is_empty(), "{again}");
    // Empty past consolidateAfter: kept while removing one would leave less than 6 free.
    step(&world, 90).await;
    let kept = sweep(&sweeper).await;
    let removed_now = names(&kept["started"]);
    for _ in 0..3 {
        step(&world, 5).await;
        sweep(&sweeper).await;
    }
    assert!(
        free_cpu_milli(&world) >= 6_000,
        "{removed_now:?} went, leaving {}m: {kept}",
        free_cpu_milli(&world)
    );
    // Real pods take the free room: the next sweep tops the headroom up.
    let nodes_before = node_names(&world).len();
    let example = world
        .example_edited("getting-started.yaml", &[("replicas: 10", "replicas: 4")])
        .unwrap();
    let deployment = example
        .split("\n---")
        .find(|d| d.contains("kind: Deployment"))
        .unwrap();
    world.apply_yaml(deployment).unwrap();
    for _ in 0..3 {
        step(&world, 5).await;
    }
    let topped = sweep_and_join(&sweeper, &world).await;
    assert!(!names(&topped["floor_launched"]).is_empty(), "{topped}");
    assert!(node_names(&world).len() > nodes_before);
    let free = free_cpu_milli(&world);
    assert!(free >= 6_000, "{free}m free after the top-up");
}
