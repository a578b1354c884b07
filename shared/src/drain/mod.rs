//! One drain for every reason a node is taken away: a pure plan of which pods go, in which order, with which
//! grace period and by when ([`plan_drain`]), and a thin executor over the eviction port
//! ([`execute`]).

mod execute;
mod plan;

pub use execute::{DrainProgress, execute};
pub use plan::{
    DEFAULT_GRACE_SECONDS, DRAIN_RECHECK, Disruption, DrainPlan, DrainPolicy, MIN_LEAD, PodStep,
    STUCK_TERMINATING, Skip, do_not_disrupt, finished, holds_node, plan_drain, reschedulable,
};

#[cfg(test)]
mod plan_tests;
