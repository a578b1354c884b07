//! Metrics in CloudWatch Embedded Metric Format (EMF): JSON lines on stdout that CloudWatch
//! Logs turns into metrics, with no PutMetricData call and no permission beyond writing
//! logs. The `metrics` facade records them where the facts are (executors and handlers,
//! never the pure decisions); `metrics_cloudwatch_embedded` is the recorder, installed once
//! per cold start by each function's `main` ([`install`]), and each handler [`flush`]es
//! after its work. Without a recorder (unit tests, the CLI) every call here is a no-op.
//!
//! One namespace, [`NAMESPACE`]; every metric carries the dimension [`dims::CLUSTER`], and
//! those with a breakdown are emitted once per dimension set (the total, then one set per
//! breakdown), so a dashboard or alarm reads any of them without metric math.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_cloudwatch_embedded::{Builder, Collector};
use thiserror::Error;

use crate::catalog::CapacityType;

/// The CloudWatch namespace of every nodewright metric.
pub const NAMESPACE: &str = "nodewright";

/// Metric names, shared with `template.yaml` (tests/tests/template_wiring.rs checks them).
pub mod names {
    /// Gauge: pods waiting for capacity at the last poll (provisioner).
    pub const PENDING_PODS: &str = "PendingPods";
    /// Gauge (seconds): how long the longest-waiting of those pods has waited, 0 when none
    /// waits (provisioner).
    pub const OLDEST_PENDING_POD_AGE: &str = "OldestPendingPodAge";
    /// Counter: pods newly found unprovisionable (once per pod and reason in a warm
    /// container; the provisioner's log names each pod and reason).
    pub const PODS_NOT_PROVISIONED: &str = "PodsNotProvisioned";
    /// Counter: instances launched; by `Zone`, `CapacityType`. Not by instance type: each
    /// value would be a custom metric billed a month (tens of types in a flexible pool),
    /// so the type is in the launch's log line, which Logs Insights counts.
    pub const LAUNCHES: &str = "Launches";
    /// Counter: node claims that launched nothing; by `Reason`.
    pub const LAUNCH_FAILURES: &str = "LaunchFailures";
    /// Counter: queue messages the interruption function read; by `Kind`.
    pub const INTERRUPTION_MESSAGES: &str = "InterruptionMessages";
    /// Counter: instances terminated; by `Reason`.
    pub const NODES_TERMINATED: &str = "NodesTerminated";
    /// Gauge: what the owned instances cost per hour, in US dollars.
    pub const FLEET_COST: &str = "FleetCostPerHour";
    /// Gauge: owned instances (pending or running).
    pub const FLEET_INSTANCES: &str = "FleetInstances";
    /// Histogram (ms): one decision, from reading the cluster to acting; by `Decision`.
    pub const DECISION_LATENCY: &str = "DecisionLatency";
    /// Counter: cold starts; by `Function`.
    pub const COLD_STARTS: &str = "ColdStarts";
    /// Counter: removals that ended, by `Outcome` (`removed`, `instance-gone`, `given-up`,
    /// `stale-taint`): a given-up removal left its node in service, with a back-off.
    pub const REMOVALS: &str = "Removals";

    /// Every metric above, for the checks that the template shows them all.
    pub const ALL: &[&str] = &[
        PENDING_PODS,
        OLDEST_PENDING_POD_AGE,
        PODS_NOT_PROVISIONED,
        LAUNCHES,
        LAUNCH_FAILURES,
        INTERRUPTION_MESSAGES,
        NODES_TERMINATED,
        FLEET_COST,
        FLEET_INSTANCES,
        DECISION_LATENCY,
        COLD_STARTS,
        REMOVALS,
    ];
}

/// Dimension names.
pub mod dims {
    pub const CLUSTER: &str = "Cluster";
    pub const FUNCTION: &str = "Function";
    pub const ZONE: &str = "Zone";
    pub const CAPACITY_TYPE: &str = "CapacityType";
    pub const REASON: &str = "Reason";
    pub const KIND: &str = "Kind";
    pub const DECISION: &str = "Decision";
    pub const OUTCOME: &str = "Outcome";
}

#[derive(Debug, Error)]
pub enum TelemetryError {
    #[error("installing the CloudWatch metrics recorder: {0}")]
    Install(String),
}

/// The three functions, as the `Function` dimension spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Provisioner,
    Interruption,
    Sweeper,
}

impl Function {
    pub fn as_str(&self) -> &'static str {
        match self {
            Function::Provisioner => "provisioner",
            Function::Interruption => "interruption",
            Function::Sweeper => "sweeper",
        }
    }
}

/// Why a node claim launched nothing, as the `Reason` dimension spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchFailure {
    /// No offering of the claim had capacity (EC2 insufficient-capacity errors).
    NoCapacity,
    /// EC2 throttled the request; launching stopped for the poll.
    Throttled,
    /// A cause that passes by itself (IAM propagation, a template collected meanwhile).
    Transient,
    /// Anything else: access denied, no usable subnet, a bad launch template.
    Error,
}

