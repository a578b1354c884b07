//! Taking over from Karpenter end to end, as docs/migrate-from-karpenter.md does it: a
//! cluster whose nodes Karpenter launched, the stack deployed with
//! `TakeOverFromKarpenter=true`, Karpenter's controller at zero. Each of Karpenter's nodes
//! is then handled by nodewright: a spot warning that comes before any sweep, consolidation,
//! drift and expiry; its `karpenter.sh/termination` finalizer does not keep a removed Node;
//! an instance that is not Karpenter's for this cluster is never touched; and the rollback
//! leaves running only what Karpenter owns.
//!
//! Emulated besides moto and the simulated cluster: Karpenter itself, stopped before the
//! test begins. Its fleet is what it leaves behind: instances launched with the tags
//! Karpenter v1 writes (NodePool, NodeClaim, EC2NodeClass, `kubernetes.io/cluster/<name>`,
//! `eks:eks-cluster-name`) and user data registering its labels and its `unregistered`
//! taint, then on each Node what its registration controller writes (the `registered` and
//! `initialized` labels, the termination finalizer, the taint removed). The functions'
//! handlers and their adapters are real, and their AWS calls are signed as the deployed
//! roles (moto checks the actions; the policy's conditions are asserted by
//! `template_policy.rs`). Their Kubernetes client is the harness's, which the simulated
//! API server treats as the cluster's creator: the RBAC of these calls is not exercised
//! here (`rbac.rs` checks the node patch the finalizer release needs).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_ec2::types::{
    InstanceMarketOptionsRequest, InstanceType, MarketType, ResourceType, Tag, TagSpecification,
};
use base64::Engine as _;
use jiff::SignedDuration;
use lambda_runtime::{Context, LambdaEvent};
use nodewright::aws::Ec2Adapter;
use nodewright_sweeper::{State, handler};
use nodewright_world::kit::{SimNow, app_pods, described_instance, manual_cluster, names};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{ProvisionerState, quick};
use serde_json::{Value, json};

const FINALIZER: &str = "karpenter.sh/termination";

async fn start(cluster: &str) -> World {
    nodewright_world::kit::log_to_test_output();
    let parameters = BTreeMap::from([("TakeOverFromKarpenter".to_string(), "true".to_string())]);
    World::start_with(cluster, &parameters, manual_cluster())
        .await
        .expect("the local world starts")
}

async fn step(world: &World, seconds: u64) {
    world.clock().advance(Duration::from_secs(seconds));
    world.sim.step().await;
}

/// What one of Karpenter's launches leaves in EC2: the instance with Karpenter's tags for
/// `cluster` and user data registering its NodePool's labels. Returns the instance id.
async fn launched_by_karpenter(world: &World, cluster: &str, pool: &str, spot: bool) -> String {
    static LAUNCHES: AtomicU32 = AtomicU32::new(0);
    let claim = format!("{pool}-k{}", LAUNCHES.fetch_add(1, Ordering::Relaxed));
    let capacity = if spot { "spot" } else { "on-demand" };
    let user_data = format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n      \
         - --node-labels=karpenter.sh/nodepool={pool},karpenter.sh/capacity-type={capacity},\
         karpenter.k8s.aws/ec2nodeclass=default\n      \
         - --register-with-taints=karpenter.sh/unregistered:NoExecute\n"
    );
    let mut tags = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in [
        ("karpenter.sh/nodepool", pool),
        ("karpenter.sh/nodeclaim", &claim),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        (&format!("kubernetes.io/cluster/{cluster}"), "owned"),
        ("eks:eks-cluster-name", cluster),
        ("Name", &claim),
    ] {
        tags = tags.tags(Tag::builder().key(k).value(v).build());
    }
    let image = world
        .seeded
        .images
        .iter()
        .find(|i| i.arch == "x86_64")
        .expect("a seeded amd64 image");
    let mut launch = aws_sdk_ec2::Client::new(&world.sdk)
        .run_instances()
        .image_id(&image.image_id)
        .instance_type(InstanceType::M5Large)
        .subnet_id(&world.seeded.subnets[0].id)
        .user_data(base64::engine::general_purpose::STANDARD.encode(user_data))
        .min_count(1)
        .max_count(1)
        .tag_specifications(tags.build());
    if spot {
        launch = launch.instance_market_options(
            InstanceMarketOptionsRequest::builder()
                .market_type(MarketType::Spot)
                .build(),
        );
    }
    let out = launch.send().await.expect("RunInstances as Karpenter");
    out.instances()[0].instance_id().unwrap().to_string()
}

