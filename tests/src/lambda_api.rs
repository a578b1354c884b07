//! An emulated Lambda Runtime API on loopback, so a function's real release binary runs
//! exactly as in Lambda: it polls `GET /2018-06-01/runtime/invocation/next`, runs its
//! handler and posts the result to `.../{request-id}/response` or `.../error`.
//!
//! Emulated, and named as such: AWS's own emulator (aws-lambda-runtime-interface-emulator)
//! is a Go program, not on crates.io or PyPI, and cargo-lambda's is part of a CLI; the
//! four routes a runtime client uses are small enough to serve here. Only what the
//! `lambda_runtime` crate reads is sent: the request id, deadline, function ARN and trace
//! id headers (see the Runtime API reference, "Next invocation").

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};

/// How a function answered one invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Response(Value),
    /// The `/error` body (`errorType`, `errorMessage`).
    Error(Value),
}

/// One invocation as the Runtime API hands it to the runtime.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub event: Value,
    /// `Lambda-Runtime-Deadline-Ms`: when the function times out, in milliseconds since
    /// the epoch on the clock the function runs on.
    pub deadline_ms: i64,
    /// `Lambda-Runtime-Trace-Id`: the X-Ray trace header (Lambda's recursion detection
    /// carries its lineage here).
    pub trace_id: String,
}

/// The trace header of an invocation that continues no chain.
pub const FRESH_TRACE: &str = "Root=1-00000000-000000000000000000000000";

#[derive(Default)]
struct Queue {
    waiting: VecDeque<(String, Invocation)>,
    answers: HashMap<String, oneshot::Sender<Outcome>>,
    init_error: Option<Value>,
    /// When the runtime first asked for an invocation: the end of its cold start.
    first_next: Option<Instant>,
}

#[derive(Default)]
struct Api {
    queue: Mutex<Queue>,
    arrived: Notify,
}

/// The emulated Runtime API; stops when dropped.
pub struct RuntimeApi {
    addr: String,
    api: Arc<Api>,
    next_id: Mutex<u64>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl RuntimeApi {
    pub async fn start() -> anyhow::Result<RuntimeApi> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the emulated Runtime API")?;
        let addr = listener.local_addr()?.to_string();
        let api = Arc::new(Api::default());
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(api.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "the emulated Runtime API stopped");
            }
        });
        Ok(RuntimeApi {
            addr,
            api,
            next_id: Mutex::new(0),
            shutdown: Some(tx),
        })
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Queues one invocation with `timeout` (on the wall clock) and waits for the
    /// function's answer.
    pub async fn invoke(&self, event: Value, timeout: Duration) -> anyhow::Result<Outcome> {
        let deadline_ms = SystemTime::now()
            .checked_add(timeout)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        self.invoke_until(event, deadline_ms).await
    }

    /// Queues one invocation that times out at `deadline_ms` (milliseconds since the epoch
    /// on the clock the function runs on) and waits for the function's answer.
    pub async fn invoke_until(&self, event: Value, deadline_ms: i64) -> anyhow::Result<Outcome> {
        let invocation = Invocation {
            event,
            deadline_ms,
            trace_id: FRESH_TRACE.to_string(),
        };
        self.invoke_with(invocation).await
    }

    /// Queues `invocation` and waits for the function's answer.
    pub async fn invoke_with(&self, invocation: Invocation) -> anyhow::Result<Outcome> {
        let id = {
            let mut n = self
                .next_id
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            *n += 1;
            format!("00000000-0000-4000-8000-{:012}", *n)
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut q = self
                .api
                .queue
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            q.answers.insert(id.clone(), tx);
            q.waiting.push_back((id.clone(), invocation));
        }
        self.api.arrived.notify_waiters();
        rx.await
            .with_context(|| format!("invocation {id} was never answered"))
    }

    /// When the function first asked for an invocation (`GET .../invocation/next`), if it
    /// has: a process started against this API has finished its init then.
    pub fn first_next(&self) -> Option<Instant> {
        self.api.queue.lock().ok().and_then(|q| q.first_next)
    }

    /// What the function reported to `/runtime/init/error`, if anything.
    pub fn init_error(&self) -> Option<Value> {
        self.api
            .queue
            .lock()
            .ok()
            .and_then(|q| q.init_error.clone())
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

async fn next(State(api): State<Arc<Api>>) -> Response {
    if let Ok(mut q) = api.queue.lock() {
        q.first_next.get_or_insert_with(Instant::now);
    }
    loop {
        let notified = api.arrived.notified();
        let item = api
            .queue
            .lock()
            .ok()
            .and_then(|mut q| q.waiting.pop_front());
        if let Some((id, invocation)) = item {
            let mut headers = HeaderMap::new();
            let mut set = |name: &'static str, value: String| {
                if let Ok(v) = HeaderValue::from_str(&value) {
                    headers.insert(name, v);
                }
            };
            set("lambda-runtime-aws-request-id", id);
            set(
                "lambda-runtime-deadline-ms",
                invocation.deadline_ms.to_string(),
            );
            set(
                "lambda-runtime-invoked-function-arn",
                "arn:aws:lambda:us-east-1:123456789012:function:local".into(),
            );
            set("lambda-runtime-trace-id", invocation.trace_id);
            return (headers, invocation.event.to_string()).into_response();
        }
        notified.await;
    }
}

