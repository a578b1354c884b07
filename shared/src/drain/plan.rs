//! The drain plan. Rules, with where they come from:
//! - DaemonSet pods stay (their controller would put them straight back, and they serve
//!   the node until it goes), as do mirror pods (the kubelet owns them; the API cannot
//!   evict them) and pods tolerating the disruption taint (they asked to stay).
//! - Finished pods (Succeeded, Failed) need nothing; pods already terminating are waited for.
//! - `karpenter.sh/do-not-disrupt: "true"` holds a pod only for voluntary reasons:
//!   Karpenter's rule, since an interruption takes the machine whatever the pod says.
//! - Non-critical pods go first and `system-cluster-critical` / `system-node-critical` pods
//!   only once the others are gone, as Karpenter's terminator orders them, so logging and
//!   DNS keep serving the pods that are leaving.
//! - Eviction honours PodDisruptionBudgets; each pod's grace period is capped by the time
//!   left. Each pod is deleted at `deadline - its own terminationGracePeriodSeconds` (at
//!   least [`MIN_LEAD`] before it) if it is still there, PDBs and do-not-disrupt no longer
//!   holding it, so it gets its whole grace before the machine goes, as Karpenter's
//!   terminator deletes pods at the NodeClaim's termination time less their grace.
//! - A pod still terminating a minute past its deletion timestamp is stuck (its kubelet is
//!   gone or wedged): it no longer holds the drain, as Karpenter counts it.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::api::labels::{DISRUPTED_TAINT, DO_NOT_DISRUPT, KARPENTER_DISRUPTED_TAINT};
use crate::kube::PodRef;

/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;
/// The least grace a drain asks for. Zero is not a short grace but a forced deletion: the
/// API server forgets the pod at once while its containers may still run, and its
/// controller starts the replacement beside it (a StatefulSet pod twice). One second lets
/// the kubelet stop it first; Karpenter clamps the same way.
pub const MIN_GRACE_SECONDS: i64 = 1;

/// A pod is deleted at least this long before the deadline, whatever its grace (a pod with
/// a grace of 0 still stops before the machine does).
pub const MIN_LEAD: Duration = Duration::from_secs(5);
/// How long past its deletion timestamp a terminating pod is waited for
/// (Karpenter's `IsStuckTerminating`: one minute).
pub const STUCK_TERMINATING: Duration = Duration::from_secs(60);
/// How soon to look again at a drain that is not finished (a PDB said wait, pods are
/// still terminating): short next to a spot interruption's two minutes.
pub const DRAIN_RECHECK: Duration = Duration::from_secs(5);

/// Whether a drain was nodewright's choice (voluntary) or forced on it (involuntary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disruption {
    Voluntary,
    Involuntary,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainPolicy {
    pub disruption: Disruption,
    /// The hard limit: the instance's end for an interruption, the NodePool's
    /// `terminationGracePeriod` after the drain began for a voluntary drain; `None` waits
    /// on PDBs and do-not-disrupt for as long as it takes.
    pub deadline: Option<Timestamp>,
}

/// One pod to evict or delete, with the grace period to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStep {
    pub pod: PodRef,
    pub grace_seconds: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    DaemonSet,
    Mirror,
    ToleratesDisruption,
    Finished,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// Through the Eviction API, which a PodDisruptionBudget may refuse (429).
    pub evict: Vec<PodStep>,
    /// Deleted outright: the deadline is near.
    pub delete: Vec<PodStep>,
    /// Held by `karpenter.sh/do-not-disrupt` (voluntary drains only).
    pub held: Vec<PodRef>,
    /// Critical pods that wait for the others to be gone.
    pub later: Vec<PodRef>,
    /// Already terminating: waited for.
    pub terminating: Vec<PodRef>,
    /// Terminating past their deletion timestamp by more than [`STUCK_TERMINATING`]: no
    /// longer waited for.
    pub stuck: Vec<PodRef>,
    pub skipped: Vec<(PodRef, Skip)>,
    /// The earliest time a pod still there is due to be deleted, if later than now.
    pub next_delete: Option<Timestamp>,
}