/// The Node of instance `id` once it is Ready, as Karpenter's registration controller
/// leaves it: labelled registered and initialized, its `unregistered` taint gone, and its
/// termination finalizer on. Returns the node's name.
async fn registered_by_karpenter(world: &World, id: &str) -> String {
    for _ in 0..20 {
        if let Some(mut node) = node_of(world, id)
            && ready(&node)
        {
            let name = node["metadata"]["name"].as_str().unwrap().to_string();
            let labels = node["metadata"]["labels"].as_object_mut().unwrap();
            labels.insert("karpenter.sh/registered".into(), json!("true"));
            labels.insert("karpenter.sh/initialized".into(), json!("true"));
            node["metadata"]["finalizers"] = json!([FINALIZER]);
            if let Some(taints) = node["spec"]["taints"].as_array_mut() {
                taints.retain(|t| t["key"] != "karpenter.sh/unregistered");
            }
            world
                .sim
                .apply_json(node)
                .expect("Karpenter's registration");
            return name;
        }
        step(world, 10).await;
    }
    panic!("instance {id} never became a Ready node");
}

fn node_of(world: &World, id: &str) -> Option<Value> {
    world.sim.list_json("v1", "Node").into_iter().find(|n| {
        n["spec"]["providerID"]
            .as_str()
            .is_some_and(|p| p.ends_with(&format!("/{id}")))
    })
}

fn ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn node_named(world: &World, name: &str) -> Option<Value> {
    world.sim.get_json("v1", "Node", "", name)
}

fn running_inflate(world: &World) -> Vec<Value> {
    app_pods(world, "inflate")
        .into_iter()
        .filter(|p| p["status"]["phase"] == "Running" && p["spec"]["nodeName"].is_string())
        .collect()
}

/// The getting-started NodePool and EC2NodeClass with `edits`, and `inflate` at `replicas`.
fn apply_pools(world: &World, replicas: u32, edits: &[(&str, &str)]) {
    let replicas = format!("replicas: {replicas}");
    let mut all = vec![("replicas: 10", replicas.as_str())];
    all.extend_from_slice(edits);
    let yaml = world.example_edited("getting-started.yaml", &all).unwrap();
    world.apply_yaml(&yaml).unwrap();
}

