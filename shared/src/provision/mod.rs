//! The provisioner's decisions around the solver: when to solve, which offerings to keep
//! out, how launches are named.

mod batch;
mod nodeclaim;
mod unavailable;

pub use batch::{Batch, BatchWindow};
pub use nodeclaim::nodeclaim_id;
pub use unavailable::{UNAVAILABLE_TTL, UnavailableOfferings};
