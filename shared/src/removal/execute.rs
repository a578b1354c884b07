//! The removal's executor, the one both functions call: read the node as it is now (its
//! record, taint, pods, instance and the replacement's nodes), ask [`next`], apply it. It
//! decides nothing itself. A replacement is not launched here: it is handed back
//! ([`Advanced::ask`]) so a batch of removals asks the provisioning core once, and its
//! answer is written with [`record_replacement`].

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::cause::Cause;
use super::decide::{Act, Budget, Instance, Next, Situation, merge, next};
use super::record::{
    Avoid, BACKOFF_ANNOTATION, Backoff, REMOVAL_ANNOTATION, Record, RecordError, Replacement,
};
use crate::api::labels::{DISRUPTED_TAINT, KARPENTER_DISRUPTED_TAINT};
use crate::api::{Taint, TaintEffect};
use crate::aws::{AwsError, InstanceState, OwnedInstance, OwnedInstances, is_owned};
use crate::drain::{DrainProgress, execute, reschedulable};
use crate::kube::{
    EventType, KubeError, Marks, NodeDisruption, ObjectKind, PodRef, Readiness, readiness,
};
use crate::provision::ReplaceReport;

#[derive(Debug, thiserror::Error)]
pub enum RemovalError {
    #[error("{what} (Kubernetes)")]
    Kube {
        what: &'static str,
        #[source]
        source: KubeError,
    },
    #[error("{what} (AWS)")]
    Aws {
        what: &'static str,
        #[source]
        source: AwsError,
    },
    #[error(transparent)]
    Record(#[from] RecordError),
}

fn kube_err(what: &'static str) -> impl FnOnce(KubeError) -> RemovalError {
    move |source| RemovalError::Kube { what, source }
}

fn aws_err(what: &'static str) -> impl FnOnce(AwsError) -> RemovalError {
    move |source| RemovalError::Aws { what, source }
}

impl RemovalError {
    /// Worth trying again in a moment (the API server or EC2 said so, or did not answer).
    pub fn is_transient(&self) -> bool {
        match self {
            RemovalError::Kube { source, .. } => source.is_transient(),
            RemovalError::Aws { source, .. } => source.is_transient(),
            RemovalError::Record(_) => false,
        }
    }
}

/// The disruption taints, nodewright's and Karpenter's: a node being taken away gets no
/// new pods.
pub fn disrupted_taints() -> [Taint; 2] {
    [DISRUPTED_TAINT, KARPENTER_DISRUPTED_TAINT].map(|key| Taint {
        key: key.into(),
        value: None,
        effect: TaintEffect::NoSchedule,
    })
}

/// What the caller knows of the node's NodePool and why it acts.
#[derive(Debug, Clone)]
pub struct Context {
    /// The NodePool's `terminationGracePeriod`.
    pub grace: Option<Duration>,
    /// For a removal not planned within its pool's budget (a rebalance): whether the budget
    /// lets its drain begin now.
    pub budget: Budget,
}

/// What a removal acts through: the cluster, EC2, and the cluster's name (the ownership
/// tag's value).
pub struct Ports<'a, K, E> {
    pub kube: &'a K,
    pub ec2: &'a E,
    pub cluster: &'a str,
}

impl<K, E> Clone for Ports<'_, K, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, E> Copy for Ports<'_, K, E> {}

/// Capacity to ask for, for the pods still on a node that need a place.
#[derive(Debug, Clone)]
pub struct Ask {
    pub node: String,
    pub pods: Vec<Pod>,
    pub avoid: Option<Avoid>,
    pub cause: Cause,
}

/// What advancing one node did.
#[derive(Debug, Clone, Default)]
pub struct Advanced {
    pub state: &'static str,
    pub note: Option<String>,
    /// When to look at the node again, if the removal goes on.
    pub recheck: Option<Timestamp>,
    /// Capacity to ask for; the caller asks and calls [`record_replacement`].
    pub ask: Option<Ask>,
    pub drained: DrainProgress,
    /// The instance was terminated and the Node deleted (or the Node deleted, the
    /// instance being gone).
    pub removed: bool,
    pub given_up: Option<String>,
    /// The node was taken (record and taint written) by this step.
    pub taken: bool,
}

