//! From a message and what is known of the instance's node to what the interruption
//! function does: a pure switch, as Karpenter's `actionForMessage`, with nodewright's
//! per-NodePool choice for rebalance recommendations. A removal it begins is carried out by
//! the one removal path (`crate::removal`); a follow-up continues the removal its node
//! records.

use jiff::{SignedDuration, Timestamp};

use super::action::{Reason, RebalancePolicy};
use super::message::{Detail, Message};
use crate::removal::{Avoid, Record};

/// What is known about the node of one instance named by a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub node: String,
    /// The instance carries `nodewright.io/cluster=<this cluster>`.
    pub owned: bool,
    /// The rebalance choice of the node's NodePool.
    pub rebalance: RebalancePolicy,
    /// The node's offering (instance type, zone, capacity type), when its labels say.
    pub offering: Option<Avoid>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Intent {
    /// Begin this removal (or take over the node's with it: an interruption outranks a
    /// voluntary removal under way).
    Remove(Box<Record>),
    /// Continue the removal the node records (a follow-up due at `due`).
    Continue {
        due: Option<Timestamp>,
    },
    Cordon(Reason),
    /// Nothing to change; `event` is the Kubernetes Event reason to leave, if any.
    None {
        why: String,
        event: Option<Reason>,
    },
}

impl Intent {
    /// The name `explain-event` prints.
    pub fn as_str(&self) -> &'static str {
        match self {
            Intent::Remove(_) => "remove",
            Intent::Continue { .. } => "continue",
            Intent::Cordon(_) => "cordon",
            Intent::None { .. } => "none",
        }
    }

    fn none(why: impl Into<String>) -> Intent {
        Intent::None {
            why: why.into(),
            event: None,
        }
    }
}

/// How long a scheduled change's instance may still run once its window has begun, when
/// the event gives no end: AWS's maintenance windows are hours long.
pub const DEFAULT_MAINTENANCE_WINDOW: SignedDuration = SignedDuration::from_hours(2);

/// The deadline of a scheduled change handled at `now`: its start while that is ahead; once
/// the window has begun the instance still runs until AWS acts, by its end at the latest,
/// so the drain keeps honouring PodDisruptionBudgets until then.
pub fn maintenance_deadline(start: Timestamp, end: Option<Timestamp>, now: Timestamp) -> Timestamp {
    if now < start {
        return start;
    }
    end.filter(|e| *e > now)
        .unwrap_or(now + DEFAULT_MAINTENANCE_WINDOW)
}

/// What to do for one instance of `message`. `node` is `None` when no Node carries the
/// instance's provider ID.
pub fn intent_for(message: &Message, node: Option<&NodeFacts>, now: Timestamp) -> Intent {
    let Some(node) = node else {
        return Intent::none("no node for this instance");
    };
    if !node.owned {
        return Intent::none("the instance is not this cluster's (no ownership tag)");
    }
    let remove = |reason: Reason, deadline: Option<Timestamp>, avoid: Option<Avoid>| {
        let mut record = Record::new(reason.into(), now, deadline);
        record.avoid = avoid;
        record.origin = message.event_id.clone();
        Intent::Remove(Box::new(record))
    };
    let reclaimed = || node.offering.clone();
    match &message.detail {
        Detail::SpotInterruption { deadline, .. } => {
            remove(Reason::SpotInterrupted, Some(*deadline), reclaimed())
        }
        Detail::CapacityReservationInterruption { deadline, .. } => remove(
            Reason::CapacityReservationInterrupted,
            Some(*deadline),
            reclaimed(),
        ),
        Detail::ScheduledChange { start, end, .. } => remove(
            Reason::ScheduledMaintenance,
            Some(maintenance_deadline(*start, *end, now)),
            None,
        ),
        Detail::RebalanceRecommendation => match node.rebalance {
            // The replacement keeps away from the offering at risk.
            RebalancePolicy::Replace => remove(Reason::RebalanceRecommendation, None, reclaimed()),
            RebalancePolicy::Cordon => Intent::Cordon(Reason::RebalanceRecommendation),
            RebalancePolicy::Ignore => Intent::None {
                why: "the NodePool ignores rebalance recommendations".into(),
                event: Some(Reason::RebalanceRecommendation),
            },
        },
        Detail::StateChange { state } if state.is_leaving() => {
            remove(Reason::InstanceStopping, Some(now), None)
        }
        Detail::StateChange { state } => {
            Intent::none(format!("the instance is {}", state.as_str()))
        }
        Detail::FollowUp(f) => Intent::Continue { due: f.due },
    }
}
