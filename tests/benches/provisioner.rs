//! The provisioner's release binary, run as Lambda runs it (`make bench`):
//!
//! 1. its size on disk (target: at most 10 MB);
//! 2. the time from a pod becoming unschedulable to its CreateFleet call over 200 pods
//!    arriving at random moments (targets: median at most 1 s, p99 at most 3 s), with the
//!    function as the stack deploys it (template.yaml's timeout, memory and reserved
//!    concurrency; the deployed environment's `POLL_INTERVAL`, `INVOCATION_BUDGET`,
//!    `DEADLINE_MARGIN` and `LEASE_DURATION`), an invocation started every minute as EventBridge Scheduler starts them and
//!    routed as Lambda routes it: to an idle warm container, else to a new (cold) one, up
//!    to the reserved concurrency. Consecutive invocations overlap and the Lease decides
//!    which one acts;
//! 3. the Lambda GB-seconds this costs per month, from the invocations' measured durations;
//! 4. its peak resident memory over one invocation that finds 5,000 pending pods (target:
//!    at most 128 MiB, Lambda's smallest useful memory size).
//!
//! Emulated: the Lambda Runtime API (`nodewright_world::lambda_api`), AWS (moto, seen
//! through the world's front, which records when CreateFleet reached it) and Kubernetes
//! (the simulated cluster, serving the Lease; its clock is brought up to real time after
//! each sample, so launched nodes join and their pods bind between samples). moto and the
//! simulated cluster answer on loopback, so EC2's and the API server's own latency are not
//! in these figures.
//!
//! The binary is `$NODEWRIGHT_PROVISIONER_BIN`, else `<target>/release/provisioner`. With
//! `NODEWRIGHT_BENCH_KEEP_LOGS` set, the containers' logs are kept (their folder is printed).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nodewright_world::aws_front::Call;
use nodewright_world::kit::{percentile, release_binary, with_world_names};
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::lambda_api::{FunctionProcess, Outcome, RuntimeApi};
use nodewright_world::template::{FunctionSettings, Template};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::scheduled_event;
use serde_json::{Value, json};

/// Pods measured; `NODEWRIGHT_BENCH_SAMPLES` overrides it for a quick smoke run.
const LATENCY_SAMPLES: usize = 200;
const PENDING_PODS: usize = 5_000;
/// EventBridge Scheduler's `rate(1 minute)`.
const SCHEDULE: Duration = Duration::from_secs(60);
/// Lambda bills duration in GB-seconds; a 30-day month.
const SECONDS_PER_MONTH: f64 = 30.0 * 24.0 * 3600.0;

