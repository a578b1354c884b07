//! Offerings (instance type x zone x capacity type, with a price) and the offline catalog
//! built from the bundled data when live EC2 pricing is not available.

use super::bundled::bundled_instance_types;
use super::{CapacityType, Catalog, CatalogEntry, CatalogError, InstanceType, Offering};

/// Share of the on-demand price assumed saved on spot when no spot price history is at
/// hand: spot estimate = on-demand * (1 - 0.6). AWS advertises savings of "up to 90%";
/// what fleets diversified over many types actually get is lower and varies by type and
/// zone. The AWS Spot Instance Advisor shows most current-generation types saving roughly
/// 55-75%, and cost-benchmark write-ups report averages near 58-60% (e.g. codcompass.com,
/// "Spot instance cost savings": "an average compute cost reduction of 58%"). 0.6 is the
/// conservative end: it rarely makes spot look cheaper than it is. Such prices are marked
/// as estimates (`Catalog::spot_prices_estimated`).
pub const DEFAULT_SPOT_DISCOUNT: f64 = 0.6;

/// The spot price assumed for an on-demand price and a discount in [0, 1).
pub fn estimated_spot_price(on_demand: f64, spot_discount: f64) -> f64 {
    on_demand * (1.0 - spot_discount)
}

/// One on-demand offering per zone, and one spot offering per zone when `spot_price` is
/// given, all available. Zones keep the caller's order; on-demand comes first.
pub fn offerings_for(
    zones: &[String],
    on_demand_price: f64,
    spot_price: Option<f64>,
) -> Vec<Offering> {
    let mut out = Vec::with_capacity(zones.len() * 2);
    for zone in zones {
        out.push(Offering {
            zone: zone.clone(),
            capacity_type: CapacityType::OnDemand,
            price: on_demand_price,
            available: true,
        });
        if let Some(price) = spot_price {
            out.push(Offering {
                zone: zone.clone(),
                capacity_type: CapacityType::Spot,
                price,
                available: true,
            });
        }
    }
    out
}

impl Catalog {
    /// Offline catalog: every bundled type, offered in every zone given, on-demand at the
    /// bundled us-east-1 price and, for types EC2 sells as spot, spot at
    /// `on-demand * (1 - spot_discount)`. `spot_prices_estimated` is true.
    pub fn offline(zones: &[String], spot_discount: f64) -> Result<Catalog, CatalogError> {
        if zones.is_empty() {
            return Err(CatalogError::NoZones);
        }
        if !(0.0..1.0).contains(&spot_discount) {
            return Err(CatalogError::SpotDiscount(spot_discount));
        }
        let entries = bundled_instance_types()?
            .into_iter()
            .map(|(instance_type, on_demand)| {
                offline_entry(instance_type, on_demand, zones, spot_discount)
            })
            .collect();
        Ok(Catalog {
            entries,
            spot_prices_estimated: true,
            reservations: Default::default(),
        })
    }
}

fn offline_entry(
    instance_type: InstanceType,
    on_demand: f64,
    zones: &[String],
    spot_discount: f64,
) -> CatalogEntry {
    let spot = instance_type
        .spot
        .then(|| estimated_spot_price(on_demand, spot_discount));
    CatalogEntry {
        offerings: offerings_for(zones, on_demand, spot),
        instance_type,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zones() -> Vec<String> {
        vec!["us-east-1a".to_string(), "us-east-1b".to_string()]
    }

    fn offline() -> Catalog {
        match Catalog::offline(&zones(), DEFAULT_SPOT_DISCOUNT) {
            Ok(c) => c,
            Err(e) => panic!("offline catalog: {e}"),
        }
    }

    #[test]
    fn offline_catalog_offers_on_demand_and_cheaper_spot_in_every_zone() {
        let catalog = offline();
        assert!(catalog.spot_prices_estimated);
        assert!(catalog.entries.len() > 400);
        for entry in &catalog.entries {
            let name = &entry.instance_type.name;
            let per_zone = if entry.instance_type.spot { 2 } else { 1 };
            assert_eq!(entry.offerings.len(), per_zone * zones().len(), "{name}");
            for zone in zones() {
                let price = |ct| {
                    entry
                        .offerings
                        .iter()
                        .find(|o| o.zone == zone && o.capacity_type == ct)
                        .map(|o| o.price)
                };
                let on_demand = price(CapacityType::OnDemand);
                assert!(on_demand.is_some_and(|p| p > 0.0), "{name} in {zone}");
                if entry.instance_type.spot {
                    let spot = price(CapacityType::Spot);
                    assert!(
                        spot.is_some_and(|s| on_demand.is_some_and(|od| s > 0.0 && s < od)),
                        "{name} {zone}"
                    );
                }
            }
            assert!(entry.offerings.iter().all(|o| o.available));
        }
    }

    #[test]
    fn most_bundled_types_can_be_bought_as_spot() {
        let catalog = offline();
        let spot = catalog
            .entries
            .iter()
            .filter(|e| e.instance_type.spot)
            .count();
        assert!(
            spot * 10 > catalog.entries.len() * 9,
            "{spot} of {}",
            catalog.entries.len()
        );
        let c5 = catalog.get("c5.xlarge").map(|e| e.offerings.len());
        assert_eq!(c5, Some(4));
    }

    #[test]
    fn spot_estimate_applies_the_discount_to_on_demand() {
        let catalog = offline();
        let Some(entry) = catalog.get("m5.large") else {
            panic!("m5.large missing")
        };
        let on_demand = entry
            .offerings
            .iter()
            .find(|o| o.capacity_type == CapacityType::OnDemand)
            .map(|o| o.price);
        let spot = entry
            .offerings
            .iter()
            .find(|o| o.capacity_type == CapacityType::Spot)
            .map(|o| o.price);
        assert_eq!(spot, on_demand.map(|p| p * 0.4));
    }

    #[test]
    fn lookups_by_name_find_the_entry_or_nothing() {
        let catalog = offline();
        assert_eq!(
            catalog.get("c6i.2xlarge").map(|e| e.instance_type.vcpu),
            Some(8)
        );
        assert!(catalog.get("c6i.huge").is_none());
    }

    #[test]
    fn offline_catalog_rejects_no_zones_and_discounts_outside_0_to_1() {
        assert!(matches!(
            Catalog::offline(&[], 0.6),
            Err(CatalogError::NoZones)
        ));
        for bad in [-0.1, 1.0, 1.5, f64::NAN] {
            assert!(
                matches!(
                    Catalog::offline(&zones(), bad),
                    Err(CatalogError::SpotDiscount(_))
                ),
                "{bad}"
            );
        }
    }
}
