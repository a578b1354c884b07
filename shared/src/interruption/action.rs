//! Why an interruption takes a node, and nodewright's per-NodePool choice for rebalance
//! recommendations.

use serde::{Deserialize, Serialize};

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
