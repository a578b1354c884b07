//! What next for one node being removed: Karpenter's terminator as a value. One pure
//! decision over the node, its pods, its removal record, its instance, the replacement's
//! state, the deadline and now, for every cause; the executor (`execute.rs`) only applies it.
//!
//! The rules, each a row of `decide_tests.rs`:
//! - **Taken first.** The record and the disruption taint are written before anything else
//!   and again whenever the taint is missing (a crash, a hand-removed taint): no pod is
//!   evicted from a node new pods can land on. A taint with no record is stale: removed.
//! - **The instance gone** (stopped, terminated): its pods are deleted at once and the Node.
//! - **Involuntary** (spot, capacity reservation, scheduled change, state change): the drain
//!   begins at once and never waits for a launch; replacement capacity is asked for the
//!   pods still on the node after the first evictions. Each pod is deleted at the deadline
//!   less its own grace (`drain::plan_drain`); drained, the instance is terminated.
//! - **Voluntary, replacement first** (expiry, drift, rebalance): the replacement is asked,
//!   then awaited until every instance is a Ready node; only then does the drain begin, and
//!   the NodePool's `terminationGracePeriod` counts from then. No somewhere to go (pods the
//!   replacement cannot place, or capacity not Ready within [`REPLACEMENT_WAIT`]) gives the
//!   removal up: untainted, its record cleared, a back-off before the next try.
//! - **do-not-disrupt** on any pod still running on the node (a DaemonSet's too) holds a
//!   voluntary removal (expiry and scale-down aside, which are forceful): it is given up
//!   at once.
//! - **Nothing tainted without progress.** A voluntary drain with no deadline that has made
//!   no progress for [`STUCK_AFTER`] is given up the same way; pods stuck terminating no
//!   longer hold a drain.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

use super::record::{Record, Replacement};
use crate::drain::{DrainPlan, DrainPolicy, plan_drain, reschedulable};

/// How long a voluntary removal waits for its replacement to be Ready nodes: as long as a
/// launch may take to join at all (Karpenter's `registrationTTL`).
pub const REPLACEMENT_WAIT: Duration = crate::disruption::JOIN_TIMEOUT;
/// How long a voluntary drain with no deadline may go without progress before it is given
/// up (its node restored) instead of staying tainted.
pub const STUCK_AFTER: Duration = Duration::from_secs(20 * 60);
/// How often a replacement that is not Ready yet is looked at: a node joins in a minute or
/// two.
pub const REPLACEMENT_RECHECK: Duration = Duration::from_secs(20);
/// How often a removal its pool's budget holds back is looked at again.
pub const BUDGET_RECHECK: Duration = Duration::from_secs(30);
/// The longest wait between two looks at a drain that is not moving: the look backs off from
/// `drain::DRAIN_RECHECK` to this while nothing changes.
pub const MAX_DRAIN_RECHECK: Duration = Duration::from_secs(60);
/// How often a drain against AWS's deadline (a spot warning's two minutes) is looked at: a
/// PodDisruptionBudget lets one pod go as the last one's successor is Ready, and each look
/// missed is a pod deleted at the deadline instead of evicted.
pub const DEADLINE_DRAIN_RECHECK: Duration = Duration::from_secs(2);

/// What EC2 says of the node's instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instance {
    Running,
    /// Stopping, stopped, shutting down or terminated: it will never run a pod again.
    Gone,
}

/// A voluntary removal's NodePool budget, for removals not planned within it (a
/// rebalance): whether it may begin now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Budget {
    Allows,
    Holds(String),
}

/// The node as it is now, read just before deciding.
#[derive(Debug, Clone)]
pub struct Situation<'a> {
    pub tainted: bool,
    /// The record the node carries (`None`: no removal), or the one to begin.
    pub record: Option<Record>,
    /// Whether `record` is what the node already carries.
    pub written: bool,
    pub instance: Instance,
    pub pods: &'a [Pod],
    /// Of the recorded replacement instances, those that are Ready nodes.
    pub ready: &'a [String],
    /// Of the recorded replacement instances, those EC2 no longer runs.
    pub lost: &'a [String],
    /// The NodePool's `terminationGracePeriod`.
    pub grace: Option<Duration>,
    pub budget: Budget,
}

