//! The interruption function's release binary, run as Lambda runs it (`make bench`):
//!
//! 1. over `SINGLES` spot interruption warnings sent one at a time, then `BATCH` sent at
//!    once, each for another node: message received → node tainted (target: at most 1 s),
//!    → its pod evicted, and → replacement CreateFleet (target: at most 2 s);
//! 2. the time to drain a 30-pod node whose pods a PodDisruptionBudget lets go one at a
//!    time, after a spot interruption warning (two minutes before the instance goes).
//!
//! Each warning goes through moto's EventBridge (PutEvents), whose rule puts it on the
//! stack's queue. An emulated SQS event source mapping receives batches from the queue
//! (ReceiveMessage, long polling), hands each batch to an idle container of the function,
//! else to a new one, as Lambda does, through an emulated Runtime API
//! (`nodewright_world::lambda_api`), and deletes the messages the function did not report
//! as failed. "Message received" is the moment that ReceiveMessage returned the warning to
//! the event source mapping: the invocation is queued on the Runtime API right after it,
//! where a warm container's runtime is already waiting for it.
//!
//! Emulated: the Lambda Runtime API and the event source mapping, AWS (moto, seen through
//! the world's front, which records when CreateFleet reached it) and Kubernetes (the
//! simulated cluster, on a real-time clock, stepped every `SIM_STEP`: graceful deletion,
//! ReplicaSets, scheduling, nodes joining `boot_delay` + `ready_delay` after launch). moto
//! and the simulated cluster answer on loopback, so EC2's and the API server's own latency
//! are not in these figures.
//!
//! The binary is `$NODEWRIGHT_INTERRUPTION_BIN`, else `<target>/release/interruption`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use jiff::Timestamp;
use nodewright::provision::BatchWindow;
use nodewright_world::kit::{
    app_pods as pods, percentile, release_binary, running_on_a_node as running, wait_until,
    with_world_names,
};
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::lambda_api::{FunctionProcess, Outcome, RuntimeApi};
use nodewright_world::template::{FunctionSettings, Template};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick};
use serde_json::{Value, json};

const FUNCTION: &str = "InterruptionFunction";
const SPOT_WARNING: &str = "EC2 Spot Instance Interruption Warning";
/// Spot warnings measured one at a time (a batch of one), one node each.
const SINGLES: usize = 20;
/// Then this many sent at once (one PutEvents), for as many other nodes.
const BATCH: usize = 10;
const LATENCY_NODES: usize = SINGLES + BATCH;
/// Pods on the node drained under the PodDisruptionBudget.
const DRAIN_PODS: usize = 30;
const SIM_STEP: Duration = Duration::from_millis(250);

/// The node of latency warning `i`: a NodePool and a one-pod Deployment of its own. One
/// pool for all would measure something else: the core's replacement plans the
/// interrupted node's pods against capacity in flight without the pending pods that
/// capacity was launched for, so the second warning's pod is nominated onto the first
/// warning's replacement and nothing is launched for it (see BENCHMARKS.md).
fn latency_node(i: usize) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: latency-{i}}}
spec:
  template:
    metadata: {{labels: {{bench: latency-{i}}}}}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [spot]}}
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}}
        - {{key: karpenter.k8s.aws/instance-cpu, operator: In, values: ["8"]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: latency-{i}, namespace: default}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: latency, victim: "{i}"}}}}
  template:
    metadata: {{labels: {{app: latency, victim: "{i}"}}}}
    spec:
      nodeSelector: {{bench: latency-{i}}}
      containers: [{{name: c, image: pause, resources: {{requests: {{cpu: "7", memory: 1Gi}}}}}}]
"#
    )
}

const CONFIG: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: drain}
spec:
  template:
    metadata: {labels: {bench: drain}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.8xlarge]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NODE_ROLE
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: drain, namespace: default}
spec:
  replicas: DRAIN_PODS
  selector: {matchLabels: {app: drain}}
  template:
    metadata: {labels: {app: drain}}
    spec:
      nodeSelector: {bench: drain}
      containers: [{name: c, image: pause, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: drain, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: drain}}
"#;

/// One container of the function: its own Runtime API and process, busy while an
/// invocation runs in it.
struct Container {
    name: String,
    api: RuntimeApi,
    process: FunctionProcess,
    log: PathBuf,
    busy: AtomicBool,
    invocations: AtomicUsize,
}

