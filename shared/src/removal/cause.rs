//! Why a node is being taken away, for every path that takes one: the interruption
//! function's events and the sweeper's disruption methods share one removal.

use serde::{Deserialize, Serialize};

use crate::disruption::Reason as Disruption;
use crate::drain::Disruption as Kind;
use crate::interruption::Reason as Interruption;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    SpotInterrupted,
    CapacityReservationInterrupted,
    /// The capacity block the node runs in ends soon: EC2 terminates its instances from
    /// 30 minutes before the end; the sweeper begins the removal 40 minutes before it, as
    /// Karpenter's `capacityreservation.expiration` controller.
    CapacityBlockExpiring,
    ScheduledMaintenance,
    InstanceStopping,
    RebalanceRecommendation,
    Empty,
    Expired,
    Drifted,
    Underutilized,
    /// Repair: a node condition past its toleration. Forceful, as AWS's causes: the node
    /// is broken whatever its pods say.
    Unhealthy,
    /// A static NodePool scaled below its node count: the user asked for fewer nodes, so
    /// nothing replaces this one and, as expiry, `do-not-disrupt` does not hold it.
    ScaleDown,
}

impl Cause {
    pub fn as_str(&self) -> &'static str {
        match self {
            Cause::SpotInterrupted => "spot-interrupted",
            Cause::CapacityReservationInterrupted => "capacity-reservation-interrupted",
            Cause::CapacityBlockExpiring => "capacity-block-expiring",
            Cause::ScheduledMaintenance => "scheduled-maintenance",
            Cause::InstanceStopping => "instance-stopping",
            Cause::RebalanceRecommendation => "rebalance-recommendation",
            Cause::Empty => "empty",
            Cause::Expired => "expired",
            Cause::Drifted => "drifted",
            Cause::Underutilized => "underutilized",
            Cause::Unhealthy => "unhealthy",
            Cause::ScaleDown => "scale-down",
        }
    }

    /// The Kubernetes Event reason on the node and the pods it moves.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Cause::SpotInterrupted => "SpotInterrupted",
            Cause::CapacityReservationInterrupted => "CapacityReservationInterrupted",
            Cause::CapacityBlockExpiring => "CapacityBlockExpiring",
            Cause::ScheduledMaintenance => "ScheduledMaintenance",
            Cause::InstanceStopping => "InstanceStopping",
            Cause::RebalanceRecommendation => "RebalanceRecommendation",
            Cause::Empty => "DisruptionEmpty",
            Cause::Expired => "DisruptionExpired",
            Cause::Drifted => "DisruptionDrifted",
            Cause::Underutilized => "DisruptionUnderutilized",
            Cause::Unhealthy => "NodeRepair",
            Cause::ScaleDown => "DisruptionScaleDown",
        }
    }

    /// Whether nodewright chose it (voluntary: `karpenter.sh/do-not-disrupt` holds pods, a
    /// removal with nowhere for its pods to go is given up) or AWS takes the instance
    /// whatever anyone says (involuntary: it drains to its deadline and goes).
    pub fn kind(&self) -> Kind {
        match self {
            Cause::SpotInterrupted
            | Cause::CapacityReservationInterrupted
            | Cause::CapacityBlockExpiring
            | Cause::ScheduledMaintenance
            | Cause::InstanceStopping
            | Cause::Unhealthy => Kind::Involuntary,
            _ => Kind::Voluntary,
        }
    }

    pub fn voluntary(&self) -> bool {
        self.kind() == Kind::Voluntary
    }

    /// A voluntary cause `karpenter.sh/do-not-disrupt` does not hold, as Karpenter's
    /// forceful methods: such a pod goes at the end of `terminationGracePeriod`.
    pub fn forceful(&self) -> bool {
        matches!(self, Cause::Expired | Cause::ScaleDown)
    }

    /// Whether the node's moving pods get new capacity before or while they drain: not for
    /// an empty node (nothing moves) nor a consolidation that deletes (the simulation
    /// found them room on the nodes that stay); a consolidation that replaces asks before
    /// the node is taken, for all its nodes at once.
    pub fn replaces(&self) -> bool {
        !matches!(self, Cause::Empty | Cause::Underutilized | Cause::ScaleDown)
    }

    /// The sweeper's reason, for a removal it began.
    pub fn disruption(&self) -> Option<Disruption> {
        Some(match self {
            Cause::Empty => Disruption::Empty,
            Cause::Expired => Disruption::Expired,
            Cause::Drifted => Disruption::Drifted,
            Cause::Underutilized => Disruption::Underutilized,
            Cause::Unhealthy => Disruption::Unhealthy,
            Cause::ScaleDown => Disruption::ScaleDown,
            _ => return None,
        })
    }
}

impl From<Disruption> for Cause {
    fn from(r: Disruption) -> Cause {
        match r {
            Disruption::Empty => Cause::Empty,
            Disruption::Expired => Cause::Expired,
            Disruption::Drifted => Cause::Drifted,
            Disruption::Underutilized => Cause::Underutilized,
            Disruption::Unhealthy => Cause::Unhealthy,
            Disruption::ScaleDown => Cause::ScaleDown,
        }
    }
}

impl From<Interruption> for Cause {
    fn from(r: Interruption) -> Cause {
        match r {
            Interruption::SpotInterrupted => Cause::SpotInterrupted,
            Interruption::CapacityReservationInterrupted => Cause::CapacityReservationInterrupted,
            Interruption::ScheduledMaintenance => Cause::ScheduledMaintenance,
            Interruption::InstanceStopping => Cause::InstanceStopping,
            Interruption::RebalanceRecommendation => Cause::RebalanceRecommendation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Cause; 12] = [
        Cause::SpotInterrupted,
        Cause::CapacityReservationInterrupted,
        Cause::CapacityBlockExpiring,
        Cause::ScheduledMaintenance,
        Cause::InstanceStopping,
        Cause::RebalanceRecommendation,
        Cause::Empty,
        Cause::Expired,
        Cause::Drifted,
        Cause::Underutilized,
        Cause::Unhealthy,
        Cause::ScaleDown,
    ];

    #[test]
    fn only_what_aws_forces_and_repair_are_involuntary() {
        for c in ALL {
            let forced = matches!(
                c,
                Cause::SpotInterrupted
                    | Cause::CapacityReservationInterrupted
                    | Cause::CapacityBlockExpiring
                    | Cause::ScheduledMaintenance
                    | Cause::InstanceStopping
                    | Cause::Unhealthy
            );
            assert_eq!(!c.voluntary(), forced, "{c:?}");
        }
    }

    #[test]
    fn the_serialized_name_is_the_one_logs_and_explain_print() {
        for c in ALL {
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::json!(c.as_str())
            );
        }
    }

    #[test]
    fn the_sweeper_s_reasons_round_trip() {
        for r in [
            Disruption::Empty,
            Disruption::Expired,
            Disruption::Drifted,
            Disruption::Underutilized,
            Disruption::Unhealthy,
            Disruption::ScaleDown,
        ] {
            assert_eq!(Cause::from(r).disruption(), Some(r));
        }
        assert_eq!(Cause::SpotInterrupted.disruption(), None);
    }
}
