//! The provisioner's release binary, run as Lambda runs it (`make bench`):
//!
//! 1. its size on disk (target: at most 10 MB);
//! 2. the time from a pod becoming unschedulable to its CreateFleet call, with the default
//!    `POLL_INTERVAL` (5 s), invocation budget (50 s) and batching window (1 s idle), the
//!    invocations started on a one-minute schedule as EventBridge Scheduler starts them
//!    (target: median at most 2 s);
//! 3. its peak resident memory over one invocation that finds 5,000 pending pods (target:
//!    at most 128 MiB, Lambda's smallest useful memory size).
//!
//! Emulated: the Lambda Runtime API (`nodewright_world::lambda_api`), AWS (moto, seen
//! through the world's front, which records when CreateFleet reached it) and Kubernetes
//! (the simulated cluster). moto and the simulated cluster answer on loopback, so EC2's and
//! the API server's own latency are not in these figures.
//!
//! The binary is `$NODEWRIGHT_PROVISIONER_BIN`, else `<target>/release/provisioner`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::lambda_api::{FunctionProcess, Outcome, RuntimeApi};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::scheduled_event;
use serde_json::{Value, json};

const LATENCY_SAMPLES: usize = 40;
const PENDING_PODS: usize = 5_000;
/// EventBridge Scheduler's `rate(1 minute)`.
const SCHEDULE: Duration = Duration::from_secs(60);
/// The function's timeout in template.yaml.
const TIMEOUT: Duration = Duration::from_secs(70);

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
  role: CLUSTER-node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
"#;

fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("NODEWRIGHT_PROVISIONER_BIN") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || nodewright_world::moto::workspace_root().join("target"),
        PathBuf::from,
    );
    target.join("release").join("provisioner")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
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

struct Function {
    api: RuntimeApi,
    process: FunctionProcess,
    log: PathBuf,
}

async fn start_function(
    world: &World,
    dir: &std::path::Path,
    name: &str,
) -> anyhow::Result<Function> {
    let api = RuntimeApi::start().await?;
    // The deployed function's variables: template.yaml's POLL_INTERVAL and budget.
    let env = world.function_env(dir)?;
    let log = dir.join(format!("{name}.log"));
    let process = FunctionProcess::spawn(&binary(), &api, 128, &env, &log)?;
    Ok(Function { api, process, log })
}

impl Function {
    async fn invoke(&self) -> anyhow::Result<Value> {
        match self.api.invoke(scheduled_event(), TIMEOUT).await? {
            Outcome::Response(v) => Ok(v),
            Outcome::Error(e) => {
                anyhow::bail!("the invocation failed: {e}; log {}", self.log.display())
            }
        }
    }
}

/// Pods arrive one at a time at random moments; each needs a new c6a.2xlarge.
async fn latency(world: &World, dir: &std::path::Path) -> anyhow::Result<Vec<Duration>> {
    let function = std::sync::Arc::new(start_function(world, dir, "latency").await?);
    let scheduler = {
        let function = function.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SCHEDULE);
            loop {
                tick.tick().await;
                if let Err(e) = function.invoke().await {
                    eprintln!("{e:#}");
                }
            }
        })
    };
    let mut samples = vec![];
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    while samples.len() < LATENCY_SAMPLES {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        tokio::time::sleep(Duration::from_millis(rng % 5000)).await;
        let fleets_before = world.front.calls("CreateFleet").len();
        let name = format!("latency-{}", samples.len());
        world.sim.apply_json(pod(&name, "7", "1Gi", "latency"))?;
        world.sim.step().await; // the scheduler marks it Unschedulable
        let pending_at = Instant::now();
        let deadline = pending_at + SCHEDULE + TIMEOUT;
        let fleet_at = loop {
            if let Some(call) = world.front.calls("CreateFleet").get(fleets_before) {
                break call.at;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no CreateFleet for {name} within {:?}; log {}",
                deadline - pending_at,
                function.log.display()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let sample = fleet_at.saturating_duration_since(pending_at);
        println!(
            "  pod {:2}: {:.2} s",
            samples.len() + 1,
            sample.as_secs_f64()
        );
        samples.push(sample);
    }
    scheduler.abort();
    samples.sort();
    Ok(samples)
}

/// One invocation of a fresh process that finds `PENDING_PODS` pending pods.
async fn memory(world: &World, dir: &std::path::Path) -> anyhow::Result<(u64, Value, Duration)> {
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
    let function = start_function(world, dir, "memory").await?;
    let started = Instant::now();
    let summary = function.invoke().await?;
    let took = started.elapsed();
    let peak = function
        .process
        .peak_rss()
        .context("reading the function's peak RSS")?;
    Ok((peak, summary, took))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let bin = binary();
    let size = std::fs::metadata(&bin)
        .with_context(|| format!("{} (build it with `make release`)", bin.display()))?
        .len();
    println!(
        "binary {}: {:.2} MB ({size} bytes); target <= 10 MB",
        bin.display(),
        size as f64 / 1e6
    );

    let config = SimConfig {
        clock: SimClock::manual(),
        crds_installed: true,
        ..SimConfig::default()
    };
    let world = World::start("bench-cluster", config).await?;
    world.apply_yaml(&CONFIG.replace("CLUSTER", &world.seeded.cluster))?;
    let dir = std::env::temp_dir().join(format!("nodewright-bench-{}", std::process::id()));

    println!("\npending -> CreateFleet, {LATENCY_SAMPLES} pods, one-minute schedule:");
    let samples = latency(&world, &dir).await?;
    println!(
        "pending -> CreateFleet over {} pods: median {:.2} s, p99 {:.2} s, min {:.2} s, max {:.2} s; target median <= 2 s",
        samples.len(),
        percentile(&samples, 0.5).as_secs_f64(),
        percentile(&samples, 0.99).as_secs_f64(),
        samples[0].as_secs_f64(),
        samples[samples.len() - 1].as_secs_f64()
    );

    let (peak, summary, took) = memory(&world, &dir).await?;
    println!(
        "\npeak RSS over one invocation with {PENDING_PODS} pending pods: {:.1} MiB; target <= 128 MiB \
         (invocation {:.1} s, {} claims, {} instances launched)",
        peak as f64 / (1024.0 * 1024.0),
        took.as_secs_f64(),
        summary["claims"],
        summary["launchedInstances"].as_array().map_or(0, Vec::len)
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
