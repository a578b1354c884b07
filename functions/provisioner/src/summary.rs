//! What one invocation did, as its answer to the Runtime API (and the bench's and tests'
//! reading of it).

use std::time::Duration;

use nodewright::provision::PollReport;
use serde_json::{Value, json};

use super::standby;

/// Totals over the polls of one invocation.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub(crate) polls: u32,
    pub(crate) failed_polls: u32,
    pub(crate) claims: usize,
    pub(crate) launched: Vec<String>,
    pub(crate) unschedulable: usize,
    pub(crate) throttled: u32,
    /// Polls started early because the pod watch saw a provisionable pod.
    pub(crate) wakeups: u32,
    /// `open`, `ended` (the server closed it; polling only since) or `failed` (never opened).
    pub(crate) watch: &'static str,
    pub(crate) pending_to_fleet_ms: Vec<u128>,
    pub(crate) last_error: Option<String>,
    /// Launches held back right before CreateFleet (Lease lost, deadline near): the last why.
    pub(crate) withheld: Option<String>,
    pub(crate) lease: LeaseSummary,
    /// US dollars per hour of the owned instances at the end of the invocation.
    pub(crate) fleet_cost_per_hour: Option<f64>,
}

/// What the Lease did in one invocation.
#[derive(Debug, Default)]
pub(crate) struct LeaseSummary {
    /// This invocation's holder identity; `None` without a Lease.
    pub(crate) identity: Option<String>,
    /// Times it went from not holding to holding the Lease.
    pub(crate) acquired: u32,
    /// Checks that found another holder.
    pub(crate) standby_checks: u32,
    /// Checks that failed (the API server did not answer): treated as not holding.
    pub(crate) failed_checks: u32,
    /// The Lease was released at the end (the next invocation takes it at once).
    pub(crate) released: bool,
    /// How it ended and how long it took, caches and prices included.
    pub(crate) warm_up: Option<(standby::WarmUp, u128)>,
}

impl Summary {
    pub(crate) fn add(&mut self, r: &PollReport) {
        self.claims += r.claims;
        self.launched.extend(r.launched_instances.iter().cloned());
        self.unschedulable = r.unschedulable_pods;
        self.throttled += u32::from(r.throttled);
        self.pending_to_fleet_ms
            .extend(r.pending_to_fleet.iter().map(Duration::as_millis));
        if r.withheld.is_some() {
            self.withheld.clone_from(&r.withheld);
        }
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "polls": self.polls,
            "failedPolls": self.failed_polls,
            "claims": self.claims,
            "launchedInstances": self.launched,
            "unschedulablePods": self.unschedulable,
            "throttledPolls": self.throttled,
            "watchWakeups": self.wakeups,
            "watch": self.watch,
            "pendingToFleetMs": self.pending_to_fleet_ms,
            "lastError": self.last_error,
            "withheld": self.withheld,
            "lease": {
                "identity": self.lease.identity,
                "acquired": self.lease.acquired,
                "standbyChecks": self.lease.standby_checks,
                "failedChecks": self.lease.failed_checks,
                "released": self.lease.released,
                "standbyWarmUp": self.lease.warm_up.map(|(outcome, ms)| json!({
                    "ms": ms,
                    "done": outcome == standby::WarmUp::Done,
                })),
            },
            "fleetCostPerHour": self.fleet_cost_per_hour,
        })
    }
}
