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

    /// Why errors kept this invocation from doing its job, so that it fails (Lambda's
    /// `Errors` metric and the provisioner's alarm) rather than answering as if all were
    /// well: every poll failed, or every Lease check it made failed, so it neither polled
    /// nor saw another invocation holding the Lease. The last error is the last of either. `None` when it polled, or stood by behind a
    /// holder it saw, or had no time to start.
    pub(crate) fn failure(&self) -> Option<String> {
        let last = self.last_error.as_deref().unwrap_or("unknown");
        if self.polls > 0 && self.failed_polls == self.polls {
            return Some(format!(
                "all {} polls failed; last error: {last}",
                self.polls
            ));
        }
        let lease = &self.lease;
        if self.polls == 0 && lease.standby_checks == 0 && lease.failed_checks > 0 {
            return Some(format!(
                "all {} Lease checks failed, so nothing was polled; last error: {last}",
                lease.failed_checks
            ));
        }
        None
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

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(polls: u32, failed_polls: u32, standby: u32, failed_checks: u32) -> Summary {
        Summary {
            polls,
            failed_polls,
            last_error: Some("403 Forbidden".into()),
            lease: LeaseSummary {
                standby_checks: standby,
                failed_checks,
                ..LeaseSummary::default()
            },
            ..Summary::default()
        }
    }

    #[test]
    fn an_invocation_fails_only_when_errors_kept_it_from_doing_anything() {
        // (polls, failed polls, standby checks, failed Lease checks, fails)
        let table = [
            (3, 1, 0, 0, false),
            (3, 3, 0, 0, true),
            (0, 0, 0, 0, false),
            (0, 0, 4, 0, false),
            (0, 0, 4, 2, false),
            (0, 0, 0, 5, true),
            (2, 0, 0, 5, false),
            (2, 2, 0, 5, true),
        ];
        for (polls, failed, standby, checks, fails) in table {
            let failure = summary(polls, failed, standby, checks).failure();
            assert_eq!(
                failure.is_some(),
                fails,
                "{polls} polls, {failed} failed, {standby} standby, {checks} failed checks: {failure:?}"
            );
            if let Some(f) = failure {
                assert!(f.contains("403 Forbidden"), "{f}");
            }
        }
    }
}