impl LaunchFailure {
    pub fn as_str(&self) -> &'static str {
        match self {
            LaunchFailure::NoCapacity => "no-capacity",
            LaunchFailure::Throttled => "throttled",
            LaunchFailure::Transient => "transient",
            LaunchFailure::Error => "error",
        }
    }
}

/// The decisions whose latency is measured, as the `Decision` dimension spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// One provisioner poll that planned for pending pods.
    Provision,
    /// One interruption message handled.
    Interruption,
}

impl Decision {
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Provision => "provision",
            Decision::Interruption => "interruption",
        }
    }
}

static COLLECTOR: OnceLock<&'static Collector> = OnceLock::new();

/// Installs the EMF recorder for this process (once, at cold start) and counts the cold
/// start. A second call is an error: the `metrics` facade holds one global recorder.
pub fn install(cluster: &str, function: Function) -> Result<(), TelemetryError> {
    let collector = Builder::new()
        .cloudwatch_namespace(NAMESPACE)
        .with_dimension(dims::CLUSTER, cluster.to_string())
        .init()
        .map_err(|e| TelemetryError::Install(e.to_string()))?;
    COLLECTOR
        .set(collector)
        .map_err(|_| TelemetryError::Install("already installed".into()))?;
    describe();
    counter!(names::COLD_STARTS, dims::FUNCTION => function.as_str()).increment(1);
    Ok(())
}

/// Units, which the recorder writes into each metric's definition.
fn describe() {
    describe_gauge!(
        names::PENDING_PODS,
        Unit::Count,
        "pods waiting for capacity"
    );
    describe_gauge!(
        names::OLDEST_PENDING_POD_AGE,
        Unit::Seconds,
        "the longest wait for capacity"
    );
    describe_counter!(
        names::PODS_NOT_PROVISIONED,
        Unit::Count,
        "pods found unprovisionable"
    );
    describe_counter!(names::LAUNCHES, Unit::Count, "instances launched");
    describe_counter!(
        names::LAUNCH_FAILURES,
        Unit::Count,
        "claims that launched nothing"
    );
    describe_counter!(
        names::INTERRUPTION_MESSAGES,
        Unit::Count,
        "queue messages read"
    );
    describe_counter!(names::NODES_TERMINATED, Unit::Count, "instances terminated");
    describe_gauge!(names::FLEET_INSTANCES, Unit::Count, "owned instances");
    describe_histogram!(names::DECISION_LATENCY, Unit::Milliseconds, "one decision");
    describe_counter!(names::COLD_STARTS, Unit::Count, "cold starts");
}

/// Writes what was recorded since the last flush to stdout, one EMF document per
/// dimension set. Counters restart from zero; gauges repeat their last value.
pub fn flush() {
    let Some(collector) = COLLECTOR.get() else {
        return;
    };
    // One lock for the whole batch, so no log line lands inside a document.
    if let Err(e) = collector.flush(std::io::stdout().lock()) {
        tracing::warn!(error = %e, "writing metrics to stdout failed");
    }
}

/// Pods waiting for capacity at this poll, and how long the longest-waiting one has.
pub fn pending_pods(count: usize, oldest: Option<Duration>) {
    gauge!(names::PENDING_PODS).set(count as f64);
    gauge!(names::OLDEST_PENDING_POD_AGE).set(oldest.unwrap_or_default().as_secs_f64());
}

pub fn pod_not_provisioned() {
    counter!(names::PODS_NOT_PROVISIONED).increment(1);
}

pub fn launched(zone: &str, capacity_type: CapacityType) {
    counter!(names::LAUNCHES).increment(1);
    counter!(names::LAUNCHES, dims::ZONE => zone.to_string()).increment(1);
    counter!(names::LAUNCHES, dims::CAPACITY_TYPE => capacity_type.as_str()).increment(1);
}

pub fn launch_failed(reason: LaunchFailure) {
    counter!(names::LAUNCH_FAILURES).increment(1);
    counter!(names::LAUNCH_FAILURES, dims::REASON => reason.as_str()).increment(1);
}

/// `kind`: the message kind (`spot-interruption`, `follow-up`, ...), or `ignored`,
/// `suspicious`, `unreadable` for messages acknowledged without action.
pub fn interruption_message(kind: &'static str) {
    counter!(names::INTERRUPTION_MESSAGES, dims::KIND => kind).increment(1);
}

/// `reason`: why the node went, as its Kubernetes Event names it (`SpotInterrupted`, ...).
pub fn node_terminated(reason: &'static str) {
    counter!(names::NODES_TERMINATED).increment(1);
    counter!(names::NODES_TERMINATED, dims::REASON => reason).increment(1);
}

/// How a removal ended (see [`names::REMOVALS`]).
pub fn removal_outcome(outcome: &'static str) {
    counter!(names::REMOVALS, dims::OUTCOME => outcome).increment(1);
}

pub fn fleet(cost_per_hour: f64, instances: usize) {
    gauge!(names::FLEET_COST).set(cost_per_hour);
    gauge!(names::FLEET_INSTANCES).set(instances as f64);
}

pub fn decision_latency(decision: Decision, took: Duration) {
    histogram!(names::DECISION_LATENCY, dims::DECISION => decision.as_str())
        .record(took.as_secs_f64() * 1000.0);
}
