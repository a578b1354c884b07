//! The fleet's cost per hour, as the provisioner sees it: its owned instances priced by
//! the catalog it last built (see [`super::super::fleet_cost`]).

use std::time::SystemTime;

use super::Provisioner;
use crate::aws::{AwsError, InstanceInventory};
use crate::provision::fleet_cost::{FleetCost, fleet_cost};

impl<K, A> Provisioner<K, A>
where
    A: InstanceInventory + Sync,
{
    /// The owned, live instances priced in memory: the kept listing when it is young, with
    /// this container's launches since it was asked for (a figure for a metric, a few
    /// seconds behind at worst on what others did; see [`super::super::fleet_view`]),
    /// else one DescribeInstances.
    pub async fn fleet_cost(&self, now: SystemTime) -> Result<FleetCost, AwsError> {
        let owned = match self.fleet.estimate(now) {
            Some(owned) => owned,
            None => self.aws.list_owned().await?,
        };
        Ok(fleet_cost(
            &owned,
            self.catalog.last_built(),
            self.catalog.on_demand_prices().current(),
        ))
    }
}
