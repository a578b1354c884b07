//! From a message and what is known of the instance's node to the action to take: a pure
//! switch, as Karpenter's `actionForMessage`, with nodewright's per-NodePool choice for
//! rebalance recommendations.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::follow_up::{FollowUp, Step};
use super::message::{Detail, Message};
use crate::drain::Disruption;

/// Why a node is being taken away: the Kubernetes Event's reason, and whether the drain
/// is voluntary (nodewright's choice: `karpenter.sh/do-not-disrupt` is honoured) or not
/// (the instance goes whatever anyone says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    SpotInterrupted,
    CapacityReservationInterrupted,
    RebalanceRecommendation,
    InstanceStopping,
    ScheduledMaintenance,
}

impl Reason {
    /// The Kubernetes Event reason, visible in `kubectl describe`.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Reason::SpotInterrupted => "SpotInterrupted",
            Reason::CapacityReservationInterrupted => "CapacityReservationInterrupted",
            Reason::RebalanceRecommendation => "RebalanceRecommendation",
            Reason::InstanceStopping => "InstanceStopping",
            Reason::ScheduledMaintenance => "ScheduledMaintenance",
        }
    }

    /// A rebalance recommendation is advice nodewright chose to follow; the others end
    /// the instance whatever the pods' annotations say. A scheduled change counts as
    /// involuntary (AWS retires the instance at its start) but drains within PDBs while
    /// time allows, like the rest.
    pub fn disruption(&self) -> Disruption {
        match self {
            Reason::RebalanceRecommendation => Disruption::Voluntary,
            _ => Disruption::Involuntary,
        }
    }
}

/// `nodewright.io/rebalance` on a NodePool: what a rebalance recommendation does to its
/// nodes.
pub const REBALANCE_ANNOTATION: &str = "nodewright.io/rebalance";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RebalancePolicy {
    /// Launch the replacement first; once it is Ready, drain and terminate the old node.
    #[default]
    Replace,
    Cordon,
    /// An Event only, as Karpenter does.
    Ignore,
}

impl RebalancePolicy {
    /// The annotation's value; unset is the default, anything unknown is an error naming
    /// the value (the caller reports it on the NodePool and uses the default).
    pub fn from_annotation(value: Option<&str>) -> Result<RebalancePolicy, String> {
        match value.map(str::trim) {
            None | Some("") | Some("replace") => Ok(RebalancePolicy::Replace),
            Some("cordon") => Ok(RebalancePolicy::Cordon),
            Some("ignore") => Ok(RebalancePolicy::Ignore),
            Some(other) => Err(format!(
                "{REBALANCE_ANNOTATION}: {other:?} is not one of replace, cordon, ignore"
            )),
        }
    }
}

/// What is known about the node of one instance named by a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub node: String,
    /// The instance carries `nodewright.io/cluster=<this cluster>`.
    pub owned: bool,
    /// The rebalance choice of the node's NodePool.
    pub rebalance: RebalancePolicy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Taint, launch replacement capacity, drain by `deadline`, delete the Node.
    ReplaceAndDrain {
        reason: Reason,
        deadline: Option<Timestamp>,
    },
    /// Drain what is still on the node (a follow-up's step).
    Drain {
        reason: Reason,
        deadline: Option<Timestamp>,
    },
    /// Drain once the replacement instances are Ready nodes.
    AwaitReplacement {
        reason: Reason,
        instances: Vec<String>,
        until: Timestamp,
    },
    /// The instance is gone or going: delete the Node so its pods are rescheduled now.
    DeleteNode {
        reason: Reason,
    },
    Cordon {
        reason: Reason,
    },
    /// Nothing to change; `event` is the Kubernetes Event reason to leave, if any.
    None {
        why: String,
        event: Option<Reason>,
    },
}

impl Action {
    /// The name `explain-event` prints.
    pub fn as_str(&self) -> &'static str {
        match self {
            Action::ReplaceAndDrain { .. } => "replace-and-drain",
            Action::Drain { .. } => "drain",
            Action::AwaitReplacement { .. } => "await-replacement",
            Action::DeleteNode { .. } => "delete-node",
            Action::Cordon { .. } => "cordon",
            Action::None { .. } => "none",
        }
    }

    fn none(why: impl Into<String>) -> Action {
        Action::None {
            why: why.into(),
            event: None,
        }
    }
}

/// How long after an interruption deadline a late (redelivered) warning still drains:
/// past it, the instance is gone by EC2's own contract and only the Node is left.
pub const GONE_AFTER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// The action for one instance of `message`. `node` is `None` when no Node carries the
/// instance's provider ID.
pub fn action_for(message: &Message, node: Option<&NodeFacts>, now: Timestamp) -> Action {
    let Some(node) = node else {
        return Action::none("no node for this instance");
    };
    if !node.owned {
        return Action::none("the instance is not this cluster's (no ownership tag)");
    }
    let interrupted = |reason: Reason, deadline: Timestamp| {
        if now > deadline + GONE_AFTER_DEADLINE {
            Action::DeleteNode { reason }
        } else {
            Action::ReplaceAndDrain {
                reason,
                deadline: Some(deadline),
            }
        }
    };
    match &message.detail {
        Detail::SpotInterruption { deadline, .. } => {
            interrupted(Reason::SpotInterrupted, *deadline)
        }
        Detail::CapacityReservationInterruption { deadline, .. } => {
            interrupted(Reason::CapacityReservationInterrupted, *deadline)
        }
        Detail::ScheduledChange { start, .. } => interrupted(Reason::ScheduledMaintenance, *start),
        Detail::RebalanceRecommendation => match node.rebalance {
            RebalancePolicy::Replace => Action::ReplaceAndDrain {
                reason: Reason::RebalanceRecommendation,
                deadline: None,
            },
            RebalancePolicy::Cordon => Action::Cordon {
                reason: Reason::RebalanceRecommendation,
            },
            RebalancePolicy::Ignore => Action::None {
                why: "the NodePool ignores rebalance recommendations".into(),
                event: Some(Reason::RebalanceRecommendation),
            },
        },
        Detail::StateChange { state } if state.is_leaving() => Action::DeleteNode {
            reason: Reason::InstanceStopping,
        },
        Detail::StateChange { state } => {
            Action::none(format!("the instance is {}", state.as_str()))
        }
        Detail::FollowUp(f) => follow_up_action(f),
    }
}

fn follow_up_action(f: &FollowUp) -> Action {
    match &f.step {
        Step::Drain => Action::Drain {
            reason: f.reason,
            deadline: f.deadline,
        },
        Step::AwaitReplacement { instances, until } => Action::AwaitReplacement {
            reason: f.reason,
            instances: instances.clone(),
            until: *until,
        },
        Step::DeleteNode => Action::DeleteNode { reason: f.reason },
    }
}
