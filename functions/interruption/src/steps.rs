//! The step executors: each applies one [`Action`] to one node and, when work remains,
//! queues the follow-up that continues it. Every step is safe to repeat: the taint,
//! eviction, deletion and termination are idempotent, and a replacement is launched once
//! per node (the node's `nodewright.io/replacement` annotation, and the claim's ClientToken
//! for a crash before the annotation is written).
//!
//! Order matters for crashes: the follow-up that continues a drain is queued before the
//! pods are touched, so an invocation that dies mid-drain is resumed by it.
//!
//! Past ~450 lines on purpose: one executor per action, kept together because they share the
//! follow-up and re-check helpers and their crash-ordering rules.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use nodewright::api::labels::{
    CAPACITY_TYPE, DISRUPTED_TAINT, INSTANCE_TYPE, NODEPOOL, SPOT, ZONE,
};
use nodewright::api::{Taint, TaintEffect};
use nodewright::aws::{FollowUpQueue, InstanceInventory, OwnedInstances};
use nodewright::catalog::CapacityType;
use nodewright::disruption::BudgetRule;
use nodewright::drain::{Disruption, DrainPolicy, execute, plan_drain, reschedulable};
use nodewright::interruption::{
    Action, Detail, FollowUp, Gate, Message, Reason, Step, pool_nodes, rebalance_gate,
};
use nodewright::kube::{
    ConfigSource, EventSink, EventType, NodeDisruption, NodeRemoval, NodeSource, ObjectKind,
    PodEviction, PodRef, Readiness, parse_provider_id, readiness,
};
use nodewright::provision::{Offering, Replacement};

use super::act::{ActError, Outcome, aws_err, kube_err};
use super::{AWAIT_REPLACEMENT, REPLACEMENT_RECHECK, State};

/// On the node: the replacement instances launched for it, so a second event does not
/// launch again (and another node's replacement does not count them as free room).
pub use nodewright::api::labels::REPLACEMENT_ANNOTATION;
/// Bounds a follow-up chain that never ends (a drain held forever without a deadline):
/// at one look every five seconds, about a day.
const MAX_ROUNDS: u32 = 17_280;

/// The node an action applies to, as it was just read.
pub(crate) struct Target {
    pub node: String,
    pub instance_id: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The NodePool's `terminationGracePeriod`, when known.
    pub termination_grace: Option<Duration>,
    /// The NodePool's disruption budgets (or why they cannot be read), when the pool was
    /// read: a rebalance drain waits for them.
    pub budgets: Option<Result<Vec<BudgetRule>, String>>,
}

/// Where a step came from: the chain it continues (or starts).
struct Chain<'a> {
    message: &'a Message,
    target: &'a Target,
}

impl Chain<'_> {
    fn follow_up(&self, step: Step, reason: Reason, deadline: Option<Timestamp>) -> FollowUp {
        match &self.message.detail {
            Detail::FollowUp(f) => FollowUp {
                reason,
                deadline,
                ..f.next(step)
            },
            _ => FollowUp {
                instance_id: self.target.instance_id.clone(),
                node: self.target.node.clone(),
                step,
                reason,
                deadline,
                origin_event: self.message.event_id.clone(),
                round: 1,
            },
        }
    }
}

