//! Set-up the tests repeat: a function binary as Lambda runs it ([`LambdaFunction`]:
//! behind its own emulated Runtime API, [`crate::lambda_api`], with the world's function
//! environment and the test's own variables, its output in a log file a failing test
//! shows), and the local world with the getting-started example applied
//! ([`getting_started`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::kube_sim::{SimClock, SimConfig};
use crate::lambda_api::{FunctionProcess, Outcome, RuntimeApi};
use crate::world::World;

/// The local world `cluster` (a manual clock, Karpenter's CRDs installed) with
/// `examples/getting-started.yaml` applied at `replicas` replicas, the simulation stepped
/// once so its pods are pending.
pub async fn getting_started(cluster: &str, replicas: u32) -> anyhow::Result<World> {
    let world = World::start(
        cluster,
        SimConfig {
            clock: SimClock::manual(),
            crds_installed: true,
            ..SimConfig::default()
        },
    )
    .await?;
    let replicas = format!("replicas: {replicas}");
    let example = world.example_edited("getting-started.yaml", &[("replicas: 10", &replicas)])?;
    world.apply_yaml(&example)?;
    world.sim.step().await;
    Ok(world)
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
    /// and then `env` (a variable in both takes `env`'s value).
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
        all.extend(env);
        let log = dir.join(format!("{name}.log"));
        let process = FunctionProcess::spawn(binary, &api, 128, &all, &log)?;
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
