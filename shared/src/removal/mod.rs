//! Taking a node away, one path for every cause (a spot warning, a scheduled change, a state
//! change, a rebalance recommendation, emptiness, expiry, drift, consolidation): one record
//! of the removal on the node ([`record`]), one pure decision of what comes next
//! ([`decide::next`]) and one thin executor both functions call (`execute`).

pub mod capacity;
pub mod cause;
pub mod decide;
pub mod execute;
pub mod offline;
pub mod record;

pub use capacity::{Capacity, offering};
pub use cause::Cause;
pub use decide::{Act, Budget, Instance, Next, Situation, merge, next};
pub use execute::{
    Advanced, Ask, Context, Ports, RemovalError, advance, disrupted_taints, instance_of, record_of,
    record_replacement, replacement_of,
};
pub use record::{
    Avoid, BACKOFF_ANNOTATION, Backoff, REMOVAL_ANNOTATION, Record, Replacement,
    recorded_replacement, replacement_on,
};

#[cfg(test)]
mod decide_tests;
