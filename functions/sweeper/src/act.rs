//! Carrying a plan out. Nothing is decided here beyond the re-check just before acting:
//! a node is removed by annotating it (`nodewright.io/disruption`, so a later sweep
//! continues the work), tainting it `nodewright.io/disrupted=:NoSchedule` (an empty node's
//! pods are read once more then: one that landed meanwhile calls the removal off,
//! `call_off.rs`), draining it
//! with the core's drain (voluntary: PodDisruptionBudgets and do-not-disrupt honoured, the
//! NodePool's `terminationGracePeriod` as the hard limit), terminating its instance (only
//! with this cluster's ownership tag; the EC2 adapter refuses any other) and deleting the
//! Node. Every step is safe to repeat.
//!
//! Past ~450 lines on purpose: starting and continuing a removal share one sequence
//! (annotate, taint, drain, terminate, delete) and its re-checks.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright::api::labels::{DISRUPTED_TAINT, DO_NOT_DISRUPT, NODEPOOL};
use nodewright::api::{Taint, TaintEffect};
use nodewright::aws::{AwsError, InstanceState, OwnedInstances};
use nodewright::disruption::{
    Command, DISRUPTION_ANNOTATION, EMPTY_SINCE_ANNOTATION, Kept, PROVISIONER_NAME, Plan, Reason,
    Snapshot, launches_first, parse_removal, removal_value,
};
use nodewright::drain::{Disruption, DrainPolicy, execute, plan_drain, reschedulable};
use nodewright::kube::{
    EventType, KubeError, NodeDisruption, ObjectKind, PodEviction, parse_provider_id,
};
use nodewright::lease::LeaseError;
use nodewright::provision::Replacement;
use serde::Serialize;

use super::State;
use super::call_off::recheck_after_taint;
use super::consolidation::{Asked, GroupReplacement, ask_once, recheck_all};
use super::events::kept_events;
use super::replacement::ready_to_drain;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{what}")]
    Kube {
        what: String,
        #[source]
        source: KubeError,
    },
    #[error("{what}")]
    Aws {
        what: String,
        #[source]
        source: AwsError,
    },
    #[error("{what}")]
    Lease {
        what: String,
        #[source]
        source: LeaseError,
    },
}

pub(crate) fn kube(what: &str) -> impl FnOnce(KubeError) -> SweepError + '_ {
    move |source| SweepError::Kube {
        what: what.into(),
        source,
    }
}

pub(crate) fn lease(what: &str) -> impl FnOnce(LeaseError) -> SweepError + '_ {
    move |source| SweepError::Lease {
        what: what.into(),
        source,
    }
}

pub(crate) fn aws(what: &str) -> impl FnOnce(AwsError) -> SweepError + '_ {
    move |source| SweepError::Aws {
        what: what.into(),
        source,
    }
}

/// What one sweep did, for the logs and the tests.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Set when another sweeper held the Lease: nothing was done.
    pub skipped: Option<String>,
    pub commands: Vec<Command>,
    pub marked_empty: Vec<String>,
    pub unmarked: Vec<String>,
    /// Removals begun this sweep (tainted and annotated).
    pub started: Vec<String>,
    /// Nodes whose drain is not finished: the next sweep continues.
    pub draining: Vec<String>,
    /// Replacement instances launched this sweep, before their nodes drain.
    pub replacements_launched: Vec<String>,
    /// Nodes not drained yet: their replacement is not a Ready node.
    pub awaiting_replacement: Vec<String>,
    /// Instances launched for capacity windows' floors, ahead of demand.
    pub floor_launched: Vec<String>,
    /// Instance terminated (or already gone) and Node deleted.
    pub removed: Vec<String>,
    /// A command dropped at the re-check, with why.
    pub rechecked_out: Vec<(String, String)>,
    pub kept: Vec<(String, String)>,
    pub kept_events: usize,
    pub never_joined_terminated: Vec<String>,
    pub orphans_deleted: Vec<String>,
    /// Leftover instance profiles deleted (see `profiles`).
    pub profiles_deleted: Vec<String>,
    pub price_before: f64,
    pub price_after: f64,
}

