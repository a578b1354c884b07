//! nodewright core: pure provisioning decisions and thin adapters to EC2 and Kubernetes.

pub mod api;
pub mod aws;
pub mod catalog;
pub mod eks;
pub mod kube;
pub mod launch;
pub mod provision;
pub mod resources;
pub mod scheduling;
