//! The catalog the provisioner solves against, built from what EC2 reports (types, zone
//! offerings, spot prices) and kept for a few minutes in a warm container.
//!
//! On-demand prices ([`super::on_demand_prices`]) start from the bundled us-east-1 table
//! ([`bundled_on_demand_prices`]) and are replaced by the region's own prices from the AWS
//! Price List API once it answers ([`LiveCatalog::refresh_prices`]); a type the Price List
//! has no price for keeps its bundled price, and a failed refresh keeps the last good
//! prices. They are kept for [`super::on_demand_prices::PRICE_TTL`], far longer than EC2's
//! answers, because they change far more rarely.
//!
//! The first poll of a cold container does not wait for the Price List: it solves with the
//! bundled table, and the prices are asked for afterwards (the provisioner handler does so
//! right after an invocation's first poll). Fetching them alongside the EC2 calls instead
//! would make the first poll wait for ten or so sequential GetProducts pages, often from
//! another continent's endpoint — seconds added to the one launch a cold start already
//! delays — while the bundled table orders types correctly in most regions; the regional
//! prices only sharpen the choice for the polls after it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use super::on_demand_prices::{OnDemandPrices, PriceRefresh};
use crate::aws::{AwsError, InstanceTypeSource, OnDemandPriceSource, SpotPrice, TypeOffering};
use crate::catalog::{
    CapacityType, Catalog, CatalogEntry, DEFAULT_SPOT_DISCOUNT, InstanceType, Offering,
    estimated_spot_price,
};

/// How long EC2's answers are reused: instance types and offerings change on the scale of
/// months, spot prices at most every few minutes (Karpenter refreshes its instance-type
/// and pricing caches on a similar period).
pub const CATALOG_TTL: Duration = Duration::from_secs(300);

/// The catalog for `zones` (the zones of the discovered subnets): a type gets an
/// on-demand offering in each zone EC2 offers it in when `on_demand_prices` has its price,
/// and a spot offering where a spot price for (type, zone) is known (the newest one wins).
/// A type with no offering left is dropped.
///
/// When EC2 reported no spot price at all (a region or emulator without spot price
/// history), spot offerings of spot-capable types are estimated from on-demand with
/// [`DEFAULT_SPOT_DISCOUNT`] and the catalog says so (`spot_prices_estimated`).
pub fn build_catalog(
    types: &[InstanceType],
    offerings: &[TypeOffering],
    spot_prices: &[SpotPrice],
    on_demand_prices: &HashMap<String, f64>,
    zones: &[String],
) -> Catalog {
    let wanted: BTreeSet<&str> = zones.iter().map(String::as_str).collect();
    let mut offered: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for o in offerings {
        if wanted.contains(o.zone.as_str()) {
            offered.entry(&o.instance_type).or_default().insert(&o.zone);
        }
    }
    let mut spot: HashMap<(&str, &str), &SpotPrice> = HashMap::new();
    for p in spot_prices {
        if !(p.price.is_finite() && p.price > 0.0) {
            continue;
        }
        let key = (p.instance_type.as_str(), p.zone.as_str());
        match spot.get(&key) {
            Some(kept) if kept.timestamp >= p.timestamp => {}
            _ => {
                spot.insert(key, p);
            }
        }
    }
    let estimated = spot_prices.is_empty();
    let mut entries = Vec::new();
    for it in types {
        let Some(in_zones) = offered.get(it.name.as_str()) else {
            continue;
        };
        let on_demand = on_demand_prices
            .get(&it.name)
            .copied()
            .filter(|p| p.is_finite() && *p > 0.0);
        let mut list = Vec::new();
        for zone in zones.iter().filter(|z| in_zones.contains(z.as_str())) {
            if let Some(price) = on_demand {
                list.push(offering(zone, CapacityType::OnDemand, price));
            }
            let spot_price = match spot.get(&(it.name.as_str(), zone.as_str())) {
                Some(p) => Some(p.price),
                None if estimated && it.spot => {
                    on_demand.map(|od| estimated_spot_price(od, DEFAULT_SPOT_DISCOUNT))
                }
                None => None,
            };
            if let Some(price) = spot_price {
                list.push(offering(zone, CapacityType::Spot, price));
            }
        }
        if !list.is_empty() {
            entries.push(CatalogEntry {
                instance_type: it.clone(),
                offerings: list,
            });
        }
    }
    Catalog {
        entries,
        spot_prices_estimated: estimated,
    }
}

fn offering(zone: &str, capacity_type: CapacityType, price: f64) -> Offering {
    Offering {
        zone: zone.to_string(),
        capacity_type,
        price,
        available: true,
    }
}

/// What EC2 said, as of `at`.
#[derive(Debug, Clone)]
struct Fetched {
    at: SystemTime,
    types: Vec<InstanceType>,
    offerings: Vec<TypeOffering>,
    spot_prices: Vec<SpotPrice>,
}

/// EC2's instance data, refreshed every [`CATALOG_TTL`]. A refresh that fails keeps the last
/// good data (a catalog a few minutes old beats no launch at all); only a first load that
/// fails is an error.
#[derive(Debug)]
pub struct LiveCatalog {
    ttl: Duration,
    on_demand_prices: OnDemandPrices,
    fetched: Option<Fetched>,
    /// The catalog last built, and the zones it was built for.
    built: Option<(Vec<String>, SystemTime, Catalog)>,
}

