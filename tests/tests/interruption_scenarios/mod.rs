//! The interruption function's remaining scenarios end to end: a rebalance drain held by its
//! NodePool's disruption budget, an AWS Health scheduled retirement, and a spot warning's
//! exclusion seen by a provisioner in another process.

mod budget;
mod health;
mod shared_exclusion;