/// One thing to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    /// Write [`Next::record`] and make sure the node carries the taint (one write).
    Take,
    /// A taint with no record: remove it.
    Untaint,
    /// The instance is gone or going: terminate what is left of it (a stopped instance of
    /// this cluster's would sit there), delete the pods at once and the Node.
    DeleteNode,
    Drain(DrainPlan),
    /// Ask capacity for the node's pods that still need a place, avoiding the record's
    /// offering; record the answer.
    Replace,
    /// Terminate the instance (only with this cluster's ownership tag) and delete the Node.
    Terminate,
    /// Give the removal up: untaint, clear the record, back off, say why.
    Restore(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    pub acts: Vec<Act>,
    /// The record after this step (`None`: no removal any more).
    pub record: Option<Record>,
    /// When to look again (`None`: nothing left to look at).
    pub recheck: Option<Timestamp>,
    /// Where the removal stands, for logs, Events and `explain-event`.
    pub state: &'static str,
    /// Why it stands there, when there is more to say (what holds it).
    pub note: Option<String>,
}

impl Next {
    fn done(state: &'static str) -> Next {
        Next {
            acts: Vec::new(),
            record: None,
            recheck: None,
            state,
            note: None,
        }
    }

    fn going(
        acts: Vec<Act>,
        record: Record,
        recheck: Option<Timestamp>,
        state: &'static str,
    ) -> Next {
        Next {
            acts,
            record: Some(record),
            recheck,
            state,
            note: None,
        }
    }
}

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t + SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

fn age(since: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or_default()
}

/// The wait before looking at a drain again: short while it moves, longer while it does
/// not (a drain a budget holds for hours is not looked at every few seconds).
fn drain_interval(record: &Record, now: Timestamp) -> Duration {
    (age(record.progress, now) / 4).clamp(crate::drain::DRAIN_RECHECK, MAX_DRAIN_RECHECK)
}

/// What next for the node `s` describes, at `now`.
pub fn next(s: &Situation<'_>, now: Timestamp) -> Next {
    let Some(record) = s.record.clone() else {
        if s.tainted {
            return Next {
                acts: vec![Act::Untaint],
                ..Next::done("stale taint")
            };
        }
        return Next::done("not being removed");
    };
    // A state change saying the instance is going is as good as EC2's word: it is.
    if s.instance == Instance::Gone || record.cause == super::Cause::InstanceStopping {
        return Next {
            acts: vec![Act::DeleteNode],
            ..Next::done("instance gone")
        };
    }
    if record.cause.voluntary() {
        voluntary(s, record, now)
    } else {
        involuntary(s, record, now)
    }
}

/// `Take` first when the record is new or changed or the taint is missing.
fn taken(s: &Situation<'_>, record: &Record, acts: &mut Vec<Act>) {
    let changed = !s.written || s.record.as_ref() != Some(record);
    if changed || !s.tainted {
        acts.insert(0, Act::Take);
    }
}

fn moving(pods: &[Pod]) -> bool {
    reschedulable(pods).next().is_some()
}

fn involuntary(s: &Situation<'_>, mut record: Record, now: Timestamp) -> Next {
    record.drain_started.get_or_insert(now);
    let policy = DrainPolicy {
        disruption: record.cause.kind(),
        deadline: record.deadline,
    };
    let plan = plan_drain(s.pods, &policy, now);
    let mut acts = Vec::new();
    if plan.finished() {
        acts.push(Act::Terminate);
        taken(s, &record, &mut acts);
        return Next::going(acts, record, None, "drained");
    }
    let interval = match record.deadline {
        Some(_) => DEADLINE_DRAIN_RECHECK,
        None => drain_interval(&record, now),
    };
    let recheck = plan
        .recheck_at(now, interval)
        .map(|r| record.deadline.map_or(r, |d| r.min(d.max(now))));
    acts.push(Act::Drain(plan));
    if record.replacement == Replacement::NotAsked && record.cause.replaces() && moving(s.pods) {
        acts.push(Act::Replace);
    }
    taken(s, &record, &mut acts);
    Next::going(acts, record, recheck, "draining")
}

