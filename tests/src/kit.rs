//! Set-up the tests and benchmarks repeat: a function binary as Lambda runs it
//! ([`LambdaFunction`]: behind its own emulated Runtime API, [`crate::lambda_api`], with the
//! world's function environment and the test's own variables, its output in a log file a
//! failing test shows), the local world on a manual clock ([`manual_world`]), with the
//! getting-started example applied ([`getting_started`]), and the benchmarks' release
//! binaries and percentiles.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::kube_sim::{SimClock, SimConfig};
use crate::lambda_api::{FunctionProcess, Outcome, RuntimeApi};
use crate::world::World;

/// Sends the test's `tracing` output to the test harness (shown for a failing test), at
/// `nodewright=info` (which covers every `nodewright*` crate) unless `DBG_LOG` says
/// otherwise. Only the first call in a test binary installs it.
pub fn log_to_test_output() {
    let filter = std::env::var("DBG_LOG").unwrap_or_else(|_| "nodewright=info".into());
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(filter.as_str())
        .try_init();
}

/// The simulated cluster the scenarios start from: a manual clock (a test moves time on by
/// advancing it) and Karpenter's CRDs installed.
pub fn manual_cluster() -> SimConfig {
    SimConfig {
        clock: SimClock::manual(),
        crds_installed: true,
        ..SimConfig::default()
    }
}

/// The local world `cluster` on its own time ([`crate::world_time`]): the wall clock's pace
/// while anything works, `idle` times as fast while everything waits, shared by moto's EC2,
/// the simulated cluster, the world's queue and Lambda, and the function binaries it runs;
/// Karpenter's CRDs installed. The control plane steps every `step` of world time in the
/// background (the task ends with the world).
pub async fn timed_world(cluster: &str, idle: f64, step: Duration) -> anyhow::Result<World> {
    let world = world_on_its_own_time(cluster, idle).await?;
    world.sim.step_in_background(step);
    Ok(world)
}

/// As [`timed_world`], but the control plane steps only when a test steps it.
pub async fn world_on_its_own_time(cluster: &str, idle: f64) -> anyhow::Result<World> {
    log_to_test_output();
    let dir = std::env::temp_dir().join(format!("nodewright-{cluster}-{}", std::process::id()));
    let time = crate::world_time::WorldTime::start(
        &dir,
        jiff::Timestamp::now(),
        crate::world_time::Speeds::idle_at(idle),
    )?;
    World::start(
        cluster,
        SimConfig {
            clock: SimClock::world(time),
            crds_installed: true,
            ..SimConfig::default()
        },
    )
    .await
}

/// The local world `cluster` on a [`manual_cluster`], logging to the test output.
pub async fn manual_world(cluster: &str) -> anyhow::Result<World> {
    log_to_test_output();
    World::start(cluster, manual_cluster()).await
}

/// Applies `examples/getting-started.yaml` at `replicas` replicas and steps the simulation
/// once, so that its pods are pending.
pub async fn apply_getting_started(world: &World, replicas: u32) -> anyhow::Result<()> {
    let replicas = format!("replicas: {replicas}");
    let example = world.example_edited("getting-started.yaml", &[("replicas: 10", &replicas)])?;
    world.apply_yaml(&example)?;
    world.sim.step().await;
    Ok(())
}

/// The local world `cluster` on a [`manual_cluster`] with the getting-started example
/// applied at `replicas` replicas ([`apply_getting_started`]).
pub async fn getting_started(cluster: &str, replicas: u32) -> anyhow::Result<World> {
    let world = World::start(cluster, manual_cluster()).await?;
    apply_getting_started(&world, replicas).await?;
    Ok(world)
}

/// The provisioner's batch window in the scenarios: 200 ms of quiet, at most 2 s.
pub fn quick_batch() -> nodewright::provision::BatchWindow {
    nodewright::provision::BatchWindow::fixed(Duration::from_millis(200), Duration::from_secs(2))
}

/// `yaml` with the world's names filled in: `CLUSTER` (the EKS cluster, as the
/// EC2NodeClass's discovery tag) and `NODE_ROLE` (the stack's node role).
pub fn with_world_names(world: &World, yaml: &str) -> String {
    yaml.replace("CLUSTER", &world.seeded.cluster)
        .replace("NODE_ROLE", &world.stack.node_role_name)
}

