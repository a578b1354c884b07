//! AWS on loopback: moto's server, started per test, and the seed that gives it what an
//! EKS account has and moto does not ship.
//!
//! The SDK is pointed at moto only through its endpoint URL (as `AWS_ENDPOINT_URL` would),
//! with static test credentials; product code cannot tell moto from AWS.
//!
//! # moto gaps (checked against moto 5.2.5, the version `mk/venv.mk` pins)
//!
//! What moto does differently from AWS, and what follows for tests:
//! - **SSM public parameters**: moto ships none under `/aws/service/eks/` or
//!   `/aws/service/bottlerocket/` and refuses every PutParameter under `/aws/` as reserved.
//!   The server is therefore started through `moto/launch.py`, which lets exactly those two
//!   prefixes be written; [`seed`] writes them. Nothing in product code knows.
//! - **SigV4 with IAM enforced**: moto re-encodes form bodies and, for a request without a
//!   body (EKS `DescribeCluster`), signs parameters parsed from the path; `moto/launch.py`
//!   makes it verify the bytes on the wire, as AWS does.
//! - **AMIs**: RegisterImage ignores `Architecture` (the image has none). The seed uses
//!   CopyImage from moto's own x86_64/arm64 Amazon images instead, which keeps the
//!   architecture. Copies are owned by moto's account `123456789012`, not by the EKS or
//!   Bottlerocket publishers (`602401143452`, `092701018921`... in AWS); owner-based AMI
//!   selector terms must name `self` or that account in tests.
//! - **DescribeSpotPriceHistory**: one constant price (`0.00001`) for every type and zone,
//!   timestamp 2006-01-02, product description `Linux/UNIX (Amazon VPC)`; the
//!   `ProductDescriptions` and `StartTime` arguments and `MaxResults` are ignored and there
//!   is never a `NextToken`. Spot prices from moto carry no ordering information.
//! - **DescribeInstanceTypes / DescribeInstanceTypeOfferings**: `MaxResults` is ignored,
//!   every result (about 1,400 types) comes in one page; offerings by `availability-zone`
//!   work and differ per zone. Pagination is tested with `aws-smithy-mocks` instead.
//! - **No Pricing API**: on-demand prices cannot come from moto.
//! - **CreateFleet `instant`**: launches the first override (in order) with the requested
//!   lifecycle (spot instances report `InstanceLifecycle=spot`), applies the request's
//!   instance and launch-template tags, returns `Instances[].InstanceIds` and never an
//!   `Errors` entry: moto never reports insufficient capacity. ICE handling is tested with
//!   `aws-smithy-mocks`.
//! - **Instance profiles of fleet instances**: moto drops a launch template's
//!   `IamInstanceProfile` on the CreateFleet path; `moto/launch.py` (11) associates it as
//!   EC2 does, so DescribeIamInstanceProfileAssociations shows the profiles in use. A
//!   profile IAM does not have still launches (EC2 would refuse).
//! - **Tags with the `aws:` prefix**: moto accepts them (AWS refuses user tags starting with
//!   `aws:`). The seed uses that to put `aws:eks:cluster-name=<cluster>` on the security
//!   group, as EKS itself does on the cluster security group.
//! - **EKS CreateCluster**: works, status `ACTIVE` at once, but the endpoint is a random
//!   `https://....eks.amazonaws.com/` host and `certificateAuthority.data` is random text,
//!   not a base64 PEM certificate. Tests that talk to a cluster use the simulated cluster's
//!   own URL and CA instead (known gap).
//! - **IAM managed policies** exist only because the server is started with
//!   `MOTO_IAM_LOAD_MANAGED_POLICIES=true`; without it AttachRolePolicy of
//!   `AmazonEKSWorkerNodePolicy` fails with NoSuchEntity.
//! - **IAM** is enforced (see [`iam`]): moto is started with `INITIAL_NO_AUTH_ACTION_COUNT`,
//!   so after the calls that create the world's administrator every call must be signed
//!   by an existing access key whose policies allow the action. The functions sign with
//!   temporary credentials of the roles the deployed stack created (STS AssumeRole). moto
//!   is made to check the action only (`moto/launch.py`, 5): resources and conditions are
//!   asserted by reading the template.
//! - **CloudFormation** (the world deploys `template.yaml`, see [`stack`]): moto models no
//!   `AWS::EKS::AccessEntry`, `AWS::SQS::QueuePolicy`, `AWS::Scheduler::Schedule`,
//!   `AWS::Logs::MetricFilter` or `AWS::SNS::Subscription` (listed, nothing behind them);
//!   an update does not change a log group's retention. `moto/launch.py` (4, 6-8) adds
//!   alarms, role policies, the Lambda service assuming a role and list defaults.