impl DrainPlan {
    /// Nothing is left that the drain must remove or wait for.
    pub fn finished(&self) -> bool {
        self.evict.is_empty()
            && self.delete.is_empty()
            && self.held.is_empty()
            && self.later.is_empty()
            && self.terminating.is_empty()
    }

    /// When to look again, if not finished: after `every` (at least [`DRAIN_RECHECK`]), and
    /// never after a pod's deletion is due.
    pub fn recheck_at(&self, now: Timestamp, every: Duration) -> Option<Timestamp> {
        if self.finished() {
            return None;
        }
        let soon = now + every;
        Some(self.next_delete.map_or(soon, |d| soon.min(d)))
    }
}

const CRITICAL_PRIORITY_CLASSES: [&str; 2] = ["system-cluster-critical", "system-node-critical"];
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Succeeded or Failed: nothing of it runs any more.
pub fn finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

fn skip_reason(pod: &Pod) -> Option<Skip> {
    if finished(pod) {
        return Some(Skip::Finished);
    }
    let meta = &pod.metadata;
    if meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
    {
        return Some(Skip::Mirror);
    }
    // Any DaemonSet owner, as Karpenter's `IsOwnedByDaemonSet` and the sweeper's snapshot
    // read it: the drain and the sweeper must agree on which pods make a node busy.
    if meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
    {
        return Some(Skip::DaemonSet);
    }
    if tolerates_disruption(pod) {
        return Some(Skip::ToleratesDisruption);
    }
    None
}

/// A toleration matching `nodewright.io/disrupted=:NoSchedule` or Karpenter's
/// `karpenter.sh/disrupted=:NoSchedule` (both are on the node): same key (or an empty key
/// with `Exists`, which tolerates everything), `Exists` or an empty value, any or
/// NoSchedule effect.
fn tolerates_disruption(pod: &Pod) -> bool {
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_ref());
    tolerations.into_iter().flatten().any(|t| {
        let exists = t.operator.as_deref() == Some("Exists");
        let key_ok = match t.key.as_deref() {
            None | Some("") => exists,
            Some(k) => k == DISRUPTED_TAINT || k == KARPENTER_DISRUPTED_TAINT,
        };
        let value_ok = exists || t.value.as_deref().unwrap_or_default().is_empty();
        let effect_ok = matches!(t.effect.as_deref(), None | Some("") | Some("NoSchedule"));
        key_ok && value_ok && effect_ok
    })
}

/// Whether the pod's `karpenter.sh/do-not-disrupt` protects it at `now`, as Karpenter
/// reads it: `"true"` always; a positive Go duration (`"30m"`, `"1h30m"`) for that long
/// after the pod started, and while its start time is unknown; any other value not at all
/// (Karpenter also posts an Event on the pod about such a value; nodewright does not).
pub fn do_not_disrupt(pod: &Pod, now: Timestamp) -> bool {
    let Some(value) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DO_NOT_DISRUPT))
    else {
        return false;
    };
    if value == "true" {
        return true;
    }
    let Ok(crate::api::Duration(protected)) = value.parse::<crate::api::Duration>() else {
        return false;
    };
    if protected.is_zero() {
        return false;
    }
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0);
    started.is_none_or(|started| {
        let age = now.duration_since(started);
        age.is_negative() || age.unsigned_abs() < protected
    })
}

/// A pod that holds its node against voluntary disruption: `do-not-disrupt` on a pod still
/// running there, whatever its kind. A DaemonSet's or a static (mirror) pod counts too, as
/// in Karpenter: its owner asked that this node not go, though the pod itself never moves.
pub fn holds_node(pod: &Pod, now: Timestamp) -> bool {
    !finished(pod) && pod.metadata.deletion_timestamp.is_none() && do_not_disrupt(pod, now)
}

fn critical(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref())
        .is_some_and(|c| CRITICAL_PRIORITY_CLASSES.contains(&c))
}

