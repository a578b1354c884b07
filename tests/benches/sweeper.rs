//! The sweeper function's release binary, run as Lambda runs it (`make bench`): how long
//! one scheduled sweep of a steady 100-node cluster takes, and the process's peak memory,
//! for the Lambda GB-seconds it costs (README, "Cost").
//!
//! The cluster: `NODES` c6a.2xlarge nodes launched by the provisioner (in process, not
//! measured) for `NODES` × `PODS_PER_NODE` pods of 700m CPU / 1 GiB, so every node is
//! full and nothing is to be disrupted: the sweep the function runs every minute almost
//! always (read the NodePools, nodes, pods, DaemonSets and this cluster's instances, mark
//! drift, plan, act on nothing). Then one container of the function (the template's
//! reserved concurrency is 1) gets `INVOCATIONS` scheduled events, one every
//! `INVOCATION_GAP`; the first is its cold start's first invocation and is reported apart.
//! An invocation's duration is the time from queueing it on the emulated Runtime API to
//! the function's answer, what Lambda bills.
//!
//! Emulated: the Lambda Runtime API (`nodewright_world::lambda_api`), AWS (moto, through
//! the world's front, signed as the template's `SweeperFunction` role) and Kubernetes (the
//! simulated cluster on a real-time clock). Both answer on loopback: EC2's and the API
//! server's own latencies are not in these figures.
//!
//! The binary is `$NODEWRIGHT_SWEEPER_BIN`, else `<target>/release/sweeper`.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use nodewright::provision::BatchWindow;
use nodewright_world::kit::{
    app_pods, percentile, release_binary, running_on_a_node, wait_until, with_world_names,
};
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::lambda_api::{FunctionProcess, Outcome, RuntimeApi};
use nodewright_world::template::Template;
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick, scheduled_event};

const FUNCTION: &str = "SweeperFunction";
const NODES: usize = 100;
const PODS_PER_NODE: usize = 10;
const INVOCATIONS: usize = 30;
const INVOCATION_GAP: Duration = Duration::from_secs(2);
/// Invocations a month at the template's `rate(1 minute)`, 30 days.
const INVOCATIONS_A_MONTH: f64 = 60.0 * 24.0 * 30.0;
const SIM_STEP: Duration = Duration::from_millis(250);

const CONFIG: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: steady}
spec:
  template:
    metadata: {labels: {bench: steady}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.2xlarge]}
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
metadata: {name: steady, namespace: default}
spec:
  replicas: PODS
  selector: {matchLabels: {app: steady}}
  template:
    metadata: {labels: {app: steady}}
    spec:
      nodeSelector: {bench: steady}
      containers: [{name: c, image: pause, resources: {requests: {cpu: 700m, memory: 1Gi}}}]
"#;

/// The steady Deployment's pods: (all, running on a node).
fn steady_pods(world: &World) -> (usize, usize) {
    let pods = app_pods(world, "steady");
    let running = pods.iter().filter(|p| running_on_a_node(p)).count();
    (pods.len(), running)
}

