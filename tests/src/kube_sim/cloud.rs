//! The cloud side the kubelet simulation reads: instances and instance-type capacity.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use jiff::Timestamp;

/// EC2 instance state, as DescribeInstances reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

impl InstanceState {
    /// Parses EC2's state name (`pending`, `running`, `shutting-down`, …).
    pub fn from_ec2(name: &str) -> Option<InstanceState> {
        Some(match name {
            "pending" => InstanceState::Pending,
            "running" => InstanceState::Running,
            "shutting-down" => InstanceState::ShuttingDown,
            "terminated" => InstanceState::Terminated,
            "stopping" => InstanceState::Stopping,
            "stopped" => InstanceState::Stopped,
            _ => return None,
        })
    }
}

/// An instance the cluster's nodes come from.
#[derive(Debug, Clone, PartialEq)]
pub struct SimInstance {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub private_dns_name: String,
    pub private_ip: Option<String>,
    pub state: InstanceState,
    pub launch_time: Timestamp,
    /// Decoded user data (the kubelet reads its labels, taints and max pods from it).
    pub user_data: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// Failure to list the cloud's instances.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct CloudViewError {
    pub what: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// The instances this cluster owns, as the cloud sees them now.
pub trait CloudView: Send + Sync {
    fn instances(&self) -> BoxFuture<'_, Result<Vec<SimInstance>, CloudViewError>>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    pub fn label(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }
}

/// What a node of an instance type reports.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCapacity {
    pub cpu_milli: i64,
    pub memory_bytes: i64,
    /// Max pods (overridden by `--max-pods` / `maxPods` in the user data).
    pub pods: u32,
    pub arch: Arch,
    /// Extended resources in whole units (`nvidia.com/gpu: 1`).
    pub extended: BTreeMap<String, i64>,
    /// Subtracted from capacity to give allocatable (kube-reserved + system-reserved +
    /// eviction threshold).
    pub reserved_cpu_milli: i64,
    pub reserved_memory_bytes: i64,
}

/// Capacity by instance type name; `None` for a type it does not know.
pub trait InstanceCapacity: Send + Sync {
    fn capacity(&self, instance_type: &str) -> Option<NodeCapacity>;
}

impl<F> InstanceCapacity for F
where
    F: Fn(&str) -> Option<NodeCapacity> + Send + Sync,
{
    fn capacity(&self, instance_type: &str) -> Option<NodeCapacity> {
        self(instance_type)
    }
}
