//! What an event means to nodewright, once parsed: the kind, the instances it is about, and
//! the moment by which the work must be done. Nothing here knows the envelope's JSON.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::follow_up::FollowUp;

/// The kinds `explain-event` reports, with their names on the command line and in logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    SpotInterruption,
    RebalanceRecommendation,
    StateChange,
    ScheduledChange,
    CapacityReservationInterruption,
    /// nodewright's own delayed message carrying the next step of longer work.
    FollowUp,
}

impl Kind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Kind::SpotInterruption => "spot-interruption",
            Kind::RebalanceRecommendation => "rebalance-recommendation",
            Kind::StateChange => "state-change",
            Kind::ScheduledChange => "scheduled-change",
            Kind::CapacityReservationInterruption => "capacity-reservation-interruption",
            Kind::FollowUp => "follow-up",
        }
    }
}

/// `instance-action` of an interruption warning: what EC2 will do to the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceAction {
    Terminate,
    Stop,
    Hibernate,
}

/// `state` of an EC2 Instance State-change Notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceStateName {
    Pending,
    Running,
    Stopping,
    Stopped,
    ShuttingDown,
    Terminated,
}

impl InstanceStateName {
    /// The instance is going or gone: its node will never run a pod again.
    pub fn is_leaving(&self) -> bool {
        !matches!(
            self,
            InstanceStateName::Pending | InstanceStateName::Running
        )
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            InstanceStateName::Pending => "pending",
            InstanceStateName::Running => "running",
            InstanceStateName::Stopping => "stopping",
            InstanceStateName::Stopped => "stopped",
            InstanceStateName::ShuttingDown => "shutting-down",
            InstanceStateName::Terminated => "terminated",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Detail {
    /// The instance goes at `deadline` (two minutes after the event).
    SpotInterruption {
        action: InstanceAction,
        deadline: Timestamp,
    },
    /// The reservation reclaims the instance at `deadline`.
    CapacityReservationInterruption {
        action: InstanceAction,
        deadline: Timestamp,
    },
    /// Spot capacity is at elevated risk; nothing is due yet.
    RebalanceRecommendation,
    StateChange {
        state: InstanceStateName,
    },
    /// AWS Health, EC2 `scheduledChange` (retirement, maintenance) starting at `start`.
    ScheduledChange {
        event_type_code: String,
        start: Timestamp,
        end: Option<Timestamp>,
    },
    FollowUp(FollowUp),
}

/// One event nodewright acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The envelope's `id` (EventBridge's event id), for logs and idempotency.
    pub event_id: String,
    /// The envelope's `time`: when AWS emitted the event.
    pub time: Timestamp,
    pub instance_ids: Vec<String>,
    pub detail: Detail,
}

impl Message {
    pub fn kind(&self) -> Kind {
        match &self.detail {
            Detail::SpotInterruption { .. } => Kind::SpotInterruption,
            Detail::CapacityReservationInterruption { .. } => Kind::CapacityReservationInterruption,
            Detail::RebalanceRecommendation => Kind::RebalanceRecommendation,
            Detail::StateChange { .. } => Kind::StateChange,
            Detail::ScheduledChange { .. } => Kind::ScheduledChange,
            Detail::FollowUp(_) => Kind::FollowUp,
        }
    }

    /// When the instance stops being usable, if the event says.
    pub fn deadline(&self) -> Option<Timestamp> {
        match &self.detail {
            Detail::SpotInterruption { deadline, .. }
            | Detail::CapacityReservationInterruption { deadline, .. } => Some(*deadline),
            Detail::ScheduledChange { start, .. } => Some(*start),
            Detail::FollowUp(f) => f.deadline,
            Detail::RebalanceRecommendation | Detail::StateChange { .. } => None,
        }
    }
}
