//! Metrics in CloudWatch Embedded Metric Format (EMF): JSON lines on stdout that CloudWatch
//! Logs turns into metrics, with no PutMetricData call and no permission beyond writing
//! logs. The `metrics` facade records them where the facts are (executors and handlers,
//! never the pure decisions); `metrics_cloudwatch_embedded` is the recorder, installed once
//! per cold start by each function's `main` ([`install`]), and each handler [`flush`]es
//! after its work. Without a recorder (unit tests, the CLI) every call here is a no-op.
//!
//! CloudWatch bills each metric series (name and dimension values) about $0.30 a month, so
//! only what an alarm or a latency percentile needs is a metric: [`names::ALL`], one series
//! each (per `Decision` for the latency), in one namespace, [`NAMESPACE`], with the
//! dimension [`dims::CLUSTER`]. Every breakdown (zone, capacity type, reason, kind,
//! outcome, function) and every other count is a `counted` log line instead
//! ([`counted::ALL`]): Logs Insights counts it by its fields at no monthly price.

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
    /// waits (provisioner). `PodsPendingTooLongAlarm` reads it.
    pub const OLDEST_PENDING_POD_AGE: &str = "OldestPendingPodAge";
    /// Counter: instances launched. `LaunchRateAlarm` reads it.
    pub const LAUNCHES: &str = "Launches";
    /// Counter: node claims that launched nothing. `LaunchFailuresAlarm` reads it.
    pub const LAUNCH_FAILURES: &str = "LaunchFailures";
    /// Gauge: what the owned instances cost per hour, in US dollars. `FleetCostAlarm`
    /// reads it.
    pub const FLEET_COST: &str = "FleetCostPerHour";
    /// Histogram (ms): one decision, from reading the cluster to acting; by `Decision`,
    /// for its percentiles.
    pub const DECISION_LATENCY: &str = "DecisionLatency";

    /// Every metric above, for the checks that the template shows them all.
    pub const ALL: &[&str] = &[
        PENDING_PODS,
        OLDEST_PENDING_POD_AGE,
        LAUNCHES,
        LAUNCH_FAILURES,
        FLEET_COST,
        DECISION_LATENCY,
    ];
}

/// What is counted in the logs only: the `counted` field of a log line whose message is
/// [`counted::MESSAGE`]; the line's other fields are the breakdown.
pub mod counted {
    /// The message of every counted line.
    pub const MESSAGE: &str = "counted";
    /// A launch (besides the metric), with `zone` and `capacity_type`.
    pub const LAUNCH: &str = "Launches";
    /// A claim that launched nothing (besides the metric), with `reason`.
    pub const LAUNCH_FAILURE: &str = "LaunchFailures";
    /// A pod newly found unprovisionable (once per pod and reason in a warm container;
    /// the provisioner's log names each pod and reason beside it).
    pub const POD_NOT_PROVISIONED: &str = "PodsNotProvisioned";
    /// A queue message the interruption function read, with `kind`.
    pub const INTERRUPTION_MESSAGE: &str = "InterruptionMessages";
    /// An instance terminated, with `reason`.
    pub const NODE_TERMINATED: &str = "NodesTerminated";
    /// A removal that ended, with `outcome` (`removed`, `instance-gone`, `given-up`,
    /// `stale-taint`): a given-up removal left its node in service, with a back-off.
    pub const REMOVAL: &str = "Removals";
    /// A cold start, with `function`.
    pub const COLD_START: &str = "ColdStarts";
    /// Per sweep and reason, the nodes a disruption method found due (acted on or kept),
    /// with `reason` and `nodes`: Karpenter's `voluntary_disruption_eligible_nodes`.
    pub const ELIGIBLE_NODES: &str = "EligibleNodes";
    /// A command a sweep decided, with `reason`, `decision` (`delete`, `replace`),
    /// `consolidation_type` (`empty`, `single`, `multi`; empty for other reasons) and
    /// `nodes`: Karpenter's `voluntary_disruption_decisions_total`.
    pub const DISRUPTION_DECISION: &str = "DisruptionDecisions";
    /// A command dropped at the re-check just before acting, with `reason` and `why`.
    pub const COMMAND_INVALIDATED: &str = "CommandsInvalidated";
    /// The owned instances and their cost, with `instances` and `per_hour`, once per
    /// invocation that acted.
    pub const FLEET: &str = "Fleet";

