//! A deployed function as Lambda runs it: execution environments ("containers", each the
//! function's real binary behind its own Runtime API, `crate::lambda_api`) reused while
//! warm, one invocation at a time each; a cold start when none is free; the function's
//! reserved concurrency as a hard limit (an invocation past it is throttled, never run);
//! and the timeout enforced by killing the process mid-call, after which that environment
//! is gone and the next invocation starts cold, as in Lambda.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use serde_json::Value;
use tokio::sync::Notify;

use super::settings::FunctionSettings;
use crate::kube_sim::SimClock;
use crate::lambda_api::{FunctionProcess, Invocation, Outcome as RuntimeOutcome, RuntimeApi};

/// How one invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The handler's answer.
    Response(Value),
    /// The handler's error (`/error`).
    Error(Value),
    /// Killed at the function's timeout.
    TimedOut,
    /// The execution environment died mid-invocation (killed by the world, or crashed).
    Died,
    /// Refused: the function's concurrency was all in use.
    Throttled,
}

impl Outcome {
    pub fn succeeded(&self) -> bool {
        matches!(self, Outcome::Response(_))
    }
}

/// One invocation, for the world's records.
#[derive(Debug, Clone)]
pub struct Record {
    pub function: String,
    pub container: Option<u32>,
    pub cold: bool,
    pub started: Timestamp,
    pub ended: Timestamp,
    pub outcome: Outcome,
    /// The chain length Lambda's recursion detection counted for it.
    pub lineage: u32,
}

