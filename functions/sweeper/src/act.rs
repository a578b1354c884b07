//! Carrying a plan out. Nothing is decided here beyond the re-checks just before acting (the
//! nodes' own, and the pool's budget on its nodes as they are now): each
//! node goes through the one removal path (`nodewright::removal`: taken, replacement first
//! where its pods need one, drained with the NodePool's `terminationGracePeriod` counted
//! from the drain, terminated only with this cluster's ownership tag; or given up, untainted
//! and backed off, when its pods have nowhere to go). Removals begun earlier, by this
//! function or by an interruption whose follow-ups stopped, are continued first; a taint of
//! nodewright's that no removal explains is removed.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright::api::labels::{DISRUPTED_TAINT, DO_NOT_DISRUPT, NODEPOOL};
use nodewright::aws::{AwsError, InstanceState, OwnedInstances};
use nodewright::disruption::{
    Command, EMPTY_SINCE_ANNOTATION, Kept, PROVISIONER_NAME, Plan, Reason, Snapshot,
    budget_recheck, launches_first,
};
use nodewright::drain::reschedulable;
use nodewright::kube::{KubeError, NodeDisruption};
use nodewright::lease::LeaseError;
use nodewright::removal::{
    Advanced, Ask, Budget, Capacity, Cause, Context, Ports, Record, Replacement, advance,
    record_of, record_replacement,
};
use nodewright::telemetry;
use serde::Serialize;

use super::State;
use super::consolidation::{Asked, GroupReplacement, ask_once, recheck_all};
use super::events::kept_events;

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

/// How long past the look an interruption's removal promised the sweeper waits before it
/// takes the removal over (its follow-up chain was lost: dead-lettered, stopped).
pub const TAKE_OVER_AFTER: Duration = Duration::from_secs(180);

/// What one sweep did, for the logs and the tests.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Set when another sweeper held the Lease: nothing was done.
    pub skipped: Option<String>,
    /// Instances Karpenter launched that became this cluster's in this sweep.
    pub adopted: Vec<String>,
    /// Why no instance of Karpenter's was adopted (it still runs, or that cannot be read).
    pub adoption_paused: Option<String>,
    pub commands: Vec<Command>,
    pub marked_empty: Vec<String>,
    pub unmarked: Vec<String>,
    /// Removals begun this sweep (taken: the record written and the node tainted).
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
    /// Removals given up (untainted, backed off), with why.
    pub given_up: Vec<(String, String)>,
    /// A command dropped at the re-check, with why.
    pub rechecked_out: Vec<(String, String)>,
    /// Removals this sweep could not advance (an API error, an unreadable record), with why:
    /// the next sweep tries again.
    pub failed: Vec<(String, String)>,
    pub kept: Vec<(String, String)>,
    pub kept_events: usize,
    pub never_joined_terminated: Vec<String>,
    pub orphans_deleted: Vec<String>,
    /// Leftover instance profiles deleted (see `profiles`).
    pub profiles_deleted: Vec<String>,
    pub price_before: f64,
    pub price_after: f64,
}

impl Report {
    /// Adds what removals begun outside the plan ([`step`]) came to.
    pub(crate) fn absorb(&mut self, other: Report) {
        self.started.extend(other.started);
        self.removed.extend(other.removed);
        self.given_up.extend(other.given_up);
        self.draining.extend(other.draining);
        self.awaiting_replacement.extend(other.awaiting_replacement);
        self.replacements_launched
            .extend(other.replacements_launched);
        self.failed.extend(other.failed);
    }

    fn note(&mut self, name: &str, a: &Advanced) {
        if a.taken {
            self.started.push(name.into());
        }
        if a.removed {
            self.removed.push(name.into());
        }
        if let Some(why) = &a.given_up {
            self.given_up.push((name.into(), why.clone()));
        }
        match a.state {
            "draining" => self.draining.push(name.into()),
            "awaiting the replacement" | "asking for a replacement" => {
                self.awaiting_replacement.push(name.into())
            }
            _ => {}
        }
    }
}

