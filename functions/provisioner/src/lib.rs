//! The `provisioner` Lambda function: its handler lives here so tests can invoke it exactly as
//! the Lambda runtime does; `main.rs` only wires configuration and clients.
//!
//! One invocation (scheduled every minute, reserved concurrency 1) polls for pending pods
//! every `POLL_INTERVAL` until `INVOCATION_BUDGET` has passed, so a pending pod waits
//! seconds rather than a minute. While the batching window is open (1 s after the last new
//! pod, 10 s at most) it looks again as soon as the window closes.

use std::time::{Duration, Instant, SystemTime};

use lambda_runtime::{Error, LambdaEvent};
use nodewright::aws::{Ec2Adapter, IamAdapter, ImageAdapter};
use nodewright::eks::EksCluster;
use nodewright::kube::KubeCluster;
use nodewright::provision::{
    AwsPorts, ClusterFacts, PollReport, ProvisionError, Provisioner, ProvisionerSettings,
};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// `POLL_INTERVAL`: time between polls. Five seconds keeps a pending pod's wait short
/// while making about ten polls (a few list calls each) per invocation.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// `INVOCATION_BUDGET`: how long one invocation keeps polling. Fifty seconds leaves the
/// one-minute schedule's next invocation room to start; the function's timeout must be
/// longer than this plus one poll.
pub const DEFAULT_INVOCATION_BUDGET: Duration = Duration::from_secs(50);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerConfig {
    pub poll_interval: Duration,
    pub budget: Duration,
}

impl Default for HandlerConfig {
    fn default() -> Self {
        HandlerConfig {
            poll_interval: DEFAULT_POLL_INTERVAL,
            budget: DEFAULT_INVOCATION_BUDGET,
        }
    }
}

impl HandlerConfig {
    /// `POLL_INTERVAL` and `INVOCATION_BUDGET` from the environment, each a duration such
    /// as `5`, `5s`, `0.5`, `500ms`; unset means the default.
    pub fn from_env() -> Result<HandlerConfig, String> {
        let read = |name: &str, default: Duration| match std::env::var(name) {
            Ok(v) => parse_duration(&v).ok_or_else(|| {
                format!("{name}={v:?}: expected seconds (5, 0.5, 5s) or milliseconds (500ms)")
            }),
            Err(_) => Ok(default),
        };
        Ok(HandlerConfig {
            poll_interval: read("POLL_INTERVAL", DEFAULT_POLL_INTERVAL)?,
            budget: read("INVOCATION_BUDGET", DEFAULT_INVOCATION_BUDGET)?,
        })
    }
}

