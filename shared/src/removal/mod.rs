//! Taking a node away, one path for every cause (a spot warning, a scheduled change, a state
//! change, a rebalance recommendation, emptiness, expiry, drift, consolidation): one record
//! of the removal on the node ([`record`]), one pure decision of what comes next
//! ([`decide::next`]) and one thin executor both functions call (`execute`).

pub mod cause;
pub mod decide;
pub mod record;

pub use cause::Cause;
pub use decide::{Act, Budget, Instance, Next, Situation, merge, next};
pub use record::{Avoid, BACKOFF_ANNOTATION, Backoff, REMOVAL_ANNOTATION, Record, Replacement};

#[cfg(test)]
mod decide_tests;