pub(crate) async fn carry_out<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    nodes: &[Node],
    plan: &Plan,
    now: Timestamp,
) -> Result<Report, SweepError>
where
    K: NodeDisruption,
    E: OwnedInstances,
    R: Replacement + GroupReplacement,
{
    let mut report = Report {
        commands: plan.commands.clone(),
        kept: plan
            .kept
            .iter()
            .map(|k| (k.node.clone(), k.why.to_string()))
            .collect(),
        price_before: plan.price_before,
        price_after: plan.price_after,
        ..Report::default()
    };
    for mark in &plan.empty_marks {
        let value = mark.since.map(|t| t.to_string()).unwrap_or_default();
        state
            .kube
            .annotate_node(&mark.node, EMPTY_SINCE_ANNOTATION, &value)
            .await
            .map_err(kube("marking a node empty"))?;
        match mark.since {
            Some(_) => report.marked_empty.push(mark.node.clone()),
            None => report.unmarked.push(mark.node.clone()),
        }
    }
    // Removals begun by an earlier sweep come first: they already hold budget.
    for node in nodes {
        if let Some((reason, started)) = in_progress(node) {
            let name = node.metadata.name.clone().unwrap_or_default();
            continue_removal(
                state,
                snapshot,
                node,
                &name,
                reason,
                started,
                now,
                &mut report,
            )
            .await?;
        }
    }
    // Commands dropped because their replacement would not be cheaper: kept, with why.
    let mut dropped: Vec<Kept> = Vec::new();
    for command in &plan.commands {
        if command.reason == Reason::Underutilized
            && let Some(why) = gained_pods(state, snapshot, command).await?
        {
            // The simulation placed exactly the pods it saw: any other and the whole
            // command (a replacement sized for all its nodes) is decided again next sweep.
            tracing::info!(nodes = ?command.nodes, why, "consolidation dropped at the re-check");
            for name in &command.nodes {
                report.rechecked_out.push((name.clone(), why.clone()));
            }
            continue;
        }
        if launches_first(command) {
            // The nodes go together or not at all: every one is re-checked before the
            // replacement for all of them is asked for.
            let (why, pods) = recheck_all(state, command).await?;
            if let Some(why) = why {
                tracing::info!(nodes = ?command.nodes, why, "consolidation dropped at the re-check");
                for name in &command.nodes {
                    report.rechecked_out.push((name.clone(), why.clone()));
                }
                continue;
            }
            match ask_once(state, snapshot, command, &pods, now, &mut report).await? {
                Asked::Start => {}
                Asked::NotNow => continue,
                Asked::Dropped(kept) => {
                    for k in &kept {
                        let why = k.why.to_string();
                        tracing::info!(node = k.node, why, "consolidation dropped");
                        report.rechecked_out.push((k.node.clone(), why.clone()));
                        report.kept.push((k.node.clone(), why));
                    }
                    dropped.extend(kept);
                    continue;
                }
            }
        }
        for name in &command.nodes {
            start_removal(state, snapshot, name, command.reason, now, &mut report).await?;
        }
    }
    let kept: Vec<Kept> = plan.kept.iter().cloned().chain(dropped).collect();
    report.kept_events = kept_events(state, &kept, nodes, now).await;
    if !plan.never_joined.is_empty() {
        let ids: Vec<String> = plan
            .never_joined
            .iter()
            .map(|n| n.instance_id.clone())
            .collect();
        for n in &plan.never_joined {
            tracing::warn!(
                instance_id = n.instance_id,
                reason = n.reason(),
                "terminating"
            );
        }
        let outcome = state
            .ec2
            .terminate(&ids)
            .await
            .map_err(aws("terminating instances that never joined"))?;
        for id in &outcome.refused {
            tracing::error!(instance_id = id, "not terminated: no ownership tag");
        }
        for _ in &outcome.terminated {
            nodewright::telemetry::node_terminated("NeverJoined");
        }
        report.never_joined_terminated = outcome.terminated;
    }
    if !plan.orphans.is_empty() {
        let ids: Vec<String> = plan.orphans.iter().map(|o| o.instance_id.clone()).collect();
        // Asked again just before acting, terminated instances included: only a Node whose
        // instance EC2 no longer describes as live is deleted, whoever owns the instance.
        let described = state
            .ec2
            .describe_ids(&ids)
            .await
            .map_err(aws("re-checking the instances of orphan nodes"))?;
        for orphan in &plan.orphans {
            let live = described.iter().any(|i| {
                i.id == orphan.instance_id
                    && !matches!(
                        i.state,
                        InstanceState::Terminated | InstanceState::ShuttingDown
                    )
            });
            if live {
                continue;
            }
            state
                .kube
                .delete_node(&orphan.node)
                .await
                .map_err(kube("deleting an orphan node"))?;
            tracing::warn!(
                node = orphan.node,
                instance_id = orphan.instance_id,
                "orphan node deleted: its instance is gone"
            );
            report.orphans_deleted.push(orphan.node.clone());
        }
    }
    Ok(report)
}

