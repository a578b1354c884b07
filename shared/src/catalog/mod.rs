//! Instance types and their offerings (type x zone x capacity type, with a price), and the
//! allocatable arithmetic that turns an instance's capacity into what pods may request.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    Spot,
    OnDemand,
}

impl CapacityType {
    pub fn as_str(&self) -> &'static str {
        match self {
            CapacityType::Spot => crate::api::labels::SPOT,
            CapacityType::OnDemand => crate::api::labels::ON_DEMAND,
        }
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub count: u32,
    pub name: String,
    pub manufacturer: String,
    pub memory_mib: u64,
}

/// One EC2 instance type as DescribeInstanceTypes reports it, plus what Karpenter parses
/// from its name (`c6i.2xlarge` -> family `c6i`, category `c`, generation 6, size `2xlarge`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub max_enis: u32,
    pub ipv4_per_eni: u32,
    pub gpu: Option<Gpu>,
    pub local_nvme_gb: u64,
    pub network_bandwidth_mbps: u64,
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
}