fn grace_of(pod: &Pod) -> i64 {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .max(0)
}

/// Pods a drain moves off a node: what a replacement must have room for. A pod already
/// Terminating is not one: its controller has made (or is making) its successor, a pending
/// pod the provisioner finds and plans for; counting the going pod too would launch for
/// it twice.
pub fn reschedulable(pods: &[Pod]) -> impl Iterator<Item = &Pod> {
    pods.iter()
        .filter(|p| skip_reason(p).is_none() && p.metadata.deletion_timestamp.is_none())
}

/// When `pod` must be deleted to stop gracefully by `deadline`: its grace (at least
/// [`MIN_LEAD`]) before it. `grace` is the pod's own, or the one its deletion already has.
fn delete_at(deadline: Timestamp, grace: i64) -> Timestamp {
    let lead = Duration::from_secs(grace.max(0) as u64).max(MIN_LEAD);
    deadline - lead
}

/// The plan for the pods bound to one node, at `now`.
pub fn plan_drain(pods: &[Pod], policy: &DrainPolicy, now: Timestamp) -> DrainPlan {
    let mut plan = DrainPlan::default();
    let left = policy
        .deadline
        .map(|d| d.duration_since(now).as_secs().max(0));
    let step = |pod: &Pod, grace: i64| PodStep {
        pod: PodRef::of(pod),
        grace_seconds: left.map_or(grace, |l| grace.min(l)).max(MIN_GRACE_SECONDS),
    };
    // Whether a pod with this grace is due for deletion now (and when it will be, if not).
    let mut due = |grace: i64| match policy.deadline.map(|d| delete_at(d, grace)) {
        Some(at) if at <= now => true,
        Some(at) => {
            plan.next_delete = Some(plan.next_delete.map_or(at, |n: Timestamp| n.min(at)));
            false
        }
        None => false,
    };
    let mut delete = Vec::new();
    let mut terminating = Vec::new();
    let mut stuck = Vec::new();
    let mut normal = Vec::new();
    let mut held = Vec::new();
    let mut crit = Vec::new();
    let mut skipped = Vec::new();
    for pod in pods {
        if let Some(why) = skip_reason(pod) {
            skipped.push((PodRef::of(pod), why));
            continue;
        }
        if let Some(stops_at) = &pod.metadata.deletion_timestamp {
            if now > stops_at.0 + STUCK_TERMINATING {
                stuck.push(PodRef::of(pod));
                continue;
            }
            // Terminating: the kubelet stops it when its grace runs out, so it is waited
            // for, never evicted again; one whose grace runs past the deadline is deleted
            // again with the time left when its own deletion is due (a DELETE may shorten a
            // grace period).
            let grace = pod
                .metadata
                .deletion_grace_period_seconds
                .unwrap_or(DEFAULT_GRACE_SECONDS);
            let outlives = policy.deadline.is_some_and(|d| stops_at.0 > d);
            if outlives && due(grace) {
                delete.push(step(pod, grace));
            } else {
                terminating.push(PodRef::of(pod));
            }
            continue;
        }
        if due(grace_of(pod)) {
            delete.push(step(pod, grace_of(pod)));
            continue;
        }
        if policy.disruption == Disruption::Voluntary && do_not_disrupt(pod, now) {
            held.push(PodRef::of(pod));
            continue;
        }
        if critical(pod) {
            crit.push(pod);
        } else {
            normal.push(pod);
        }
    }
    // Critical pods wait while other pods are still to go (or going).
    let others_left = !normal.is_empty() || !held.is_empty() || !terminating.is_empty();
    plan.evict = normal.into_iter().map(|p| step(p, grace_of(p))).collect();
    if others_left {
        plan.later = crit.into_iter().map(PodRef::of).collect();
    } else {
        plan.evict
            .extend(crit.into_iter().map(|p| step(p, grace_of(p))));
    }
    plan.delete = delete;
    plan.held = held;
    plan.terminating = terminating;
    plan.stuck = stuck;
    plan.skipped = skipped;
    plan
}