pub mod iam;
mod seed;
pub mod stack;
mod zygote;

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;

pub use seed::{SeedError, SeedSpec, Seeded, SeededImage, SeededSubnet, seed};
pub use stack::{Deployed, Stack, StackError};

/// The region every test world lives in.
pub const REGION: &str = "us-east-1";
/// moto's fixed account id (moto's `DEFAULT_ACCOUNT_ID`).
pub const ACCOUNT_ID: &str = "123456789012";
/// AWS's documentation example key pair: signs the unauthenticated calls that create the
/// world's administrator (no IAM user owns it, so moto refuses it afterwards).
const ACCESS_KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const SECRET_ACCESS_KEY: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// How long moto may take to answer after it was started; a cold Python start with moto's
/// imports takes 1-3 s on the 2-core machine, the margin covers a loaded CI box.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a port collision (another process took the free port first) is retried.
const START_ATTEMPTS: u32 = 5;

const LAUNCHER: &str = include_str!("moto/launch.py");

#[derive(Debug, thiserror::Error)]
pub enum MotoError {
    #[error(
        "no Python venv with moto at {venv}: run `make venv` in the workspace root, or set \
         NODEWRIGHT_VENV to a venv that has `moto[server]`"
    )]
    NoVenv { venv: PathBuf },
    #[error("cannot find a free loopback port")]
    FreePort { source: io::Error },
    #[error("cannot start {python}")]
    Spawn { python: PathBuf, source: io::Error },
    #[error(
        "the moto zygote (tests/src/moto/launch.py) did not fork a server; see the test's stderr"
    )]
    Zygote,
    #[error("moto_server exited before it answered ({status}); see its log {log}")]
    Exited { status: String, log: PathBuf },
    #[error("moto_server did not answer on {url} within {timeout:?}; see its log {log}")]
    NotReady {
        url: String,
        timeout: Duration,
        log: PathBuf,
    },
    #[error("moto_server on {url} could not be started after {attempts} attempts; last log {log}")]
    GaveUp {
        url: String,
        attempts: u32,
        log: PathBuf,
    },
    #[error("POST {url} failed")]
    Reset { url: String, source: reqwest::Error },
    #[error("moto on {url} did not let the world's administrator be created")]
    Admin {
        url: String,
        #[source]
        source: SeedError,
    },
}

/// A running moto server on 127.0.0.1; stopped (with its process group) when dropped.
#[derive(Debug)]
pub struct Moto {
    /// The server's process id, and its process group's.
    pid: u32,
    url: String,
    log: PathBuf,
    http: reqwest::Client,
    /// The world's administrator, created by the first (unauthenticated) calls.
    admin: Option<Credentials>,
}

impl Moto {
    /// Starts moto from the venv ([`venv_dir`]) on a free loopback port and waits until it
    /// answers.
    pub async fn start() -> Result<Moto, MotoError> {
        Moto::start_on(None).await
    }

