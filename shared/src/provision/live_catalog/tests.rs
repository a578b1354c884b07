use std::sync::Mutex;

use super::freshness::Purpose;
use super::*;
use crate::aws::{ApiError, ErrorClass};

fn it(name: &str, spot: bool) -> InstanceType {
    InstanceType {
        name: name.into(),
        arch: "amd64".into(),
        vcpu: 2,
        memory_mib: 4096,
        spot,
        ..Default::default()
    }
}

fn offered(ty: &str, zone: &str) -> TypeOffering {
    TypeOffering {
        instance_type: ty.into(),
        zone: zone.into(),
    }
}

fn spot(ty: &str, zone: &str, price: f64, at_secs: i64) -> SpotPrice {
    SpotPrice {
        instance_type: ty.into(),
        zone: zone.into(),
        price,
        timestamp: jiff::Timestamp::from_second(at_secs).ok(),
    }
}

fn zones(z: &[&str]) -> Vec<String> {
    z.iter().map(|s| s.to_string()).collect()
}

type Key = (&'static str, &'static str, CapacityType);

fn table(c: &Catalog) -> Vec<((String, String, CapacityType), f64)> {
    price_table(c).into_iter().collect()
}

fn want(rows: &[(Key, f64)]) -> Vec<((String, String, CapacityType), f64)> {
    let mut v: Vec<_> = rows
        .iter()
        .map(|((t, z, c), p)| ((t.to_string(), z.to_string(), *c), *p))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn offerings_come_from_zone_offerings_prices_and_the_subnet_zones() {
    use CapacityType::{OnDemand as Od, Spot as S};
    let types = [
        it("m5.large", true),
        it("c5.large", true),
        it("x9.huge", true),
    ];
    let offerings = [
        offered("m5.large", "us-east-1a"),
        offered("m5.large", "us-east-1b"),
        // A zone without a discovered subnet is left out.
        offered("m5.large", "us-east-1c"),
        offered("c5.large", "us-east-1b"),
        // No on-demand price and no spot price: no offering, so no entry.
        offered("x9.huge", "us-east-1a"),
    ];
    let spot_prices = [
        spot("m5.large", "us-east-1a", 0.05, 100),
        // The newest price wins, whatever the order EC2 lists them in.
        spot("m5.large", "us-east-1a", 0.03, 200),
        spot("m5.large", "us-east-1a", 0.04, 150),
        spot("m5.large", "us-east-1c", 0.01, 100),
    ];
    let od: HashMap<String, f64> = [("m5.large".to_string(), 0.096), ("c5.large".into(), 0.085)]
        .into_iter()
        .collect();
    let c = build_catalog(
        &types,
        &offerings,
        &spot_prices,
        &od,
        &zones(&["us-east-1a", "us-east-1b"]),
    );
    assert!(!c.spot_prices_estimated);
    assert_eq!(
        table(&c),
        want(&[
            (("c5.large", "us-east-1b", Od), 0.085),
            (("m5.large", "us-east-1a", Od), 0.096),
            (("m5.large", "us-east-1a", S), 0.03),
            (("m5.large", "us-east-1b", Od), 0.096),
        ])
    );
    assert!(c.get("x9.huge").is_none());
}

#[test]
fn a_type_without_an_on_demand_price_is_offered_as_spot_only() {
    let types = [it("m7i.large", true)];
    let offerings = [offered("m7i.large", "us-east-1a")];
    let c = build_catalog(
        &types,
        &offerings,
        &[spot("m7i.large", "us-east-1a", 0.04, 1)],
        &HashMap::new(),
        &zones(&["us-east-1a"]),
    );
    assert_eq!(
        table(&c),
        want(&[(("m7i.large", "us-east-1a", CapacityType::Spot), 0.04)])
    );
}

#[test]
fn without_any_spot_price_spot_is_estimated_from_on_demand_and_flagged() {
    let types = [it("m5.large", true), it("t1.micro", false)];
    let offerings = [
        offered("m5.large", "us-east-1a"),
        offered("t1.micro", "us-east-1a"),
    ];
    let od: HashMap<String, f64> = [("m5.large".to_string(), 0.1), ("t1.micro".into(), 0.02)]
        .into_iter()
        .collect();
    let c = build_catalog(&types, &offerings, &[], &od, &zones(&["us-east-1a"]));
    assert!(c.spot_prices_estimated);
    let spot_m5 = price_table(&c)
        .get(&("m5.large".into(), "us-east-1a".into(), CapacityType::Spot))
        .copied();
    assert_eq!(
        spot_m5,
        Some(estimated_spot_price(0.1, DEFAULT_SPOT_DISCOUNT))
    );
    // A type EC2 does not sell as spot gets no spot estimate.
    assert!(!price_table(&c).contains_key(&(
        "t1.micro".into(),
        "us-east-1a".into(),
        CapacityType::Spot
    )));
}

/// A fake `InstanceTypeSource` that counts calls and fails on demand: it stands in for EC2
/// only to test the cache's refresh logic, not EC2's answers. `calls` counts refreshes
/// (every one asks the offerings, and fails there when failing); `type_calls` counts
/// DescribeInstanceTypes, which a refresh within [`TYPES_TTL`] does not ask.
struct FakeInstanceTypeSource {
    calls: Mutex<u32>,
    type_calls: Mutex<u32>,
    failing: Mutex<bool>,
    price: Mutex<f64>,
}

impl FakeInstanceTypeSource {
    fn new() -> Self {
        FakeInstanceTypeSource {
            calls: Mutex::new(0),
            type_calls: Mutex::new(0),
            failing: Mutex::new(false),
            price: Mutex::new(0.05),
        }
    }
    fn set_failing(&self, f: bool) {
        if let Ok(mut x) = self.failing.lock() {
            *x = f;
        }
    }
    fn set_price(&self, p: f64) {
        if let Ok(mut x) = self.price.lock() {
            *x = p;
        }
    }
    fn calls(&self) -> u32 {
        self.calls.lock().map(|c| *c).unwrap_or(0)
    }
    fn type_calls(&self) -> u32 {
        self.type_calls.lock().map(|c| *c).unwrap_or(0)
    }
}

impl InstanceTypeSource for FakeInstanceTypeSource {
    async fn instance_types(&self) -> Result<Vec<InstanceType>, AwsError> {
        if let Ok(mut c) = self.type_calls.lock() {
            *c += 1;
        }
        Ok(vec![it("m5.large", true)])
    }
    async fn offerings(&self) -> Result<Vec<TypeOffering>, AwsError> {
        if let Ok(mut c) = self.calls.lock() {
            *c += 1;
        }
        if self.failing.lock().map(|f| *f).unwrap_or(true) {
            return Err(AwsError::DescribeInstanceTypeOfferings {
                source: ApiError {
                    class: ErrorClass::Throttled,
                    code: Some("RequestLimitExceeded".into()),
                    message: "slow down".into(),
                    source: Box::new(std::io::Error::other("fake")),
                },
            });
        }
        Ok(vec![offered("m5.large", "us-east-1a")])
    }
    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, AwsError> {
        let p = self.price.lock().map(|p| *p).unwrap_or(0.0);
        Ok(vec![spot("m5.large", "us-east-1a", p, 1)])
    }
}

fn spot_price_of(c: &Catalog) -> Option<f64> {
    price_table(c)
        .get(&("m5.large".into(), "us-east-1a".into(), CapacityType::Spot))
        .copied()
}

/// One step of a timeline: what it shows, who asks, when (seconds after the first load),
/// whether EC2 fails then, and what comes out: (EC2's calls so far, the spot price in
/// the catalog used, a refresh failed, the data used was past its TTL, a back-off runs).
type Turn = (
    &'static str,
    Purpose,
    u64,
    Ec2,
    (u32, f64, bool, bool, bool),
);

#[derive(Clone, Copy)]
enum Ec2 {
    Answers,
    Fails,
}

/// Runs `turns` against one LiveCatalog whose first load (at 0 s) saw spot price 0.05;
/// EC2 answers 0.07 from then on.
async fn run_timeline(turns: &[Turn]) {
    let src = FakeInstanceTypeSource::new();
    let mut live = LiveCatalog::new(HashMap::new());
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let z = zones(&["us-east-1a"]);
    assert!(live.get(&src, &z, t0).await.is_ok(), "first load");
    src.set_price(0.07);
    for (what, ask, at, ec2, want) in turns {
        src.set_failing(matches!(ec2, Ec2::Fails));
        let now = t0 + Duration::from_secs(*at);
        let got = match ask {
            Purpose::Poll => live.get(&src, &z, now).await,
            Purpose::WarmUp => match live.warm(&src, &z, now).await {
                Ok(refresh) => Ok((live.last_built().cloned().unwrap_or_default(), refresh)),
                Err(e) => Err(e),
            },
        };
        let Ok((catalog, refresh)) = got else {
            panic!("{what}: a last good catalog exists, so no error")
        };
        let seen = (
            src.calls(),
            spot_price_of(&catalog),
            refresh.stale_because.is_some(),
            refresh.stale_for.is_some(),
            refresh.retry_at.is_some(),
        );
        let (calls, price, failed, stale, backing_off) = *want;
        let want = (calls, Some(price), failed, stale, backing_off);
        assert_eq!(
            seen, want,
            "{what} (calls, price, failed, stale, backing off)"
        );
    }
}

#[tokio::test]
async fn a_poll_uses_the_last_good_catalog_past_its_ttl_and_never_asks_ec2() {
    use Ec2::Answers;
    use Purpose::{Poll, WarmUp};
    run_timeline(&[
        ("fresh", Poll, 299, Answers, (1, 0.05, false, false, false)),
        (
            "expired: used stale, EC2 not asked",
            Poll,
            300,
            Answers,
            (1, 0.05, false, true, false),
        ),
        (
            "long expired, still under the bound",
            Poll,
            3599,
            Answers,
            (1, 0.05, false, true, false),
        ),
        (
            "the warm-up refreshes it off the path",
            WarmUp,
            3599,
            Answers,
            (2, 0.07, false, false, false),
        ),
        (
            "the next poll finds it fresh",
            Poll,
            3600,
            Answers,
            (2, 0.07, false, false, false),
        ),
    ])
    .await;
}

#[tokio::test]
async fn a_catalog_past_the_staleness_bound_is_refreshed_by_the_poll_itself() {
    use Ec2::{Answers, Fails};
    use Purpose::Poll;
    run_timeline(&[(
        "an hour old: the poll asks EC2",
        Poll,
        3600,
        Answers,
        (2, 0.07, false, false, false),
    )])
    .await;
    run_timeline(&[
        (
            "an hour old and EC2 fails: stale, backing off",
            Poll,
            3600,
            Fails,
            (2, 0.05, true, true, true),
        ),
        (
            "within the back-off the poll does not ask again",
            Poll,
            3629,
            Fails,
            (2, 0.05, false, true, true),
        ),
        (
            "after it, it does",
            Poll,
            3630,
            Answers,
            (3, 0.07, false, false, false),
        ),
    ])
    .await;
}

#[tokio::test]
async fn a_failed_refresh_is_remembered_and_retried_after_a_growing_back_off() {
    use Ec2::{Answers, Fails};
    use Purpose::{Poll, WarmUp};
    run_timeline(&[
        (
            "the warm-up fails: last good kept",
            WarmUp,
            150,
            Fails,
            (2, 0.05, true, false, true),
        ),
        (
            "within 30 s: not asked again",
            WarmUp,
            179,
            Fails,
            (2, 0.05, false, false, true),
        ),
        (
            "a poll meanwhile asks nothing either",
            Poll,
            179,
            Fails,
            (2, 0.05, false, false, true),
        ),
        (
            "after 30 s: tried again, fails again",
            WarmUp,
            180,
            Fails,
            (3, 0.05, true, false, true),
        ),
        (
            "the second back-off is 60 s",
            WarmUp,
            239,
            Fails,
            (3, 0.05, false, false, true),
        ),
        (
            "tried at 60 s: fails a third time",
            WarmUp,
            240,
            Fails,
            (4, 0.05, true, false, true),
        ),
        (
            "a poll past the TTL uses it stale",
            Poll,
            300,
            Fails,
            (4, 0.05, false, true, true),
        ),
        (
            "the third back-off is 120 s",
            WarmUp,
            359,
            Answers,
            (4, 0.05, false, true, true),
        ),
        (
            "EC2 answers: fresh data, the back-off forgotten",
            WarmUp,
            360,
            Answers,
            (5, 0.07, false, false, false),
        ),
        (
            "a later failure starts again from 30 s",
            WarmUp,
            510,
            Fails,
            (6, 0.07, true, false, true),
        ),
        (
            "retried at 30 s",
            WarmUp,
            540,
            Answers,
            (7, 0.07, false, false, false),
        ),
    ])
    .await;
}

#[tokio::test]
async fn a_warm_up_refreshes_data_past_half_its_ttl_so_the_polls_after_it_ask_ec2_nothing() {
    let src = FakeInstanceTypeSource::new();
    let mut live = LiveCatalog::new(HashMap::new());
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let z = zones(&["us-east-1a"]);
    // A cold container's warm-up is its first load.
    assert!(live.warm(&src, &z, t0).await.is_ok());
    assert_eq!(src.calls(), 1);
    // Younger than half the TTL: nothing to do.
    assert!(
        live.warm(&src, &z, t0 + CATALOG_TTL / 2 - Duration::from_secs(1))
            .await
            .is_ok()
    );
    assert_eq!(src.calls(), 1);
    // Half the TTL old: refreshed ahead of the polls that would otherwise do it.
    src.set_price(0.07);
    let warmed_at = t0 + CATALOG_TTL / 2;
    assert!(live.warm(&src, &z, warmed_at).await.is_ok());
    assert_eq!(src.calls(), 2);
    // A poll at the old data's expiry finds the warmed data fresh and asks EC2 nothing.
    let polled = live.get(&src, &z, t0 + CATALOG_TTL).await;
    assert_eq!(polled.ok().and_then(|(c, _)| spot_price_of(&c)), Some(0.07));
    assert_eq!(src.calls(), 2);
}

#[tokio::test]
async fn a_warm_up_that_fails_keeps_the_last_good_catalog_for_the_polls() {
    let src = FakeInstanceTypeSource::new();
    let mut live = LiveCatalog::new(HashMap::new());
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let z = zones(&["us-east-1a"]);
    assert!(live.get(&src, &z, t0).await.is_ok());
    src.set_failing(true);
    let warmed = live.warm(&src, &z, t0 + CATALOG_TTL / 2).await;
    assert!(warmed.is_ok_and(|r| r.stale_because.is_some()));
    let polled = live.get(&src, &z, t0 + CATALOG_TTL / 2).await;
    assert_eq!(polled.ok().and_then(|(c, _)| spot_price_of(&c)), Some(0.05));
}

#[tokio::test]
async fn a_first_load_that_fails_is_an_error() {
    let src = FakeInstanceTypeSource::new();
    src.set_failing(true);
    let mut live = LiveCatalog::new(HashMap::new());
    let got = live
        .get(&src, &zones(&["us-east-1a"]), SystemTime::UNIX_EPOCH)
        .await;
    assert!(got.is_err());
}

/// A price source with one fixed answer: it stands in for the Price List API only to test
/// how its prices reach the catalog.
struct FixedPrices(Result<HashMap<String, f64>, ()>);

impl OnDemandPriceSource for FixedPrices {
    async fn on_demand_prices(&self) -> Result<HashMap<String, f64>, AwsError> {
        self.0.clone().map_err(|()| AwsError::GetProductsTimedOut {
            region: "eu-west-1".into(),
            after: Duration::from_secs(20),
        })
    }
}

fn on_demand_price_of(c: &Catalog) -> Option<f64> {
    price_table(c)
        .get(&(
            "m5.large".into(),
            "us-east-1a".into(),
            CapacityType::OnDemand,
        ))
        .copied()
}

#[tokio::test]
async fn regional_prices_reach_the_next_catalog_even_while_ec2_answers_are_cached() {
    let src = FakeInstanceTypeSource::new();
    let bundled: HashMap<String, f64> = [("m5.large".to_string(), 0.096)].into_iter().collect();
    // EC2's answers are kept for an hour here, so every catalog below is built from the
    // same cached EC2 data and only the prices differ.
    let mut live = LiveCatalog::with_ttl(bundled, Duration::from_secs(3600));
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let z = zones(&["us-east-1a"]);

    let cold = live
        .get(&src, &z, t0)
        .await
        .map(|(c, _)| on_demand_price_of(&c));
    assert_eq!(
        cold.ok().flatten(),
        Some(0.096),
        "a cold catalog uses the bundled table"
    );

    let failed = FixedPrices(Err(()));
    let refresh = live.refresh_prices(&failed, t0).await;
    assert!(matches!(refresh, PriceRefresh::Failed(_)));
    let after_failure = live.get(&src, &z, t0 + Duration::from_secs(1)).await;
    assert_eq!(
        after_failure.ok().and_then(|(c, _)| on_demand_price_of(&c)),
        Some(0.096)
    );

    let regional = FixedPrices(Ok([("m5.large".to_string(), 0.107)].into_iter().collect()));
    let retry_at = t0 + crate::provision::on_demand_prices::PRICE_RETRY_AFTER;
    let refresh = live.refresh_prices(&regional, retry_at).await;
    assert!(matches!(refresh, PriceRefresh::Updated { .. }));
    let warm = live.get(&src, &z, retry_at).await;
    assert_eq!(
        warm.ok().and_then(|(c, _)| on_demand_price_of(&c)),
        Some(0.107)
    );
    assert_eq!(src.calls(), 1, "EC2 was asked once");
}

#[tokio::test]
async fn refreshes_within_an_hour_ask_offerings_and_spot_prices_but_keep_the_instance_types() {
    let src = FakeInstanceTypeSource::new();
    let mut cache = LiveCatalog::new(HashMap::from([("m5.large".to_string(), 0.096)]));
    let z = zones(&["us-east-1a"]);
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    // (seconds after the first load, a warm-up then): (refreshes so far, type lists so far).
    let cases = [
        (0, (1, 1)),
        (CATALOG_TTL.as_secs(), (2, 1)),
        (TYPES_TTL.as_secs() - CATALOG_TTL.as_secs(), (3, 1)),
        (TYPES_TTL.as_secs(), (4, 2)),
        (TYPES_TTL.as_secs() + CATALOG_TTL.as_secs(), (5, 2)),
    ];
    for (at, want) in cases {
        cache
            .warm(&src, &z, t0 + Duration::from_secs(at))
            .await
            .unwrap_or_else(|e| panic!("warm at {at}: {e}"));
        assert_eq!((src.calls(), src.type_calls()), want, "at {at} s");
    }
    // A clock that went backwards asks for the types again.
    cache
        .warm(&src, &z, t0 - Duration::from_secs(1))
        .await
        .unwrap_or_else(|e| panic!("warm: {e}"));
    assert_eq!(src.type_calls(), 3);
}