pub(crate) async fn run<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    message: &Message,
    action: Action,
    target: &Target,
    now: Timestamp,
) -> Result<Outcome, ActError>
where
    K: NodeDisruption + ConfigSource,
    E: OwnedInstances,
    R: Replacement,
    Q: FollowUpQueue,
{
    let chain = Chain { message, target };
    if let Detail::FollowUp(f) = &message.detail
        && f.round > MAX_ROUNDS
    {
        tracing::error!(
            node = target.node,
            round = f.round,
            "follow-up chain too long; stopped"
        );
        return Ok(Outcome::Ignored("follow-up chain too long".into()));
    }
    match action {
        Action::None { why, .. } => Ok(Outcome::Ignored(why)),
        Action::Cordon { reason } => {
            state
                .kube
                .cordon(&target.node)
                .await
                .map_err(kube_err("cordoning the node"))?;
            node_event(
                state,
                target,
                reason,
                "cordoned; no new pods will be scheduled here",
            )
            .await;
            Ok(Outcome::Cordoned)
        }
        Action::ReplaceAndDrain { reason, deadline } => {
            replace_and_drain(state, &chain, reason, deadline, now).await
        }
        Action::Drain { reason, deadline } => {
            // The first step queues this follow-up before it launches the replacement, so
            // an invocation that died in between leaves a tainted node with no replacement
            // recorded: launch it now, before its pods are evicted.
            if reason.disruption() == Disruption::Involuntary
                && !target.annotations.contains_key(REPLACEMENT_ANNOTATION)
                && let Err(e) = replace(state, target, reason, now).await
            {
                tracing::warn!(
                    node = target.node,
                    error = nodewright::error_chain(&e),
                    "replacement launch failed; draining anyway"
                );
            }
            drain(state, &chain, reason, deadline, true, now).await
        }
        Action::AwaitReplacement {
            reason,
            instances,
            until,
        } => await_replacement(state, &chain, reason, &instances, until, now).await,
        Action::DeleteNode { reason } => {
            let deadline = match &message.detail {
                Detail::FollowUp(f) => f.deadline,
                _ => None,
            };
            match deadline {
                // The instance is still running its last seconds: look again then.
                Some(d) if d > now => {
                    let f = chain.follow_up(Step::DeleteNode, reason, Some(d));
                    send(state, &f, d, now).await?;
                    Ok(Outcome::Waiting("the instance's deadline"))
                }
                _ => remove_node(state, target, reason).await,
            }
        }
    }
}

async fn node_event<K: EventSink, E, R, Q>(
    state: &State<K, E, R, Q>,
    target: &Target,
    reason: Reason,
    note: &str,
) {
    state
        .kube
        .object_event(
            ObjectKind::Node,
            &target.node,
            reason.event_reason(),
            &format!("instance {}: {note}", target.instance_id),
            EventType::Warning,
        )
        .await;
}

fn deadline_note(deadline: Option<Timestamp>) -> String {
    deadline.map_or_else(|| "no deadline".into(), |d| format!("deadline {d}"))
}

async fn send<K, E, R, Q: FollowUpQueue>(
    state: &State<K, E, R, Q>,
    follow_up: &FollowUp,
    at: Timestamp,
    now: Timestamp,
) -> Result<(), ActError> {
    let delay = if at > now {
        at.duration_since(now).unsigned_abs()
    } else {
        Duration::ZERO
    };
    let origin = &state.settings.origin;
    let body = follow_up.envelope(&origin.account, &origin.region, now);
    state
        .queue
        .send_delayed(&body.to_string(), delay)
        .await
        .map_err(aws_err("queueing the follow-up"))?;
    tracing::debug!(
        node = follow_up.node,
        step = follow_up.step.as_str(),
        ?delay,
        "follow-up queued"
    );
    Ok(())
}

fn disrupted_taint() -> Taint {
    Taint {
        key: DISRUPTED_TAINT.into(),
        value: None,
        effect: TaintEffect::NoSchedule,
    }
}

/// The offering an interruption reclaims: what the next plans should avoid for a while.
fn reclaimed(target: &Target, reason: Reason) -> Option<Offering> {
    if !matches!(
        reason,
        Reason::SpotInterrupted | Reason::CapacityReservationInterrupted
    ) {
        return None;
    }
    Some(Offering {
        instance_type: target.labels.get(INSTANCE_TYPE)?.clone(),
        zone: target.labels.get(ZONE)?.clone(),
        // A spot warning is about spot capacity whatever the node's label says; a
        // capacity reservation's reclaim is about the capacity type the node ran as.
        capacity_type: match (reason, target.labels.get(CAPACITY_TYPE).map(String::as_str)) {
            (Reason::SpotInterrupted, _) | (_, Some(SPOT)) => CapacityType::Spot,
            _ => CapacityType::OnDemand,
        },
    })
}