/// `5`, `5s`, `0.5`, `500ms` -> a duration; anything else (negative, NaN, text) -> None.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let (number, scale) = if let Some(ms) = t.strip_suffix("ms") {
        (ms, 0.001)
    } else if let Some(s) = t.strip_suffix('s') {
        (s, 1.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = number.trim().parse().ok()?;
    Duration::try_from_secs_f64(value * scale).ok()
}

/// The cluster facts new nodes need, from DescribeCluster.
pub fn cluster_facts(cluster: &EksCluster) -> ClusterFacts {
    ClusterFacts {
        name: cluster.name.clone(),
        endpoint: cluster.endpoint.clone(),
        ca_bundle_base64: cluster.certificate_authority_data.clone(),
        service_cidr: cluster.service_ipv4_cidr.clone().unwrap_or_default(),
        kubernetes_version: cluster.kubernetes_version.clone(),
    }
}

/// What a warm container keeps between invocations: the provisioner (its catalog cache,
/// unavailable offerings, batching and event dedupe) behind a mutex. The function runs with
/// reserved concurrency 1, so the lock is never contended in AWS.
pub struct State<K, A> {
    provisioner: Mutex<Provisioner<K, A>>,
    config: HandlerConfig,
}

impl State<KubeCluster, AwsPorts<Ec2Adapter, ImageAdapter>> {
    /// The production wiring; reads `POLL_INTERVAL` / `INVOCATION_BUDGET` from the env.
    pub fn new(
        kube: KubeCluster,
        ec2: Ec2Adapter,
        images: ImageAdapter,
        iam: IamAdapter,
        settings: ProvisionerSettings,
    ) -> Result<Self, Error> {
        let config = HandlerConfig::from_env()?;
        let provisioner = Provisioner::new(kube, AwsPorts { ec2, images, iam }, settings)?;
        Ok(State::with_provisioner(provisioner, config))
    }
}

impl<K, A> State<K, A> {
    pub fn with_provisioner(provisioner: Provisioner<K, A>, config: HandlerConfig) -> Self {
        State {
            provisioner: Mutex::new(provisioner),
            config,
        }
    }

    pub fn config(&self) -> HandlerConfig {
        self.config
    }

    pub fn provisioner(&self) -> &Mutex<Provisioner<K, A>> {
        &self.provisioner
    }
}

/// Totals over the polls of one invocation.
#[derive(Debug, Default)]
struct Summary {
    polls: u32,
    failed_polls: u32,
    claims: usize,
    launched: Vec<String>,
    unschedulable: usize,
    throttled: u32,
    pending_to_fleet_ms: Vec<u128>,
    last_error: Option<String>,
}

impl Summary {
    fn add(&mut self, r: &PollReport) {
        self.claims += r.claims;
        self.launched.extend(r.launched_instances.iter().cloned());
        self.unschedulable = r.unschedulable_pods;
        self.throttled += u32::from(r.throttled);
        self.pending_to_fleet_ms
            .extend(r.pending_to_fleet.iter().map(Duration::as_millis));
    }

    fn json(&self) -> Value {
        json!({
            "polls": self.polls,
            "failedPolls": self.failed_polls,
            "claims": self.claims,
            "launchedInstances": self.launched,
            "unschedulablePods": self.unschedulable,
            "throttledPolls": self.throttled,
            "pendingToFleetMs": self.pending_to_fleet_ms,
            "lastError": self.last_error,
        })
    }
}

/// Polls until the invocation budget is spent and returns a JSON summary. A failed poll is
/// logged and the next one tries again; the invocation fails only when every poll failed.
pub async fn handler<K, A>(event: LambdaEvent<Value>, state: &State<K, A>) -> Result<Value, Error>
where
    K: nodewright::kube::PodSource
        + nodewright::kube::NodeSource
        + nodewright::kube::ConfigSource
        + nodewright::kube::EventSink
        + nodewright::kube::NodeOps,
    A: nodewright::aws::InstanceTypeSource
        + nodewright::aws::NetworkDiscovery
        + nodewright::aws::ImageResolver
        + nodewright::aws::Fleet
        + nodewright::aws::LaunchTemplates
        + nodewright::aws::InstanceInventory
        + nodewright::aws::InstanceProfiles
        + Sync,
{
    let started = Instant::now();
    let HandlerConfig {
        poll_interval,
        budget,
    } = state.config;
    tracing::debug!(request_id = event.context.request_id, "provisioner invoked");
    let mut summary = Summary::default();
    loop {
        summary.polls += 1;
        let result: Result<PollReport, ProvisionError> =
            state.provisioner.lock().await.poll(SystemTime::now()).await;
        let next = match result {
            Ok(report) => {
                summary.add(&report);
                if !report.launched_instances.is_empty() || report.unschedulable_pods > 0 {
                    tracing::info!(?report, "poll");
                }
                report
                    .waiting
                    .map_or(poll_interval, |w| w.min(poll_interval))
            }
            Err(e) => {
                summary.failed_polls += 1;
                let chain = error_chain(&e);
                tracing::error!(error = chain, "poll failed");
                summary.last_error = Some(chain);
                poll_interval
            }
        };
        if started.elapsed() + next >= budget {
            break;
        }
        tokio::time::sleep(next).await;
    }
    if summary.failed_polls == summary.polls {
        return Err(format!(
            "all {} polls failed; last error: {}",
            summary.polls,
            summary.last_error.as_deref().unwrap_or("unknown")
        )
        .into());
    }
    Ok(summary.json())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_as_seconds_or_milliseconds() {
        let cases = [
            ("5", Some(Duration::from_secs(5))),
            ("5s", Some(Duration::from_secs(5))),
            ("0.5", Some(Duration::from_millis(500))),
            ("250ms", Some(Duration::from_millis(250))),
            (" 2 ", Some(Duration::from_secs(2))),
            ("-1", None),
            ("fast", None),
            ("NaN", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), want, "{text:?}");
        }
    }
}