/// How a [`LiveCatalog::get`] went, besides the catalog itself.
#[derive(Debug, Default)]
pub struct Refresh {
    /// The refresh that failed, when stale data was used instead.
    pub stale_because: Option<AwsError>,
}

impl LiveCatalog {
    pub fn new(on_demand_prices: HashMap<String, f64>) -> LiveCatalog {
        LiveCatalog::with_ttl(on_demand_prices, CATALOG_TTL)
    }

    pub fn with_ttl(on_demand_prices: HashMap<String, f64>, ttl: Duration) -> LiveCatalog {
        LiveCatalog {
            ttl,
            on_demand_prices: OnDemandPrices::new(on_demand_prices),
            fetched: None,
            built: None,
        }
    }

    /// The on-demand prices in use and where they came from.
    pub fn on_demand_prices(&self) -> &OnDemandPrices {
        &self.on_demand_prices
    }

    /// The catalog last built, if any: what the fleet's cost is read from between polls.
    pub fn last_built(&self) -> Option<&Catalog> {
        self.built.as_ref().map(|(_, _, catalog)| catalog)
    }

    /// Asks `source` for the region's on-demand prices when they are due (see
    /// [`super::on_demand_prices`]); the next catalog is built with them.
    pub async fn refresh_prices<P: OnDemandPriceSource>(
        &mut self,
        source: &P,
        now: SystemTime,
    ) -> PriceRefresh {
        let refresh = self.on_demand_prices.refresh(source, now).await;
        if matches!(refresh, PriceRefresh::Updated { .. }) {
            self.built = None;
        }
        refresh
    }

    /// The catalog for `zones` at `now`, asking `source` again when the data is older
    /// than the TTL (or `now` went backwards).
    pub async fn get<S: InstanceTypeSource>(
        &mut self,
        source: &S,
        zones: &[String],
        now: SystemTime,
    ) -> Result<(Catalog, Refresh), AwsError> {
        self.get_younger_than(source, zones, now, self.ttl).await
    }

    /// Builds the catalog for `zones` ahead of need, off a pending pod's path (a standby
    /// invocation does it while it waits for the Lease): data older than half the TTL is
    /// fetched again, so a container that warms itself at least every half TTL never
    /// refreshes inside a poll.
    pub async fn warm<S: InstanceTypeSource>(
        &mut self,
        source: &S,
        zones: &[String],
        now: SystemTime,
    ) -> Result<Refresh, AwsError> {
        self.get_younger_than(source, zones, now, self.ttl / 2)
            .await
            .map(|(_, refresh)| refresh)
    }

    async fn get_younger_than<S: InstanceTypeSource>(
        &mut self,
        source: &S,
        zones: &[String],
        now: SystemTime,
        max_age: Duration,
    ) -> Result<(Catalog, Refresh), AwsError> {
        let fresh = self
            .fetched
            .as_ref()
            .is_some_and(|f| now.duration_since(f.at).is_ok_and(|age| age < max_age));
        let mut refresh = Refresh::default();
        if !fresh {
            match fetch(source, now).await {
                Ok(f) => {
                    self.fetched = Some(f);
                    self.built = None;
                }
                Err(e) if self.fetched.is_some() => refresh.stale_because = Some(e),
                Err(e) => return Err(e),
            }
        }
        let Some(f) = &self.fetched else {
            // Unreachable: either the fetch above succeeded or we returned its error.
            return Ok((Catalog::default(), refresh));
        };
        if let Some((z, at, c)) = &self.built
            && z == zones
            && *at == f.at
        {
            return Ok((c.clone(), refresh));
        }
        let catalog = build_catalog(
            &f.types,
            &f.offerings,
            &f.spot_prices,
            self.on_demand_prices.current(),
            zones,
        );
        self.built = Some((zones.to_vec(), f.at, catalog.clone()));
        Ok((catalog, refresh))
    }
}

async fn fetch<S: InstanceTypeSource>(source: &S, now: SystemTime) -> Result<Fetched, AwsError> {
    Ok(Fetched {
        at: now,
        types: source.instance_types().await?,
        offerings: source.offerings().await?,
        spot_prices: source.spot_prices().await?,
    })
}

/// The bundled us-east-1 on-demand prices by type name: where on-demand prices start, and
/// what stays in use where the Price List API has no answer (see the module comment).
pub fn bundled_on_demand_prices() -> Result<HashMap<String, f64>, crate::catalog::CatalogError> {
    Ok(crate::catalog::bundled_instance_types()?
        .into_iter()
        .map(|(it, price)| (it.name, price))
        .collect())
}

/// Offerings by (type, zone, capacity type) -> price, for tests and reports.
pub fn price_table(catalog: &Catalog) -> BTreeMap<(String, String, CapacityType), f64> {
    catalog
        .entries
        .iter()
        .flat_map(|e| {
            e.offerings.iter().map(|o| {
                (
                    (
                        e.instance_type.name.clone(),
                        o.zone.clone(),
                        o.capacity_type,
                    ),
                    o.price,
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
