//! Karpenter's configuration API, read as nodewright's own: `karpenter.sh/v1` NodePool and
//! `karpenter.k8s.aws/v1` EC2NodeClass, with the legacy `v1alpha5` Provisioner and
//! `v1alpha1` AWSNodeTemplate converted to v1 on load.

pub mod annotations;
pub mod defaults;
pub mod diagnostics;
mod duration;
mod every_error;
pub mod legacy;
pub mod load;
mod nodeclass;
mod nodepool;
mod overlay;
mod quantity;
pub mod validation;
pub mod workloads;

pub use diagnostics::{Problem, Severity, Source, not_yet_reported};
pub use duration::{Duration, NillableDuration};
pub use load::Inputs;
pub use nodeclass::*;
pub use nodepool::*;
pub use overlay::{
    NodeOverlay, NodeOverlaySpec, OverlayOperator, OverlayRequirement, PriceChange,
    node_overlay_errors,
};
pub use quantity::Quantity;
pub use validation::{NODE_CLASS_REF_NAME, validate};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The part of `metadata` nodewright reads; anything else is ignored, as the API server
/// would keep it but nothing here depends on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Well-known label keys (Kubernetes and Karpenter) used across the core.
pub mod labels {
    pub const NODEPOOL: &str = "karpenter.sh/nodepool";
    pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
    pub const ZONE: &str = "topology.kubernetes.io/zone";
    pub const REGION: &str = "topology.kubernetes.io/region";
    pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    pub const ARCH: &str = "kubernetes.io/arch";
    pub const OS: &str = "kubernetes.io/os";
    pub const HOSTNAME: &str = "kubernetes.io/hostname";
    pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
    pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
    pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
    pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
    pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
    pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
    pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
    pub const NODECLAIM: &str = "nodewright.io/nodeclaim";
    pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
    pub const DISRUPTED_TAINT: &str = "nodewright.io/disrupted";
    /// Karpenter's taint on a node it disrupts, written beside [`DISRUPTED_TAINT`] so pods
    /// and tools made for Karpenter (a toleration to stay, a node filter) see the same.
    /// nodewright's own taint is the one it reads.
    pub const KARPENTER_DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
    /// On a node being replaced: the instances launched for its pods (comma-separated,
    /// `none` when its pods fit on existing capacity).
    pub const REPLACEMENT_ANNOTATION: &str = "nodewright.io/replacement";
    pub const OWNERSHIP_TAG: &str = "nodewright.io/cluster";
    /// On the placeholder pods a pool's floor (a capacity window's, a static NodePool's
    /// replicas) is planned with, naming the pool; never created in the cluster.
    pub const CAPACITY_FLOOR: &str = "nodewright.io/capacity-floor";
    /// The uid of every such placeholder starts so; a real pod's is a UUID.
    pub const CAPACITY_FLOOR_UID_PREFIX: &str = "capacity-floor/";

    pub const SPOT: &str = "spot";
    pub const ON_DEMAND: &str = "on-demand";
    /// Capacity in an EC2 capacity reservation (an ODCR or a capacity block) the NodePool's
    /// EC2NodeClass selects.
    pub const RESERVED: &str = "reserved";
    pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
    /// `default` (an on-demand capacity reservation) or `capacity-block`.
    pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
}
