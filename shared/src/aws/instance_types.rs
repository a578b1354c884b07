//! Instance types, their zone offerings and spot prices (EC2 DescribeInstanceTypes,
//! DescribeInstanceTypeOfferings, DescribeSpotPriceHistory).

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    EphemeralNvmeSupport, InstanceTypeInfo, LocationType, SpotPrice as SdkSpotPrice, UsageClassType,
};

use crate::catalog::{Gpu, InstanceType};

use super::Ec2Adapter;
use super::convert::{kubernetes_arch, timestamp};
use super::errors::{AwsError, api};
use super::ports::InstanceTypeSource;

/// An instance type offered in a zone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TypeOffering {
    pub instance_type: String,
    pub zone: String,
}

/// The spot price of a type in a zone, per hour in USD, and when it was set.
#[derive(Debug, Clone, PartialEq)]
pub struct SpotPrice {
    pub instance_type: String,
    pub zone: String,
    pub price: f64,
    pub timestamp: Option<jiff::Timestamp>,
}

/// The product description whose spot prices apply to Linux nodes.
const LINUX_PRODUCT: &str = "Linux/UNIX";

impl InstanceTypeSource for Ec2Adapter {
    async fn instance_types(&self) -> Result<Vec<InstanceType>, AwsError> {
        let infos = self
            .client
            .describe_instance_types()
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(api(|source| AwsError::DescribeInstanceTypes { source }))?;
        Ok(infos.iter().filter_map(instance_type).collect())
    }

    async fn offerings(&self) -> Result<Vec<TypeOffering>, AwsError> {
        let items = self
            .client
            .describe_instance_type_offerings()
            .location_type(LocationType::AvailabilityZone)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(api(|source| AwsError::DescribeInstanceTypeOfferings {
                source,
            }))?;
        let mut offerings: Vec<TypeOffering> = items
            .into_iter()
            .filter_map(|o| {
                Some(TypeOffering {
                    instance_type: o.instance_type?.as_str().to_string(),
                    zone: o.location?,
                })
            })
            .collect();
        offerings.sort();
        offerings.dedup();
        Ok(offerings)
    }

    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, AwsError> {
        self.spot_prices_of(&[]).await
    }
}

impl Ec2Adapter {
    /// The spot price in force now of each zone of `types`, or of every type when `types`
    /// is empty.
    pub async fn spot_prices_of(&self, types: &[String]) -> Result<Vec<SpotPrice>, AwsError> {
        // Start time "now" returns the price in force now for every pair (the newest
        // entry at or before now), not the history.
        let now = aws_smithy_types::DateTime::from(std::time::SystemTime::now());
        let types = (!types.is_empty()).then(|| {
            types
                .iter()
                .map(|t| aws_sdk_ec2::types::InstanceType::from(t.as_str()))
                .collect()
        });
        let items = self
            .client
            .describe_spot_price_history()
            .product_descriptions(LINUX_PRODUCT)
            .set_instance_types(types)
            .start_time(now)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(api(|source| AwsError::DescribeSpotPriceHistory { source }))?;
        Ok(newest_per_pair(items.iter().filter_map(spot_price)))
    }
}

fn spot_price(p: &SdkSpotPrice) -> Option<SpotPrice> {
    Some(SpotPrice {
        instance_type: p.instance_type.as_ref()?.as_str().to_string(),
        zone: p.availability_zone.clone()?,
        // A price EC2 reports that is not a number is skipped: no price means the
        // offering is not priced, never priced at zero.
        price: p
            .spot_price
            .as_deref()?
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite())?,
        timestamp: p.timestamp.as_ref().and_then(timestamp),
    })
}

/// Keeps the newest price of each (type, zone); on equal timestamps the later entry wins.
pub fn newest_per_pair(prices: impl IntoIterator<Item = SpotPrice>) -> Vec<SpotPrice> {
    let mut newest: BTreeMap<(String, String), SpotPrice> = BTreeMap::new();
    for p in prices {
        let key = (p.instance_type.clone(), p.zone.clone());
        match newest.get(&key) {
            Some(kept) if kept.timestamp > p.timestamp => {}
            _ => {
                newest.insert(key, p);
            }
        }
    }
    newest.into_values().collect()
}

