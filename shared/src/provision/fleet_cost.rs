//! What the owned instances cost per hour: the fleet $/h metric and `nodewright status`'s
//! total. Each instance is priced from the catalog the provisioner last built (spot prices
//! of the region, on-demand prices from the Price List or the bundled table); an on-demand
//! instance of a type that catalog lacks falls back to the on-demand table; a spot
//! instance without a catalog price is counted as unpriced rather than guessed.

use std::collections::HashMap;

use crate::aws::OwnedInstance;
use crate::catalog::{CapacityType, Catalog, reserved_price};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetCost {
    /// US dollars per hour of the priced instances.
    pub per_hour: f64,
    pub instances: usize,
    /// Ids of the instances no price was found for.
    pub unpriced: Vec<String>,
}

/// The hourly price of one instance type in a zone and capacity type, when known.
pub fn instance_price(
    instance_type: &str,
    zone: &str,
    capacity_type: CapacityType,
    catalog: Option<&Catalog>,
    on_demand: &HashMap<String, f64>,
) -> Option<f64> {
    let offered = catalog
        .and_then(|c| c.get(instance_type))
        .and_then(|e| {
            e.offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == capacity_type)
        })
        .map(|o| o.price);
    offered.or_else(|| match capacity_type {
        CapacityType::OnDemand => on_demand.get(instance_type).copied(),
        CapacityType::Reserved => on_demand.get(instance_type).copied().map(reserved_price),
        CapacityType::Spot => None,
    })
}

pub fn fleet_cost(
    instances: &[OwnedInstance],
    catalog: Option<&Catalog>,
    on_demand: &HashMap<String, f64>,
) -> FleetCost {
    let mut cost = FleetCost {
        instances: instances.len(),
        ..FleetCost::default()
    };
    for i in instances {
        match instance_price(
            &i.instance_type,
            &i.zone,
            i.capacity_type,
            catalog,
            on_demand,
        ) {
            Some(price) => cost.per_hour += price,
            None => cost.unpriced.push(i.id.clone()),
        }
    }
    cost
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::InstanceState;
    use crate::catalog::{CatalogEntry, InstanceType, Offering};

    fn instance(id: &str, instance_type: &str, zone: &str, ct: CapacityType) -> OwnedInstance {
        OwnedInstance {
            id: id.into(),
            instance_type: instance_type.into(),
            zone: zone.into(),
            state: InstanceState::Running,
            capacity_type: ct,
            launch_time: None,
            tags: Default::default(),
            private_dns_name: None,
            subnet_id: None,
            image_id: None,
            security_groups: Vec::new(),
        }
    }

    fn catalog() -> Catalog {
        let offering = |zone: &str, capacity_type, price| Offering {
            zone: zone.into(),
            capacity_type,
            price,
            available: true,
        };
        Catalog {
            entries: vec![CatalogEntry {
                instance_type: InstanceType {
                    name: "m5.large".into(),
                    ..Default::default()
                },
                offerings: vec![
                    offering("us-east-1a", CapacityType::OnDemand, 0.096),
                    offering("us-east-1a", CapacityType::Spot, 0.035),
                    offering("us-east-1b", CapacityType::Spot, 0.041),
                ],
            }],
            spot_prices_estimated: false,
            reservations: Default::default(),
        }
    }

    #[test]
    fn each_instance_costs_its_own_zones_and_capacity_types_price() {
        let on_demand = HashMap::from([("m5.large".to_string(), 0.1)]);
        let fleet = [
            instance("i-1", "m5.large", "us-east-1a", CapacityType::OnDemand),
            instance("i-2", "m5.large", "us-east-1a", CapacityType::Spot),
            instance("i-3", "m5.large", "us-east-1b", CapacityType::Spot),
        ];
        let cost = fleet_cost(&fleet, Some(&catalog()), &on_demand);
        assert!(
            (cost.per_hour - (0.096 + 0.035 + 0.041)).abs() < 1e-9,
            "{cost:?}"
        );
        assert_eq!(cost.instances, 3);
        assert!(cost.unpriced.is_empty());
    }

    #[test]
    fn without_a_catalog_on_demand_uses_the_table_and_spot_is_unpriced_not_guessed() {
        let on_demand = HashMap::from([("c5.xlarge".to_string(), 0.17)]);
        let fleet = [
            instance("i-1", "c5.xlarge", "us-east-1a", CapacityType::OnDemand),
            instance("i-2", "c5.xlarge", "us-east-1a", CapacityType::Spot),
            instance("i-3", "x9.unknown", "us-east-1a", CapacityType::OnDemand),
        ];
        let cost = fleet_cost(&fleet, None, &on_demand);
        assert!((cost.per_hour - 0.17).abs() < 1e-9, "{cost:?}");
        assert_eq!(cost.instances, 3);
        assert_eq!(cost.unpriced, ["i-2", "i-3"]);
    }

    #[test]
    fn an_on_demand_type_the_catalog_lacks_falls_back_to_the_table() {
        let on_demand = HashMap::from([("r5.large".to_string(), 0.126)]);
        let price = instance_price(
            "r5.large",
            "us-east-1a",
            CapacityType::OnDemand,
            Some(&catalog()),
            &on_demand,
        );
        assert_eq!(price, Some(0.126));
    }
}