pub use crate::kube::instance_of;

fn name_of(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

fn annotations_of(node: &Node) -> BTreeMap<String, String> {
    node.metadata.annotations.clone().unwrap_or_default()
}

fn tainted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == DISRUPTED_TAINT))
}

fn gone(i: &OwnedInstance) -> bool {
    !matches!(i.state, InstanceState::Pending | InstanceState::Running)
}

/// The recorded replacement instances that are Ready nodes now.
fn ready_replacements(record: Option<&Record>, nodes: &[Node]) -> Vec<String> {
    let Some(record) = record else {
        return Vec::new();
    };
    record
        .launched()
        .iter()
        .filter(|id| {
            nodes.iter().any(|n| {
                instance_of(n).as_deref() == Some(id.as_str()) && readiness(n) == Readiness::Ready
            })
        })
        .cloned()
        .collect()
}

/// The removal record the node carries, if it can be read.
pub fn record_of(node: &Node) -> Result<Option<Record>, RecordError> {
    Record::read(&name_of(node), &annotations_of(node))
}

/// Reads `node` (as listed just now, with `nodes` for the replacement's readiness),
/// decides what comes next for its removal (`wanted`: one to begin, merged with any under
/// way) and applies it. `instance`: the node's instance as EC2 describes it now (`None`:
/// EC2 does not know it); an instance that is not this cluster's is never acted on.
pub async fn advance<K, E>(
    ports: Ports<'_, K, E>,
    node: &Node,
    nodes: &[Node],
    wanted: Option<Record>,
    ctx: &Context,
    now: Timestamp,
) -> Result<Advanced, RemovalError>
where
    K: NodeDisruption,
    E: OwnedInstances,
{
    let Ports { kube, ec2, cluster } = ports;
    let name = name_of(node);
    let existing = record_of(node)?;
    let record = merge(existing.clone(), wanted);
    let cause = record.as_ref().map(|r| r.cause);
    let mut written = existing.is_some() && existing == record;
    let mut is_tainted = tainted(node);
    let instance_id = instance_of(node);
    let mut ids: Vec<String> = instance_id.iter().cloned().collect();
    ids.extend(record.iter().flat_map(|r| r.launched().iter().cloned()));
    let described = if ids.is_empty() {
        Vec::new()
    } else {
        ec2.describe_ids(&ids)
            .await
            .map_err(aws_err("describing the node's instance"))?
    };
    let own = instance_id
        .as_ref()
        .and_then(|id| described.iter().find(|i| &i.id == id));
    if own.is_some_and(|i| !is_owned(i, cluster)) {
        return Ok(Advanced {
            state: "not this cluster's instance",
            ..Advanced::default()
        });
    }
    let instance = if own.is_some_and(gone) {
        Instance::Gone
    } else {
        Instance::Running
    };
    let lost: Vec<String> = described
        .iter()
        .filter(|i| Some(&i.id) != instance_id.as_ref() && gone(i))
        .map(|i| i.id.clone())
        .collect();
    let ready = ready_replacements(record.as_ref(), nodes);
    let mut out = Advanced::default();
    let mut record = record;
    let mut last_taken: Option<Record> = None;
    // At most twice: once taken, the node's pods are read again before anything is done
    // to them (a pod may have landed before the taint did).
    for _ in 0..2 {
        let pods = kube
            .pods_on_node(&name)
            .await
            .map_err(kube_err("listing the node's pods"))?;
        let situation = Situation {
            tainted: is_tainted,
            record: record.clone(),
            written,
            instance,
            pods: &pods,
            ready: &ready,
            lost: &lost,
            grace: ctx.grace,
            budget: ctx.budget.clone(),
        };
        let decided = next(&situation, now);
        out.state = decided.state;
        out.note = decided.note.clone();
        out.recheck = decided.recheck;
        let first_take = decided.acts.first() == Some(&Act::Take) && !written;
        let again = apply(
            kube,
            ec2,
            &name,
            instance_id.as_deref(),
            &pods,
            &decided,
            cause,
            first_take,
            now,
            &mut out,
        )
        .await?;
        record = decided.record.clone();
        if again {
            last_taken = decided.record.clone();
            written = true;
            is_tainted = true;
            if first_take {
                continue;
            }
        }
        break;
    }
    if out.state == "held by the disruption budget" {
        let note = format!(
            "removal waits: {}",
            out.note
                .as_deref()
                .unwrap_or("the NodePool's disruption budget")
        );
        let reason = cause.map_or("Removal", |c| c.event_reason());
        event(kube, &name, reason, &note, EventType::Normal).await;
    }
    // What moved and when the next look comes go on the record; a write that would change
    // nothing is skipped.
    if let Some(r) = record.filter(|_| !out.removed && out.given_up.is_none()) {
        let moved = out.drained.evicted.len() + out.drained.deleted.len() > 0;
        let r = Record {
            next_look: out.recheck,
            ..if moved { r.moved_on(now) } else { r }
        };
        let on_node = if out.taken { last_taken } else { existing };
        if on_node.as_ref() != Some(&r) {
            write(kube, &name, &r).await?;
        }
    }
    Ok(out)
}

