//! The world's end-to-end tests, one binary: each test binary links the whole AWS SDK
//! (about 150 MB in a debug build), so one binary per file filled CI's disk and spent
//! minutes linking. Cargo runs a binary's tests on as many threads as there are cores,
//! as it did within each binary before. A file is a module:
//! `cargo test --workspace --test world scale_up::` runs one.

mod aws_moto;
mod capacity_reservations_world;
mod ec2_eventual_consistency;
mod eks_token_auth;
mod in_flight_order;
mod install_guide;
mod interruption;
mod interruption_scenarios;
mod kube_adapters;
mod kube_sim_api;
mod kube_sim_ec2;
mod kube_sim_graceful;
mod kube_sim_leases;
mod kube_sim_world;
mod kubectl;
mod launch_idempotency;
mod launch_tags;
mod lease_election;
mod lease_gate;
mod profile_leftovers;
mod provisioner_robust;
mod rbac;
mod reserved_capacity;
mod scale_up;
mod soak;
mod stack_deploy;
mod status_health;
mod sweeper;
mod takeover;
mod template_policy;
mod template_wiring;
mod volume_topology;