/// The most invocations that ran at once among `records` (throttled ones never ran).
pub fn max_concurrency(records: &[Record]) -> usize {
    let mut edges: Vec<(Timestamp, i32)> = records
        .iter()
        .filter(|r| r.outcome != Outcome::Throttled)
        .flat_map(|r| [(r.started, 1), (r.ended, -1)])
        .collect();
    // An invocation ending at the instant another starts did not overlap it.
    edges.sort_by_key(|&(t, d)| (t, d));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// What the world keeps of an environment to kill it mid-invocation.
#[derive(Clone)]
struct Handle {
    id: u32,
    process: Arc<Mutex<FunctionProcess>>,
    /// Notified when the world kills this environment mid-invocation.
    killed: Arc<Notify>,
}

struct Container {
    api: RuntimeApi,
    handle: Handle,
}

/// A function of the deployed stack, run from its binary.
pub struct Function {
    pub settings: FunctionSettings,
    binary: PathBuf,
    env: Vec<(String, String)>,
    dir: PathBuf,
    clock: SimClock,
    idle: Mutex<Vec<Container>>,
    busy: Mutex<Vec<Handle>>,
    running: AtomicU32,
    next_container: AtomicU32,
    records: Mutex<Vec<Record>>,
}

impl Function {
    /// `env`: what Lambda gives the function (the deployed environment, its role's
    /// credentials, plus the world's endpoints and clock); `dir`: where each environment's
    /// log goes (`<logical id>-<n>.log`).
    pub fn new(
        settings: FunctionSettings,
        binary: PathBuf,
        env: Vec<(String, String)>,
        dir: PathBuf,
        clock: SimClock,
    ) -> Function {
        Function {
            settings,
            binary,
            env,
            dir,
            clock,
            idle: Mutex::default(),
            busy: Mutex::default(),
            running: AtomicU32::new(0),
            next_container: AtomicU32::new(0),
            records: Mutex::default(),
        }
    }

    pub fn name(&self) -> &str {
        &self.settings.logical_id
    }

    /// Every invocation so far.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Invocations in flight now.
    pub fn running(&self) -> u32 {
        self.running.load(Ordering::SeqCst)
    }

    /// The log file of environment `id`.
    pub fn log_path(&self, id: u32) -> PathBuf {
        self.dir
            .join(format!("{}-{id}.log", self.settings.logical_id))
    }

    /// Everything every environment of the function has logged so far.
    pub fn logs(&self) -> String {
        let n = self.next_container.load(Ordering::SeqCst);
        (1..=n)
            .map(|id| std::fs::read_to_string(self.log_path(id)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn take_slot(&self) -> bool {
        let limit = self.settings.reserved_concurrency.map(|n| n as u32);
        self.running
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                limit.is_none_or(|l| n < l).then_some(n + 1)
            })
            .is_ok()
    }

    async fn container(&self) -> anyhow::Result<(Container, bool)> {
        while let Some(c) = self.idle.lock().ok().and_then(|mut idle| idle.pop()) {
            let alive = c
                .handle
                .process
                .lock()
                .is_ok_and(|mut p| p.exited().is_none());
            if alive {
                return Ok((c, false));
            }
        }
        let id = self.next_container.fetch_add(1, Ordering::SeqCst) + 1;
        let api = RuntimeApi::start().await?;
        std::fs::create_dir_all(&self.dir)?;
        let env: Vec<(&str, String)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .chain([("AWS_LAMBDA_FUNCTION_NAME", self.settings.logical_id.clone())])
            .collect();
        let process = FunctionProcess::spawn(
            &self.binary,
            &api,
            self.settings.memory_mb,
            &env,
            &self.log_path(id),
        )?;
        if let (Some(time), Some(pid)) = (self.clock.world_time(), process.pid()) {
            time.watch_process(pid);
        }
        let handle = Handle {
            id,
            process: Arc::new(Mutex::new(process)),
            killed: Arc::new(Notify::new()),
        };
        Ok((Container { api, handle }, true))
    }

    /// Invokes the function with `event` continuing a chain counted `lineage` so far
    /// (`trace`: the header Lambda gives it), and records how it went.
    pub async fn invoke(&self, event: Value, trace: String, lineage: u32) -> Outcome {
        let started = self.clock.now();
        if !self.take_slot() {
            return self.record(None, false, started, Outcome::Throttled, lineage);
        }
        let outcome = match self.container().await {
            Ok((container, cold)) => {
                let id = container.handle.id;
                let outcome = self.run(container, event, trace).await;
                self.record(Some(id), cold, started, outcome, lineage)
            }
            Err(e) => {
                let error = serde_json::json!({"errorType": "Runtime.Init",
                    "errorMessage": format!("the world could not start the function: {e:#}")});
                self.record(None, true, started, Outcome::Error(error), lineage)
            }
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        outcome
    }

    fn record(
        &self,
        container: Option<u32>,
        cold: bool,
        started: Timestamp,
        outcome: Outcome,
        lineage: u32,
    ) -> Outcome {
        let record = Record {
            function: self.settings.logical_id.clone(),
            container,
            cold,
            started,
            ended: self.clock.now(),
            outcome: outcome.clone(),
            lineage,
        };
        if let Ok(mut r) = self.records.lock() {
            r.push(record);
        }
        outcome
    }

    async fn run(&self, container: Container, event: Value, trace: String) -> Outcome {
        let timeout = self.settings.timeout;
        let deadline = self.clock.now() + timeout;
        let invocation = Invocation {
            event,
            deadline_ms: deadline.as_millisecond(),
            trace_id: trace,
        };
        let handle = container.handle.clone();
        if let Ok(mut busy) = self.busy.lock() {
            busy.push(handle.clone());
        }
        let answer = tokio::select! {
            a = container.api.invoke_with(invocation) => Some(a),
            () = self.clock.sleep(timeout) => None,
            () = handle.killed.notified() => Some(Err(anyhow::anyhow!("killed"))),
        };
        if let Ok(mut busy) = self.busy.lock() {
            busy.retain(|h| h.id != handle.id);
        }
        let outcome = match answer {
            Some(Ok(RuntimeOutcome::Response(v))) => Outcome::Response(v),
            Some(Ok(RuntimeOutcome::Error(v))) => Outcome::Error(v),
            Some(Err(_)) => Outcome::Died,
            None => Outcome::TimedOut,
        };
        let alive = handle
            .process
            .lock()
            .map(|mut p| p.exited().is_none())
            .unwrap_or(false);
        match (&outcome, alive) {
            (Outcome::Response(_) | Outcome::Error(_), true) => {
                if let Ok(mut idle) = self.idle.lock() {
                    idle.push(container);
                }
            }
            // Lambda discards an environment that timed out or died; kill_on_drop ends
            // the process if it still runs.
            _ => {
                if let Ok(mut p) = handle.process.lock() {
                    p.kill();
                }
            }
        }
        outcome
    }

    /// Kills one environment that is running an invocation, as a crash or an out-of-memory
    /// kill would; `false` when none is busy.
    pub fn kill_a_busy_environment(&self) -> bool {
        let victim = self.busy.lock().ok().and_then(|b| b.first().cloned());
        let Some(victim) = victim else {
            return false;
        };
        if let Ok(mut p) = victim.process.lock() {
            p.kill();
        }
        victim.killed.notify_waiters();
        true
    }

    /// Ends every environment (the world is stopping).
    pub fn shut_down(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            for c in idle.drain(..) {
                if let Ok(mut p) = c.handle.process.lock() {
                    p.kill();
                }
            }
        }
    }
}