/// The release build of function `name` (`provisioner`, `interruption`, `sweeper`) that a
/// benchmark measures: `NODEWRIGHT_<NAME>_BIN` if set, else `release/<name>` in the target
/// directory (`CARGO_TARGET_DIR` if set).
pub fn release_binary(name: &str) -> PathBuf {
    let var = format!("NODEWRIGHT_{}_BIN", name.to_uppercase());
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || crate::moto::workspace_root().join("target"),
        PathBuf::from,
    );
    target.join("release").join(name)
}

/// The debug build of function `name` (`provisioner`, `interruption`, `sweeper`) that the
/// world's Lambda runs in tests: `debug/<name>` in the target directory (`CARGO_TARGET_DIR`
/// if set). `cargo test --workspace` builds it, since each function's package has
/// integration tests (cargo builds a package's binaries for them); a missing one is an
/// error that says so.
pub fn debug_binary(name: &str) -> anyhow::Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || crate::moto::workspace_root().join("target"),
        PathBuf::from,
    );
    let path = target.join("debug").join(name);
    anyhow::ensure!(
        path.is_file(),
        "{} is missing: `cargo test --workspace` (as `make test` runs it) builds it",
        path.display()
    );
    Ok(path)
}

/// The debug CLI as a user in `world` runs it: the world's AWS through the front as its
/// administrator, the simulated cluster through `kubeconfig`, and the world's time.
pub fn nodewright_cli(world: &World, kubeconfig: &Path) -> anyhow::Result<tokio::process::Command> {
    let mut command = tokio::process::Command::new(debug_binary("nodewright")?);
    command
        .env_clear()
        .env("HOME", std::env::temp_dir())
        .env("KUBECONFIG", kubeconfig)
        .envs(crate::moto::sdk_env(
            world.front.url(),
            &world.moto.admin_credentials(),
        ));
    if let Some(time) = world.clock().world_time() {
        command.env(
            nodewright::clock::CLOCK_VARIABLE,
            nodewright::clock::world_setting(time.path()),
        );
    }
    Ok(command)
}

/// The `p` quantile (0.0 to 1.0) of `sorted`, the nearest sample by rank; `sorted` must not
/// be empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// One container of a function: its Runtime API, its process and its log.
pub struct LambdaFunction {
    pub api: RuntimeApi,
    pub process: FunctionProcess,
    pub log: PathBuf,
}