async fn replace_and_drain<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    chain: &Chain<'_>,
    reason: Reason,
    deadline: Option<Timestamp>,
    now: Timestamp,
) -> Result<Outcome, ActError>
where
    K: NodeDisruption + ConfigSource,
    E: OwnedInstances,
    R: Replacement,
    Q: FollowUpQueue,
{
    let target = chain.target;
    let involuntary = reason.disruption() == Disruption::Involuntary;
    // A voluntary drain is tainted when it begins, not now: the taint is what counts a
    // node as disrupted against its NodePool's budget, and the drain waits for that
    // budget once the replacement is Ready.
    let note = if involuntary {
        state
            .kube
            .taint(&target.node, &disrupted_taint())
            .await
            .map_err(kube_err("tainting the node"))?;
        format!(
            "tainted {DISRUPTED_TAINT}; launching replacement capacity and draining ({})",
            deadline_note(deadline)
        )
    } else {
        "launching replacement capacity; draining once it is Ready, within the NodePool's disruption budget".into()
    };
    node_event(state, target, reason, &note).await;
    if involuntary {
        // Queued before anything else can fail: whatever happens to this invocation, the
        // drain goes on.
        let f = chain.follow_up(Step::Drain, reason, deadline);
        send(state, &f, now + nodewright::drain::DRAIN_RECHECK, now).await?;
    }
    let launched = match target.annotations.get(REPLACEMENT_ANNOTATION) {
        Some(done) => done
            .split(',')
            .filter(|s| !s.is_empty() && *s != "none")
            .map(str::to_string)
            .collect(),
        None => match replace(state, target, reason, now).await {
            Ok(launched) => launched,
            // Time is short: the pods still go, and the provisioner launches for them
            // once they are pending.
            Err(e) if involuntary => {
                tracing::warn!(
                    node = target.node,
                    error = nodewright::error_chain(&e),
                    "replacement launch failed; draining anyway"
                );
                node_event(
                    state,
                    target,
                    reason,
                    &format!("replacement launch failed: {e}"),
                )
                .await;
                Vec::new()
            }
            Err(e) => return Err(e),
        },
    };
    if involuntary {
        drain(state, chain, reason, deadline, false, now).await?;
    } else {
        let until = now + AWAIT_REPLACEMENT;
        let step = Step::AwaitReplacement {
            instances: launched.clone(),
            until,
        };
        let f = chain.follow_up(step, reason, deadline);
        send(state, &f, now + REPLACEMENT_RECHECK, now).await?;
    }
    Ok(Outcome::Replacing { launched })
}

/// Launches capacity for the node's reschedulable pods and records it on the node.
async fn replace<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    target: &Target,
    reason: Reason,
    now: Timestamp,
) -> Result<Vec<String>, ActError>
where
    K: PodEviction + NodeRemoval,
    R: Replacement,
{
    let pods = state
        .kube
        .pods_on_node(&target.node)
        .await
        .map_err(kube_err("listing the node's pods"))?;
    let movable: Vec<_> = reschedulable(&pods)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    let offering = reclaimed(target, reason);
    let system_now = SystemTime::UNIX_EPOCH
        + Duration::from_nanos(u64::try_from(now.as_nanosecond()).unwrap_or_default());
    let report = state
        .replacer
        .replace(&target.node, &movable, offering.as_ref(), system_now)
        .await
        .map_err(|source| ActError::Replace {
            node: target.node.clone(),
            source,
        })?;
    tracing::info!(node = target.node, ?report, "replacement");
    if report.throttled || report.failed_claims > 0 {
        let why = report
            .unschedulable
            .first()
            .map(|(pod, why)| format!("{pod}: {why}"))
            .unwrap_or_else(|| "throttled".into());
        tracing::warn!(
            node = target.node,
            why,
            "part of the replacement could not be launched"
        );
    }
    let value = if report.launched_instances.is_empty() {
        "none".to_string()
    } else {
        report.launched_instances.join(",")
    };
    // Only a complete replacement is recorded: a partial one is asked again by a retry.
    if report.failed_claims == 0 {
        state
            .kube
            .annotate_node(&target.node, REPLACEMENT_ANNOTATION, &value)
            .await
            .map_err(kube_err("recording the replacement on the node"))?;
    }
    Ok(report.launched_instances)
}

