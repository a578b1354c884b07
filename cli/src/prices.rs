//! What a node costs an hour in `status`: the region's own prices when AWS can be asked (the
//! Price List API for on-demand, EC2's spot price history for spot), else the bundled
//! us-east-1 table with spot estimated from it. A price that had to fall back is marked as
//! an estimate, and the line under the table says where the prices came from.

use std::collections::HashMap;

use anyhow::Context as _;
use nodewright::aws::{Ec2Adapter, OnDemandPriceSource as _, PricingAdapter};
use nodewright::catalog::{BUNDLED_PRICE_REGION, bundled_instance_types, estimated_spot_price};

use crate::money;

/// Where the prices in use came from.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    Bundled,
    Region {
        region: String,
        /// On-demand prices came from the region's Price List (else the bundled table).
        on_demand: bool,
        /// Spot prices came from the region's spot price history (else estimated).
        spot: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Prices {
    bundled: HashMap<String, f64>,
    /// The region's on-demand prices, by instance type.
    on_demand: HashMap<String, f64>,
    /// The region's spot prices in force now, by (instance type, zone).
    spot: HashMap<(String, String), f64>,
    spot_discount: f64,
    source: Source,
}

impl Prices {
    /// The bundled us-east-1 table; spot estimated as on-demand less `spot_discount`.
    pub fn bundled(spot_discount: f64) -> anyhow::Result<Prices> {
        let bundled = bundled_instance_types()
            .context("reading the bundled catalog")?
            .into_iter()
            .map(|(t, price)| (t.name, price))
            .collect();
        Ok(Prices {
            bundled,
            on_demand: HashMap::new(),
            spot: HashMap::new(),
            spot_discount,
            source: Source::Bundled,
        })
    }

    /// `region`'s prices for the fleet: on-demand from the Price List API, spot for
    /// `spot_types` from EC2's price history. What cannot be read is named in the second
    /// value, and those prices come from the bundled table as estimates.
    pub async fn of_region(
        sdk: &aws_config::SdkConfig,
        region: &str,
        spot_types: &[String],
        spot_discount: f64,
    ) -> anyhow::Result<(Prices, Vec<String>)> {
        let mut prices = Prices::bundled(spot_discount)?;
        let mut problems = Vec::new();
        match PricingAdapter::from_config(sdk, region)
            .on_demand_prices()
            .await
        {
            Ok(listed) => prices.on_demand = listed,
            Err(e) => problems.push(format!(
                "{region}'s on-demand prices: {}",
                nodewright::error_chain(&e)
            )),
        }
        if !spot_types.is_empty() {
            // Spot prices are the region's: no cluster is involved.
            let ec2 = Ec2Adapter::new(aws_sdk_ec2::Client::new(sdk), "");
            match ec2.spot_prices_of(spot_types).await {
                Ok(history) => {
                    prices.spot = history
                        .into_iter()
                        .map(|p| ((p.instance_type, p.zone), p.price))
                        .collect();
                }
                Err(e) => problems.push(format!(
                    "{region}'s spot prices: {}",
                    nodewright::error_chain(&e)
                )),
            }
        }
        prices.source = Source::Region {
            region: region.to_string(),
            on_demand: !prices.on_demand.is_empty(),
            spot: !prices.spot.is_empty(),
        };
        Ok((prices, problems))
    }

    /// The hourly price of a node and whether it is an estimate; `None` for a type neither
    /// the region nor the bundled table prices.
    pub fn of(&self, instance_type: &str, zone: &str, capacity_type: &str) -> Option<(f64, bool)> {
        let regional = matches!(self.source, Source::Region { .. });
        if capacity_type == "spot" {
            let listed = self
                .spot
                .get(&(instance_type.to_string(), zone.to_string()));
            if let Some(price) = listed {
                return Some((*price, false));
            }
            let (on_demand, _) = self.on_demand_of(instance_type)?;
            return Some((estimated_spot_price(on_demand, self.spot_discount), true));
        }
        self.on_demand_of(instance_type)
            .map(|(price, fallback)| (price, fallback && regional))
    }

    /// The region's on-demand price, else the bundled one (`true`: the fallback).
    fn on_demand_of(&self, instance_type: &str) -> Option<(f64, bool)> {
        match self.on_demand.get(instance_type) {
            Some(price) => Some((*price, false)),
            None => self.bundled.get(instance_type).map(|p| (*p, true)),
        }
    }

    /// The line under the table: where the prices came from and how an estimate is made.
    pub fn source_line(&self, any_estimate: bool) -> String {
        let Source::Region {
            region,
            on_demand,
            spot,
        } = &self.source
        else {
            return money::source_line(self.spot_discount, any_estimate);
        };
        let on_demand = if *on_demand {
            format!("{region} on-demand from the Price List API")
        } else {
            format!("bundled {BUNDLED_PRICE_REGION} on-demand table ({region}'s could not be read)")
        };
        let mut line = format!("Prices: {on_demand}");
        if *spot {
            line.push_str(&format!("; spot from {region}'s spot price history"));
        }
        if any_estimate {
            line.push_str(&format!(
                "; ~ marks an estimate: a type {region} does not price from the bundled \
                 {BUNDLED_PRICE_REGION} table, spot without a price taken as on-demand less \
                 {:.0}% (--spot-discount)",
                self.spot_discount * 100.0
            ));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regional() -> Prices {
        let mut p = Prices::bundled(0.6).unwrap();
        p.on_demand = [("m5.large".to_string(), 0.107)].into();
        p.spot = [(("m5.large".to_string(), "eu-west-1a".to_string()), 0.04)].into();
        p.source = Source::Region {
            region: "eu-west-1".into(),
            on_demand: true,
            spot: true,
        };
        p
    }

    #[test]
    fn a_node_costs_what_its_region_lists_and_the_bundled_table_only_as_a_marked_estimate() {
        let bundled_c5 = Prices::bundled(0.6).unwrap().bundled["c5.large"];
        let bundled_m5 = Prices::bundled(0.6).unwrap().bundled["m5.large"];
        let cases = [
            ("m5.large", "eu-west-1a", "on-demand", Some((0.107, false))),
            ("m5.large", "eu-west-1a", "spot", Some((0.04, false))),
            // No spot price for the zone: the region's on-demand price less the discount.
            ("m5.large", "eu-west-1b", "spot", Some((0.107 * 0.4, true))),
            // Not in the region's answer: the bundled price, marked.
            (
                "c5.large",
                "eu-west-1a",
                "on-demand",
                Some((bundled_c5, true)),
            ),
            (
                "c5.large",
                "eu-west-1a",
                "spot",
                Some((bundled_c5 * 0.4, true)),
            ),
            ("x9.nothing", "eu-west-1a", "on-demand", None),
        ];
        let prices = regional();
        for (t, zone, capacity, want) in cases {
            let got = prices.of(t, zone, capacity);
            let close = match (got, want) {
                (Some((g, ge)), Some((w, we))) => (g - w).abs() < 1e-9 && ge == we,
                (g, w) => g == w,
            };
            assert!(close, "{t} {zone} {capacity}: {got:?}, want {want:?}");
        }
        let bundled = Prices::bundled(0.6).unwrap();
        assert_eq!(
            bundled.of("m5.large", "us-east-1a", "on-demand"),
            Some((bundled_m5, false)),
            "the bundled table is what a kubeconfig-only status lists, not an estimate"
        );
    }

    #[test]
    fn the_source_line_names_the_region_and_what_fell_back() {
        assert_eq!(
            regional().source_line(false),
            "Prices: eu-west-1 on-demand from the Price List API; spot from eu-west-1's spot \
             price history"
        );
        let mut unread = regional();
        unread.source = Source::Region {
            region: "eu-west-1".into(),
            on_demand: false,
            spot: false,
        };
        let line = unread.source_line(true);
        assert!(
            line.starts_with(
                "Prices: bundled us-east-1 on-demand table (eu-west-1's could not be read); ~"
            ),
            "{line}"
        );
        assert_eq!(
            Prices::bundled(0.6).unwrap().source_line(false),
            "Prices: bundled us-east-1 on-demand table"
        );
    }
}
