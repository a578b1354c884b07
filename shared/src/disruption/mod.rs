//! Voluntary disruption and hygiene, decided as values: [`plan_disruption`] takes the
//! sweeper's [`Snapshot`] and `now` and returns a [`Plan`] of commands (which nodes go, and
//! why), the candidates kept with the reason, and the hygiene work (instances that never
//! joined, Nodes whose instance is gone). The sweeper function carries the plan out and
//! re-checks each node just before acting; `nodewright sweep-plan` prints it offline.

mod balanced;
mod budget;
mod budget_recheck;
mod candidates;
mod capacity;
mod capacity_blocks;
mod consolidate;
mod cron;
mod decisions;
mod drift;
mod from_k8s;
mod headroom;
mod hygiene;
mod kept;
mod leftovers;
mod plan;
mod pool_conditions;
mod pool_status;
mod removal;
mod repair;
mod replace_first;
mod reserved_labels;
mod simulation;
mod snapshot;
mod static_pools;

pub use budget::{
    BudgetRule, EXPIRING_AT_ONCE_PERCENT, NodesLimit, SettingError, TIME_ZONE_ANNOTATION, Window,
    allowed, expiration_cap, expirations_allowed, pool_budgets,
};
pub use budget_recheck::budget_recheck;
pub use capacity::{CAPACITY_WINDOWS_ANNOTATION, CapacityWindow, floor, headroom, pool_capacity};
pub use capacity_blocks::{
    BLOCK_RECLAIM_BEFORE_END, ExpiringBlock, capacity_block_ids, expiring_blocks,
};
pub use consolidate::{
    MAX_MULTI_NODE, MIN_SAVING, MIN_SPOT_TYPES, NotSaving, Replacing,
    placement as consolidation_placement, price_ceiling,
};
pub use cron::Cron;
pub use decisions::{consolidation_type, decision, eligible};
pub use drift::{
    CurrentLaunch, IMAGE_TAG, NODECLASS_HASH_TAG, NODEPOOL_HASH_TAG, SECURITY_GROUPS_TAG, drift,
    drift_tags, nodeclass_hash, nodepool_hash, requirements_drift, security_groups_hash,
    subnet_drift,
};
pub use from_k8s::{EMPTY_SINCE_ANNOTATION, FirstSight, Inputs, PROVISIONER_NAME, snapshot};
pub use hygiene::{JOIN_TIMEOUT, NeverJoined, OrphanNode};
pub use kept::{Kept, KeptWhy};
pub use leftovers::{PROFILE_GRACE, UnusedProfile, unused_profiles};
pub use plan::{Action, Command, EmptyMark, Plan, plan_disruption};
pub use pool_conditions::{
    ClassReadiness, Wanted as WantedCondition, conditions, node_pool_dependents,
};
pub use pool_status::pool_statuses;
pub use removal::{DISRUPTION_ANNOTATION, parse_removal, removal_value};
pub use repair::{
    REPAIR_POLICIES, RepairPolicy, STATUS_CHECK_TOLERATION, UNHEALTHY_AT_ONCE_PERCENT, Unhealthy,
    mark_impaired, unhealthy, unhealthy_allowed,
};
pub use replace_first::{
    REPLACEMENT_ANNOTATION, launches_first, parse_replacement, replacement_value,
};
pub use reserved_labels::{OUT_OF_RESERVATION, out_of_reservation, set_out_of_reservation};
pub use simulation::{Simulation, SimulationInputs, simulation};
pub use snapshot::{InstanceView, NodeView, PodKind, PodView, PoolPolicy, Snapshot};

use serde::Serialize;

/// Why a node is disrupted: the `reason` of `sweep-plan`'s JSON and of the node's Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    Empty,
    Expired,
    Underutilized,
    Drifted,
    /// A node condition past its toleration (`repair.rs`).
    Unhealthy,
    /// A static NodePool holds more nodes than its `replicas` (`static_pools.rs`).
    #[serde(rename = "scale-down")]
    ScaleDown,
}

impl Reason {
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::Empty => "empty",
            Reason::Expired => "expired",
            Reason::Underutilized => "underutilized",
            Reason::Drifted => "drifted",
            Reason::Unhealthy => "unhealthy",
            Reason::ScaleDown => "scale-down",
        }
    }

    /// The reason [`Reason::as_str`] spells.
    pub fn parse(s: &str) -> Option<Reason> {
        Some(match s {
            "empty" => Reason::Empty,
            "expired" => Reason::Expired,
            "underutilized" => Reason::Underutilized,
            "drifted" => Reason::Drifted,
            "unhealthy" => Reason::Unhealthy,
            "scale-down" => Reason::ScaleDown,
            _ => return None,
        })
    }

    /// A budget's `reasons` entry (`Empty`, `Underutilized`, `Drifted`, as Karpenter v1
    /// spells them). Expiration has no entry: only budgets without `reasons` limit it; repair
    /// none at all (its own limit is the pool's health).
    pub fn from_budget(s: &str) -> Option<Reason> {
        Some(match s {
            "Empty" => Reason::Empty,
            "Underutilized" => Reason::Underutilized,
            "Drifted" => Reason::Drifted,
            _ => return None,
        })
    }

    /// The Kubernetes Event reason on the node.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Reason::Empty => "DisruptingEmpty",
            Reason::Expired => "DisruptingExpired",
            Reason::Underutilized => "DisruptingUnderutilized",
            Reason::Drifted => "DisruptingDrifted",
            Reason::Unhealthy => "DisruptingUnhealthy",
            Reason::ScaleDown => "DisruptingScaleDown",
        }
    }
}

#[cfg(test)]
mod budget_recheck_tests;
#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod capacity_tests;
#[cfg(test)]
mod consolidate_tests;
#[cfg(test)]
mod drift_tests;
#[cfg(test)]
mod from_k8s_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod repair_tests;
#[cfg(test)]
mod static_pools_tests;
#[cfg(test)]
mod testkit;