/// One drain pass: plan, queue what comes next (when `schedule`), evict or delete.
async fn drain<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    chain: &Chain<'_>,
    reason: Reason,
    deadline: Option<Timestamp>,
    schedule: bool,
    now: Timestamp,
) -> Result<Outcome, ActError>
where
    K: NodeDisruption,
    E: OwnedInstances,
    Q: FollowUpQueue,
{
    let target = chain.target;
    // Again, in case an earlier invocation died before its taint landed.
    state
        .kube
        .taint(&target.node, &disrupted_taint())
        .await
        .map_err(kube_err("tainting the node"))?;
    let pods = state
        .kube
        .pods_on_node(&target.node)
        .await
        .map_err(kube_err("listing the node's pods"))?;
    let policy = DrainPolicy {
        disruption: reason.disruption(),
        deadline,
    };
    let plan = plan_drain(&pods, &policy, now);
    if plan.finished() {
        if !schedule {
            return Ok(Outcome::Draining {
                evicted: 0,
                blocked: 0,
                deleted: 0,
            });
        }
        return match deadline {
            // An interrupted instance goes by itself at its deadline; its Node is deleted then.
            Some(d)
                if d > now
                    && policy.disruption == Disruption::Involuntary
                    && reason != Reason::ScheduledMaintenance =>
            {
                let f = chain.follow_up(Step::DeleteNode, reason, Some(d));
                send(state, &f, d, now).await?;
                Ok(Outcome::Waiting("the instance's deadline"))
            }
            // Drained and replaced: nothing is gained by keeping the instance.
            _ => remove_node(state, target, reason).await,
        };
    }
    if schedule && let Some(at) = plan.recheck_at(now, nodewright::drain::DRAIN_RECHECK) {
        let f = chain.follow_up(Step::Drain, reason, deadline);
        send(state, &f, at, now).await?;
    }
    let note = format!("node {} ({})", target.node, deadline_note(deadline));
    let progress = execute(&state.kube, &plan, reason.event_reason(), &note).await;
    for (pod, error) in &progress.failed {
        tracing::warn!(
            node = target.node,
            pod,
            error,
            "evicting or deleting failed; the follow-up retries"
        );
    }
    if !progress.blocked.is_empty() {
        tracing::info!(node = target.node, blocked = ?progress.blocked, "a PodDisruptionBudget holds these pods; the follow-up retries");
    }
    Ok(Outcome::Draining {
        evicted: progress.evicted.len(),
        blocked: progress.blocked.len(),
        deleted: progress.deleted.len(),
    })
}

async fn await_replacement<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    chain: &Chain<'_>,
    reason: Reason,
    instances: &[String],
    until: Timestamp,
    now: Timestamp,
) -> Result<Outcome, ActError>
where
    K: NodeDisruption,
    E: OwnedInstances,
    Q: FollowUpQueue,
{
    let nodes = state
        .kube
        .nodes()
        .await
        .map_err(kube_err("listing nodes"))?;
    let ready = instances.iter().all(|id| {
        nodes.iter().any(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(parse_provider_id)
                .is_some_and(|p| &p.instance_id == id)
                && readiness(n) == Readiness::Ready
        })
    });
    if !ready && now < until {
        let step = Step::AwaitReplacement {
            instances: instances.to_vec(),
            until,
        };
        let f = chain.follow_up(step, reason, None);
        send(state, &f, now + REPLACEMENT_RECHECK, now).await?;
        return Ok(Outcome::Waiting("the replacement to be Ready"));
    }
    if !ready {
        tracing::warn!(
            node = chain.target.node,
            ?instances,
            "replacement not Ready in time; draining anyway"
        );
    }
    if reason.disruption() == Disruption::Voluntary
        && let Some(budgets) = &chain.target.budgets
        && let Some(pool) = chain.target.labels.get(NODEPOOL)
    {
        let counted = pool_nodes(&nodes, pool, &chain.target.node);
        let budgets = budgets.as_deref().map_err(String::as_str);
        if let Gate::Hold(why) = rebalance_gate(pool, budgets, counted, now) {
            let step = Step::AwaitReplacement {
                instances: instances.to_vec(),
                until,
            };
            let f = chain.follow_up(step, reason, None);
            send(state, &f, now + REPLACEMENT_RECHECK, now).await?;
            tracing::info!(
                node = chain.target.node,
                why,
                "rebalance drain held by the disruption budget"
            );
            node_event(state, chain.target, reason, &format!("drain waits: {why}")).await;
            return Ok(Outcome::Waiting("the NodePool's disruption budget"));
        }
    }
    // A voluntary drain's hard limit is the NodePool's terminationGracePeriod.
    let deadline = chain.target.termination_grace.map(|g| now + g);
    node_event(
        state,
        chain.target,
        reason,
        &format!("replacement ready; draining ({})", deadline_note(deadline)),
    )
    .await;
    drain(state, chain, reason, deadline, true, now).await
}

