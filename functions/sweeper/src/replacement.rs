//! The replacement an expired or drifted node's pods get before it drains
//! ([`nodewright::disruption::replace_first`] decides; this asks the provisioning core,
//! records what it launched on the node and reports). The node is already tainted when
//! the core is asked, so it is not counted as capacity for its own pods.

use std::collections::BTreeMap;
use std::time::SystemTime;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright::disruption::{
    REPLACEMENT_ANNOTATION, Reason, ReplaceFirst, parse_replacement, replace_first,
    replacement_value,
};
use nodewright::drain::reschedulable;
use nodewright::kube::{
    EventSink, EventType, NodeRemoval, NodeSource, ObjectKind, Readiness, parse_provider_id,
    readiness,
};
use nodewright::provision::{Offering, ProvisionError, ReplaceReport, Replacement};

use super::State;
use super::act::{Report, SweepError, kube};

/// The replacer of a sweeper that has none: such a sweeper drains at once (see
/// [`State::replacer`]). It has no values, so it is never called.
pub enum NoReplacement {}

impl Replacement for NoReplacement {
    async fn replace(
        &self,
        _node: &str,
        _pods: &[Pod],
        _reclaimed: Option<&Offering>,
        _now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        match *self {}
    }
}

/// Whether the node may drain now; when not, why is in `report` and in the logs.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn ready_to_drain<K, E, R>(
    state: &State<K, E, R>,
    node: &Node,
    name: &str,
    reason: Reason,
    pods: &[Pod],
    started: Timestamp,
    now: Timestamp,
    report: &mut Report,
) -> Result<bool, SweepError>
where
    K: NodeSource + NodeRemoval + EventSink,
    R: Replacement,
{
    let Some(replacer) = &state.replacer else {
        return Ok(true);
    };
    let moving: Vec<Pod> = reschedulable(pods)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    let empty = BTreeMap::new();
    let recorded = node
        .metadata
        .annotations
        .as_ref()
        .unwrap_or(&empty)
        .get(REPLACEMENT_ANNOTATION)
        .map(|v| parse_replacement(v));
    let nodes = match &recorded {
        Some(ids) if !ids.is_empty() => state
            .kube
            .nodes()
            .await
            .map_err(kube("listing nodes for the replacement"))?,
        _ => Vec::new(),
    };
    let ready = |id: &str| {
        nodes.iter().any(|n| {
            readiness(n) == Readiness::Ready
                && n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(parse_provider_id)
                    .is_some_and(|p| p.instance_id == id)
        })
    };
    let step = replace_first(
        reason,
        !moving.is_empty(),
        recorded.as_deref(),
        ready,
        started,
        now,
    );
    match step {
        ReplaceFirst::Drain => Ok(true),
        ReplaceFirst::Wait { remaining } => {
            tracing::info!(
                node = name,
                remaining_s = remaining.as_secs(),
                "awaiting the replacement"
            );
            report.awaiting_replacement.push(name.into());
            Ok(false)
        }
        ReplaceFirst::GiveUp => {
            let note = "the replacement is not a Ready node in time; draining anyway";
            tracing::warn!(node = name, note);
            event(state, name, "ReplacementNotReady", note, EventType::Warning).await;
            Ok(true)
        }
        ReplaceFirst::Ask => match replacer.replace(name, &moving, None, now.into()).await {
            Ok(launched) => record(state, name, &launched, report).await,
            // Asked again next sweep (the launch is idempotent by its pods' uids), until
            // the timeout gives up on it.
            Err(e) => {
                let error = nodewright::error_chain(&e);
                tracing::warn!(node = name, error, "asking for a replacement failed");
                report.awaiting_replacement.push(name.into());
                Ok(false)
            }
        },
    }
}

/// Writes what was launched on the node; drains at once when nothing had to be.
async fn record<K, E, R>(
    state: &State<K, E, R>,
    name: &str,
    launched: &ReplaceReport,
    report: &mut Report,
) -> Result<bool, SweepError>
where
    K: NodeRemoval + EventSink,
{
    if launched.launched_instances.is_empty() && launched.failed_claims > 0 {
        // Nothing recorded: the next sweep asks again.
        tracing::warn!(node = name, unschedulable = ?launched.unschedulable, "no replacement launched");
        report.awaiting_replacement.push(name.into());
        return Ok(false);
    }
    let ids = &launched.launched_instances;
    state
        .kube
        .annotate_node(name, REPLACEMENT_ANNOTATION, &replacement_value(ids))
        .await
        .map_err(kube("recording the replacement on the node"))?;
    if ids.is_empty() {
        // The pods fit on existing or in-flight capacity (or an earlier attempt's launch
        // is in flight): nothing to wait for.
        return Ok(true);
    }
    let note = format!(
        "replacement {} launched; draining once it is Ready",
        ids.join(", ")
    );
    event(state, name, "ReplacementLaunched", &note, EventType::Normal).await;
    tracing::info!(node = name, instances = ?ids, "replacement launched");
    report.replacements_launched.extend(ids.iter().cloned());
    report.awaiting_replacement.push(name.into());
    Ok(false)
}

async fn event<K: EventSink, E, R>(
    state: &State<K, E, R>,
    name: &str,
    reason: &str,
    note: &str,
    kind: EventType,
) {
    state
        .kube
        .object_event(ObjectKind::Node, name, reason, note, kind)
        .await;
}