async fn write<K: NodeDisruption>(kube: &K, name: &str, r: &Record) -> Result<(), RemovalError> {
    let marks = Marks {
        tainted: true,
        draining: r.drain_started.is_some(),
    };
    kube.mark_removal(
        name,
        REMOVAL_ANNOTATION,
        Some(&r.to_annotation()),
        &disrupted_taints(),
        marks,
    )
    .await
    .map_err(kube_err("writing the removal record"))
}

/// Takes the taint, the record and the load-balancer label off in one write.
async fn clear<K: NodeDisruption>(kube: &K, name: &str) -> Result<(), KubeError> {
    kube.mark_removal(
        name,
        REMOVAL_ANNOTATION,
        None,
        &disrupted_taints(),
        Marks::NONE,
    )
    .await
}

async fn event<K: NodeDisruption>(kube: &K, node: &str, reason: &str, note: &str, t: EventType) {
    kube.object_event(ObjectKind::Node, node, reason, note, t)
        .await;
}

/// Applies `decided`'s acts in order; `true` when the node was (re)taken, so its pods are
/// worth reading again before anything else is done to them.
#[allow(clippy::too_many_arguments)]
async fn apply<K, E>(
    kube: &K,
    ec2: &E,
    name: &str,
    instance_id: Option<&str>,
    pods: &[Pod],
    decided: &Next,
    cause: Option<Cause>,
    first_take: bool,
    now: Timestamp,
    out: &mut Advanced,
) -> Result<bool, RemovalError>
where
    K: NodeDisruption,
    E: OwnedInstances,
{
    let reason = cause.map_or("Removal", |c| c.event_reason());
    for act in &decided.acts {
        match act {
            Act::Take => {
                let Some(r) = &decided.record else { continue };
                write(kube, name, r).await?;
                if first_take {
                    out.taken = true;
                    let deadline = r
                        .deadline
                        .map_or_else(|| "no deadline".to_string(), |d| format!("deadline {d}"));
                    let note = format!(
                        "tainted {DISRUPTED_TAINT}: {} ({deadline})",
                        r.cause.as_str()
                    );
                    event(kube, name, reason, &note, EventType::Warning).await;
                    return Ok(true);
                }
            }
            Act::Untaint => {
                clear(kube, name)
                    .await
                    .map_err(kube_err("removing a stale disruption taint"))?;
                let note =
                    format!("{DISRUPTED_TAINT} removed: no removal of this node is under way");
                event(kube, name, "StaleTaintRemoved", &note, EventType::Normal).await;
                crate::telemetry::removal_outcome("stale-taint");
            }
            Act::Drain(plan) => {
                let note = format!("node {name} is being removed ({})", decided.state);
                out.drained = execute(kube, plan, reason, &note).await;
            }
            Act::Replace => {
                let moving: Vec<Pod> = reschedulable(pods).cloned().collect();
                if let (Some(r), false) = (&decided.record, moving.is_empty()) {
                    out.ask = Some(Ask {
                        node: name.to_string(),
                        pods: moving,
                        avoid: r.avoid.clone(),
                        cause: r.cause,
                    });
                }
            }
            Act::DeleteNode => {
                if let Some(id) = instance_id {
                    let outcome = ec2
                        .terminate(&[id.to_string()])
                        .await
                        .map_err(aws_err("terminating what is left of the instance"))?;
                    if !outcome.terminated.is_empty() {
                        crate::telemetry::node_terminated(reason);
                    }
                }
                delete_node(kube, name, instance_id.is_some(), pods, reason).await?;
                out.removed = true;
                crate::telemetry::removal_outcome("instance-gone");
            }
            Act::Terminate => {
                let mut instance_gone = false;
                if let Some(id) = instance_id {
                    let outcome = ec2
                        .terminate(&[id.to_string()])
                        .await
                        .map_err(aws_err("terminating the instance"))?;
                    if !outcome.refused.is_empty() {
                        let note = format!(
                            "instance {id} does not carry this cluster's ownership tag; not terminated"
                        );
                        event(kube, name, "DisruptionRefused", &note, EventType::Warning).await;
                        return Ok(false);
                    }
                    if !outcome.terminated.is_empty() {
                        crate::telemetry::node_terminated(reason);
                    }
                    instance_gone = !outcome.terminated.is_empty() || !outcome.gone.is_empty();
                }
                kube.delete_node(name, instance_gone)
                    .await
                    .map_err(kube_err("deleting the node"))?;
                out.removed = true;
                crate::telemetry::removal_outcome("removed");
            }
            Act::Restore(why) => {
                give_up(kube, name, cause, why, now).await?;
                out.given_up = Some(why.clone());
            }
        }
    }
    Ok(false)
}

