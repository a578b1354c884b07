//! Instance types and their offerings (type x zone x capacity type, with a price), and the
//! allocatable arithmetic that turns an instance's capacity into what pods may request.

mod allocatable;
mod bundled;
mod kubelet;
mod labels;
mod name;
mod offerings;
mod reserved;

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use allocatable::{
    DEFAULT_EPHEMERAL_STORAGE_BYTES, EVICTION_HARD_MEMORY_BYTES, EVICTION_HARD_NODEFS_PERCENT,
    GRAVITON_CMA_RESERVED_MIB, KUBE_RESERVED_EPHEMERAL_STORAGE_BYTES, RESOURCE_AMD_GPU,
    RESOURCE_AWS_NEURON, RESOURCE_AWS_NEURON_CORE, RESOURCE_HABANA_GAUDI, RESOURCE_NVIDIA_GPU,
    VM_MEMORY_OVERHEAD_PERCENT, kube_reserved_cpu_millis, kube_reserved_memory_mib,
};
pub use bundled::{BUNDLED_PRICE_REGION, bundled_instance_types, bundled_node_prices};
pub use kubelet::{MEMORY_AVAILABLE, NODEFS_AVAILABLE, validate_kubelet};
pub use labels::*;
pub use name::parse_name;
pub use offerings::{DEFAULT_SPOT_DISCOUNT, estimated_spot_price, offerings_for};
pub use reserved::{
    CAPACITY_BLOCK_NOTICE, RESERVED_PRICE_DIVISOR, Reservation, ReservationKind, count_down,
    reserved_price,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    Spot,
    OnDemand,
    /// In a capacity reservation: paid for whether used or not, so priced near zero.
    Reserved,
}

impl CapacityType {
    pub fn as_str(&self) -> &'static str {
        match self {
            CapacityType::Spot => crate::api::labels::SPOT,
            CapacityType::OnDemand => crate::api::labels::ON_DEMAND,
            CapacityType::Reserved => crate::api::labels::RESERVED,
        }
    }

    /// The capacity type a label value (`karpenter.sh/capacity-type`) or an EC2
    /// lifecycle names; `None` for anything else.
    pub fn parse(text: &str) -> Option<CapacityType> {
        match text {
            crate::api::labels::SPOT => Some(CapacityType::Spot),
            crate::api::labels::ON_DEMAND => Some(CapacityType::OnDemand),
            crate::api::labels::RESERVED => Some(CapacityType::Reserved),
            _ => None,
        }
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The GPUs of an instance type (DescribeInstanceTypes `GpuInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Number of GPUs in the instance.
    pub count: u32,
    /// `A10G`, `T4`, `H100`, ... as EC2 reports it.
    pub name: String,
    /// `NVIDIA`, `AMD`, `Habana`, ... as EC2 reports it.
    pub manufacturer: String,
    /// Memory of ONE GPU, in MiB: what Karpenter's `karpenter.k8s.aws/instance-gpu-memory`
    /// label carries. The instance total is `count * memory_mib`.
    pub memory_mib: u64,
}

/// AWS machine-learning accelerators (Inferentia, Trainium), from DescribeInstanceTypes
/// `NeuronInfo` (or `InferenceAcceleratorInfo` when EC2 reports no `NeuronInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Accelerator {
    /// Number of Neuron devices; advertised as `aws.amazon.com/neuron`.
    pub count: u32,
    /// `Inferentia`, `Inferentia2`, `Trainium`, ...
    pub name: String,
    /// `AWS`.
    pub manufacturer: String,
    /// Memory of one device in MiB.
    pub memory_mib: u64,
    /// NeuronCores over all devices (0 when unknown); advertised as
    /// `aws.amazon.com/neuroncore`.
    #[serde(default)]
    pub cores: u32,
}

/// One EC2 instance type as DescribeInstanceTypes reports it, plus what Karpenter parses
/// from its name (`c6i.2xlarge` -> family `c6i`, category `c`, generation 6, size `2xlarge`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceType {
    pub name: String,
    pub family: String,
    pub category: String,
    pub generation: u32,
    pub size: String,
    pub vcpu: u32,
    pub memory_mib: u64,
    /// `amd64` or `arm64`, as the `kubernetes.io/arch` label spells it.
    pub arch: String,
    /// `nitro`, `xen`, or empty for bare metal.
    pub hypervisor: String,
    pub bare_metal: bool,
    pub burstable: bool,
    /// ENIs the VPC CNI can attach: those of the default network card (EC2's
    /// `NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces`), which is what the
    /// max-pods formula uses; multi-card instances have more ENIs in total.
    pub max_enis: u32,
    pub ipv4_per_eni: u32,
    pub gpu: Option<Gpu>,
    /// Inferentia / Trainium devices.
    #[serde(default)]
    pub accelerator: Option<Accelerator>,
    /// Total instance-store NVMe capacity in GB (decimal), 0 when none.
    pub local_nvme_gb: u64,
    /// Baseline network bandwidth summed over all network cards, in Mbit/s.
    pub network_bandwidth_mbps: u64,
    /// `NetworkInfo.EncryptionInTransitSupported`.
    #[serde(default)]
    pub encryption_in_transit: bool,
    /// Whether EC2 sells the type as spot (`SupportedUsageClasses` has `spot`).
    #[serde(default)]
    pub spot: bool,
}

/// Where and how an instance type can be bought, and what it costs per hour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    pub available: bool,
}

/// An instance type with its offerings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogEntry {
    pub instance_type: InstanceType,
    pub offerings: Vec<Offering>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub entries: Vec<CatalogEntry>,
    /// True when spot prices were derived from on-demand prices by a discount ratio rather
    /// than read from DescribeSpotPriceHistory; output labels such prices as estimates.
    pub spot_prices_estimated: bool,
    /// The capacity reservations each EC2NodeClass selects, by class name (`reserved.rs`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub reservations: std::collections::BTreeMap<String, Vec<Reservation>>,
}

/// What can go wrong building a catalog or applying a kubelet configuration to it.
#[derive(Debug, Error)]
pub enum CatalogError {
    #[error("bundled instance catalog (shared/data/instance-types.json) is not valid JSON")]
    BundledData {
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "bundled instance catalog: {instance_type} has on-demand price {price}; prices must be positive numbers"
    )]
    BundledPrice { instance_type: String, price: f64 },
    /// A user-written setting (`kubelet.kubeReserved.memory`,
    /// `blockDeviceMappings[0].ebs.volumeSize`) that cannot be used.
    #[error("{field}: {value:?}: {reason}")]
    Field {
        field: String,
        value: String,
        reason: String,
    },
    #[error("offline catalog needs at least one availability zone")]
    NoZones,
    #[error("spot discount {0} is not a fraction in [0, 1); 0.6 means spot costs 40% of on-demand")]
    SpotDiscount(f64),
}

impl Catalog {
    /// The entry for an instance type name. A linear scan: a region has ~1,000 types and
    /// callers look up a handful per decision.
    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.entries.iter().find(|e| e.instance_type.name == name)
    }
}