const CONFIG: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: one-per-pod}
spec:
  template:
    metadata: {labels: {bench: latency}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.2xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    metadata: {labels: {bench: memory}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NODE_ROLE
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
"#;

fn latency_samples() -> usize {
    std::env::var("NODEWRIGHT_BENCH_SAMPLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(LATENCY_SAMPLES)
}

fn client_token(call: &Call) -> String {
    call.params.get("ClientToken").cloned().unwrap_or_default()
}

fn pod(name: &str, cpu: &str, memory: &str, pool: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {
            "nodeSelector": {"bench": pool},
            "containers": [{"name": "c", "image": "pause",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
        }
    })
}

/// One container of the function: its own Runtime API and process, busy while an
/// invocation runs in it.
struct Container {
    name: String,
    api: RuntimeApi,
    process: FunctionProcess,
    log: PathBuf,
    busy: std::sync::atomic::AtomicBool,
    invocations: std::sync::atomic::AtomicUsize,
}

async fn start_container(
    world: &World,
    settings: &FunctionSettings,
    dir: &Path,
    name: &str,
) -> anyhow::Result<Container> {
    let api = RuntimeApi::start().await?;
    // The deployed function's variables (template.yaml's POLL_INTERVAL, budget, margin and
    // Lease), and the log stream that names the container, as Lambda's does: the Lease
    // holder's identity.
    let mut env = world.function_env(dir)?;
    env.push(("AWS_LAMBDA_LOG_STREAM_NAME", name.to_string()));
    let log = dir.join(format!("{name}.log"));
    let process = FunctionProcess::spawn(
        &release_binary("provisioner"),
        &api,
        settings.memory_mb,
        &env,
        &log,
    )?;
    Ok(Container {
        name: name.to_string(),
        api,
        process,
        log,
        busy: false.into(),
        invocations: 0.into(),
    })
}

impl Container {
    async fn invoke(&self, timeout: Duration) -> anyhow::Result<Value> {
        match self.api.invoke(scheduled_event(), timeout).await? {
            Outcome::Response(v) => Ok(v),
            Outcome::Error(e) => {
                anyhow::bail!("the invocation failed: {e}; log {}", self.log.display())
            }
        }
    }
}

/// What the scheduled invocations did: each one's duration, and the starts Lambda would
/// have throttled (every container busy at the reserved concurrency).
#[derive(Default)]
struct Invocations {
    started: usize,
    durations: Vec<Duration>,
    containers: usize,
    throttled: usize,
    /// One line per invocation: container, cold or warm, duration, what its summary says.
    lines: Vec<String>,
}

/// Starts an invocation every minute, as Lambda routes it.
fn schedule(
    world: Arc<World>,
    settings: FunctionSettings,
    dir: PathBuf,
    record: Arc<Mutex<Invocations>>,
) -> tokio::task::JoinHandle<()> {
    use std::sync::atomic::Ordering;
    tokio::spawn(async move {
        let cap = settings.reserved_concurrency.unwrap_or(1000) as usize;
        let mut containers: Vec<Arc<Container>> = vec![];
        let began = Instant::now();
        let mut tick = tokio::time::interval(SCHEDULE);
        loop {
            tick.tick().await;
            let idle = containers
                .iter()
                .find(|c| !c.busy.load(Ordering::SeqCst))
                .cloned();
            let container = match idle {
                Some(c) => c,
                None if containers.len() < cap => {
                    let name = format!("container-{}", containers.len());
                    match start_container(&world, &settings, &dir, &name).await {
                        Ok(c) => {
                            containers.push(Arc::new(c));
                            record.lock().unwrap().containers = containers.len();
                            containers[containers.len() - 1].clone()
                        }
                        Err(e) => {
                            eprintln!("starting {name}: {e:#}");
                            continue;
                        }
                    }
                }
                None => {
                    record.lock().unwrap().throttled += 1;
                    continue;
                }
            };
            container.busy.store(true, Ordering::SeqCst);
            let first = container.invocations.fetch_add(1, Ordering::SeqCst) == 0;
            let number = {
                let mut r = record.lock().unwrap();
                r.started += 1;
                r.started
            };
            let (record, timeout) = (record.clone(), settings.timeout);
            let at = began.elapsed();
            tokio::spawn(async move {
                let started = Instant::now();
                let outcome = container.invoke(timeout).await;
                let took = started.elapsed();
                let line = match &outcome {
                    Ok(s) => format!(
                        "  invocation {number:2} at {:5.1} s on {}{}: {:.1} s, lease acquired {} \
                         (standby checks {}, released {}, standby warm-up {}), {} polls, {} \
                         watch wake-ups, {} instances launched",
                        at.as_secs_f64(),
                        container.name,
                        if first { " (cold)" } else { "" },
                        took.as_secs_f64(),
                        s["lease"]["acquired"],
                        s["lease"]["standbyChecks"],
                        s["lease"]["released"],
                        s["lease"]["standbyWarmUp"],
                        s["polls"],
                        s["watchWakeups"],
                        s["launchedInstances"].as_array().map_or(0, Vec::len),
                    ),
                    Err(e) => format!("  invocation {number:2} on {}: {e:#}", container.name),
                };
                let mut r = record.lock().unwrap();
                r.durations.push(took);
                r.lines.push(line);
                container.busy.store(false, Ordering::SeqCst);
            });
        }
    })
}

/// Pods arrive one at a time at random moments; each needs a new c6a.2xlarge.
async fn latency(
    world: Arc<World>,
    settings: &FunctionSettings,
    dir: &Path,
) -> anyhow::Result<(Vec<Duration>, Invocations, Duration)> {
    let record = Arc::new(Mutex::new(Invocations::default()));
    let began = Instant::now();
    let scheduler = schedule(
        world.clone(),
        settings.clone(),
        dir.to_path_buf(),
        record.clone(),
    );
    let mut samples = vec![];
    let mut tokens: HashSet<String> = HashSet::new();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    while samples.len() < latency_samples() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        tokio::time::sleep(Duration::from_millis(rng % 5000)).await;
        let before = world.front.calls("CreateFleet");
        let fleets_before = before.len();
        tokens.extend(before.iter().map(client_token));
        let name = format!("latency-{}", samples.len());
        world.sim.apply_json(pod(&name, "7", "1Gi", "latency"))?;
        world.sim.step().await; // the scheduler marks it Unschedulable
        let pending_at = Instant::now();
        let deadline = pending_at + SCHEDULE + settings.timeout;
        // The pod's own launch is the first CreateFleet with a ClientToken not sent before:
        // a replay of an earlier launch (same token) is not this pod's.
        let fleet_at = loop {
            let calls = world.front.calls("CreateFleet");
            let new_launch = calls[fleets_before..]
                .iter()
                .find(|c| tokens.insert(client_token(c)));
            if let Some(call) = new_launch {
                break call.at;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no CreateFleet for {name} within {:?}; logs in {}",
                deadline - pending_at,
                dir.display()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let sample = fleet_at.saturating_duration_since(pending_at);
        println!(
            "  pod {:3}: {:.2} s{}",
            samples.len() + 1,
            sample.as_secs_f64(),
            slowest_call(&world, pending_at, fleet_at)
        );
        samples.push(sample);
        // The nodes launched so far join, and their pods bind, as in a cluster: the pending
        // set stays what it would be, and no instance outlives the provisioner's
        // JOIN_DEADLINE (15 min) unjoined, which would launch its pod again. Done between
        // samples, so the simulated cluster's work is outside every measured window.
        world.catch_up_clock();
        world.sim.step().await;
    }
    // The invocations still running count to their end: wait for them, starting no more.
    scheduler.abort();
    let wall = began.elapsed();
    let running_until = Instant::now() + settings.timeout + Duration::from_secs(5);
    while Instant::now() < running_until {
        let done = {
            let r = record.lock().unwrap();
            r.durations.len() >= r.started
        };
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let invocations = std::mem::take(&mut *record.lock().unwrap());
    let fleets = world.front.calls("CreateFleet");
    let distinct: HashSet<String> = fleets.iter().map(client_token).collect();
    println!(
        "CreateFleet calls during the run: {}, with {} distinct ClientTokens, for {} pods \
         (a call beyond one per pod is a replay or a second launch)",
        fleets.len(),
        distinct.len(),
        samples.len()
    );
    for line in repeated_tokens(&fleets, began, dir) {
        println!("  {line}");
    }
    println!("AWS calls by action, as the front timed them (moto's time and the front's):");
    let halfway = began + wall / 2;
    for (half, keep) in [
        (
            "first half",
            &(|c: &Call| c.at < halfway) as &dyn Fn(&Call) -> bool,
        ),
        ("second half", &|c: &Call| c.at >= halfway),
    ] {
        for line in call_times(&world.front.calls_where(|c| c.at >= began && keep(c))) {
            println!("  {half}: {line}");
        }
    }
    samples.sort();
    Ok((samples, invocations, wall))
}

/// Each ClientToken CreateFleet received more than once: when each call came and how long
/// it took, and the log lines of every container that name its node claim, so the retry
/// that sent it again can be told (the SDK's own, the next poll's, another holder's).
fn repeated_tokens(fleets: &[Call], began: Instant, dir: &Path) -> Vec<String> {
    let mut by_token: std::collections::BTreeMap<String, Vec<&Call>> = Default::default();
    for c in fleets {
        by_token.entry(client_token(c)).or_default().push(c);
    }
    let logs: Vec<(String, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(e.path()).unwrap_or_default())
        })
        .collect();
    let mut lines = vec![];
    for (token, calls) in by_token.iter().filter(|(_, calls)| calls.len() > 1) {
        let at: Vec<String> = calls
            .iter()
            .map(|c| {
                format!(
                    "{:.2} s (took {:.2} s, {:?})",
                    c.at.saturating_duration_since(began).as_secs_f64(),
                    c.took.as_secs_f64(),
                    c.handling
                )
            })
            .collect();
        lines.push(format!(
            "ClientToken {token} sent {} times, at {}",
            calls.len(),
            at.join(", ")
        ));
        let claim = token.rsplit_once('-').map_or(token.as_str(), |(c, _)| c);
        for (name, log) in &logs {
            let about = |l: &&str| {
                l.contains(claim) || (l.contains("CreateFleet") && !l.contains("\"INFO\""))
            };
            for line in log.lines().filter(about) {
                lines.push(format!("    {name}: {line}"));
            }
        }
    }
    lines
}

/// The AWS call that took longest of those answered while a pod waited, so a slow sample
/// says where its wait went (an empty text when none was).
fn slowest_call(world: &World, from: Instant, to: Instant) -> String {
    world
        .front
        .calls_where(|c| c.at >= from && c.at + c.took <= to)
        .into_iter()
        .max_by_key(|c| c.took)
        .map(|c| {
            format!(
                " (slowest AWS call in the wait: {} {:.2} s)",
                c.action,
                c.took.as_secs_f64()
            )
        })
        .unwrap_or_default()
}

/// One line per action: count, median, p99 and longest of its calls' times.
fn call_times(calls: &[Call]) -> Vec<String> {
    let mut by_action: std::collections::BTreeMap<&str, Vec<Duration>> = Default::default();
    for c in calls {
        by_action.entry(&c.action).or_default().push(c.took);
    }
    by_action
        .into_iter()
        .map(|(action, mut took)| {
            took.sort();
            format!(
                "{action}: {} calls, median {:.3} s, p99 {:.3} s, max {:.3} s",
                took.len(),
                percentile(&took, 0.5).as_secs_f64(),
                percentile(&took, 0.99).as_secs_f64(),
                took[took.len() - 1].as_secs_f64()
            )
        })
        .collect()
}

/// One invocation of a fresh process that finds `PENDING_PODS` pending pods.
async fn memory(
    world: &World,
    settings: &FunctionSettings,
    dir: &Path,
) -> anyhow::Result<(u64, Value, Duration)> {
    // A mix of shapes, as a cluster's pending pods are.
    let shapes = [
        ("100m", "128Mi"),
        ("250m", "512Mi"),
        ("500m", "1Gi"),
        ("1", "2Gi"),
    ];
    for i in 0..PENDING_PODS {
        let (cpu, mem) = shapes[i % shapes.len()];
        world
            .sim
            .apply_json(pod(&format!("memory-{i}"), cpu, mem, "memory"))?;
    }
    world.sim.step().await;
    let function = start_container(world, settings, dir, "memory").await?;
    let started = Instant::now();
    let summary = function.invoke(settings.timeout).await?;
    let took = started.elapsed();
    let peak = function
        .process
        .peak_rss()
        .context("reading the function's peak RSS")?;
    Ok((peak, summary, took))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let bin = release_binary("provisioner");
    let size = std::fs::metadata(&bin)
        .with_context(|| format!("{} (build it with `make release`)", bin.display()))?
        .len();
    println!(
        "binary {}: {:.2} MB ({size} bytes); target <= 10 MB",
        bin.display(),
        size as f64 / 1e6
    );
    let settings = Template::load()?.function_settings("ProvisionerFunction")?;
    println!(
        "as template.yaml deploys it: timeout {:?}, {} MB, reserved concurrency {:?}, {:?}",
        settings.timeout, settings.memory_mb, settings.reserved_concurrency, settings.literal_env
    );

    let config = SimConfig {
        clock: SimClock::manual(),
        crds_installed: true,
        ..SimConfig::default()
    };
    let world = Arc::new(World::start("bench-cluster", config).await?);
    world.apply_yaml(&with_world_names(&world, CONFIG))?;
    let dir = std::env::temp_dir().join(format!("nodewright-bench-{}", std::process::id()));

    println!(
        "\npending -> CreateFleet, {} pods, one-minute schedule:",
        latency_samples()
    );
    let (samples, invocations, wall) = latency(world.clone(), &settings, &dir).await?;
    let over_3s = samples.iter().filter(|s| s.as_secs_f64() > 3.0).count();
    println!(
        "pending -> CreateFleet over {} pods: median {:.2} s, p99 {:.2} s, min {:.2} s, max {:.2} s, \
         {over_3s} over 3 s; targets median <= 1 s, p99 <= 3 s",
        samples.len(),
        percentile(&samples, 0.5).as_secs_f64(),
        percentile(&samples, 0.99).as_secs_f64(),
        samples[0].as_secs_f64(),
        samples[samples.len() - 1].as_secs_f64()
    );
    for line in &invocations.lines {
        println!("{line}");
    }
    let busy: Duration = invocations.durations.iter().sum();
    let mean = busy.as_secs_f64() / invocations.durations.len().max(1) as f64;
    let mut durations = invocations.durations.clone();
    durations.sort();
    let gb = f64::from(settings.memory_mb) / 1024.0;
    println!(
        "invocations: {} in {:.0} s on {} containers, {} throttled; duration median {:.1} s; \
         mean {mean:.1} s; {:.0} GB-s per month (mean duration x one start a minute x 30 days \
         x {} MB), \
         against {:.0} GB-s for one 50 s invocation a minute (the design before the Lease)",
        durations.len(),
        wall.as_secs_f64(),
        invocations.containers,
        invocations.throttled,
        durations
            .get(durations.len() / 2)
            .map_or(0.0, Duration::as_secs_f64),
        mean * (SECONDS_PER_MONTH / SCHEDULE.as_secs_f64()) * gb,
        settings.memory_mb,
        50.0 * (SECONDS_PER_MONTH / SCHEDULE.as_secs_f64()) * gb,
    );

    let (peak, summary, took) = memory(&world, &settings, &dir).await?;
    println!(
        "\npeak RSS over one invocation with {PENDING_PODS} pending pods: {:.1} MiB; target <= 128 MiB \
         (invocation {:.1} s, {} claims, {} instances launched)",
        peak as f64 / (1024.0 * 1024.0),
        took.as_secs_f64(),
        summary["claims"],
        summary["launchedInstances"].as_array().map_or(0, Vec::len)
    );
    // `NODEWRIGHT_BENCH_KEEP_LOGS` keeps the containers' logs for reading a slow sample.
    if std::env::var_os("NODEWRIGHT_BENCH_KEEP_LOGS").is_some() {
        println!("logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
