//! The fleet's cost per hour, as the provisioner sees it: its owned instances priced by
//! the catalog it last built (see [`super::super::fleet_cost`]).

use std::time::SystemTime;

use super::super::owned_listing::MAX_AGE;
use super::Provisioner;
use crate::aws::{AwsError, InstanceInventory};
use crate::provision::fleet_cost::{FleetCost, fleet_cost};

impl<K, A> Provisioner<K, A>
where
    A: InstanceInventory + Sync,
{
    /// The owned, live instances priced in memory: the holder's listing when it is at most
    /// [`MAX_AGE`] old, with this container's launches since it was asked for (a figure
    /// for a metric, a few seconds behind at worst on what others did), else one
    /// DescribeInstances.
    pub async fn fleet_cost(&self, now: SystemTime) -> Result<FleetCost, AwsError> {
        let owned = match self
            .owned_listing
            .as_ref()
            .filter(|l| l.age(now) <= MAX_AGE)
        {
            Some(listing) => {
                let mut owned = listing.instances.clone();
                owned.extend(self.unseen.made_since(&owned, listing.asked_at));
                owned
            }
            None => self.aws.list_owned().await?,
        };
        Ok(fleet_cost(
            &owned,
            self.catalog.last_built(),
            self.catalog.on_demand_prices().current(),
        ))
    }
}
