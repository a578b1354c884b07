//! nodewright core: pure provisioning decisions and thin adapters to EC2 and Kubernetes.

pub mod api;
pub mod aws;
pub mod catalog;
pub mod clock;
pub mod disruption;
pub mod drain;
pub mod eks;
mod error_chain;
pub mod ids;
pub mod interruption;
pub mod kube;
pub mod lease;
pub mod provision;
pub mod removal;
pub mod resources;
pub mod scheduling;
pub mod takeover;
pub mod telemetry;
pub mod userdata;

pub use error_chain::error_chain;

/// The version the CLI and the functions report: the workspace's, from Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
