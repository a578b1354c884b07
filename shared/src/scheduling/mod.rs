//! Scheduling: the requirements algebra, pod constraints, taints, and the solver that
//! turns pending pods into planned node claims.

mod namespaces;
mod overlay;
mod pod;
mod requirements;
mod selector;
mod taints;
mod volumes;

pub use namespaces::{NamespaceLabels, selects_namespaces};
pub use overlay::{Overlays, lookup as overlay_labels, selects as overlay_selects};
pub use pod::{
    AffinityTerm, PodDemand, PodError, Spread, TopologyKey, bound_anti_affinity,
    effective_requests, is_floor_placeholder,
};
pub use requirements::{Conflict, Requirement, Requirements};
pub use selector::Selector;
pub use taints::{Toleration, first_untolerated, format_taint};
pub use volumes::{VolumeObjects, claims_volumes};

mod claim;
mod columns;
mod domains;
mod exact;
mod finalize;
mod packing;
mod plan;
mod preferences;
mod reasons;
mod repack;
mod reserved_room;
mod snapshot;
mod solver;
mod template;
mod topology;

pub use plan::{MAX_INSTANCE_TYPES, Nomination, PlannedClaim, ProvisioningPlan, Unschedulable};
pub use reasons::{Why, explain};
pub use reserved_room::solve_within_room;
pub use snapshot::{ExistingNode, MinValuesPolicy, PreferencePolicy, Snapshot};
pub use solver::{Prepared, Repacking, solve, solve_prepared, solve_repacking};
pub use template::{
    NODES, OfferingView, Template, TypeOption, allows_reservation, defined_by_instance,
};

#[cfg(test)]
mod overlay_tests;
#[cfg(test)]
mod packing_tests;
#[cfg(test)]
mod solver_cost_tests;
#[cfg(test)]
mod solver_preference_tests;
#[cfg(test)]
mod solver_props;
#[cfg(test)]
mod solver_reserved_tests;
#[cfg(test)]
mod solver_semantics_tests;
#[cfg(test)]
mod solver_tests;
#[cfg(test)]
mod solver_topology_tests;
#[cfg(test)]
pub(crate) mod testkit;