/// How a warning reached the function.
#[derive(Debug, Clone)]
struct Receipt {
    at: Instant,
    container: String,
    /// The container's first invocation: its provisioning core has no catalog yet.
    first_in_container: bool,
    /// The container was started for this batch (its process start and init are on the
    /// path).
    cold: bool,
}

/// The emulated SQS event source mapping and the containers it routes batches to.
struct EventSource {
    world: Arc<World>,
    settings: FunctionSettings,
    dir: PathBuf,
    containers: tokio::sync::Mutex<Vec<Arc<Container>>>,
    /// Spot warnings received, by instance id.
    receipts: Mutex<BTreeMap<String, Receipt>>,
    invocations: AtomicUsize,
    /// Each invocation's duration, queued to answered: what Lambda bills.
    durations: Mutex<Vec<Duration>>,
    failures: Mutex<Vec<String>>,
}

impl EventSource {
    async fn container(&self) -> anyhow::Result<(Arc<Container>, bool)> {
        let mut containers = self.containers.lock().await;
        if let Some(c) = containers
            .iter()
            .find(|c| !c.busy.swap(true, Ordering::SeqCst))
        {
            return Ok((c.clone(), false));
        }
        let name = format!("interruption-{}", containers.len());
        let api = RuntimeApi::start().await?;
        let mut env = self.world.deployed_env(FUNCTION, &self.dir)?;
        env.push(("AWS_LAMBDA_LOG_STREAM_NAME", name.clone()));
        let log = self.dir.join(format!("{name}.log"));
        let process = FunctionProcess::spawn(
            &release_binary("interruption"),
            &api,
            self.settings.memory_mb,
            &env,
            &log,
        )?;
        let container = Arc::new(Container {
            name,
            api,
            process,
            log,
            busy: true.into(),
            invocations: 0.into(),
        });
        containers.push(container.clone());
        Ok((container, true))
    }

    /// Receives and dispatches batches until `stop`.
    async fn run(self: Arc<Self>, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
        while !stop.load(Ordering::SeqCst) {
            let Some(batch) = self.world.receive_batch(Duration::from_secs(1)).await? else {
                continue;
            };
            let (container, cold) = self.container().await?;
            let first = container.invocations.fetch_add(1, Ordering::SeqCst) == 0;
            for body in &batch.bodies {
                if body["detail-type"] == SPOT_WARNING
                    && let Some(id) = body["detail"]["instance-id"].as_str()
                {
                    self.receipts.lock().unwrap().insert(
                        id.to_string(),
                        Receipt {
                            at: batch.received_at,
                            container: container.name.clone(),
                            first_in_container: first,
                            cold,
                        },
                    );
                }
            }
            self.invocations.fetch_add(1, Ordering::SeqCst);
            let this = self.clone();
            tokio::spawn(async move {
                let invoked = Instant::now();
                let outcome = container
                    .api
                    .invoke(batch.event.clone(), this.settings.timeout)
                    .await;
                this.durations.lock().unwrap().push(invoked.elapsed());
                let failed: Vec<String> = match outcome {
                    Ok(Outcome::Response(v)) => v["batchItemFailures"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|f| f["itemIdentifier"].as_str().map(str::to_string))
                        .collect(),
                    Ok(Outcome::Error(e)) => {
                        this.failures.lock().unwrap().push(format!(
                            "{}: {e} (log {})",
                            container.name,
                            container.log.display()
                        ));
                        vec![]
                    }
                    Err(e) => {
                        this.failures
                            .lock()
                            .unwrap()
                            .push(format!("{}: {e:#}", container.name));
                        vec![]
                    }
                };
                if !failed.is_empty() {
                    this.failures.lock().unwrap().push(format!(
                        "{}: messages reported failed: {failed:?} (log {})",
                        container.name,
                        container.log.display()
                    ));
                }
                if let Err(e) = this.world.settle(&batch, &failed).await {
                    this.failures.lock().unwrap().push(format!("{e:#}"));
                }
                container.busy.store(false, Ordering::SeqCst);
            });
        }
        Ok(())
    }
}