/// Pods bound to a machine that is gone are not running: deleted at once so their
/// controllers replace them now, not after the pod garbage collector's delay.
async fn delete_node<K: NodeDisruption>(
    kube: &K,
    name: &str,
    instance_gone: bool,
    pods: &[Pod],
    reason: &str,
) -> Result<(), RemovalError> {
    event(
        kube,
        name,
        reason,
        "instance gone; deleting the node",
        EventType::Warning,
    )
    .await;
    for pod in pods {
        let r = PodRef::of(pod);
        kube.pod_event(
            &r,
            reason,
            &format!("node {name} deleted"),
            EventType::Warning,
        )
        .await;
        kube.delete_pod(&r, 0)
            .await
            .map_err(kube_err("deleting a pod of the removed node"))?;
    }
    kube.delete_node(name, instance_gone)
        .await
        .map_err(kube_err("deleting the node"))?;
    Ok(())
}

/// Untaints the node and clears its record in one write, then backs it off.
async fn give_up<K: NodeDisruption>(
    kube: &K,
    name: &str,
    cause: Option<Cause>,
    why: &str,
    now: Timestamp,
) -> Result<(), RemovalError> {
    clear(kube, name)
        .await
        .map_err(kube_err("giving the removal up"))?;
    if let Some(cause) = cause {
        let nodes = kube.nodes().await.map_err(kube_err("listing nodes"))?;
        let previous = nodes
            .iter()
            .find(|n| name_of(n) == name)
            .and_then(|n| Backoff::read(&annotations_of(n)));
        let backoff = Backoff::after(cause, why.to_string(), previous.as_ref(), now);
        kube.annotate_node(name, BACKOFF_ANNOTATION, &backoff.to_annotation())
            .await
            .map_err(kube_err("backing the node off"))?;
        let note = format!(
            "removal ({}) given up: {why}; not tried again before {}",
            cause.as_str(),
            backoff.until
        );
        event(kube, name, "RemovalGivenUp", &note, EventType::Warning).await;
    }
    crate::telemetry::removal_outcome("given-up");
    Ok(())
}

