//! Where capacity can be launched this poll ([`Provisioner::launchable`]): the usable
//! classes with their subnets, the pools that use them, and the catalog of their zones
//! (with the on-demand prices [`Provisioner::refresh_prices`] keeps current). Shared by a
//! poll and by a replacement.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use super::super::live_catalog::freshness::Purpose;
use super::super::on_demand_prices::PriceRefresh;
use super::{ProvisionError, Provisioner, aws_err};
use crate::api::{EC2NodeClass, NodePool};
use crate::aws::{Cloud, OnDemandPriceSource, Subnet, pick_subnet_per_zone};
use crate::kube::{Cluster, ObjectRef};

/// Per poll, what each usable EC2NodeClass resolves to.
pub(super) struct ClassNetwork {
    pub(super) subnets: BTreeMap<String, Subnet>,
}

/// See [`Provisioner::launchable`].
pub(super) struct Launchable {
    pub(super) pools: Vec<NodePool>,
    pub(super) classes: Vec<EC2NodeClass>,
    pub(super) networks: HashMap<String, ClassNetwork>,
    pub(super) catalog: crate::catalog::Catalog,
}

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// Where capacity can be launched now: the classes whose subnets are found, the pools
    /// that use them, and the catalog of their zones less the offerings just found
    /// unavailable. Shared by a poll and by a replacement.
    pub(super) async fn launchable(
        &mut self,
        pools: Vec<NodePool>,
        classes: Vec<EC2NodeClass>,
        now: SystemTime,
    ) -> Result<Launchable, ProvisionError> {
        let (networks, classes) = self.discover_networks(classes, now).await;
        let pools: Vec<NodePool> = pools
            .into_iter()
            .filter(|p| networks.contains_key(&p.spec.template.spec.node_class_ref.name))
            .collect();
        let mut zones: Vec<String> = networks
            .values()
            .flat_map(|n| n.subnets.keys().cloned())
            .collect();
        zones.sort();
        zones.dedup();
        let (mut catalog, refresh) = self
            .catalog
            .get(&self.aws, &zones, now)
            .await
            .map_err(aws_err("building the instance catalog"))?;
        if let Some(e) = refresh.stale_because {
            tracing::warn!(error = %e, "refreshing the instance catalog failed; using the last good one");
        }
        for class in &classes {
            self.add_reservations(&mut catalog, class, now).await;
        }
        // Others' exclusions were adopted with the capacity side's reads.
        self.unavailable.apply(&mut catalog, now);
        self.pool_hashes = pools
            .iter()
            .map(|p| (p.metadata.name.clone(), crate::disruption::nodepool_hash(p)))
            .collect();
        Ok(Launchable {
            pools,
            classes,
            networks,
            catalog,
        })
    }

    /// `class`'s capacity reservations as reserved offerings of `catalog`. One that cannot
    /// be read leaves the class to launch spot and on-demand this poll, and says so.
    async fn add_reservations(
        &mut self,
        catalog: &mut crate::catalog::Catalog,
        class: &EC2NodeClass,
        now: SystemTime,
    ) {
        if class.spec.capacity_reservation_selector_terms.is_empty() {
            return;
        }
        match self.class_reservations(Purpose::Poll, class, now).await {
            Ok(found) => catalog.add_reservations(&class.metadata.name, found, now),
            Err(e) => tracing::warn!(
                class = class.metadata.name,
                error = %crate::error_chain(&e),
                "reading the capacity reservations of the class failed; its launches do not use them until it succeeds"
            ),
        }
    }

    /// Subnets per usable class; a class whose subnets cannot be found (or that has none)
    /// is reported and left out, with the NodePools that use it.
    async fn discover_networks(
        &mut self,
        classes: Vec<EC2NodeClass>,
        now: SystemTime,
    ) -> (HashMap<String, ClassNetwork>, Vec<EC2NodeClass>) {
        let mut networks = HashMap::new();
        let mut kept = Vec::new();
        for class in classes {
            let name = class.metadata.name.clone();
            let found = self.class_subnets(&class, now).await;
            match found {
                Ok(found) if !found.is_empty() => {
                    networks.insert(
                        name,
                        ClassNetwork {
                            subnets: pick_subnet_per_zone(&found),
                        },
                    );
                    kept.push(class);
                }
                Ok(_) => {
                    self.report_dropped(
                        &ObjectRef::node_class(&name),
                        "spec.subnetSelectorTerms: no subnet matches",
                    )
                    .await
                }
                Err(e) => {
                    self.report_dropped(
                        &ObjectRef::node_class(&name),
                        &format!("subnet discovery failed: {e}"),
                    )
                    .await
                }
            }
        }
        (networks, kept)
    }
}

impl<K, A: OnDemandPriceSource> Provisioner<K, A> {
    /// Asks the price source for the region's on-demand prices when they are due, and
    /// logs how it went; the next poll's catalog uses them. Kept out of [`Self::poll`] so
    /// a poll never waits on the Price List API: the caller picks the moment (the handler
    /// does it right after an invocation's first poll).
    pub async fn refresh_prices(&mut self, now: SystemTime) -> PriceRefresh {
        let refresh = self.catalog.refresh_prices(&self.aws, now).await;
        match &refresh {
            PriceRefresh::NotDue => {}
            PriceRefresh::Updated { priced, total } => tracing::info!(
                priced,
                total,
                "on-demand prices updated from the Price List API; types it has no price for keep the bundled one"
            ),
            PriceRefresh::NoRegionalPrices => tracing::info!(
                "no regional on-demand prices (no Price List endpoint for this region, or none \
                 configured); keeping the prices in use"
            ),
            PriceRefresh::Failed(e) => tracing::warn!(
                error = %e,
                cause = std::error::Error::source(e).map(ToString::to_string),
                retry_after = ?super::super::on_demand_prices::PRICE_RETRY_AFTER,
                "refreshing on-demand prices failed; keeping the last good prices"
            ),
        }
        refresh
    }
}