    /// Every count above, for the checks that the dashboard shows them all.
    pub const ALL: &[&str] = &[
        LAUNCH,
        LAUNCH_FAILURE,
        POD_NOT_PROVISIONED,
        INTERRUPTION_MESSAGE,
        NODE_TERMINATED,
        REMOVAL,
        COLD_START,
        FLEET,
        ELIGIBLE_NODES,
        DISRUPTION_DECISION,
        COMMAND_INVALIDATED,
    ];
}

/// Writes one `counted` line: `counted = $name`, then the breakdown's fields, with the
/// message [`counted::MESSAGE`] that every query filters on.
macro_rules! count {
    ($name:expr $(, $($field:tt)+)?) => {
        tracing::info!(counted = $name, $($($field)+,)? "{}", counted::MESSAGE)
    };
}

/// Dimension names.
pub mod dims {
    pub const CLUSTER: &str = "Cluster";
    pub const DECISION: &str = "Decision";
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
    count!(counted::COLD_START, function = function.as_str());
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
    describe_counter!(names::LAUNCHES, Unit::Count, "instances launched");
    describe_counter!(
        names::LAUNCH_FAILURES,
        Unit::Count,
        "claims that launched nothing"
    );
    describe_histogram!(names::DECISION_LATENCY, Unit::Milliseconds, "one decision");
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
    count!(counted::POD_NOT_PROVISIONED);
}

pub fn launched(zone: &str, capacity_type: CapacityType) {
    counter!(names::LAUNCHES).increment(1);
    count!(
        counted::LAUNCH,
        zone,
        capacity_type = capacity_type.as_str()
    );
}

pub fn launch_failed(reason: LaunchFailure) {
    counter!(names::LAUNCH_FAILURES).increment(1);
    count!(counted::LAUNCH_FAILURE, reason = reason.as_str());
}

/// `kind`: the message kind (`spot-interruption`, `follow-up`, ...), or `ignored`,
/// `suspicious`, `unreadable` for messages acknowledged without action.
pub fn interruption_message(kind: &'static str) {
    count!(counted::INTERRUPTION_MESSAGE, kind);
}

/// `reason`: why the node went, as its Kubernetes Event names it (`SpotInterrupted`, ...).
pub fn node_terminated(reason: &'static str) {
    count!(counted::NODE_TERMINATED, reason);
}

/// How a removal ended (see [`counted::REMOVAL`]).
pub fn removal_outcome(outcome: &'static str) {
    count!(counted::REMOVAL, outcome);
}

pub fn fleet(cost_per_hour: f64, instances: usize) {
    gauge!(names::FLEET_COST).set(cost_per_hour);
    count!(counted::FLEET, instances, per_hour = cost_per_hour);
}

pub fn decision_latency(decision: Decision, took: Duration) {
    histogram!(names::DECISION_LATENCY, dims::DECISION => decision.as_str())
        .record(took.as_secs_f64() * 1000.0);
}

/// What one sweep decided (see [`crate::disruption::eligible`]).
pub fn sweep_decided(plan: &crate::disruption::Plan) {
    for (reason, nodes) in crate::disruption::eligible(plan) {
        count!(counted::ELIGIBLE_NODES, reason = reason.as_str(), nodes);
    }
    for c in &plan.commands {
        count!(
            counted::DISRUPTION_DECISION,
            reason = c.reason.as_str(),
            decision = crate::disruption::decision(c),
            consolidation_type = crate::disruption::consolidation_type(c).unwrap_or_default(),
            nodes = c.nodes.len()
        );
    }
}

/// A command dropped at the re-check just before acting.
pub fn command_invalidated(reason: &'static str, why: &str) {
    count!(counted::COMMAND_INVALIDATED, reason, why);
}