/// Removals the sweeper carries on every sweep: its own; an interruption's only once its
/// follow-ups have stopped coming.
fn sweeper_continues(record: &Record, now: Timestamp) -> bool {
    record.cause.disruption().is_some()
        || record.cause == Cause::CapacityBlockExpiring
        || record.overdue(now, TAKE_OVER_AFTER)
}

fn tainted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == DISRUPTED_TAINT))
}

fn name_of(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
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
    R: Capacity + GroupReplacement,
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
    // Removals under way come first: they already hold budget.
    for node in nodes {
        let name = name_of(node);
        let go_on = match record_of(node) {
            Ok(Some(r)) => sweeper_continues(&r, now),
            Ok(None) => tainted(node),
            Err(e) => {
                tracing::error!(node = name, error = %e, "an unreadable removal record; the node is left as it is");
                report.failed.push((name, e.to_string()));
                continue;
            }
        };
        if go_on {
            step(state, snapshot, node, nodes, None, now, &mut report).await;
        }
    }
    let mut dropped: Vec<Kept> = Vec::new();
    for command in &plan.commands {
        if command.reason == Reason::Underutilized
            && let Some(why) = gained_pods(state, snapshot, command).await?
        {
            // The simulation placed exactly the pods it saw: any other and the whole
            // command (a replacement sized for all its nodes) is decided again next sweep.
            dropped_at_recheck(
                &mut report,
                command,
                &why,
                "consolidation dropped at the re-check",
            );
            continue;
        }
        // The nodes as they are now, for the command's budget and its nodes' re-check:
        // another function may have begun a voluntary removal since the sweep read them.
        let fresh = state
            .kube
            .nodes()
            .await
            .map_err(kube("re-reading the nodes"))?;
        if let Some(why) = over_budget(snapshot, command.reason, &fresh, &command.nodes, now) {
            dropped_at_recheck(
                &mut report,
                command,
                &why,
                "command dropped at the budget's re-check",
            );
            continue;
        }
        let mut launched = None;
        if launches_first(command) {
            // The nodes go together or not at all: every one is re-checked before the
            // replacement for all of them is asked for.
            let (why, pods) = recheck_all(state, command, &fresh).await?;
            if let Some(why) = why {
                dropped_at_recheck(
                    &mut report,
                    command,
                    &why,
                    "consolidation dropped at the re-check",
                );
                continue;
            }
            match ask_once(state, snapshot, command, &pods, now, &mut report).await? {
                Asked::Start(replacement) => launched = Some(replacement),
                Asked::NotNow => continue,
                Asked::Dropped(kept) => {
                    for k in &kept {
                        let why = k.why.to_string();
                        tracing::info!(node = k.node, why, "consolidation dropped");
                        telemetry::command_invalidated(k.reason.as_str(), &why);
                        report.rechecked_out.push((k.node.clone(), why.clone()));
                        report.kept.push((k.node.clone(), why));
                    }
                    dropped.extend(kept);
                    continue;
                }
            }
        }
        for name in &command.nodes {
            start(
                state,
                snapshot,
                name,
                command,
                launched.clone(),
                now,
                &mut report,
            )
            .await?;
        }
    }
    let kept: Vec<Kept> = plan.kept.iter().cloned().chain(dropped).collect();
    report.kept_events = kept_events(state, &kept, nodes, now).await;
    hygiene(state, plan, &mut report).await?;
    Ok(report)
}

