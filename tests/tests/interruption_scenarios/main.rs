//! The interruption function's remaining scenarios end to end, one test binary (each binary
//! links the whole AWS SDK): a rebalance drain held by its NodePool's disruption budget, an
//! AWS Health scheduled retirement, and a spot warning's exclusion seen by a provisioner in
//! another process.
//
// The crate root sits in tests/, so its modules are found by explicit path.

mod budget;
mod health;
mod shared_exclusion;