fn answer(api: &Api, id: &str, outcome: Outcome) -> StatusCode {
    let tx = api.queue.lock().ok().and_then(|mut q| q.answers.remove(id));
    match tx {
        Some(tx) => {
            let _ = tx.send(outcome);
            StatusCode::ACCEPTED
        }
        None => StatusCode::BAD_REQUEST,
    }
}

fn json_or_text(body: &Bytes) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

async fn response(
    State(api): State<Arc<Api>>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> StatusCode {
    answer(&api, &id, Outcome::Response(json_or_text(&body)))
}

async fn error(
    State(api): State<Arc<Api>>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> StatusCode {
    answer(&api, &id, Outcome::Error(json_or_text(&body)))
}

async fn init_error(State(api): State<Arc<Api>>, body: Bytes) -> StatusCode {
    if let Ok(mut q) = api.queue.lock() {
        q.init_error = Some(json_or_text(&body));
    }
    StatusCode::ACCEPTED
}

/// A function binary started as Lambda starts it, against a [`RuntimeApi`]; killed when
/// dropped.
pub struct FunctionProcess {
    child: tokio::process::Child,
}

impl FunctionProcess {
    /// Starts `binary` with Lambda's environment (`AWS_LAMBDA_RUNTIME_API`, function name,
    /// memory size) plus `env`; its stderr/stdout go to `log`.
    pub fn spawn(
        binary: &Path,
        api: &RuntimeApi,
        memory_mb: u32,
        env: &[(&str, String)],
        log: &Path,
    ) -> anyhow::Result<FunctionProcess> {
        let out = std::fs::File::create(log)
            .with_context(|| format!("creating the function's log {}", log.display()))?;
        let err = out.try_clone()?;
        let mut command = tokio::process::Command::new(binary);
        command
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", api.addr())
            .env("AWS_LAMBDA_FUNCTION_NAME", "local")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory_mb.to_string())
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/local")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        for (k, v) in env {
            command.env(k, v);
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(FunctionProcess { child })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Peak resident set size so far (`VmHWM` in `/proc/<pid>/status`, Linux only), in bytes.
    pub fn peak_rss(&self) -> anyhow::Result<u64> {
        let pid = self.pid().context("the function has exited")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .context("reading /proc/<pid>/status (Linux only)")?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .context("no VmHWM line in /proc/<pid>/status")?;
        Ok(kb * 1024)
    }

    /// Kills the process (SIGKILL), as Lambda ends an environment that timed out.
    pub fn kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// Whether the process has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}