/// Writes what the provisioning core answered for `ask` on its node's record.
pub async fn record_replacement<K>(
    kube: &K,
    ask: &Ask,
    answer: Result<&ReplaceReport, String>,
    now: Timestamp,
) -> Result<Replacement, RemovalError>
where
    K: NodeDisruption,
{
    let replacement = replacement_of(ask.cause, answer, now);
    let nodes = kube.nodes().await.map_err(kube_err("listing nodes"))?;
    let Some(node) = nodes.iter().find(|n| name_of(n) == ask.node) else {
        return Ok(replacement);
    };
    let Some(mut r) = record_of(node)? else {
        return Ok(replacement);
    };
    r.replacement = replacement.clone();
    if matches!(replacement, Replacement::Launched { .. }) {
        r.progress = now;
    }
    write(kube, &ask.node, &r).await?;
    if let Replacement::Launched { instances, .. } = &replacement {
        let note = format!("replacement {} launched", instances.join(", "));
        event(
            kube,
            &ask.node,
            "ReplacementLaunched",
            &note,
            EventType::Normal,
        )
        .await;
    }
    Ok(replacement)
}

/// The record of what a replacement ask got: for a voluntary removal anything short of a
/// place for every pod is a failure (the removal is then given up); an involuntary one
/// keeps what was launched and never asks again (the provisioner takes the rest, pending).
pub fn replacement_of(
    cause: Cause,
    answer: Result<&ReplaceReport, String>,
    now: Timestamp,
) -> Replacement {
    let report = match answer {
        Ok(r) => r,
        Err(why) if cause.voluntary() => return Replacement::Failed { why, at: now },
        Err(_) => return Replacement::NotNeeded,
    };
    let short = report.failed_claims > 0 || !report.unschedulable.is_empty();
    if short && cause.voluntary() {
        let why = report
            .unschedulable
            .first()
            .map(|(pod, why)| format!("pod {pod}: {why}"))
            .unwrap_or_else(|| format!("{} launch(es) failed", report.failed_claims));
        return Replacement::Failed { why, at: now };
    }
    // Pods placed on capacity still starting wait for it as for a launch.
    let instances: Vec<String> = report
        .launched_instances
        .iter()
        .chain(&report.waiting_on)
        .cloned()
        .collect();
    if instances.is_empty() {
        return Replacement::NotNeeded;
    }
    Replacement::Launched { instances, at: now }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Timestamp {
        Timestamp::from_second(1_000_000).unwrap_or_default()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_replacement_is_what_was_launched_and_what_the_pods_wait_for_unless_it_fell_short() {
        let report = |launched: &[&str], waiting: &[&str], failed: usize| ReplaceReport {
            launched_instances: ids(launched),
            waiting_on: ids(waiting),
            failed_claims: failed,
            ..Default::default()
        };
        let launched = |v: &[&str]| Replacement::Launched {
            instances: ids(v),
            at: at(),
        };
        let cases = [
            (
                "launched",
                Cause::Expired,
                report(&["i-1"], &[], 0),
                launched(&["i-1"]),
            ),
            (
                "launched and starting",
                Cause::Drifted,
                report(&["i-1"], &["i-0"], 0),
                launched(&["i-1", "i-0"]),
            ),
            (
                "only starting",
                Cause::Underutilized,
                report(&[], &["i-0"], 0),
                launched(&["i-0"]),
            ),
            (
                "room now",
                Cause::Expired,
                report(&[], &[], 0),
                Replacement::NotNeeded,
            ),
            (
                "short, voluntary",
                Cause::Expired,
                report(&["i-1"], &[], 1),
                Replacement::Failed {
                    why: "1 launch(es) failed".into(),
                    at: at(),
                },
            ),
            (
                "short, involuntary",
                Cause::SpotInterrupted,
                report(&["i-1"], &["i-0"], 1),
                launched(&["i-1", "i-0"]),
            ),
        ];
        for (case, cause, report, want) in cases {
            assert_eq!(replacement_of(cause, Ok(&report), at()), want, "{case}");
        }
    }
}