fn ready_and_not_deleting(pod: &Value) -> bool {
    pod["metadata"]["deletionTimestamp"].is_null()
        && pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn tainted(world: &World, node: &str) -> bool {
    world.sim.get_json("v1", "Node", "", node).is_some_and(|n| {
        n["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == "nodewright.io/disrupted")
    })
}

/// `(node name, instance id)` of every node running a pod of `app`, busiest first.
fn nodes_running(world: &World, app: &str) -> Vec<(String, String)> {
    let pods = pods(world, app);
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
            let count = pods
                .iter()
                .filter(|p| running(p) && p["spec"]["nodeName"] == name.as_str())
                .count();
            (count > 0).then_some((count, name, id))
        })
        .collect();
    nodes.sort_by_key(|n| std::cmp::Reverse(n.0));
    nodes.into_iter().map(|(_, n, i)| (n, i)).collect()
}

/// One spot interruption warning per instance, in one PutEvents call.
async fn spot_warnings(world: &World, instances: &[&str]) -> anyhow::Result<()> {
    let details = instances
        .iter()
        .map(|id| json!({"instance-id": id, "instance-action": "terminate"}))
        .collect();
    world
        .put_events("aws.ec2", SPOT_WARNING, details, Timestamp::now())
        .await
}

/// What the run's invocations cost in Lambda terms: each one's duration (queued to
/// answered, what Lambda bills) and each container's peak memory, for README's "Cost".
async fn invocation_costs(source: &EventSource) -> anyhow::Result<()> {
    let mut durations = source.durations.lock().unwrap().clone();
    anyhow::ensure!(!durations.is_empty(), "no invocation was timed");
    durations.sort();
    let mean = durations.iter().sum::<Duration>() / durations.len() as u32;
    let s = |d: Duration| d.as_secs_f64();
    println!(
        "invocation duration, {} invocations: median {:.2} s, p99 {:.2} s, mean {:.2} s, min {:.2} s, max {:.2} s",
        durations.len(),
        s(percentile(&durations, 0.5)),
        s(percentile(&durations, 0.99)),
        s(mean),
        s(durations[0]),
        s(durations[durations.len() - 1])
    );
    for c in source.containers.lock().await.iter() {
        let peak = c.process.peak_rss()? as f64 / (1024.0 * 1024.0);
        println!(
            "{}: {} invocations, peak RSS (VmHWM) {peak:.1} MiB",
            c.name,
            c.invocations.load(Ordering::SeqCst)
        );
    }
    Ok(())
}

/// A latency node about to be warned: its pool (the replacement's CreateFleet carries it
/// as a tag) and the uid of the pod it runs.
struct Victim {
    node: String,
    instance: String,
    pool: String,
    pod: String,
}

struct Sample {
    taint: Duration,
    evicted: Duration,
    fleet: Duration,
    receipt: Receipt,
}

fn victims(world: &World) -> Vec<Victim> {
    let pods = pods(world, "latency");
    nodes_running(world, "latency")
        .into_iter()
        .filter_map(|(node, instance)| {
            let pod = pods
                .iter()
                .find(|p| p["spec"]["nodeName"] == node.as_str())?;
            Some(Victim {
                pool: format!("latency-{}", pod["metadata"]["labels"]["victim"].as_str()?),
                pod: pod["metadata"]["uid"].as_str()?.to_string(),
                node,
                instance,
            })
        })
        .collect()
}

