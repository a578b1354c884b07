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

use self::freshness::{Purpose, Step};
use super::on_demand_prices::{OnDemandPrices, PriceRefresh};
use super::swr::Swr;
use crate::aws::{AwsError, InstanceTypeSource, OnDemandPriceSource, SpotPrice, TypeOffering};
use crate::catalog::{
    CapacityType, Catalog, CatalogEntry, DEFAULT_SPOT_DISCOUNT, InstanceType, Offering,
    estimated_spot_price,
};

/// How long EC2's answers are reused: instance types and offerings change on the scale of
/// months, spot prices at most every few minutes (Karpenter refreshes its instance-type
/// and pricing caches on a similar period).
pub const CATALOG_TTL: Duration = Duration::from_secs(300);

/// How long the instance types themselves are kept across refreshes: a type's vCPUs,
/// memory and limits never change and new types arrive a few times a year, while
/// DescribeInstanceTypes is the largest of the three answers (about 900 types, ten pages).
/// Offerings and spot prices, which do change, are asked at every refresh.
pub const TYPES_TTL: Duration = Duration::from_secs(3600);

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
        reservations: Default::default(),
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

/// What EC2 said (the types as of `types_at`, see [`TYPES_TTL`]).
#[derive(Debug, Clone)]
struct Fetched {
    types_at: SystemTime,
    types: Vec<InstanceType>,
    offerings: Vec<TypeOffering>,
    spot_prices: Vec<SpotPrice>,
}

/// The catalog's data is one answer (no key to tell answers apart).
const ONE: &str = "";

/// EC2's instance data, kept fresh off the pod's path and used stale rather than waited
/// for (see [`freshness`]): a poll asks EC2 only when the container has no catalog yet (or
/// its catalog is past [`freshness::MAX_STALENESS`]); [`LiveCatalog::warm`] refreshes it
/// ahead of need. A refresh that fails keeps the last good data and backs off; only a
/// first load that fails is an error.
#[derive(Debug)]
pub struct LiveCatalog {
    on_demand_prices: OnDemandPrices,
    /// EC2's answers, kept with [`freshness::policy`].
    fetched: Swr<Fetched>,
    /// The catalog last built, the zones it was built for and when its data was fetched.
    built: Option<(Vec<String>, SystemTime, Catalog)>,
}

/// How a [`LiveCatalog::get`] or [`LiveCatalog::warm`] went, besides the catalog itself.
#[derive(Debug, Default)]
pub struct Refresh {
    /// The refresh that failed, when stale data was used instead.
    pub stale_because: Option<AwsError>,
    /// The age of the data used when it was past its TTL.
    pub stale_for: Option<Duration>,
    /// When the next refresh may be tried, while a failure is backing off.
    pub retry_at: Option<SystemTime>,
}

impl LiveCatalog {
    pub fn new(on_demand_prices: HashMap<String, f64>) -> LiveCatalog {
        LiveCatalog::with_ttl(on_demand_prices, CATALOG_TTL)
    }

    pub fn with_ttl(on_demand_prices: HashMap<String, f64>, ttl: Duration) -> LiveCatalog {
        LiveCatalog {
            on_demand_prices: OnDemandPrices::new(on_demand_prices),
            fetched: Swr::new(freshness::policy(ttl)),
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

    /// The catalog for a poll at `now`: the last good one while there is one (stale past
    /// the TTL, see [`freshness`]), so a pending pod never waits for EC2; built from EC2
    /// only when there is none yet, or when it is past [`freshness::MAX_STALENESS`].
    pub async fn get<S: InstanceTypeSource>(
        &mut self,
        source: &S,
        zones: &[String],
        now: SystemTime,
    ) -> Result<(Catalog, Refresh), AwsError> {
        self.get_for(Purpose::Poll, source, zones, now).await
    }

    /// Whether [`LiveCatalog::warm`] at `now` would ask EC2: the data is past half its TTL
    /// (or missing) and no failed refresh is backing off.
    pub fn refresh_due(&self, now: SystemTime) -> bool {
        self.step(Purpose::WarmUp, now) == Step::Fetch
    }

    /// Builds the catalog for `zones` ahead of need, off a pending pod's path (a standby
    /// invocation while it waits for the Lease, a holder between polls): data older than
    /// half the TTL is fetched again, so a container that warms itself at least every
    /// half TTL has fresh data at every poll. Within a failure's back-off it asks nothing.
    pub async fn warm<S: InstanceTypeSource>(
        &mut self,
        source: &S,
        zones: &[String],
        now: SystemTime,
    ) -> Result<Refresh, AwsError> {
        self.get_for(Purpose::WarmUp, source, zones, now)
            .await
            .map(|(_, refresh)| refresh)
    }

    /// A clock that went backwards makes the data's age unknown: it counts as just expired
    /// (a poll uses it, a warm-up refreshes it).
    fn step(&self, purpose: Purpose, now: SystemTime) -> Step {
        self.fetched.step(purpose, ONE, now)
    }

    async fn get_for<S: InstanceTypeSource>(
        &mut self,
        purpose: Purpose,
        source: &S,
        zones: &[String],
        now: SystemTime,
    ) -> Result<(Catalog, Refresh), AwsError> {
        let mut refresh = Refresh::default();
        match self.step(purpose, now) {
            Step::Use => {}
            Step::UseStale { warn } => {
                refresh.stale_for = self.age(now);
                if warn {
                    tracing::warn!(
                        age = ?refresh.stale_for,
                        ?purpose,
                        "the instance catalog is past {:?}: its offerings and spot prices may be out of date (refreshing it keeps failing)",
                        freshness::STALE_WARN_AFTER
                    );
                }
            }
            Step::Fetch => match fetch(source, self.fetched.value(ONE), now).await {
                Ok(f) => {
                    self.fetched.store(ONE.to_string(), f, now);
                    self.built = None;
                }
                Err(e) if self.fetched.value(ONE).is_some() => {
                    self.fetched.failed(now);
                    refresh.stale_because = Some(e);
                    let ttl = self.fetched.policy().ttl;
                    refresh.stale_for = self.age(now).filter(|age| *age >= ttl);
                }
                Err(e) => return Err(e),
            },
        }
        refresh.retry_at = self.fetched.backing_off(now);
        let (Some(f), Some(fetched_at)) = (self.fetched.value(ONE), self.fetched.fetched_at(ONE))
        else {
            // Unreachable: without data the step is Fetch, which stored data or returned.
            return Ok((Catalog::default(), refresh));
        };
        if let Some((z, at, c)) = &self.built
            && z == zones
            && *at == fetched_at
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
        self.built = Some((zones.to_vec(), fetched_at, catalog.clone()));
        Ok((catalog, refresh))
    }

    fn age(&self, now: SystemTime) -> Option<Duration> {
        self.fetched.age(ONE, now)
    }
}

/// EC2's answers as of `now`, the instance types taken from `previous` while they are
/// younger than [`TYPES_TTL`] (a clock that went backwards: asked again).
async fn fetch<S: InstanceTypeSource>(
    source: &S,
    previous: Option<&Fetched>,
    now: SystemTime,
) -> Result<Fetched, AwsError> {
    let kept = previous.filter(|f| {
        now.duration_since(f.types_at)
            .is_ok_and(|age| age < TYPES_TTL)
    });
    let (types, types_at) = match kept {
        Some(f) => (f.types.clone(), f.types_at),
        None => (source.instance_types().await?, now),
    };
    Ok(Fetched {
        types_at,
        types,
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

pub mod freshness;

#[cfg(test)]
mod tests;