/// [`budget_recheck`] for each pool `taking` touches.
fn over_budget(
    snapshot: &Snapshot,
    reason: Reason,
    nodes: &[Node],
    taking: &[String],
    now: Timestamp,
) -> Option<String> {
    let mut pools: Vec<&str> = taking
        .iter()
        .filter_map(|name| snapshot.nodes.iter().find(|n| &n.name == name))
        .filter_map(|n| n.pool.as_deref())
        .collect();
    pools.sort_unstable();
    pools.dedup();
    pools.into_iter().find_map(|name| {
        let pool = snapshot.pools.iter().find(|p| p.name == name)?;
        let of_pool: Vec<String> = taking
            .iter()
            .filter(|t| {
                snapshot
                    .nodes
                    .iter()
                    .any(|n| &n.name == *t && n.pool.as_deref() == Some(name))
            })
            .cloned()
            .collect();
        budget_recheck(pool, reason, nodes, &of_pool, now)
    })
}

/// A whole command dropped at a re-check: logged as `what`, counted, each node reported.
fn dropped_at_recheck(report: &mut Report, command: &Command, why: &str, what: &'static str) {
    tracing::info!(nodes = ?command.nodes, why, "{what}");
    telemetry::command_invalidated(command.reason.as_str(), why);
    for name in &command.nodes {
        report.rechecked_out.push((name.clone(), why.to_string()));
    }
}

/// Begins the removal of `name` for `command`, after the re-check just before acting.
async fn start<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    name: &str,
    command: &Command,
    launched: Option<Replacement>,
    now: Timestamp,
    report: &mut Report,
) -> Result<(), SweepError>
where
    K: NodeDisruption,
    E: OwnedInstances,
    R: Capacity,
{
    let nodes = state
        .kube
        .nodes()
        .await
        .map_err(kube("re-reading the node"))?;
    let (node, _, kept) = reread(&state.kube, &nodes, name, command.reason, now).await?;
    // The budget once more on this read, the last before the node is taken: the
    // command's nodes taken before it now count as disrupting.
    let taking = [name.to_string()];
    let kept = kept.or_else(|| over_budget(snapshot, command.reason, &nodes, &taking, now));
    if let Some(why) = kept {
        tracing::info!(node = name, why, "removal dropped at the re-check");
        telemetry::command_invalidated(command.reason.as_str(), &why);
        report.rechecked_out.push((name.into(), why));
        return Ok(());
    }
    let Some(node) = node else { return Ok(()) };
    let mut record = Record::sweep(command.reason, now);
    if let Some(r) = launched {
        record.replacement = r;
    }
    step(state, snapshot, node, &nodes, Some(record), now, report).await;
    Ok(())
}

/// One step of one node's removal, its replacement asked for when the step needs one.
pub(crate) async fn step<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    node: &Node,
    nodes: &[Node],
    wanted: Option<Record>,
    now: Timestamp,
    report: &mut Report,
) where
    K: NodeDisruption,
    E: OwnedInstances,
    R: Capacity,
{
    let name = name_of(node);
    let ctx = Context {
        grace: termination_grace(snapshot, node),
        // The sweeper's removals were planned within their pools' budgets.
        budget: Budget::Allows,
    };
    let cluster = state.ec2_cluster();
    let ports = Ports {
        kube: &state.kube,
        ec2: &state.ec2,
        cluster,
    };
    match advance(ports, node, nodes, wanted, &ctx, now).await {
        Ok(a) => {
            tracing::info!(
                node = name,
                state = a.state,
                note = a.note,
                evicted = a.drained.evicted.len(),
                deleted = a.drained.deleted.len(),
                blocked = a.drained.blocked.len(),
                "removal advanced"
            );
            report.note(&name, &a);
            if let Some(ask) = &a.ask {
                let fixed = super::floor::static_replacement(snapshot, node, now);
                let pods = fixed.as_deref().unwrap_or(&ask.pods);
                replace(state, ask, pods, now, report).await;
            }
        }
        Err(e) => {
            let why = nodewright::error_chain(&e);
            tracing::warn!(
                node = name,
                error = why,
                "advancing the removal failed; the next sweep tries again"
            );
            report.failed.push((name, why));
        }
    }
}