/// When each of `victims` was tainted, had its pod evicted (deleting or gone) and saw its
/// pool's replacement CreateFleet (the first since call `fleets_before`), from the
/// receipt of its warning.
async fn watch(
    world: &World,
    source: &EventSource,
    victims: &[Victim],
    fleets_before: usize,
) -> anyhow::Result<Vec<Sample>> {
    let until = Instant::now() + Duration::from_secs(60);
    let mut tainted_at: Vec<Option<Instant>> = vec![None; victims.len()];
    let mut evicted_at: Vec<Option<Instant>> = vec![None; victims.len()];
    loop {
        let now = Instant::now();
        let pods = pods(world, "latency");
        for (i, v) in victims.iter().enumerate() {
            if tainted_at[i].is_none() && tainted(world, &v.node) {
                tainted_at[i] = Some(now);
            }
            let evicted = pods
                .iter()
                .find(|p| p["metadata"]["uid"] == v.pod.as_str())
                .is_none_or(|p| !p["metadata"]["deletionTimestamp"].is_null());
            if evicted_at[i].is_none() && evicted {
                evicted_at[i] = Some(now);
            }
        }
        let fleets = world.front.calls("CreateFleet");
        let fleet_of = |v: &Victim| {
            fleets[fleets_before.min(fleets.len())..]
                .iter()
                .find(|c| c.params.values().any(|value| *value == v.pool))
                .map(|c| c.at)
        };
        let receipts = source.receipts.lock().unwrap().clone();
        let samples: Option<Vec<Sample>> = victims
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let receipt = receipts.get(&v.instance)?.clone();
                let from = |t: Instant| t.saturating_duration_since(receipt.at);
                Some(Sample {
                    taint: from(tainted_at[i]?),
                    evicted: from(evicted_at[i]?),
                    fleet: from(fleet_of(v)?),
                    receipt,
                })
            })
            .collect();
        if let Some(samples) = samples {
            return Ok(samples);
        }
        anyhow::ensure!(
            Instant::now() < until,
            "warnings for {:?}: tainted {tainted_at:?}, evicted {evicted_at:?}, \
             received {:?}; failures {:?}; logs in {}",
            victims.iter().map(|v| &v.node).collect::<Vec<_>>(),
            victims
                .iter()
                .map(|v| receipts.contains_key(&v.instance))
                .collect::<Vec<_>>(),
            source.failures.lock().unwrap(),
            source.dir.display()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn print_sample(label: &str, s: &Sample) {
    println!(
        "  {label}: tainted {:.3} s, first eviction {:.3} s, CreateFleet {:.3} s ({}{}{})",
        s.taint.as_secs_f64(),
        s.evicted.as_secs_f64(),
        s.fleet.as_secs_f64(),
        s.receipt.container,
        if s.receipt.cold { ", cold" } else { "" },
        if s.receipt.first_in_container {
            ", first invocation"
        } else {
            ""
        },
    );
}

/// Waits until no CreateFleet came for 3 s, so the next warning's CreateFleet is its own.
async fn quiet(world: &World) {
    loop {
        let n = world.front.calls("CreateFleet").len();
        tokio::time::sleep(Duration::from_secs(3)).await;
        if world.front.calls("CreateFleet").len() == n {
            break;
        }
    }
}

/// A batch of one: a spot warning for each of `victims`, one at a time.
async fn one_at_a_time(
    world: &World,
    source: &EventSource,
    victims: &[Victim],
) -> anyhow::Result<Vec<Sample>> {
    let mut samples = vec![];
    for (i, v) in victims.iter().enumerate() {
        let fleets_before = world.front.calls("CreateFleet").len();
        spot_warnings(world, &[&v.instance]).await?;
        let sample = watch(world, source, std::slice::from_ref(v), fleets_before)
            .await?
            .remove(0);
        print_sample(&format!("warning {:2}", i + 1), &sample);
        samples.push(sample);
        quiet(world).await;
    }
    Ok(samples)
}

/// A batch of `victims.len()`: their spot warnings in one PutEvents, as a reclaimed spot
/// pool sends them.
async fn all_at_once(
    world: &World,
    source: &EventSource,
    victims: &[Victim],
) -> anyhow::Result<Vec<Sample>> {
    let fleets_before = world.front.calls("CreateFleet").len();
    let invocations_before = source.invocations.load(Ordering::SeqCst);
    let instances: Vec<&str> = victims.iter().map(|v| v.instance.as_str()).collect();
    spot_warnings(world, &instances).await?;
    let samples = watch(world, source, victims, fleets_before).await?;
    for (v, s) in victims.iter().zip(&samples) {
        print_sample(&v.node, s);
    }
    quiet(world).await;
    println!(
        "  {} warnings in {} invocations; {} CreateFleet calls",
        victims.len(),
        source.invocations.load(Ordering::SeqCst) - invocations_before,
        world.front.calls("CreateFleet").len() - fleets_before
    );
    Ok(samples)
}

fn summary(name: &str, mut values: Vec<Duration>, target: f64) {
    if values.is_empty() {
        println!("{name}: no samples");
        return;
    }
    values.sort();
    println!(
        "{name} over {} warnings: median {:.3} s, p90 {:.3} s, p99 {:.3} s, min {:.3} s, max {:.3} s; target <= {target} s",
        values.len(),
        percentile(&values, 0.5).as_secs_f64(),
        percentile(&values, 0.9).as_secs_f64(),
        percentile(&values, 0.99).as_secs_f64(),
        values[0].as_secs_f64(),
        values[values.len() - 1].as_secs_f64(),
    );
}

fn summaries(label: &str, samples: &[&Sample]) {
    summary(
        &format!("{label}: received -> tainted"),
        samples.iter().map(|s| s.taint).collect(),
        1.0,
    );
    summary(
        &format!("{label}: received -> first eviction"),
        samples.iter().map(|s| s.evicted).collect(),
        1.0,
    );
    summary(
        &format!("{label}: received -> CreateFleet"),
        samples.iter().map(|s| s.fleet).collect(),
        2.0,
    );
}

/// A spot warning for the node running the `drain` pods; follows them until none is left.
async fn drain(world: &World, source: &EventSource) -> anyhow::Result<()> {
    let (node, instance) = nodes_running(world, "drain")
        .into_iter()
        .next()
        .context("no node runs the drain pods")?;
    let on_node = |world: &World| {
        pods(world, "drain")
            .iter()
            .filter(|p| p["spec"]["nodeName"] == node.as_str())
            .count()
    };
    anyhow::ensure!(
        on_node(world) == DRAIN_PODS,
        "{} of the {DRAIN_PODS} drain pods on {node}",
        on_node(world)
    );
    let fleets_before = world.front.calls("CreateFleet").len();
    let requests_before = world.sim.requests().len();
    let sent = Instant::now();
    spot_warnings(world, &[&instance]).await?;
    let mut worst_unavailable = 0;
    let mut first_gone = None;
    let mut replacement_ready = None;
    let until = sent + Duration::from_secs(180);
    loop {
        let pods = pods(world, "drain");
        let healthy = pods.iter().filter(|p| ready_and_not_deleting(p)).count();
        worst_unavailable = worst_unavailable.max(DRAIN_PODS.saturating_sub(healthy));
        let left = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"] == node.as_str())
            .count();
        if first_gone.is_none() && left < DRAIN_PODS {
            first_gone = Some(Instant::now());
        }
        let elsewhere = pods
            .iter()
            .filter(|p| ready_and_not_deleting(p) && p["spec"]["nodeName"] != node.as_str())
            .count();
        if replacement_ready.is_none() && elsewhere > 0 {
            replacement_ready = Some(Instant::now());
        }
        if left == 0 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < until,
            "{left} pods still on {node} {:?} after the warning; failures {:?}",
            until - sent,
            source.failures.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained = Instant::now();
    let receipt = source
        .receipts
        .lock()
        .unwrap()
        .get(&instance)
        .cloned()
        .context("the warning was never received")?;
    let from = |t: Option<Instant>| {
        t.map_or("never".to_string(), |t| {
            format!(
                "{:.1} s",
                t.saturating_duration_since(receipt.at).as_secs_f64()
            )
        })
    };
    let fleet = world
        .front
        .calls("CreateFleet")
        .get(fleets_before)
        .map(|c| c.at);
    let healthy_now = pods(world, "drain")
        .iter()
        .filter(|p| running(p) && p["spec"]["nodeName"] != node.as_str())
        .count();
    println!(
        "drain of {DRAIN_PODS} pods (PDB maxUnavailable 1, deadline 120 s after the warning): \
         received {:.2} s after PutEvents; from receipt: replacement CreateFleet {}, first pod \
         off the node {}, first pod Ready elsewhere {}, node empty {}; at most {worst_unavailable} \
         pods unavailable at once; {healthy_now} running elsewhere when the node was empty",
        receipt.at.saturating_duration_since(sent).as_secs_f64(),
        from(fleet),
        from(first_gone),
        from(replacement_ready),
        from(Some(drained)),
    );
    // How the pods left: evictions (the budget's 429s included) vs deletions near the
    // deadline. Only this drain's chain talks to the API server meanwhile.
    let requests = world.sim.requests();
    let count = |what: &str| {
        requests[requests_before..]
            .iter()
            .filter(|r| *r == what)
            .count()
    };
    println!(
        "API requests meanwhile: {} POST pods/eviction (allowed and refused), {} DELETE pods",
        count("POST pods/eviction"),
        count("DELETE pods")
    );
    let notes: Vec<String> = world
        .sim
        .list_json("events.k8s.io/v1", "Event")
        .into_iter()
        .filter(|e| e["regarding"]["name"] == node.as_str())
        .filter_map(|e| e["note"].as_str().map(str::to_string))
        .collect();
    println!("events on the node: {notes:#?}");
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // The harness's own logs (the in-process provisioner that sets the nodes up):
    // `RUST_LOG=nodewright=info`.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let bin = release_binary("interruption");
    std::fs::metadata(&bin)
        .with_context(|| format!("{} (build it with `make release`)", bin.display()))?;
    let settings = Template::load()?.function_settings(FUNCTION)?;
    println!(
        "binary {}; as template.yaml deploys it: timeout {:?}, {} MB",
        bin.display(),
        settings.timeout,
        settings.memory_mb
    );
    let config = SimConfig {
        clock: SimClock::real_time(1.0),
        crds_installed: true,
        ..SimConfig::default()
    };
    println!(
        "simulated cluster on real time: nodes register {:?} after launch and are Ready {:?} later",
        config.boot_delay, config.ready_delay
    );
    let world = Arc::new(World::start("bench-interruption", config).await?);
    let _stepping = world.sim.run_in_background(SIM_STEP);
    world.apply_yaml(
        &with_world_names(&world, CONFIG).replace("DRAIN_PODS", &DRAIN_PODS.to_string()),
    )?;
    for i in 0..LATENCY_NODES {
        world.apply_yaml(&latency_node(i))?;
    }
    // The nodes to interrupt, launched by the provisioner (in process: not measured).
    let batch = BatchWindow::fixed(Duration::from_millis(500), Duration::from_secs(3));
    let provisioner = world
        .provisioner(quick(Duration::from_secs(8)), batch)
        .await?;
    wait_until(
        "pods pending",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            pods(&world, "latency").len() == LATENCY_NODES
                && pods(&world, "drain").len() == DRAIN_PODS
        },
    )
    .await?;
    let launched = invoke(&provisioner).await?;
    let all_running = |world: &World| {
        pods(world, "latency").iter().all(running) && pods(world, "drain").iter().all(running)
    };
    if let Err(e) = wait_until(
        "every pod running",
        Duration::from_secs(150),
        Duration::from_millis(100),
        || all_running(&world),
    )
    .await
    {
        let count = |app| pods(&world, app).iter().filter(|p| running(p)).count();
        anyhow::bail!(
            "{e}: {} of {LATENCY_NODES} latency pods and {} of {DRAIN_PODS} drain pods running on \
             {} nodes; the provisioner's invocation: {launched}",
            count("latency"),
            count("drain"),
            world.sim.list_json("v1", "Node").len()
        );
    }
    drop(provisioner);

    let dir = std::env::temp_dir().join(format!("nodewright-bench-{}", std::process::id()));
    let source = Arc::new(EventSource {
        world: world.clone(),
        settings,
        dir: dir.clone(),
        containers: Vec::new().into(),
        receipts: Mutex::default(),
        invocations: 0.into(),
        durations: Mutex::default(),
        failures: Mutex::default(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let mapping = tokio::spawn(source.clone().run(stop.clone()));

    let all = victims(&world);
    anyhow::ensure!(
        all.len() == LATENCY_NODES,
        "{} latency nodes, {LATENCY_NODES} needed",
        all.len()
    );
    let (singles, batch) = all.split_at(SINGLES);
    println!("\nbatches of one: received -> tainted / first eviction / replacement CreateFleet:");
    let singles = one_at_a_time(&world, &source, singles).await?;
    println!("\na batch of {BATCH}, in one PutEvents:");
    let batch = all_at_once(&world, &source, batch).await?;
    println!();
    summaries("batch of 1", &singles.iter().collect::<Vec<_>>());
    let warm: Vec<&Sample> = singles
        .iter()
        .filter(|s| !s.receipt.first_in_container)
        .collect();
    summaries("batch of 1, warm containers only", &warm);
    summaries(
        &format!("batch of {BATCH}"),
        &batch.iter().collect::<Vec<_>>(),
    );

    // The latency warnings' drains and follow-ups end by their deadlines; the drain is
    // measured alone.
    println!("\nwaiting for the latency warnings' follow-ups to end (their 120 s deadlines)");
    tokio::time::sleep(Duration::from_secs(125)).await;
    drain(&world, &source).await?;

    stop.store(true, Ordering::SeqCst);
    mapping.await??;
    println!(
        "\n{} invocations on {} containers; failures: {:?}",
        source.invocations.load(Ordering::SeqCst),
        source.containers.lock().await.len(),
        source.failures.lock().unwrap()
    );
    invocation_costs(&source).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