impl LambdaFunction {
    /// Starts `binary` (an `env!("CARGO_BIN_EXE_…")` path) behind a Runtime API of its
    /// own; see [`LambdaFunction::start_behind`].
    pub async fn start(
        world: &World,
        binary: &Path,
        test: &str,
        name: &str,
        env: impl IntoIterator<Item = (&'static str, String)>,
    ) -> anyhow::Result<LambdaFunction> {
        let api = RuntimeApi::start().await?;
        Self::start_behind(world, api, binary, test, name, env)
    }

    /// Starts `binary` behind `api` as container `name` of test `test` (its log:
    /// `<temp>/nodewright-<test>-<pid>/<name>.log`), with the world's function environment
    /// and then `env` (a variable in both takes `env`'s value). On a world that keeps its own
    /// time the binary keeps it too, and its work counts as the world working.
    pub fn start_behind(
        world: &World,
        api: RuntimeApi,
        binary: &Path,
        test: &str,
        name: &str,
        env: impl IntoIterator<Item = (&'static str, String)>,
    ) -> anyhow::Result<LambdaFunction> {
        let dir = std::env::temp_dir().join(format!("nodewright-{test}-{}", std::process::id()));
        let mut all = world.function_env(&dir)?;
        let time = world.clock().world_time();
        if let Some(time) = &time {
            all.push((
                nodewright::clock::CLOCK_VARIABLE,
                nodewright::clock::world_setting(time.path()),
            ));
        }
        all.extend(env);
        let log = dir.join(format!("{name}.log"));
        let process = FunctionProcess::spawn(binary, &api, 128, &all, &log)?;
        if let (Some(time), Some(pid)) = (time, process.pid()) {
            time.watch_process(pid);
        }
        Ok(LambdaFunction { api, process, log })
    }

    /// Its directory: the log and the kubeconfig it was given.
    pub fn dir(&self) -> &Path {
        self.log.parent().unwrap_or(&self.log)
    }

    /// What the function has written so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Invokes it with `event`, waiting at most `timeout`; no answer by then is an error
    /// that carries the process's exit status and its log.
    pub async fn invoke(&mut self, event: Value, timeout: Duration) -> anyhow::Result<Outcome> {
        match tokio::time::timeout(timeout, self.api.invoke(event, timeout)).await {
            Ok(outcome) => outcome,
            Err(_) => anyhow::bail!(
                "no answer within {timeout:?}; exited: {:?}; log:\n{}",
                self.process.exited(),
                self.log_text()
            ),
        }
    }
}

/// The strings of a JSON array (the node names in a sweep's report); none when it is not one.
pub fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// Emulated: the simulated cluster's clock stands in for the system clock, so "fifteen
/// minutes later" is a clock advance, not a sleep.
pub struct SimNow(pub SimClock);

impl nodewright::kube::Clock for SimNow {
    fn now(&self) -> jiff::Timestamp {
        self.0.now()
    }
}

/// The sweeper handler's state over the real adapters of `world`, signed as the template's
/// `SweeperFunction` role, on the simulated cluster's clock; its default NodePool on-demand
/// amd64 c/m/r, as the stack's defaults with `DefaultCapacityTypes=on-demand`.
pub async fn sweeper_state(
    world: &World,
) -> anyhow::Result<
    nodewright_sweeper::State<nodewright::kube::KubeCluster, nodewright::aws::Ec2Adapter>,
> {
    let mut kube_config = world.sim.config().await?;
    // A 429 from the API server reaches the drain's own retry policy.
    kube_config.default_retry = false;
    let client = kube::Client::try_from(kube_config)?;
    let defaults = nodewright::kube::DefaultPoolParams {
        cluster_name: world.seeded.cluster.clone(),
        node_role: world.stack.node_role_name.clone(),
        capacity_types: vec!["on-demand".into()],
        architectures: vec!["amd64".into()],
        instance_categories: vec!["c".into(), "m".into(), "r".into()],
        cpu_limit: Some("1000".into()),
        ami_alias: "al2023@latest".into(),
    };
    let kube = nodewright::kube::KubeCluster::new(
        client,
        nodewright::kube::ClusterSettings::new(defaults, "sweeper-local"),
    );
    let sdk = world.function_sdk("SweeperFunction")?;
    let ec2 = nodewright::aws::Ec2Adapter::new(
        aws_sdk_ec2::Client::new(&sdk),
        world.seeded.cluster.clone(),
    );
    Ok(nodewright_sweeper::State::new(
        kube,
        ec2,
        world.seeded.cluster.clone(),
        std::sync::Arc::new(SimNow(world.clock())),
    )
    .with_takeover(world.takeover_setting("SweeperFunction")?))
}

/// The pods labelled `app: <app>` in the simulated cluster, as JSON.
pub fn app_pods(world: &World, app: &str) -> Vec<Value> {
    world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == app)
        .collect()
}

/// The names of the simulated cluster's Nodes.
pub fn node_names(world: &World) -> Vec<String> {
    world
        .sim
        .list_json("v1", "Node")
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// One quick in-process provisioner invocation for what `world` has applied, then waits
/// (a minute at most) until every `inflate` pod runs on a node.
pub async fn inflate_running(world: &World) -> anyhow::Result<()> {
    // Boxed: the provisioner's futures are deep, and a test's own future holding them
    // inline passes the compiler's layout depth.
    let provisioner = Box::pin(world.provisioner(
        crate::world::provisioner::quick(Duration::from_secs(3)),
        quick_batch(),
    ))
    .await?;
    Box::pin(crate::world::provisioner::invoke(&provisioner)).await?;
    wait_until(
        "inflate running",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            let pods = app_pods(world, "inflate");
            !pods.is_empty() && pods.iter().all(running_on_a_node)
        },
    )
    .await
}

/// Running, and bound to a node.
pub fn running_on_a_node(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running" && pod["spec"]["nodeName"].is_string()
}

/// Waits until `done`, looking every `every`; an error naming `what` after `within`.
pub async fn wait_until(
    what: &str,
    within: Duration,
    every: Duration,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let until = std::time::Instant::now() + within;
    while !done() {
        anyhow::ensure!(
            std::time::Instant::now() < until,
            "{what}: not within {within:?}"
        );
        tokio::time::sleep(every).await;
    }
    Ok(())
}

/// `(state, tags)` of instance `id` as EC2 describes it.
pub async fn described_instance(world: &World, id: &str) -> (String, BTreeMap<String, String>) {
    let out = aws_sdk_ec2::Client::new(&world.sdk)
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("DescribeInstances");
    let i = &out.reservations()[0].instances()[0];
    let state = i
        .state()
        .and_then(|s| s.name())
        .unwrap()
        .as_str()
        .to_string();
    (state, crate::world::tags_of(i))
}