/// Terminates the instance (if it still carries this cluster's tag), deletes what is
/// left on the node, then the Node.
async fn remove_node<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    target: &Target,
    reason: Reason,
) -> Result<Outcome, ActError>
where
    K: NodeSource + PodEviction + NodeRemoval + EventSink,
    E: InstanceInventory + Sync,
{
    let outcome = state
        .ec2
        .terminate(std::slice::from_ref(&target.instance_id))
        .await
        .map_err(aws_err("terminating the instance"))?;
    if !outcome.terminated.is_empty() {
        nodewright::telemetry::node_terminated(reason.event_reason());
    }
    if !outcome.refused.is_empty() {
        tracing::warn!(
            instance = target.instance_id,
            "not terminated: it lost this cluster's ownership tag"
        );
    }
    let pods = state
        .kube
        .pods_on_node(&target.node)
        .await
        .map_err(kube_err("listing the node's pods"))?;
    node_event(state, target, reason, "instance gone; deleting the node").await;
    // Pods bound to a machine that is gone are not running: delete them at once so their
    // controllers replace them now, not after the pod garbage collector's delay.
    for pod in &pods {
        let r = PodRef::of(pod);
        state
            .kube
            .pod_event(
                &r,
                reason.event_reason(),
                &format!("node {} deleted", target.node),
                EventType::Warning,
            )
            .await;
        state
            .kube
            .delete_pod(&r, 0)
            .await
            .map_err(kube_err("deleting a pod of the removed node"))?;
    }
    let existed = state
        .kube
        .delete_node(&target.node)
        .await
        .map_err(kube_err("deleting the node"))?;
    Ok(Outcome::NodeDeleted { existed })
}

#[cfg(test)]
mod reclaimed_tests {
    use super::*;

    fn node(capacity_type: &str) -> Target {
        Target {
            node: "n".into(),
            instance_id: "i-1".into(),
            labels: [
                (INSTANCE_TYPE, "c5.xlarge"),
                (ZONE, "us-east-1a"),
                (CAPACITY_TYPE, capacity_type),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            annotations: BTreeMap::new(),
            termination_grace: None,
            budgets: None,
        }
    }

    #[test]
    fn the_offering_excluded_is_the_capacity_the_event_says_was_reclaimed() {
        let cases = [
            (Reason::SpotInterrupted, "spot", Some(CapacityType::Spot)),
            // A spot warning names spot capacity even when the label disagrees: excluding
            // on-demand there would leave the pool nothing to replace with.
            (
                Reason::SpotInterrupted,
                "on-demand",
                Some(CapacityType::Spot),
            ),
            (
                Reason::CapacityReservationInterrupted,
                "on-demand",
                Some(CapacityType::OnDemand),
            ),
            (Reason::RebalanceRecommendation, "spot", None),
            (Reason::InstanceStopping, "spot", None),
        ];
        for (reason, label, want) in cases {
            let got = reclaimed(&node(label), reason);
            assert_eq!(
                got.as_ref().map(|o| o.capacity_type),
                want,
                "{reason:?} on a {label} node"
            );
            if let Some(o) = got {
                assert_eq!(
                    (o.instance_type.as_str(), o.zone.as_str()),
                    ("c5.xlarge", "us-east-1a")
                );
            }
        }
    }
}
