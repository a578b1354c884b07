//! The listing of this cluster's instances kept between polls, so that a pending pod's
//! poll does not wait for DescribeInstances (see [`super::super::owned_listing`]): listed
//! by the holder between polls, and by an invocation standing by, for the turn it is
//! about to take.

use std::time::SystemTime;

use super::super::turn::Turn;
use super::{ProvisionError, Provisioner, aws_err};
use crate::aws::InstanceInventory;

impl<K, A> Provisioner<K, A> {
    /// Whether the holder (in `turn`) or an invocation standing by should list again.
    pub fn owned_listing_due(&self, turn: &Turn<'_>, standing_by: bool, now: SystemTime) -> bool {
        self.fleet.listing_due(turn, standing_by, now)
    }

    /// Whether a poll of `turn` at `now` would plan with the kept listing (else it lists
    /// for itself).
    pub fn plans_with_listing(&self, turn: &Turn<'_>, now: SystemTime) -> bool {
        self.fleet.usable_listing(turn, now).is_some()
    }
}

impl<K, A: InstanceInventory + Sync> Provisioner<K, A> {
    /// Lists this cluster's instances, asked for at `now`, for the polls to come. On
    /// failure nothing changes: the polls list for themselves until a refresh succeeds.
    pub async fn refresh_owned_listing(&mut self, now: SystemTime) -> Result<(), ProvisionError> {
        let owned = (self.aws.list_owned().await)
            .map_err(aws_err("listing owned instances ahead of need"))?;
        self.fleet.keep_listing(owned, now, true);
        Ok(())
    }
}
