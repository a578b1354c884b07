//! Warming a provisioner that is not acting yet: the standby invocation, waiting for the
//! Lease, builds what its first poll as holder would otherwise build with pods pending
//! (the subnets of each class, the instance catalog of their zones), and refreshes the
//! catalog ahead of its TTL so that a warm container's polls never wait on EC2's
//! DescribeInstanceTypes (see [`super::super::live_catalog::LiveCatalog::warm`]).

use std::time::SystemTime;

use super::super::discovery::terms_key;
use super::{ProvisionError, Provisioner};
use crate::api::EC2NodeClass;
use crate::aws::{AwsError, InstanceTypeSource, NetworkDiscovery, Subnet, pick_subnet_per_zone};
use crate::kube::{ConfigSource, usable};

/// What one warm-up found, for the invocation's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Warmed {
    /// Zones the catalog is built for.
    pub zones: usize,
    /// EC2NodeClasses whose subnets could not be discovered (their polls report why).
    pub classes_without_subnets: usize,
    /// The catalog refresh failed and the last good one stays (logged).
    pub catalog_stale: bool,
}

impl<K: ConfigSource, A: InstanceTypeSource + NetworkDiscovery> Provisioner<K, A> {
    /// Loads the configuration, discovers the usable classes' subnets and builds or
    /// refreshes the catalog for their zones. Reports nothing to the cluster: problems are
    /// the acting invocation's to report, once.
    pub async fn warm(&mut self, now: SystemTime) -> Result<Warmed, ProvisionError> {
        let config = self
            .kube
            .load()
            .await
            .map_err(|source| ProvisionError::Kube {
                what: "NodePools",
                source,
            })?;
        let (_, classes, _) = usable(&config.inputs, &config.problems);
        let mut warmed = Warmed::default();
        let mut zones: Vec<String> = Vec::new();
        for class in &classes {
            match self.class_subnets(class, now).await {
                Ok(subnets) => zones.extend(pick_subnet_per_zone(&subnets).into_keys()),
                Err(_) => warmed.classes_without_subnets += 1,
            }
        }
        zones.sort();
        zones.dedup();
        warmed.zones = zones.len();
        if zones.is_empty() {
            return Ok(warmed);
        }
        let refresh = self
            .catalog
            .warm(&self.aws, &zones, now)
            .await
            .map_err(|source| ProvisionError::Aws {
                what: "building the instance catalog",
                source,
            })?;
        if let Some(e) = refresh.stale_because {
            tracing::warn!(error = %e, "refreshing the instance catalog ahead of need failed; the last good one stays");
            warmed.catalog_stale = true;
        }
        Ok(warmed)
    }
}

impl<K, A: NetworkDiscovery> Provisioner<K, A> {
    /// `class`'s subnets, from the cache while it is fresh, else from EC2 (and cached).
    pub(super) async fn class_subnets(
        &mut self,
        class: &EC2NodeClass,
        now: SystemTime,
    ) -> Result<Vec<Subnet>, AwsError> {
        let name = &class.metadata.name;
        let terms = terms_key(&class.spec.subnet_selector_terms);
        if let Some(cached) = self.discovered.subnets(name, &terms, now) {
            return Ok(cached.clone());
        }
        let found = self.aws.subnets(&class.spec.subnet_selector_terms).await?;
        self.discovered.put_subnets(name, terms, now, found.clone());
        Ok(found)
    }
}
