//! The local world.

pub mod kube_sim;
