//! nodewright core: pure provisioning decisions and thin adapters to EC2 and Kubernetes.

pub mod api;
pub mod aws;
pub mod catalog;
pub mod resources;