    /// [`Moto::start`], with EC2's "now" read from the world's pace file `clock` (the
    /// world's own time; `moto/launch.py`, 13) when given.
    pub async fn start_on(clock: Option<PathBuf>) -> Result<Moto, MotoError> {
        let http = http_client()?;
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            let port = free_port()?;
            let log = log_path(port);
            let pid = zygote::fork_server(port, log.clone(), clock.clone()).await?;
            let url = format!("http://127.0.0.1:{port}");
            let mut moto = Moto {
                pid,
                url,
                log,
                http: http.clone(),
                admin: None,
            };
            match moto.wait_ready().await {
                Ok(()) => {
                    let anonymous = sdk_config_for(&moto.url, &example_credentials()).await;
                    let admin = iam::bootstrap_admin(&anonymous).await.map_err(|source| {
                        MotoError::Admin {
                            url: moto.url.clone(),
                            source,
                        }
                    })?;
                    moto.admin = Some(admin);
                    return Ok(moto);
                }
                // Another process won the race for the port; moto exits at once.
                Err(MotoError::Exited { .. }) => {
                    last = Some((moto.url.clone(), moto.log.clone()));
                    moto.keep_log();
                }
                Err(e) => {
                    moto.keep_log();
                    return Err(e);
                }
            }
        }
        let (url, log) = last.unwrap_or_default();
        Err(MotoError::GaveUp {
            url,
            attempts: START_ATTEMPTS,
            log,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// moto's log file (removed when the server is dropped, unless starting failed or
    /// `NODEWRIGHT_KEEP_MOTO_LOG` is set).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The administrator's access key (allowed every action).
    pub fn admin_credentials(&self) -> Credentials {
        self.admin.clone().unwrap_or_else(example_credentials)
    }

    /// An SDK configuration that reaches this moto and nothing else: region `us-east-1`,
    /// the administrator's credentials, endpoint URL = [`Moto::url`].
    pub async fn sdk_config(&self) -> SdkConfig {
        sdk_config_for(&self.url, &self.admin_credentials()).await
    }

    async fn wait_ready(&mut self) -> Result<(), MotoError> {
        let started = Instant::now();
        let probe = format!("{}/moto-api/", self.url);
        loop {
            if !self.running() {
                return Err(MotoError::Exited {
                    status: "exited".to_string(),
                    log: self.log.clone(),
                });
            }
            if let Ok(resp) = self.http.get(&probe).send().await
                && resp.status().is_success()
            {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(MotoError::NotReady {
                    url: self.url.clone(),
                    timeout: READY_TIMEOUT,
                    log: self.log.clone(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether the server's process is still there (the zygote reaps it when it exits).
    fn running(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .ok()
            .and_then(|stat| {
                let state = stat.rsplit_once(") ")?.1.chars().next()?;
                Some(state != 'Z' && state != 'X')
            })
            .unwrap_or(false)
    }

    fn keep_log(&mut self) {
        self.log = PathBuf::new();
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        // moto runs in its own process group (`launch.py`'s `serve`): kill the group so
        // nothing it started survives, and the server itself; the zygote reaps it.
        let (group, server) = (format!("-{}", self.pid), self.pid.to_string());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group, &server])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !self.log.as_os_str().is_empty()
            && std::env::var_os("NODEWRIGHT_KEEP_MOTO_LOG").is_none()
        {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

fn http_client() -> Result<reqwest::Client, MotoError> {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|source| MotoError::Reset {
            url: String::new(),
            source,
        })
}

fn example_credentials() -> Credentials {
    Credentials::new(ACCESS_KEY_ID, SECRET_ACCESS_KEY, None, None, "moto")
}

/// An SDK configuration for a moto server at `url` signing with `credentials` (see
/// [`Moto::sdk_config`]).
pub async fn sdk_config_for(url: &str, credentials: &Credentials) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(credentials.clone())
        .endpoint_url(url)
        .load()
        .await
}

/// The environment that points an AWS SDK in another process at `url` signing with
/// `credentials`, as `AWS_ENDPOINT_URL` does for every SDK.
pub fn sdk_env(url: &str, credentials: &Credentials) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("AWS_ENDPOINT_URL", url.to_string()),
        ("AWS_REGION", REGION.to_string()),
        ("AWS_ACCESS_KEY_ID", credentials.access_key_id().to_string()),
        (
            "AWS_SECRET_ACCESS_KEY",
            credentials.secret_access_key().to_string(),
        ),
        // No instance metadata on a developer machine: do not wait for it.
        ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
    ];
    // A role's temporary credentials, as Lambda gives a function.
    if let Some(token) = credentials.session_token() {
        env.push(("AWS_SESSION_TOKEN", token.to_string()));
    }
    env
}

/// The venv's Python, when the venv has moto's server.
fn venv_python() -> Result<PathBuf, MotoError> {
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    if !venv.join("bin").join("moto_server").is_file() || !python.exists() {
        return Err(MotoError::NoVenv { venv });
    }
    Ok(python)
}

/// The Python venv that holds moto: `NODEWRIGHT_VENV`, else `<workspace>/.venv`.
pub fn venv_dir() -> PathBuf {
    if let Some(venv) = std::env::var_os("NODEWRIGHT_VENV") {
        return PathBuf::from(venv);
    }
    workspace_root().join(".venv")
}

/// The workspace root: the parent of this crate's directory (`tests/`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

fn free_port() -> Result<u16, MotoError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|source| MotoError::FreePort { source })?;
    let port = listener
        .local_addr()
        .map_err(|source| MotoError::FreePort { source })?
        .port();
    drop(listener);
    Ok(port)
}

fn log_path(port: u16) -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "nodewright-moto-{}-{n}-{port}.log",
        std::process::id()
    ))
}