/// Whether a node of a consolidation command now holds a pod the decision did not see.
async fn gained_pods<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    command: &Command,
) -> Result<Option<String>, SweepError>
where
    K: PodEviction,
{
    for name in &command.nodes {
        let seen: Vec<(&str, &str)> = snapshot
            .nodes
            .iter()
            .filter(|n| &n.name == name)
            .flat_map(|n| n.pods.iter().filter(|p| p.moves()))
            .map(|p| (p.namespace.as_str(), p.name.as_str()))
            .collect();
        let pods = state
            .kube
            .pods_on_node(name)
            .await
            .map_err(kube("re-reading the node's pods"))?;
        let new = reschedulable(&pods).find(|p| {
            let ns = p.metadata.namespace.as_deref().unwrap_or("default");
            let pod = p.metadata.name.as_deref().unwrap_or_default();
            !seen.contains(&(ns, pod))
        });
        if let Some(p) = new {
            return Ok(Some(format!(
                "pod {} was scheduled on {name} after the decision",
                p.metadata.name.as_deref().unwrap_or_default()
            )));
        }
    }
    Ok(None)
}

/// The reason and start of a removal this function began, if the node carries them.
fn in_progress(node: &Node) -> Option<(Reason, Timestamp)> {
    let value = node
        .metadata
        .annotations
        .as_ref()?
        .get(DISRUPTION_ANNOTATION)?;
    parse_removal(value)
}

fn disrupted_taint() -> Taint {
    Taint {
        key: DISRUPTED_TAINT.into(),
        value: None,
        effect: TaintEffect::NoSchedule,
    }
}

/// Why a planned removal no longer holds, read from the node and its pods as they are now.
pub(crate) fn recheck(node: Option<&Node>, pods: &[Pod], reason: Reason) -> Option<String> {
    let Some(node) = node else {
        return Some("the node is gone".into());
    };
    let empty = BTreeMap::new();
    let annotations = node.metadata.annotations.as_ref().unwrap_or(&empty);
    if annotations.get(DO_NOT_DISRUPT).is_some_and(|v| v == "true") {
        return Some("the node now has karpenter.sh/do-not-disrupt".into());
    }
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == DISRUPTED_TAINT));
    if tainted {
        return Some("another removal is under way".into());
    }
    let moving: Vec<&Pod> = reschedulable(pods)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if reason == Reason::Empty && !moving.is_empty() {
        return Some("a pod was scheduled on it".into());
    }
    let held = moving.iter().find(|p| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DO_NOT_DISRUPT))
            .is_some_and(|v| v == "true")
    });
    held.map(|p| {
        format!(
            "pod {} now has karpenter.sh/do-not-disrupt",
            p.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// The re-check just before acting on `name`: the node as `nodes` (a fresh list) has it,
/// its pods read again, and why it must stay for `reason`, if it must.
pub(crate) async fn reread<'n, K: NodeDisruption>(
    cluster: &K,
    nodes: &'n [Node],
    name: &str,
    reason: Reason,
) -> Result<(Option<&'n Node>, Vec<Pod>, Option<String>), SweepError> {
    let node = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name));
    let pods = cluster
        .pods_on_node(name)
        .await
        .map_err(kube("re-reading the node's pods"))?;
    let why = recheck(node, &pods, reason);
    Ok((node, pods, why))
}

