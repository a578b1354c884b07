//! The holder's listing of this cluster's instances, kept between polls so that a pending
//! pod's poll does not wait for DescribeInstances (see [`super::super::owned_listing`]).

use std::time::SystemTime;

use super::super::owned_listing::{OwnedListing, refresh_due, usable};
use super::{ProvisionError, Provisioner, aws_err};
use crate::aws::{InstanceInventory, OwnedInstance};

impl<K, A> Provisioner<K, A> {
    /// Marks the start (`Some`, the moment the Lease became this invocation's) or the end
    /// (`None`) of a Lease turn. A listing asked for before the turn began is not used in
    /// it: the previous holder's last launches may be missing from it.
    pub fn set_acting_since(&mut self, since: Option<SystemTime>) {
        if since.is_none() {
            self.owned_listing = None;
        }
        self.acting_since = since;
    }

    /// Whether the holder should list this cluster's instances again between polls.
    pub fn owned_listing_due(&self, now: SystemTime) -> bool {
        refresh_due(self.owned_listing.as_ref(), self.acting_since, now)
    }

    /// Whether a poll at `now` would plan with the kept listing (else it lists for itself).
    pub fn plans_with_listing(&self, now: SystemTime) -> bool {
        self.usable_listing(now).is_some()
    }

    /// The listing a poll at `now` may plan with, if any.
    pub(super) fn usable_listing(&self, now: SystemTime) -> Option<&OwnedListing> {
        self.owned_listing
            .as_ref()
            .filter(|l| usable(l, self.acting_since, now))
    }

    /// Keeps `instances`, listed by a call asked at `asked_at`, for this Lease turn's polls
    /// (outside a turn nothing is kept: every read lists).
    pub(super) fn keep_listing(&mut self, instances: Vec<OwnedInstance>, asked_at: SystemTime) {
        if self.acting_since.is_some() {
            self.owned_listing = Some(OwnedListing {
                instances,
                asked_at,
            });
        }
    }
}

impl<K, A: InstanceInventory + Sync> Provisioner<K, A> {
    /// Lists this cluster's instances, asked for at `now`, for the polls to come (between
    /// polls, by the holder). On failure nothing changes: the polls list for themselves
    /// until a refresh succeeds.
    pub async fn refresh_owned_listing(&mut self, now: SystemTime) -> Result<(), ProvisionError> {
        let owned = (self.aws.list_owned().await)
            .map_err(aws_err("listing owned instances ahead of need"))?;
        self.keep_listing(owned, now);
        Ok(())
    }

    /// The replacements nodes record (`nodewright.io/replacement`) that `owned`, a kept
    /// listing, lacks, described by id and added: the interruption function and the
    /// sweeper launch them outside the Lease, and a node's pods move only once it is
    /// recorded, so a poll planning for those pods learns of them here.
    pub(super) async fn add_recorded_replacements(
        &self,
        nodes: &[k8s_openapi::api::core::v1::Node],
        owned: &mut Vec<OwnedInstance>,
    ) -> Result<(), ProvisionError> {
        let mut missing: Vec<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.annotations.as_ref())
            .flat_map(crate::removal::recorded_replacement)
            .filter(|id| !owned.iter().any(|i| &i.id == id))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort();
        missing.dedup();
        let found = (self.aws.list_owned_ids(&missing).await)
            .map_err(aws_err("describing recorded replacements"))?;
        owned.extend(found);
        Ok(())
    }
}
