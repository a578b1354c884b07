//! The api loader and the solver types this module builds on, in one place.

pub use crate::api::{Inputs, Problem, Severity, validate};
pub use crate::scheduling::{ExistingNode, effective_requests};