fn termination_grace(snapshot: &Snapshot, node: &Node) -> Option<Duration> {
    let labels = node.metadata.labels.as_ref()?;
    let pool = labels
        .get(NODEPOOL)
        .or_else(|| labels.get(PROVISIONER_NAME))?;
    snapshot
        .pools
        .iter()
        .find(|p| &p.name == pool)
        .and_then(|p| p.termination_grace)
}

/// Asks the provisioning core for capacity for `pods` (`ask`'s, or a static pool's floor)
/// and records the answer on the node.
async fn replace<K, E, R>(
    state: &State<K, E, R>,
    ask: &Ask,
    pods: &[Pod],
    now: Timestamp,
    report: &mut Report,
) where
    K: NodeDisruption,
    R: Capacity,
{
    let Some(replacer) = &state.replacer else {
        // Without the core the node drains at once; the provisioner launches for its pods
        // once they are pending.
        let none: Result<&nodewright::provision::ReplaceReport, String> =
            Ok(&nodewright::provision::ReplaceReport::default());
        let _ = record_replacement(&state.kube, ask, none, now).await;
        return;
    };
    let answer = replacer
        .replace_for(std::slice::from_ref(&ask.node), pods, &[], now.into())
        .await;
    if let Err(e) = &answer {
        tracing::warn!(
            node = ask.node,
            error = nodewright::error_chain(e),
            "asking for a replacement failed"
        );
    }
    let answer = answer.as_ref().map_err(|e| nodewright::error_chain(e));
    match record_replacement(&state.kube, ask, answer, now).await {
        Ok(Replacement::Launched { instances, .. }) => {
            report.replacements_launched.extend(instances);
        }
        Ok(_) => {}
        Err(e) => report
            .failed
            .push((ask.node.clone(), nodewright::error_chain(&e))),
    }
}

/// Instances that never joined, and Nodes whose instance is gone.
async fn hygiene<K, E, R>(
    state: &State<K, E, R>,
    plan: &Plan,
    report: &mut Report,
) -> Result<(), SweepError>
where
    K: NodeDisruption,
    E: OwnedInstances,
{
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
                .delete_node(&orphan.node, true)
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
    Ok(())
}

/// Whether a node of a consolidation command now holds a pod the decision did not see.
async fn gained_pods<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    command: &Command,
) -> Result<Option<String>, SweepError>
where
    K: NodeDisruption,
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

/// Why a planned removal no longer holds, read from the node and its pods as they are now.
pub(crate) fn recheck(
    node: Option<&Node>,
    pods: &[Pod],
    reason: Reason,
    now: Timestamp,
) -> Option<String> {
    let Some(node) = node else {
        return Some("the node is gone".into());
    };
    if tainted(node) || record_of(node).ok().flatten().is_some() {
        return Some("another removal is under way".into());
    }
    // Nothing a node or its pods say holds a repair, nor a static pool's scale-down (the
    // user asked for fewer nodes; `do-not-disrupt` made the node the last one chosen).
    if matches!(reason, Reason::Unhealthy | Reason::ScaleDown) {
        return None;
    }
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    if annotations.get(DO_NOT_DISRUPT).is_some_and(|v| v == "true") {
        return Some("the node now has karpenter.sh/do-not-disrupt".into());
    }
    let moving: Vec<&Pod> = reschedulable(pods).collect();
    if reason == Reason::Empty && !moving.is_empty() {
        return Some("a pod was scheduled on it".into());
    }
    let held = pods.iter().find(|p| nodewright::drain::holds_node(p, now));
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
    now: Timestamp,
) -> Result<(Option<&'n Node>, Vec<Pod>, Option<String>), SweepError> {
    let node = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name));
    let pods = cluster
        .pods_on_node(name)
        .await
        .map_err(kube("re-reading the node's pods"))?;
    let why = recheck(node, &pods, reason, now);
    Ok((node, pods, why))
}
