//! A consolidation's `replace`, carried out replacement first (as Karpenter: launch the
//! replacement, wait for it to initialize, then taint and drain): once per command, before
//! any of its nodes is tainted, the provisioning core is asked for capacity for the pods of
//! ALL the command's nodes at once (so several nodes become the one cheaper node the
//! simulation found), with the price of the nodes less [`MIN_SAVING`] as a ceiling; what it
//! launched goes into every node's removal record as the node is taken, and the removal
//! waits for it to be a Ready node before it drains (`nodewright::removal`).
//!
//! Nothing is tainted before the core answers: a command whose replacement cannot be
//! launched now, or would not be cheaper (prices moved since the plan), is dropped whole and
//! decided again by the next sweep, its nodes untouched.
//!
//! [`MIN_SAVING`]: nodewright::disruption::MIN_SAVING

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright::aws::Cloud;
use nodewright::disruption::{Command, Kept, KeptWhy, Snapshot, price_ceiling};
use nodewright::drain::reschedulable;
use nodewright::kube::{Cluster, NodeDisruption};
use nodewright::provision::{ProvisionError, Provisioner, ReplaceReport};
use nodewright::removal::Replacement;

use super::NoReplacement;
use super::State;
use super::act::{Report, SweepError, reread};

/// What a consolidation asks of the provisioning core: capacity for the pods of several
/// nodes at once, none of which counts as capacity, launched only when it costs at most
/// `ceiling` per hour in all.
pub trait GroupReplacement: Send + Sync {
    fn replace_nodes(
        &self,
        nodes: &[String],
        pods: &[Pod],
        ceiling: f64,
        now: SystemTime,
    ) -> impl Future<Output = Result<ReplaceReport, ProvisionError>> + Send;
}

impl<K, A> GroupReplacement for tokio::sync::Mutex<Provisioner<K, A>>
where
    K: Cluster,
    A: Cloud + Send,
{
    async fn replace_nodes(
        &self,
        nodes: &[String],
        pods: &[Pod],
        ceiling: f64,
        now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        self.lock()
            .await
            .replace_nodes(nodes, pods, &[], Some(ceiling), now)
            .await
    }
}

impl<T: GroupReplacement> GroupReplacement for &T {
    async fn replace_nodes(
        &self,
        nodes: &[String],
        pods: &[Pod],
        ceiling: f64,
        now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        (**self).replace_nodes(nodes, pods, ceiling, now).await
    }
}

impl GroupReplacement for NoReplacement {
    async fn replace_nodes(
        &self,
        _nodes: &[String],
        _pods: &[Pod],
        _ceiling: f64,
        _now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        match *self {}
    }
}

/// What became of a command's replacement.
pub(crate) enum Asked {
    /// Launched (or nothing had to be; no replacer: nothing asked): start the nodes'
    /// removals with it in their records.
    Start(Replacement),
    /// Not launched this sweep (an error, a failed launch): nothing tainted, decided again
    /// next sweep.
    NotNow,
    /// Would not be cheaper: dropped, and why, as each node's kept reason.
    Dropped(Vec<Kept>),
}

/// Asks for `command`'s replacement and records it on its nodes. `pods`: the moving pods
/// of all the command's nodes, as re-read just now.
pub(crate) async fn ask_once<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    command: &Command,
    pods: &[Pod],
    now: jiff::Timestamp,
    report: &mut Report,
) -> Result<Asked, SweepError>
where
    K: NodeDisruption,
    R: GroupReplacement,
{
    let Some(replacer) = &state.replacer else {
        // A sweeper without the core drains at once; the provisioner launches for the pods
        // once they are pending.
        return Ok(Asked::Start(Replacement::NotNeeded));
    };
    let prices: Option<f64> = command
        .nodes
        .iter()
        .map(|name| {
            snapshot
                .nodes
                .iter()
                .find(|n| &n.name == name)
                .and_then(|n| n.price_per_hour)
        })
        .sum();
    let Some(current) = prices else {
        let why = "its price is unknown now, so no saving can be shown".to_string();
        return Ok(Asked::Dropped(kept_all(command, why)));
    };
    let ceiling = price_ceiling(current);
    let moving: Vec<Pod> = reschedulable(pods)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    let launched = match replacer
        .replace_nodes(&command.nodes, &moving, ceiling, now.into())
        .await
    {
        Ok(l) => l,
        Err(e) => {
            let error = nodewright::error_chain(&e);
            tracing::warn!(nodes = ?command.nodes, error, "asking for a consolidation's replacement failed");
            report
                .awaiting_replacement
                .extend(command.nodes.iter().cloned());
            return Ok(Asked::NotNow);
        }
    };
    if let Some(why) = &launched.too_narrow {
        return Ok(Asked::Dropped(kept_all(
            command,
            format!("a replacement would not save enough now: {why}"),
        )));
    }
    if let Some(price) = launched.over_ceiling {
        let why = format!(
            "a replacement now costs ${price:.4}/h, not below ${ceiling:.4}/h ({}% less than ${current:.4}/h)",
            (nodewright::disruption::MIN_SAVING * 100.0).round()
        );
        return Ok(Asked::Dropped(kept_all(command, why)));
    }
    let ids = launched.launched_instances.clone();
    if launched.failed_claims > 0 {
        // All of the replacement or none of the removal (as Karpenter): draining onto part
        // of it would leave pods pending that the command promised a place. What did
        // launch stays as capacity; the next sweep decides with it, and removes it if
        // it stays empty.
        tracing::warn!(nodes = ?command.nodes, launched = ?ids, failed = launched.failed_claims, unschedulable = ?launched.unschedulable, "consolidation replacement not fully launched; nothing drained");
        report.replacements_launched.extend(ids);
        report
            .awaiting_replacement
            .extend(command.nodes.iter().cloned());
        return Ok(Asked::NotNow);
    }
    tracing::info!(nodes = ?command.nodes, instances = ?ids, waiting_on = ?launched.waiting_on, "consolidation replacement launched");
    report.replacements_launched.extend(ids.iter().cloned());
    // Pods placed on capacity still starting wait for it as for a launch.
    let mut awaited = ids;
    awaited.extend(launched.waiting_on);
    Ok(Asked::Start(if awaited.is_empty() {
        Replacement::NotNeeded
    } else {
        Replacement::Launched {
            instances: awaited,
            at: now,
        }
    }))
}

/// Why a consolidation's nodes may not all go now (the first node's reason), and the pods
/// of all of them as they are now; `nodes`: the nodes as just re-read.
pub(crate) async fn recheck_all<K, E, R>(
    state: &State<K, E, R>,
    command: &Command,
    nodes: &[Node],
) -> Result<(Option<String>, Vec<Pod>), SweepError>
where
    K: NodeDisruption,
{
    let mut all = Vec::new();
    for name in &command.nodes {
        let now = state.clock.now();
        let (_, pods, kept) = reread(&state.kube, nodes, name, command.reason, now).await?;
        if let Some(why) = kept {
            return Ok((Some(format!("{name}: {why}")), Vec::new()));
        }
        all.extend(pods);
    }
    Ok((None, all))
}

fn kept_all(command: &Command, why: String) -> Vec<Kept> {
    command
        .nodes
        .iter()
        .map(|n| Kept {
            node: n.clone(),
            reason: command.reason,
            why: KeptWhy::NotConsolidatable { why: why.clone() },
        })
        .collect()
}
