//! The local world: moto's server for AWS and a simulated EKS cluster on loopback, the
//! harness that wires nodewright's real handlers to both, and the demo built on it.

pub mod access_entries;
pub mod aws_faults;
pub mod aws_front;
pub mod capacity_reservations;
pub mod deployed_env;
pub mod ec2_consistency;
pub mod ec2_idempotency;
pub mod eks_access;
pub mod emf;
pub mod fleet_faults;
pub mod interruption;
pub mod kit;
pub mod kube_sim;
pub mod kubectl;
pub mod lambda;
pub mod lambda_api;
pub mod moto;
pub mod price_list;
pub mod soak;
pub mod sqs;
pub mod status_checks;
pub mod template;
pub mod world;
pub mod world_time;