fn voluntary(s: &Situation<'_>, mut record: Record, now: Timestamp) -> Next {
    let mut acts = Vec::new();
    let restore = |why: String, _: &Situation<'_>| Next {
        acts: vec![Act::Restore(why.clone())],
        note: Some(why),
        ..Next::done("given up")
    };
    // A removal not planned within its pool's budget (a rebalance) begins only when the
    // budget allows one more disruption; once begun, its taint counts against the budget.
    if !s.written
        && let Budget::Holds(why) = &s.budget
    {
        return Next {
            recheck: Some(plus(now, BUDGET_RECHECK)),
            note: Some(why.clone()),
            ..Next::done("held by the disruption budget")
        };
    }
    // An empty node that gained a pod (it landed before the taint did) is not empty: its
    // removal is called off rather than drained.
    if record.cause == super::Cause::Empty && moving(s.pods) {
        return restore("a pod was scheduled on it".into(), s);
    }
    // A pod that may not be disrupted holds every voluntary removal but the forceful ones
    // (expiry, a static pool's scale-down): such a pod goes at the end of
    // `terminationGracePeriod`. Given up at once, before a replacement is launched for
    // nothing and the taint sits until the drain is declared stuck.
    if !record.cause.forceful()
        && let Some(held) = s.pods.iter().find(|p| crate::drain::holds_node(p, now))
    {
        let name = held.metadata.name.as_deref().unwrap_or("");
        return restore(format!("pod {name} is karpenter.sh/do-not-disrupt"), s);
    }
    // Replacement first: for a cause that asks for one, and for a consolidation that
    // launched its replacement before taking its nodes.
    let launched = matches!(record.replacement, Replacement::Launched { .. });
    if record.drain_started.is_none() && (record.cause.replaces() || launched) && moving(s.pods) {
        match &record.replacement {
            Replacement::NotAsked => {
                acts.push(Act::Replace);
                taken(s, &record, &mut acts);
                let recheck = Some(plus(now, REPLACEMENT_RECHECK));
                return Next::going(acts, record, recheck, "asking for a replacement");
            }
            Replacement::Failed { why, .. } => {
                return restore(format!("nowhere for its pods to go: {why}"), s);
            }
            Replacement::Launched { instances, .. } => {
                if let Some(lost) = instances.iter().find(|i| s.lost.contains(i)) {
                    return restore(format!("replacement instance {lost} is gone"), s);
                }
                let ready = instances.iter().all(|i| s.ready.contains(i));
                if !ready {
                    let until = plus(record.started, REPLACEMENT_WAIT);
                    if now >= until {
                        return restore(
                            format!(
                                "replacement {} not a Ready node within {} minutes",
                                instances.join(", "),
                                REPLACEMENT_WAIT.as_secs() / 60
                            ),
                            s,
                        );
                    }
                    taken(s, &record, &mut acts);
                    let recheck = Some(plus(now, REPLACEMENT_RECHECK).min(until));
                    return Next::going(acts, record, recheck, "awaiting the replacement");
                }
            }
            Replacement::NotNeeded => {}
        }
    }
    let started = *record.drain_started.get_or_insert(now);
    let deadline = s.grace.map(|g| plus(started, g));
    let policy = DrainPolicy {
        disruption: record.cause.kind(),
        deadline,
    };
    let plan = plan_drain(s.pods, &policy, now);
    if plan.finished() {
        acts.push(Act::Terminate);
        taken(s, &record, &mut acts);
        return Next::going(acts, record, None, "drained");
    }
    if deadline.is_none() && age(record.progress, now) >= STUCK_AFTER {
        return restore(
            format!(
                "its drain made no progress for {} minutes",
                STUCK_AFTER.as_secs() / 60
            ),
            s,
        );
    }
    let recheck = plan.recheck_at(now, drain_interval(&record, now));
    acts.push(Act::Drain(plan));
    taken(s, &record, &mut acts);
    Next::going(acts, record, recheck, "draining")
}

/// The record for a removal of `wanted` begun on a node that may already carry `existing`:
/// an involuntary cause takes over a voluntary removal (its deadline now binds), keeping
/// what was launched; two deadlines keep the earlier; otherwise the existing record stands.
pub fn merge(existing: Option<Record>, wanted: Option<Record>) -> Option<Record> {
    match (existing, wanted) {
        (None, w) => w,
        (e, None) => e,
        (Some(e), Some(w)) => {
            let takes_over = e.cause.voluntary() && !w.cause.voluntary();
            if takes_over {
                return Some(Record {
                    replacement: e.replacement,
                    drain_started: e.drain_started,
                    ..w
                });
            }
            let earlier = match (e.deadline, w.deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            Some(Record {
                deadline: earlier,
                ..e
            })
        }
    }
}