async fn provisioner(world: &World) -> ProvisionerState {
    world
        .provisioner(
            quick(Duration::from_secs(2)),
            nodewright_world::kit::quick_batch(),
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_warning_for_a_karpenter_node_before_any_sweep_is_handled_and_its_node_goes() {
    let world = start("takeover-spot").await;
    let cluster = world.seeded.cluster.clone();
    apply_pools(
        &world,
        1,
        &[(r#"values: ["on-demand"]"#, r#"values: ["spot"]"#)],
    );
    let karpenters = launched_by_karpenter(&world, &cluster, "default", true).await;
    // Karpenter's, but of another cluster in the account (its node joins that cluster).
    let others = launched_by_karpenter(&world, "another-cluster", "default", true).await;
    let victim = registered_by_karpenter(&world, &karpenters).await;
    for _ in 0..6 {
        step(&world, 10).await;
    }
    assert_eq!(
        running_inflate(&world).len(),
        1,
        "inflate runs on Karpenter's node"
    );

    let provisioner = provisioner(&world).await;
    let state = world.interruption(&provisioner).await.unwrap();
    assert!(state.settings.take_over_karpenter, "the deployed setting");
    let emitted = world.clock().now() - SignedDuration::from_secs(10);
    let deadline = emitted + SignedDuration::from_secs(120);
    for id in [&karpenters, &others] {
        world
            .put_event(
                "aws.ec2",
                "EC2 Spot Instance Interruption Warning",
                json!({"instance-id": id, "instance-action": "terminate"}),
                emitted,
            )
            .await
            .expect("PutEvents");
    }
    let first = world.deliver(&state, Duration::from_secs(5)).await.unwrap();
    assert_eq!((first.received, first.failed.len()), (2, 0), "{first:?}");

    // Adopted by the warning itself, before any sweep: its tags say so.
    let (_, tags) = described_instance(&world, &karpenters).await;
    assert_eq!(
        tags.get("nodewright.io/cluster"),
        Some(&cluster),
        "{tags:?}"
    );
    assert_eq!(
        tags.get("nodewright.io/adopted-from").map(String::as_str),
        Some("karpenter")
    );
    assert_eq!(
        tags.get("nodewright.io/nodeclaim"),
        tags.get("karpenter.sh/nodeclaim")
    );
    let taints = node_named(&world, &victim).unwrap()["spec"]["taints"].clone();
    assert!(
        taints
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "nodewright.io/disrupted"),
        "{taints}"
    );

    // Drained, terminated, and the Node gone by the deadline although Karpenter's
    // finalizer was on it.
    let mut gone_at = None;
    for _ in 0..150 {
        world
            .deliver(&state, Duration::from_millis(300))
            .await
            .unwrap();
        step(&world, 1).await;
        if node_named(&world, &victim).is_none() {
            gone_at = Some(world.clock().now());
            break;
        }
    }
    let gone_at = gone_at.expect("the adopted node is still there");
    assert!(
        gone_at <= deadline + SignedDuration::from_secs(5),
        "{gone_at} past {deadline}"
    );
    let (state_now, _) = described_instance(&world, &karpenters).await;
    assert!(
        ["shutting-down", "terminated"].contains(&state_now.as_str()),
        "{state_now}"
    );

    // The other cluster's instance: untagged, untainted, running.
    let (state_other, tags_other) = described_instance(&world, &others).await;
    assert_eq!(state_other, "running");
    assert!(
        !tags_other.contains_key("nodewright.io/cluster"),
        "{tags_other:?}"
    );
}

/// The notes of the `Adopted` Events on `node`.
fn adopted_events(world: &World, node: &str) -> Vec<String> {
    let mut all = world.sim.list_json("v1", "Event");
    all.extend(world.sim.list_json("events.k8s.io/v1", "Event"));
    all.into_iter()
        .filter(|e| e["reason"] == "Adopted")
        .filter(|e| e["involvedObject"]["name"] == node || e["regarding"]["name"] == node)
        .filter_map(|e| {
            e["note"]
                .as_str()
                .or(e["message"].as_str())
                .map(str::to_string)
        })
        .collect()
}

/// A second NodePool of the getting-started class whose nodes expire after an hour.
const BATCH_POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: batch
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: [amd64]
        - key: karpenter.sh/capacity-type
          operator: In
          values: [on-demand]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: 1h
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 1m
";

/// The sweeper's state as the deployed function builds it: its role, the takeover setting
/// of its deployed environment, and replacements through the provisioning core.
async fn sweeper(
    world: &World,
    provisioner: &ProvisionerState,
) -> State<
    nodewright::kube::KubeCluster,
    Ec2Adapter,
    impl nodewright_sweeper::LaunchResolver
    + nodewright::provision::Replacement
    + nodewright::removal::Capacity
    + nodewright_sweeper::GroupReplacement,
> {
    let kube = provisioner.provisioner().lock().await.kube().clone();
    let sdk = world.function_sdk("SweeperFunction").unwrap();
    let ec2 = Ec2Adapter::new(aws_sdk_ec2::Client::new(&sdk), world.seeded.cluster.clone());
    State::new(
        kube,
        ec2,
        world.seeded.cluster.clone(),
        Arc::new(SimNow(world.clock())),
    )
    .with_takeover(world.takeover_setting("SweeperFunction").unwrap())
    .with_replacer(provisioner.provisioner())
}

/// The nodes each command of a sweep's report took for `reason`.
fn taken_for(report: &Value, reason: &str) -> Vec<String> {
    report["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["reason"] == reason)
        .flat_map(|c| names(&c["nodes"]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_adopts_karpenters_nodes_then_consolidates_drifts_and_expires_them() {
    let world = start("takeover-sweep").await;
    let cluster = world.seeded.cluster.clone();
    let when_empty = [("WhenEmptyOrUnderutilized", "WhenEmpty")];
    apply_pools(&world, 0, &when_empty);
    world.apply_yaml(BATCH_POOL).unwrap();
    // One inflate pod fills an m5.large: one on each of D and X, and E empty.
    let d = launched_by_karpenter(&world, &cluster, "default", false).await;
    let x = launched_by_karpenter(&world, &cluster, "batch", false).await;
    let d_node = registered_by_karpenter(&world, &d).await;
    let x_node = registered_by_karpenter(&world, &x).await;
    apply_pools(&world, 2, &when_empty);
    for _ in 0..6 {
        step(&world, 10).await;
    }
    let on: Vec<Value> = running_inflate(&world)
        .iter()
        .map(|p| p["spec"]["nodeName"].clone())
        .collect();
    assert_eq!(on.len(), 2, "{on:?}");
    assert!(
        on.contains(&json!(d_node)) && on.contains(&json!(x_node)),
        "{on:?}"
    );
    let e = launched_by_karpenter(&world, &cluster, "default", false).await;
    let e_node = registered_by_karpenter(&world, &e).await;

    let provisioner = provisioner(&world).await;
    let sweeper = sweeper(&world, &provisioner).await;
    // Karpenter's controller renewed its leader Lease a moment ago: it may still be running
    // (not scaled to zero yet), so nothing is adopted.
    world
        .sim
        .apply_json(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "karpenter-leader-election", "namespace": "kube-system"},
            "spec": {"holderIdentity": "karpenter-6f7c9d-x2k4p", "leaseDurationSeconds": 15,
                     "renewTime": world.clock().now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
        }))
        .unwrap();
    let held = sweep(&sweeper).await;
    assert!(names(&held["adopted"]).is_empty(), "{held}");
    let paused = held["adoption_paused"].as_str().unwrap_or_default();
    assert!(
        paused.contains("kube-system/karpenter-leader-election"),
        "{held}"
    );
    let (_, untouched) = described_instance(&world, &d).await;
    assert!(
        !untouched.contains_key("nodewright.io/cluster"),
        "{untouched:?}"
    );
    // Scaled to zero: the Lease is no longer renewed.
    step(&world, 20).await;
    let first = sweep(&sweeper).await;
    let mut adopted = names(&first["adopted"]);
    adopted.sort();
    let mut want = vec![d.clone(), e.clone(), x.clone()];
    want.sort();
    assert_eq!(adopted, want, "{first}");
    for id in [&d, &e, &x] {
        let (_, tags) = described_instance(&world, id).await;
        for key in [
            "nodewright.io/cluster",
            "nodewright.io/nodepool-hash",
            "nodewright.io/ec2nodeclass-hash",
            "nodewright.io/image-id",
        ] {
            assert!(tags.contains_key(key), "{id} lacks {key}: {tags:?}");
        }
    }
    for node in [&d_node, &e_node, &x_node] {
        let told = adopted_events(&world, node);
        assert_eq!(told.len(), 1, "{node}: {told:?}");
        assert!(told[0].contains("launched by Karpenter"), "{told:?}");
    }
    // A second sweep adopts nothing more: what is written stays.
    let (_, before) = described_instance(&world, &d).await;
    assert!(names(&sweep(&sweeper).await["adopted"]).is_empty());
    assert_eq!(described_instance(&world, &d).await.1, before);

    // The default pool's template changes (D drifts) and an hour passes (X expires, E has
    // long been empty).
    apply_pools(
        &world,
        2,
        &[
            when_empty[0],
            (
                "  template:\n    spec:",
                "  template:\n    metadata:\n      labels:\n        team: web\n    spec:",
            ),
        ],
    );
    world.clock().advance(Duration::from_secs(61 * 60));
    world.sim.step().await;

    let mut reasons: BTreeMap<String, String> = BTreeMap::new();
    for _ in 0..20 {
        let report = sweep(&sweeper).await;
        for reason in ["empty", "drifted", "expired"] {
            for node in taken_for(&report, reason) {
                reasons.entry(node).or_insert_with(|| reason.to_string());
            }
        }
        for _ in 0..4 {
            step(&world, 10).await;
        }
        let gone = [&d_node, &e_node, &x_node]
            .iter()
            .all(|n| node_named(&world, n).is_none());
        if gone {
            break;
        }
    }
    let reason = |n: &str| reasons.get(n).map(String::as_str);
    assert_eq!(reason(&e_node), Some("empty"), "{reasons:?}");
    assert_eq!(reason(&d_node), Some("drifted"), "{reasons:?}");
    assert_eq!(reason(&x_node), Some("expired"), "{reasons:?}");
    // Each Node gone although Karpenter's finalizer was on it, each instance terminated.
    for (node, id) in [(&d_node, &d), (&e_node, &e), (&x_node, &x)] {
        assert!(node_named(&world, node).is_none(), "{node} is still there");
        let (state, _) = described_instance(&world, id).await;
        assert!(
            ["shutting-down", "terminated"].contains(&state.as_str()),
            "{id}: {state}"
        );
    }
    // inflate runs on nodes nodewright launched.
    let running = running_inflate(&world);
    assert_eq!(running.len(), 2);
    for pod in running {
        let node = node_named(&world, pod["spec"]["nodeName"].as_str().unwrap()).unwrap();
        let labels = &node["metadata"]["labels"];
        assert!(labels["nodewright.io/nodeclaim"].is_string(), "{labels}");
        assert!(labels["karpenter.sh/registered"].is_null(), "{labels}");
    }
}

async fn sweep<R>(state: &State<nodewright::kube::KubeCluster, Ec2Adapter, R>) -> Value
where
    R: nodewright_sweeper::LaunchResolver
        + nodewright::provision::Replacement
        + nodewright::removal::Capacity
        + nodewright_sweeper::GroupReplacement,
{
    handler(LambdaEvent::new(json!({}), Context::default()), state)
        .await
        .expect("a sweep")
}

/// The command lines of the rollback in docs/migrate-from-karpenter.md, `<cluster>` filled in.
fn rollback_lines(cluster: &str) -> Vec<String> {
    let path = nodewright_world::moto::workspace_root().join("docs/migrate-from-karpenter.md");
    let text = std::fs::read_to_string(path).expect("docs/migrate-from-karpenter.md");
    let section = text
        .split("## Roll back")
        .nth(1)
        .expect("a Roll back section");
    let block = section.split("```").nth(1).expect("a code block in it");
    block
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.replace("<cluster>", cluster))
        .collect()
}

/// The text between `flag ` and the next ` --` (or the end) in `line`.
fn flag_value<'a>(line: &'a str, flag: &str) -> &'a str {
    let rest = line.split(&format!("{flag} ")).nth(1).unwrap_or_default();
    rest.split(" --").next().unwrap_or_default().trim()
}

/// The instance ids a documented `aws ec2 describe-instances` prints: its own filters sent
/// through the SDK, its `--query` run by jmespath (the library the AWS CLI evaluates it
/// with) over the answer in the CLI's JSON shape.
async fn described_as_the_line_says(world: &World, describe: &str) -> Vec<String> {
    let filters: Vec<aws_sdk_ec2::types::Filter> = flag_value(describe, "--filters")
        .split_whitespace()
        .map(|f| {
            let (name, values) = f
                .strip_prefix("Name=")
                .and_then(|f| f.split_once(",Values="))
                .expect("Name=...,Values=...");
            aws_sdk_ec2::types::Filter::builder()
                .name(name)
                .set_values(Some(values.split(',').map(str::to_string).collect()))
                .build()
        })
        .collect();
    let query = flag_value(describe, "--query").trim_matches('\'');
    let out = aws_sdk_ec2::Client::new(&world.sdk)
        .describe_instances()
        .set_filters(Some(filters))
        .send()
        .await
        .expect("DescribeInstances");
    let instance = |i: &aws_sdk_ec2::types::Instance| {
        let tags: Vec<Value> = i
            .tags()
            .iter()
            .map(|t| json!({"Key": t.key(), "Value": t.value()}))
            .collect();
        json!({"InstanceId": i.instance_id(), "Tags": tags})
    };
    let reservations: Vec<Value> = out
        .reservations()
        .iter()
        .map(|r| json!({"Instances": r.instances().iter().map(instance).collect::<Vec<_>>()}))
        .collect();
    let printed = jmespath(query, &json!({ "Reservations": reservations })).await;
    let mut ids: Vec<String> = Vec::new();
    collect_strings(&printed, &mut ids);
    ids
}

const JMESPATH_SEARCH: &str = "import jmespath, json, sys; print(json.dumps(jmespath.search(sys.argv[1], json.load(sys.stdin))))";

/// `query` evaluated over `document` by the venv's jmespath.
async fn jmespath(query: &str, document: &Value) -> Value {
    use tokio::io::AsyncWriteExt as _;
    let python = nodewright_world::moto::venv_dir()
        .join("bin")
        .join("python");
    let mut run = tokio::process::Command::new(python)
        .arg("-c")
        .arg(JMESPATH_SEARCH)
        .arg(query)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the venv's python");
    let mut stdin = run.stdin.take().unwrap();
    stdin
        .write_all(document.to_string().as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let answer = run.wait_with_output().await.unwrap();
    serde_json::from_slice(&answer.stdout)
        .unwrap_or_else(|e| panic!("{query}: {e}: {}", String::from_utf8_lossy(&answer.stdout)))
}

/// The strings of `v`, nested lists flattened, as `--output text` prints them.
fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        _ => {}
    }
}

/// A documented `aws ec2 describe-instances ... | xargs -r aws ec2 <action> ...` line,
/// emulated (the AWS CLI is not installed here): the ids it describes, then the action
/// with them through the SDK, `terminate-instances` or `delete-tags`. Returns the ids.
async fn aws_line(world: &World, line: &str) -> Vec<String> {
    let (describe, action) = line
        .split_once(" | xargs -r ")
        .expect("describe-instances piped into xargs -r");
    let ids = described_as_the_line_says(world, describe).await;
    if ids.is_empty() {
        return ids;
    }
    let ec2 = aws_sdk_ec2::Client::new(&world.sdk);
    if action.starts_with("aws ec2 terminate-instances --instance-ids") {
        ec2.terminate_instances()
            .set_instance_ids(Some(ids.clone()))
            .send()
            .await
            .expect("TerminateInstances");
    } else if action.starts_with("aws ec2 delete-tags") {
        let tags = flag_value(action, "--tags")
            .split_whitespace()
            .map(|t| {
                let key = t.strip_prefix("Key=").expect("Key=...");
                aws_sdk_ec2::types::Tag::builder().key(key).build()
            })
            .collect();
        ec2.delete_tags()
            .set_resources(Some(ids.clone()))
            .set_tags(Some(tags))
            .send()
            .await
            .expect("DeleteTags");
    } else {
        panic!("an aws action this test does not emulate: {action}");
    }
    ids
}

/// Runs `line` with kubectl while the world's clock moves on (a drain waits for its pods'
/// grace periods to end), and asserts it succeeded.
async fn kubectl_line(world: &World, kubectl: &nodewright_world::kubectl::Kubectl, line: &str) {
    let run = kubectl.shell(line);
    tokio::pin!(run);
    let out = loop {
        tokio::select! {
            out = &mut run => break out.expect("sh runs"),
            _ = tokio::time::sleep(Duration::from_millis(200)) => step(world, 2).await,
        }
    };
    assert!(out.success, "{line}:\n{}\n{}", out.stdout, out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_rollback_leaves_running_only_what_karpenter_owns() {
    let world = start("takeover-rollback").await;
    let cluster = world.seeded.cluster.clone();
    apply_pools(&world, 0, &[]);
    let k = launched_by_karpenter(&world, &cluster, "default", false).await;
    let k_node = registered_by_karpenter(&world, &k).await;
    // Two pods: one fits on Karpenter's node, nodewright launches for the other.
    apply_pools(&world, 2, &[]);
    world.sim.step().await;
    let provisioner = provisioner(&world).await;
    for _ in 0..3 {
        nodewright_world::world::provisioner::invoke(&provisioner)
            .await
            .unwrap();
        for _ in 0..8 {
            step(&world, 10).await;
        }
        if running_inflate(&world).len() == 2 {
            break;
        }
    }
    assert_eq!(running_inflate(&world).len(), 2);
    let sweeper = sweeper(&world, &provisioner).await;
    assert_eq!(
        names(&sweep(&sweeper).await["adopted"]),
        std::slice::from_ref(&k)
    );
    let ours: Vec<String> = world
        .instances()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .filter(|id| id != &k)
        .collect();
    assert!(!ours.is_empty(), "nodewright launched a node");

    // The adopted node was being consolidated onto a cheaper node when the rollback began.
    let disrupted = |node: &Value| {
        node["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == "nodewright.io/disrupted" || t["key"] == "karpenter.sh/disrupted")
    };
    let k_before = node_named(&world, &k_node).unwrap();
    assert!(disrupted(&k_before), "{k_before}");

    let kubectl = nodewright_world::kubectl::Kubectl::for_cluster(&world.sim).unwrap();
    let mut terminated = Vec::new();
    let mut untagged = Vec::new();
    for line in rollback_lines(&cluster) {
        if line.contains("deployment karpenter") || line.starts_with("sam delete") {
            // Emulated: Karpenter is not in the world, and after `sam delete` no function
            // of the stack is invoked again (none is from here on).
            continue;
        }
        if let Some(args) = line.strip_prefix("nodewright ") {
            let cli = nodewright_world::kit::debug_binary("nodewright").expect("the CLI is built");
            kubectl_line(&world, &kubectl, &format!("{} {args}", cli.display())).await;
            continue;
        }
        if line.starts_with("aws ") {
            let ids = aws_line(&world, &line).await;
            match line.contains("terminate-instances") {
                true => terminated.extend(ids),
                false => untagged.extend(ids),
            }
            continue;
        }
        kubectl_line(&world, &kubectl, &line).await;
    }
    assert_eq!(
        untagged,
        std::slice::from_ref(&k),
        "the adopted instance is given back"
    );

    // What nodewright launched is gone; what Karpenter launched runs on, untouched.
    terminated.sort();
    let mut want = ours.clone();
    want.sort();
    assert_eq!(
        terminated, want,
        "the rollback terminates nodewright's own launches"
    );
    let (k_state, k_tags) = described_instance(&world, &k).await;
    assert_eq!(k_state, "running");
    let left: Vec<&String> = k_tags
        .keys()
        .filter(|t| t.starts_with("nodewright.io/"))
        .collect();
    assert!(
        left.is_empty(),
        "nodewright's tags left on Karpenter's instance: {left:?}"
    );
    let k_after = node_named(&world, &k_node).expect("Karpenter's node stays");
    assert_eq!(k_after["spec"]["unschedulable"], Value::Null, "{k_after}");
    assert_eq!(k_after["metadata"]["finalizers"], json!([FINALIZER]));
    assert!(!disrupted(&k_after), "handed back tainted: {k_after}");
    assert!(
        k_after["metadata"]["annotations"]["nodewright.io/removal"].is_null(),
        "{k_after}"
    );
    let remaining: Vec<String> = world
        .sim
        .list_json("v1", "Node")
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        remaining,
        std::slice::from_ref(&k_node),
        "only Karpenter's node is left"
    );
    // The drained pod waits, pending, for the capacity Karpenter launches once it runs.
    step(&world, 10).await;
    let pods = app_pods(&world, "inflate");
    assert_eq!(pods.len(), 2);
    assert_eq!(running_inflate(&world).len(), 1);
}
