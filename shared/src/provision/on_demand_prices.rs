//! On-demand prices for the catalog: the bundled us-east-1 table at first, replaced by the
//! region's own prices (the Price List API) once an answer arrives, kept in the warm
//! container and asked again after [`PRICE_TTL`].
//!
//! The decisions are values: [`merge_prices`] (what the catalog uses) and [`refresh_due`]
//! (when to ask), both tested by tables; [`OnDemandPrices::apply`] is the one transition.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::swr::{BackOff, Policy, Purpose, Step, Swr};
use crate::aws::{AwsError, OnDemandPriceSource};

/// How long a Price List answer is used before asking again. AWS changes on-demand prices
/// rarely (a price cut is announced; a new type appears a few times a month, and until
/// then keeps its bundled price), and one answer costs about ten GetProducts pages, so
/// half a day is fresh enough. A Lambda container seldom lives that long: in practice each
/// cold container asks once.
pub const PRICE_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// After a failed refresh, how long to wait before the next try: short enough that a
/// passing throttle or timeout heals soon, long enough that a lasting failure (the role
/// lacks `pricing:GetProducts`, no route to the endpoint) does not cost every invocation a
/// failed call and a warning.
pub const PRICE_RETRY_AFTER: Duration = Duration::from_secs(15 * 60);

/// The prices the catalog uses: the fetched price of each type where it is usable (finite
/// and above zero), the bundled price otherwise. A type only the Price List knows is
/// included; a type it lacks keeps its bundled price.
pub fn merge_prices(
    bundled: &HashMap<String, f64>,
    fetched: &HashMap<String, f64>,
) -> HashMap<String, f64> {
    let mut merged = bundled.clone();
    for (instance_type, price) in fetched {
        if usable(*price) {
            merged.insert(instance_type.clone(), *price);
        }
    }
    merged
}

fn usable(price: f64) -> bool {
    price.is_finite() && price > 0.0
}

/// How the last ask for prices went, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastAsk {
    Answered(SystemTime),
    Failed(SystemTime),
}

/// How the Price List's answer ages: asked again after [`PRICE_TTL`], or a fixed
/// [`PRICE_RETRY_AFTER`] after a failure. Polls never ask for prices (they use what is
/// kept, the bundled table at worst), so there is no bound on staleness.
pub const PRICE_POLICY: Policy = Policy {
    ttl: PRICE_TTL,
    refresh_after: PRICE_TTL,
    max_staleness: Duration::MAX,
    warn_after: None,
    back_off: BackOff {
        first: PRICE_RETRY_AFTER,
        max: PRICE_RETRY_AFTER,
    },
};

/// The last ask as an answer kept by [`PRICE_POLICY`]: the bundled table counts as an
/// answer as old as can be, so prices are asked for at first.
fn kept(last: Option<LastAsk>) -> Swr<()> {
    let mut asked = Swr::seeded(PRICE_POLICY, (), SystemTime::UNIX_EPOCH);
    match last {
        None => {}
        Some(LastAsk::Answered(at)) => asked.store(String::new(), (), at),
        Some(LastAsk::Failed(at)) => asked.failed(at),
    }
    asked
}

/// Whether to ask for prices at `now`: never asked yet, the answer is [`PRICE_TTL`] old,
/// the failure [`PRICE_RETRY_AFTER`] old, or the clock went back past the last ask (an
/// age we cannot trust).
pub fn refresh_due(last: Option<LastAsk>, now: SystemTime) -> bool {
    kept(last).step(Purpose::WarmUp, "", now) == Step::Fetch
}

/// Where the prices in use came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceOrigin {
    /// The bundled us-east-1 table only.
    Bundled,
    /// The Price List API's answer of this time, over the bundled table.
    PricingApi(SystemTime),
}

/// What one [`OnDemandPrices::refresh`] did.
#[derive(Debug)]
pub enum PriceRefresh {
    /// The prices in use are recent enough; nothing was asked.
    NotDue,
    /// The answer replaced the prices in use: `priced` types have a regional price, of
    /// `total` types with any price.
    Updated { priced: usize, total: usize },
    /// The source knows no prices for this region; the prices in use stay.
    NoRegionalPrices,
    /// Asking failed; the last good prices stay.
    Failed(AwsError),
}

/// The on-demand prices of a warm container and when to ask for them again.
#[derive(Debug, Clone)]
pub struct OnDemandPrices {
    bundled: HashMap<String, f64>,
    current: HashMap<String, f64>,
    origin: PriceOrigin,
    /// When the Price List last answered, and how asking it has been failing.
    asked: Swr<()>,
}

impl OnDemandPrices {
    /// Starts from the bundled table; the first [`Self::refresh`] asks at once.
    pub fn new(bundled: HashMap<String, f64>) -> OnDemandPrices {
        OnDemandPrices {
            current: bundled.clone(),
            bundled,
            origin: PriceOrigin::Bundled,
            asked: kept(None),
        }
    }

    /// USD per hour by instance type, as the catalog uses them.
    pub fn current(&self) -> &HashMap<String, f64> {
        &self.current
    }

    pub fn origin(&self) -> PriceOrigin {
        self.origin
    }

    pub fn due(&self, now: SystemTime) -> bool {
        self.asked.step(Purpose::WarmUp, "", now) == Step::Fetch
    }

    /// Takes in one answer of the price source, asked at `now`.
    pub fn apply(
        &mut self,
        answer: Result<HashMap<String, f64>, AwsError>,
        now: SystemTime,
    ) -> PriceRefresh {
        match answer {
            Err(e) => {
                self.asked.failed(now);
                PriceRefresh::Failed(e)
            }
            Ok(fetched) => {
                self.asked.store(String::new(), (), now);
                let priced = fetched.values().filter(|p| usable(**p)).count();
                if priced == 0 {
                    // Nothing usable: a region the Price List does not cover (yet), or a
                    // source without regional prices. Keep what we have.
                    return PriceRefresh::NoRegionalPrices;
                }
                self.current = merge_prices(&self.bundled, &fetched);
                self.origin = PriceOrigin::PricingApi(now);
                PriceRefresh::Updated {
                    priced,
                    total: self.current.len(),
                }
            }
        }
    }

    /// Asks `source` when [`Self::due`], and takes its answer in.
    pub async fn refresh<P: OnDemandPriceSource>(
        &mut self,
        source: &P,
        now: SystemTime,
    ) -> PriceRefresh {
        if !self.due(now) {
            return PriceRefresh::NotDue;
        }
        let answer = source.on_demand_prices().await;
        self.apply(answer, now)
    }
}

#[cfg(test)]
mod tests;
