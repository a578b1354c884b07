//! One Python process per test binary that has imported moto and applied `launch.py`'s
//! changes, and forks a server for each world (`launch.py`, 15): importing them took
//! about 1.2 s of CPU per world, on a 2-core machine running two worlds at a time.
//! Each server is still its own process with its own state, port and log, stopped with
//! its process group.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use super::{LAUNCHER, MotoError, iam, venv_python};

struct Zygote {
    process: Child,
    ask: ChildStdin,
    answers: BufReader<ChildStdout>,
}

static ZYGOTE: Mutex<Option<Zygote>> = Mutex::new(None);

/// Forks a server onto `port`, logging to `log`, with EC2's clock read from the pace file
/// `clock` when given; its process id (also its process group's). The zygote's pipes are
/// blocking, and its first start takes a second or two: off the async workers.
pub(super) async fn fork_server(
    port: u16,
    log: PathBuf,
    clock: Option<PathBuf>,
) -> Result<u32, MotoError> {
    tokio::task::spawn_blocking(move || fork_blocking(port, &log, clock.as_deref()))
        .await
        .unwrap_or(Err(MotoError::Zygote))
}

fn fork_blocking(port: u16, log: &Path, clock: Option<&Path>) -> Result<u32, MotoError> {
    let ask = serde_json::json!({
        "port": port,
        "log": log,
        "clock": clock.map(nodewright::clock::world_setting),
    });
    let mut zygote = ZYGOTE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // A zygote that died (killed from outside) is replaced once.
    for _ in 0..2 {
        if zygote.is_none() {
            *zygote = Some(start()?);
        }
        if let Some(z) = zygote.as_mut()
            && let Some(pid) = z.fork(&ask)
        {
            return Ok(pid);
        }
        if let Some(mut dead) = zygote.take() {
            let _ = dead.process.kill();
            let _ = dead.process.wait();
        }
    }
    Err(MotoError::Zygote)
}

impl Zygote {
    fn fork(&mut self, ask: &serde_json::Value) -> Option<u32> {
        writeln!(self.ask, "{ask}").ok()?;
        self.ask.flush().ok()?;
        let mut line = String::new();
        self.answers.read_line(&mut line).ok()?;
        line.trim().parse().ok()
    }
}

fn start() -> Result<Zygote, MotoError> {
    let python = venv_python()?;
    let mut process = Command::new(&python)
        .arg("-c")
        .arg(LAUNCHER)
        // moto must not pick up a developer's AWS settings or proxy.
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_PROFILE")
        .env_remove(nodewright::clock::CLOCK_VARIABLE)
        .env("NO_PROXY", "127.0.0.1,localhost")
        // AWS managed policies (AmazonEKSWorkerNodePolicy, ...) exist in every account;
        // moto loads them only when asked.
        .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
        // IAM enforced after the calls that create the administrator (see `iam`).
        .env(
            "INITIAL_NO_AUTH_ACTION_COUNT",
            iam::UNAUTHENTICATED_CALLS.to_string(),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|source| MotoError::Spawn {
            python: python.clone(),
            source,
        })?;
    let (Some(ask), Some(answers)) = (process.stdin.take(), process.stdout.take()) else {
        let _ = process.kill();
        return Err(MotoError::Zygote);
    };
    Ok(Zygote {
        process,
        ask,
        answers: BufReader::new(answers),
    })
}