async fn start_removal<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    name: &str,
    reason: Reason,
    now: Timestamp,
    report: &mut Report,
) -> Result<(), SweepError>
where
    K: NodeDisruption,
    E: OwnedInstances,
    R: Replacement,
{
    let nodes = state
        .kube
        .nodes()
        .await
        .map_err(kube("re-reading the node"))?;
    let (node, _, kept) = reread(&state.kube, &nodes, name, reason).await?;
    if let Some(why) = kept {
        tracing::info!(node = name, why, "removal dropped at the re-check");
        report.rechecked_out.push((name.into(), why));
        return Ok(());
    }
    let Some(node) = node else { return Ok(()) };
    state
        .kube
        .annotate_node(name, DISRUPTION_ANNOTATION, &removal_value(reason, now))
        .await
        .map_err(kube("annotating the node"))?;
    state
        .kube
        .taint(name, &disrupted_taint())
        .await
        .map_err(kube("tainting the node"))?;
    if let Some(why) = recheck_after_taint(&state.kube, name, reason).await? {
        report.rechecked_out.push((name.into(), why));
        return Ok(());
    }
    state
        .kube
        .object_event(
            ObjectKind::Node,
            name,
            reason.event_reason(),
            &format!(
                "tainted {DISRUPTED_TAINT}; draining, then terminating the instance ({})",
                reason.as_str()
            ),
            EventType::Normal,
        )
        .await;
    report.started.push(name.into());
    continue_removal(state, snapshot, node, name, reason, now, now, report).await
}

#[allow(clippy::too_many_arguments)]
async fn continue_removal<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    node: &Node,
    name: &str,
    reason: Reason,
    started: Timestamp,
    now: Timestamp,
    report: &mut Report,
) -> Result<(), SweepError>
where
    K: NodeDisruption,
    E: OwnedInstances,
    R: Replacement,
{
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let pool = labels
        .get(NODEPOOL)
        .or_else(|| labels.get(PROVISIONER_NAME));
    let grace = pool
        .and_then(|p| snapshot.pools.iter().find(|x| &x.name == p))
        .and_then(|p| p.termination_grace);
    let policy = DrainPolicy {
        disruption: Disruption::Voluntary,
        deadline: grace.and_then(|g| started.checked_add(g).ok()),
    };
    let pods = state
        .kube
        .pods_on_node(name)
        .await
        .map_err(kube("listing the node's pods"))?;
    if !ready_to_drain(state, node, name, reason, &pods, started, now, report).await? {
        return Ok(());
    }
    let drain = plan_drain(&pods, &policy, now);
    if !drain.finished() {
        let note = format!("node {name} is being removed ({})", reason.as_str());
        let progress = execute(&state.kube, &drain, reason.event_reason(), &note).await;
        tracing::info!(node = name, ?progress, "draining");
        report.draining.push(name.into());
        return Ok(());
    }
    let instance = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(parse_provider_id)
        .map(|p| p.instance_id);
    if let Some(id) = instance {
        let outcome = state
            .ec2
            .terminate(std::slice::from_ref(&id))
            .await
            .map_err(aws("terminating the instance"))?;
        if !outcome.refused.is_empty() {
            // Not ours after all: the Node stays, and says why.
            state
                .kube
                .object_event(
                    ObjectKind::Node,
                    name,
                    "DisruptionRefused",
                    &format!(
                        "instance {id} does not carry this cluster's ownership tag; not terminated"
                    ),
                    EventType::Warning,
                )
                .await;
            tracing::error!(
                node = name,
                instance_id = id,
                "not terminated: no ownership tag"
            );
            return Ok(());
        }
        if !outcome.terminated.is_empty() {
            nodewright::telemetry::node_terminated(reason.event_reason());
        }
    }
    state
        .kube
        .delete_node(name)
        .await
        .map_err(kube("deleting the node"))?;
    tracing::info!(node = name, reason = reason.as_str(), "node removed");
    report.removed.push(name.into());
    Ok(())
}