/// Our instance type from EC2's description; None for types nodes cannot use (no name,
/// no Linux architecture, no vCPU or memory figures).
pub(crate) fn instance_type(info: &InstanceTypeInfo) -> Option<InstanceType> {
    let name = info.instance_type.as_ref()?.as_str().to_string();
    let arch = info
        .processor_info
        .as_ref()?
        .supported_architectures()
        .iter()
        .find_map(|a| kubernetes_arch(a.as_str()))?;
    let vcpu = u32::try_from(info.v_cpu_info.as_ref()?.default_v_cpus?).ok()?;
    let memory_mib = u64::try_from(info.memory_info.as_ref()?.size_in_mib?).ok()?;
    let (family, category, generation, size) = crate::catalog::parse_name(&name)?;
    let network = info.network_info.as_ref();
    let gpu = info.gpu_info.as_ref().and_then(|g| {
        let first = g.gpus().first()?;
        Some(Gpu {
            count: g
                .gpus()
                .iter()
                .filter_map(|d| d.count)
                .map(|c| u32::try_from(c).unwrap_or(0))
                .sum(),
            name: first.name.clone().unwrap_or_default(),
            manufacturer: first.manufacturer.clone().unwrap_or_default(),
            memory_mib: first
                .memory_info
                .as_ref()
                .and_then(|m| m.size_in_mib)
                .and_then(|m| u64::try_from(m).ok())
                .unwrap_or(0),
        })
    });
    let local_nvme_gb = info
        .instance_storage_info
        .as_ref()
        .filter(|s| s.nvme_support != Some(EphemeralNvmeSupport::Unsupported))
        .and_then(|s| s.total_size_in_gb)
        .and_then(|g| u64::try_from(g).ok())
        .unwrap_or(0);
    let network_bandwidth_mbps = network
        .and_then(|n| n.network_cards().first())
        .and_then(|c| c.baseline_bandwidth_in_gbps)
        .map(|g| (g * 1000.0).round() as u64)
        .unwrap_or(0);
    Some(InstanceType {
        name,
        family,
        category,
        generation,
        size,
        vcpu,
        memory_mib,
        arch: arch.to_string(),
        hypervisor: info
            .hypervisor
            .as_ref()
            .map(|h| h.as_str().to_string())
            .unwrap_or_default(),
        bare_metal: info.bare_metal.unwrap_or(false),
        burstable: info.burstable_performance_supported.unwrap_or(false),
        // The VPC CNI attaches ENIs on the default network card only, so its limit (not
        // the instance-wide one) bounds max pods, as in the bundled catalog.
        max_enis: network
            .and_then(|n| {
                let default_card = n.default_network_card_index.unwrap_or(0);
                n.network_cards()
                    .iter()
                    .find(|c| c.network_card_index == Some(default_card))
                    .and_then(|c| c.maximum_network_interfaces)
                    .or(n.maximum_network_interfaces)
            })
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0),
        ipv4_per_eni: network
            .and_then(|n| n.ipv4_addresses_per_interface)
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0),
        gpu,
        local_nvme_gb,
        network_bandwidth_mbps,
        spot: info
            .supported_usage_classes()
            .contains(&UsageClassType::Spot),
        ..InstanceType::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(t: &str, z: &str, p: f64, secs: i64) -> SpotPrice {
        SpotPrice {
            instance_type: t.into(),
            zone: z.into(),
            price: p,
            timestamp: jiff::Timestamp::from_second(secs).ok(),
        }
    }

    #[test]
    fn newest_spot_price_per_type_and_zone_wins() {
        let prices = vec![
            price("m5.large", "us-east-1a", 0.05, 100),
            price("m5.large", "us-east-1a", 0.04, 200),
            price("m5.large", "us-east-1a", 0.06, 150),
            price("m5.large", "us-east-1b", 0.07, 100),
        ];
        let newest = newest_per_pair(prices);
        assert_eq!(
            newest,
            vec![
                price("m5.large", "us-east-1a", 0.04, 200),
                price("m5.large", "us-east-1b", 0.07, 100)
            ]
        );
    }
}
