//! The interruption function's remaining scenarios end to end, one test binary (each binary
//! links the whole AWS SDK): a rebalance drain held by its NodePool's disruption budget, an
//! AWS Health scheduled retirement, and a spot warning's exclusion seen by a provisioner in
//! another process.
//
// The crate root sits in tests/, so its modules are found by explicit path.

#[path = "interruption_scenarios/budget.rs"]
mod budget;
#[path = "interruption_scenarios/health.rs"]
mod health;
#[path = "interruption_scenarios/shared_exclusion.rs"]
mod shared_exclusion;
