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
//!   left. From [`DELETE_BEFORE_DEADLINE`] before the deadline, whatever is still there is
//!   deleted (PDBs and do-not-disrupt no longer hold it), so it stops gracefully instead of
//!   dying with the machine.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::api::labels::{DISRUPTED_TAINT, DO_NOT_DISRUPT};
use crate::kube::PodRef;

/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;
/// Deleting this long before the deadline leaves a pod with the default grace period its
/// whole grace before the machine goes.
pub const DELETE_BEFORE_DEADLINE: Duration = Duration::from_secs(DEFAULT_GRACE_SECONDS as u64);
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
    pub skipped: Vec<(PodRef, Skip)>,
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

    /// When to look again, if not finished: soon, and never after deletion is due.
    pub fn recheck_at(&self, policy: &DrainPolicy, now: Timestamp) -> Option<Timestamp> {
        if self.finished() {
            return None;
        }
        let soon = now + DRAIN_RECHECK;
        Some(match policy.deadline.map(|d| d - DELETE_BEFORE_DEADLINE) {
            Some(delete_from) if delete_from > now => soon.min(delete_from),
            _ => soon,
        })
    }
}

const CRITICAL_PRIORITY_CLASSES: [&str; 2] = ["system-cluster-critical", "system-node-critical"];
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

fn skip_reason(pod: &Pod) -> Option<Skip> {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
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
    if meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true))
    {
        return Some(Skip::DaemonSet);
    }
    if tolerates_disruption(pod) {
        return Some(Skip::ToleratesDisruption);
    }
    None
}

/// A toleration matching `nodewright.io/disrupted=:NoSchedule`: same key (or an empty key
/// with `Exists`, which tolerates everything), `Exists` or an empty value, any or
/// NoSchedule effect.
fn tolerates_disruption(pod: &Pod) -> bool {
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_ref());
    tolerations.into_iter().flatten().any(|t| {
        let exists = t.operator.as_deref() == Some("Exists");
        let key_ok = match t.key.as_deref() {
            None | Some("") => exists,
            Some(k) => k == DISRUPTED_TAINT,
        };
        let value_ok = exists || t.value.as_deref().unwrap_or_default().is_empty();
        let effect_ok = matches!(t.effect.as_deref(), None | Some("") | Some("NoSchedule"));
        key_ok && value_ok && effect_ok
    })
}

fn do_not_disrupt(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DO_NOT_DISRUPT))
        .is_some_and(|v| v == "true")
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

/// The plan for the pods bound to one node, at `now`.
pub fn plan_drain(pods: &[Pod], policy: &DrainPolicy, now: Timestamp) -> DrainPlan {
    let mut plan = DrainPlan::default();
    let left = policy
        .deadline
        .map(|d| d.duration_since(now).as_secs().max(0));
    let forcing = policy
        .deadline
        .is_some_and(|d| now >= d - DELETE_BEFORE_DEADLINE);
    let step = |pod: &Pod| PodStep {
        pod: PodRef::of(pod),
        grace_seconds: left.map_or(grace_of(pod), |l| grace_of(pod).min(l)),
    };
    let mut normal = Vec::new();
    let mut crit = Vec::new();
    for pod in pods {
        if let Some(why) = skip_reason(pod) {
            plan.skipped.push((PodRef::of(pod), why));
            continue;
        }
        if let Some(stops_at) = &pod.metadata.deletion_timestamp {
            // Terminating: the kubelet stops it when its grace runs out, so it is waited
            // for, never evicted again. Near the deadline, one whose grace runs past it is
            // deleted again with the time left (a DELETE may shorten a grace period).
            let past_deadline = policy.deadline.is_some_and(|d| stops_at.0 > d);
            if forcing && past_deadline {
                plan.delete.push(step(pod));
            } else {
                plan.terminating.push(PodRef::of(pod));
            }
            continue;
        }
        if forcing {
            plan.delete.push(step(pod));
            continue;
        }
        if policy.disruption == Disruption::Voluntary && do_not_disrupt(pod) {
            plan.held.push(PodRef::of(pod));
            continue;
        }
        if critical(pod) {
            crit.push(pod);
        } else {
            normal.push(pod);
        }
    }
    // Critical pods wait while other pods are still to go (or going).
    let others_left = !normal.is_empty() || !plan.held.is_empty() || !plan.terminating.is_empty();
    plan.evict = normal.into_iter().map(step).collect();
    if others_left {
        plan.later = crit.into_iter().map(PodRef::of).collect();
    } else {
        plan.evict.extend(crit.into_iter().map(step));
    }
    plan
}
