//! Warming a provisioner off a pending pod's path: the standby invocation, waiting for the
//! Lease, builds what its first poll as holder would otherwise build with pods pending
//! (each class's subnets, security groups and AMIs, the instance catalog of their zones),
//! and the holder does the same between polls: lookups past their TTL are refreshed here,
//! so that a warm container's polls never wait on EC2 for them (see
//! [`super::super::live_catalog::LiveCatalog::warm`] and [`super::super::discovery`]).

use std::collections::HashSet;
use std::time::SystemTime;

use super::super::discovery::{images_key, terms_key};
use super::super::live_catalog::freshness::Purpose;
use super::{ProvisionError, Provisioner, aws_err, kube_err};
use crate::api::EC2NodeClass;
use crate::aws::{
    AwsError, ImageResolver, InstanceTypeSource, NetworkDiscovery, Subnet, pick_subnet_per_zone,
};
use crate::catalog::Reservation;
use crate::kube::{ConfigSource, usable};

/// What one warm-up found, for the invocation's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Warmed {
    /// Zones the catalog is built for.
    pub zones: usize,
    /// EC2NodeClasses whose subnets could not be discovered (their polls report why).
    pub classes_without_subnets: usize,
    /// Security group, AMI or capacity reservation lookups that failed (the last good answers stay).
    pub failed_lookups: usize,
    /// The catalog refresh failed and the last good one stays (logged).
    pub catalog_stale: bool,
}

impl<K, A> Provisioner<K, A> {
    /// Whether [`Provisioner::warm`] at `now` has something to refresh: the catalog or a
    /// class's lookups past their TTL, and no failed refresh backing off.
    pub fn warm_up_due(&self, now: SystemTime) -> bool {
        self.catalog.refresh_due(now) || self.discovered.refresh_due(now)
    }
}

impl<K: ConfigSource, A: InstanceTypeSource + NetworkDiscovery + ImageResolver> Provisioner<K, A> {
    /// Loads the configuration, refreshes the usable classes' subnets, security groups and
    /// AMIs past their TTL, and builds or refreshes the catalog for their zones. Reports
    /// nothing to the cluster: problems are the acting invocation's to report, once.
    pub async fn warm(&mut self, now: SystemTime) -> Result<Warmed, ProvisionError> {
        let config = self.kube.load().await.map_err(kube_err("NodePools"))?;
        let (_, classes, _) = usable(&config.inputs, &config.problems);
        let mut warmed = Warmed::default();
        let mut zones: Vec<String> = Vec::new();
        for class in &classes {
            match self.class_subnets_for(Purpose::WarmUp, class, now).await {
                Ok(subnets) => zones.extend(pick_subnet_per_zone(&subnets).into_keys()),
                Err(_) => warmed.classes_without_subnets += 1,
            }
            warmed.failed_lookups += self.refresh_groups_and_images(class, now).await;
            let reserves = !class.spec.capacity_reservation_selector_terms.is_empty();
            if reserves && let Err(e) = self.class_reservations(Purpose::WarmUp, class, now).await {
                tracing::debug!(class = class.metadata.name, error = %e, "refreshing capacity reservations ahead of need failed");
                warmed.failed_lookups += 1;
            }
        }
        if warmed.classes_without_subnets + warmed.failed_lookups > 0 {
            self.discovered.failed(now);
        }
        let in_use: HashSet<&str> = classes.iter().map(|c| c.metadata.name.as_str()).collect();
        self.discovered.retain_classes(&in_use);
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
            .map_err(aws_err("building the instance catalog"))?;
        if let Some(e) = refresh.stale_because {
            tracing::warn!(error = %e, "refreshing the instance catalog ahead of need failed; the last good one stays");
            warmed.catalog_stale = true;
        }
        Ok(warmed)
    }
}

impl<K, A: NetworkDiscovery + ImageResolver> Provisioner<K, A> {
    /// Looks up `class`'s security groups and AMIs when their answers are past the TTL;
    /// the number of lookups that failed (logged; the last good answers stay).
    async fn refresh_groups_and_images(&mut self, class: &EC2NodeClass, now: SystemTime) -> usize {
        let name = &class.metadata.name;
        let mut failed = 0;
        let terms = terms_key(&class.spec.security_group_selector_terms);
        if self
            .discovered
            .groups(Purpose::WarmUp, name, &terms, now)
            .is_none()
        {
            match self
                .aws
                .security_groups(&class.spec.security_group_selector_terms)
                .await
            {
                Ok(found) => self.discovered.put_groups(name, terms, now, found),
                Err(e) => {
                    tracing::debug!(class = name, error = %e, "refreshing security groups ahead of need failed");
                    failed += 1;
                }
            }
        }
        let version = &self.settings.cluster.kubernetes_version;
        let key = images_key(&class.spec.ami_selector_terms, version);
        if self
            .discovered
            .images(Purpose::WarmUp, name, &key, now)
            .is_none()
        {
            match self
                .aws
                .resolve(&class.spec.ami_selector_terms, version)
                .await
            {
                Ok(found) => self.discovered.put_images(name, key, now, found),
                Err(e) => {
                    tracing::debug!(class = name, error = %e, "resolving AMIs ahead of need failed");
                    failed += 1;
                }
            }
        }
        failed
    }
}

impl<K, A: NetworkDiscovery> Provisioner<K, A> {
    /// `class`'s capacity reservations for `purpose`: a kept answer young enough, else
    /// from EC2 (and kept).
    pub(super) async fn class_reservations(
        &mut self,
        purpose: Purpose,
        class: &EC2NodeClass,
        now: SystemTime,
    ) -> Result<Vec<Reservation>, AwsError> {
        let name = &class.metadata.name;
        let terms = terms_key(&class.spec.capacity_reservation_selector_terms);
        if let Some(cached) = self.discovered.reservations(purpose, name, &terms, now) {
            return Ok(cached.clone());
        }
        let found = self
            .aws
            .capacity_reservations(&class.spec.capacity_reservation_selector_terms)
            .await?;
        self.discovered
            .put_reservations(name, terms, now, found.clone());
        Ok(found)
    }

    /// `class`'s subnets for a poll: a kept answer up to
    /// [`super::super::discovery::DISCOVERY_MAX_STALENESS`] old (warm-ups refresh it past
    /// its TTL), else from EC2 (and kept).
    pub(super) async fn class_subnets(
        &mut self,
        class: &EC2NodeClass,
        now: SystemTime,
    ) -> Result<Vec<Subnet>, AwsError> {
        self.class_subnets_for(Purpose::Poll, class, now).await
    }

    async fn class_subnets_for(
        &mut self,
        purpose: Purpose,
        class: &EC2NodeClass,
        now: SystemTime,
    ) -> Result<Vec<Subnet>, AwsError> {
        let name = &class.metadata.name;
        let terms = terms_key(&class.spec.subnet_selector_terms);
        if let Some(cached) = self.discovered.subnets(purpose, name, &terms, now) {
            return Ok(cached.clone());
        }
        let found = self.aws.subnets(&class.spec.subnet_selector_terms).await?;
        self.discovered.put_subnets(name, terms, now, found.clone());
        Ok(found)
    }
}