/// The bench's waits look every 200 ms.
const LOOK_EVERY: Duration = Duration::from_millis(200);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let bin = release_binary("sweeper");
    std::fs::metadata(&bin)
        .with_context(|| format!("{} (build it with `make release`)", bin.display()))?;
    let settings = Template::load()?.function_settings(FUNCTION)?;
    println!(
        "binary {}; as template.yaml deploys it: timeout {:?}, {} MB",
        bin.display(),
        settings.timeout,
        settings.memory_mb
    );
    let world = World::start(
        "bench-sweeper",
        SimConfig {
            clock: SimClock::real_time(1.0),
            crds_installed: true,
            ..SimConfig::default()
        },
    )
    .await?;
    let _stepping = world.sim.run_in_background(SIM_STEP);
    let pods = NODES * PODS_PER_NODE;
    world.apply_yaml(&with_world_names(&world, CONFIG).replace("PODS", &pods.to_string()))?;
    wait_until("pods created", Duration::from_secs(30), LOOK_EVERY, || {
        steady_pods(&world).0 == pods
    })
    .await?;

    // The cluster, launched by the provisioner in process (not measured); invoked again
    // while pods are pending, as its schedule would.
    let provisioner = world
        .provisioner(
            quick(Duration::from_secs(20)),
            BatchWindow::fixed(Duration::from_millis(500), Duration::from_secs(3)),
        )
        .await?;
    let started = Instant::now();
    for _ in 0..6 {
        if steady_pods(&world).1 == pods {
            break;
        }
        invoke(&provisioner).await?;
        let _ = wait_until(
            "every pod running",
            Duration::from_secs(60),
            LOOK_EVERY,
            || steady_pods(&world).1 == pods,
        )
        .await;
    }
    drop(provisioner);
    let nodes = world.sim.list_json("v1", "Node").len();
    let (_, running) = steady_pods(&world);
    anyhow::ensure!(
        running == pods,
        "{running} of {pods} pods running on {nodes} nodes after {:?}",
        started.elapsed()
    );
    println!(
        "cluster: {nodes} nodes, {pods} pods running (set up in {:.0?})",
        started.elapsed()
    );

    let dir = std::env::temp_dir().join(format!("nodewright-bench-sweeper-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let api = RuntimeApi::start().await?;
    let env = world.deployed_env(FUNCTION, &dir)?;
    let log = dir.join("sweeper.log");
    let process = FunctionProcess::spawn(&bin, &api, settings.memory_mb, &env, &log)?;
    let mut durations = Vec::new();
    let mut reports = Vec::new();
    for i in 0..INVOCATIONS {
        let t = Instant::now();
        let outcome = api.invoke(scheduled_event(), settings.timeout).await?;
        durations.push(t.elapsed());
        match outcome {
            Outcome::Response(v) => reports.push(v),
            Outcome::Error(e) => {
                anyhow::bail!("invocation {i} failed: {e} (log {})", log.display())
            }
        }
        tokio::time::sleep(INVOCATION_GAP).await;
    }
    let peak = process.peak_rss()? as f64 / (1024.0 * 1024.0);
    println!("first sweep's answer: {}", reports[0]);
    println!("last sweep's answer: {}", reports[INVOCATIONS - 1]);
    let nodes_after = world.sim.list_json("v1", "Node").len();
    anyhow::ensure!(
        nodes_after == nodes,
        "the steady cluster changed: {nodes} nodes before the sweeps, {nodes_after} after"
    );

    let first = durations[0];
    let mut warm: Vec<Duration> = durations[1..].to_vec();
    warm.sort();
    let mut all = durations.clone();
    all.sort();
    let mean = all.iter().sum::<Duration>() / all.len() as u32;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("\nsweep duration, {INVOCATIONS} invocations of one container:");
    println!(
        "  first (container's first invocation): {:.1} ms",
        ms(first)
    );
    println!(
        "  warm ({}): median {:.1} ms, p99 {:.1} ms, min {:.1} ms, max {:.1} ms",
        warm.len(),
        ms(percentile(&warm, 0.5)),
        ms(percentile(&warm, 0.99)),
        ms(warm[0]),
        ms(warm[warm.len() - 1])
    );
    println!(
        "  all: mean {:.1} ms, median {:.1} ms, p99 {:.1} ms",
        ms(mean),
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.99))
    );
    println!("peak RSS (VmHWM): {peak:.1} MiB");
    // Lambda bills each invocation's duration (rounded up to the millisecond) at the
    // configured memory size.
    let gb = f64::from(settings.memory_mb) / 1024.0;
    let gb_s = mean.as_secs_f64() * INVOCATIONS_A_MONTH * gb;
    println!(
        "GB-s a month at one sweep a minute, {} MB, the mean duration: {gb_s:.0}",
        settings.memory_mb
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
