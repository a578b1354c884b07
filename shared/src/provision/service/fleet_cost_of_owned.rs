//! The fleet's cost per hour, as the provisioner sees it: its owned instances priced by
//! the catalog it last built (see [`super::super::fleet_cost`]).

use super::Provisioner;
use crate::aws::{AwsError, InstanceInventory};
use crate::provision::fleet_cost::{FleetCost, fleet_cost};

impl<K, A> Provisioner<K, A>
where
    A: InstanceInventory + Sync,
{
    /// One DescribeInstances (the owned, live instances), priced in memory.
    pub async fn fleet_cost(&self) -> Result<FleetCost, AwsError> {
        let owned = self.aws.list_owned().await?;
        Ok(fleet_cost(
            &owned,
            self.catalog.last_built(),
            self.catalog.on_demand_prices().current(),
        ))
    }
}
