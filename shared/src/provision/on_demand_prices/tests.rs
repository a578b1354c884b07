use std::sync::Mutex;

use super::*;
use crate::aws::{ApiError, ErrorClass};

fn prices(rows: &[(&str, f64)]) -> HashMap<String, f64> {
    rows.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

fn sorted(map: &HashMap<String, f64>) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = map.iter().map(|(t, p)| (t.clone(), *p)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn fetched_prices_override_bundled_ones_and_a_type_without_a_fetched_price_keeps_its_bundled_one() {
    let bundled = prices(&[("m5.large", 0.096), ("c5.large", 0.085)]);
    type Case = (&'static str, HashMap<String, f64>, Vec<(&'static str, f64)>);
    let cases: Vec<Case> = vec![
        (
            "nothing fetched: the bundled table",
            prices(&[]),
            vec![("c5.large", 0.085), ("m5.large", 0.096)],
        ),
        (
            "a regional price replaces the bundled one; the rest stay",
            prices(&[("m5.large", 0.115)]),
            vec![("c5.large", 0.085), ("m5.large", 0.115)],
        ),
        (
            "a type only the Price List knows is added",
            prices(&[("m8g.large", 0.1)]),
            vec![("c5.large", 0.085), ("m5.large", 0.096), ("m8g.large", 0.1)],
        ),
        (
            "zero, negative, NaN and infinite prices are not used",
            prices(&[
                ("m5.large", 0.0),
                ("c5.large", -1.0),
                ("r5.large", f64::NAN),
                ("x9.huge", f64::INFINITY),
            ]),
            vec![("c5.large", 0.085), ("m5.large", 0.096)],
        ),
    ];
    for (name, fetched, want) in cases {
        let want: Vec<(String, f64)> = want.iter().map(|(t, p)| (t.to_string(), *p)).collect();
        assert_eq!(sorted(&merge_prices(&bundled, &fetched)), want, "{name}");
    }
}

const T0: u64 = 1_000_000;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

#[test]
fn prices_are_asked_for_at_first_then_after_twelve_hours_or_fifteen_minutes_after_a_failure() {
    let hour = 3600;
    let cases = [
        ("never asked", None, T0, true),
        (
            "answered a second ago",
            Some(LastAsk::Answered(at(T0))),
            T0 + 1,
            false,
        ),
        (
            "answered almost twelve hours ago",
            Some(LastAsk::Answered(at(T0))),
            T0 + 12 * hour - 1,
            false,
        ),
        (
            "answered twelve hours ago",
            Some(LastAsk::Answered(at(T0))),
            T0 + 12 * hour,
            true,
        ),
        (
            "failed fourteen minutes ago",
            Some(LastAsk::Failed(at(T0))),
            T0 + 14 * 60,
            false,
        ),
        (
            "failed fifteen minutes ago",
            Some(LastAsk::Failed(at(T0))),
            T0 + 15 * 60,
            true,
        ),
        (
            "the clock went back past the answer",
            Some(LastAsk::Answered(at(T0))),
            T0 - 1,
            true,
        ),
    ];
    for (name, last, now, want) in cases {
        assert_eq!(refresh_due(last, at(now)), want, "{name}");
    }
}

fn throttled() -> AwsError {
    AwsError::GetProducts {
        region: "eu-west-1".into(),
        source: ApiError {
            class: ErrorClass::Throttled,
            code: Some("ThrottlingException".into()),
            message: "Rate exceeded".into(),
            source: Box::new(std::io::Error::other("fake")),
        },
    }
}

#[derive(Debug, PartialEq)]
enum Outcome {
    NotDue,
    Updated { priced: usize, total: usize },
    NoRegionalPrices,
    Failed,
}

fn outcome(r: &PriceRefresh) -> Outcome {
    match r {
        PriceRefresh::NotDue => Outcome::NotDue,
        PriceRefresh::Updated { priced, total } => Outcome::Updated {
            priced: *priced,
            total: *total,
        },
        PriceRefresh::NoRegionalPrices => Outcome::NoRegionalPrices,
        PriceRefresh::Failed(_) => Outcome::Failed,
    }
}

/// One answer of the price source, `secs` after T0, and what must follow: the outcome, the
/// m5.large price in use and where the prices in use came from.
struct Step {
    secs: u64,
    answer: Result<HashMap<String, f64>, AwsError>,
    want: Outcome,
    m5: f64,
    origin: PriceOrigin,
}

#[test]
fn a_failed_or_empty_answer_keeps_the_last_good_prices_and_a_good_one_replaces_them() {
    let mut p = OnDemandPrices::new(prices(&[("m5.large", 0.096), ("c5.large", 0.085)]));
    let m5 = |p: &OnDemandPrices| p.current().get("m5.large").copied();
    let steps = [
        Step {
            secs: 0,
            answer: Err(throttled()),
            want: Outcome::Failed,
            m5: 0.096,
            origin: PriceOrigin::Bundled,
        },
        Step {
            secs: 900,
            answer: Ok(prices(&[("m5.large", 0.115)])),
            want: Outcome::Updated {
                priced: 1,
                total: 2,
            },
            m5: 0.115,
            origin: PriceOrigin::PricingApi(at(T0 + 900)),
        },
        Step {
            secs: 50_000,
            answer: Err(throttled()),
            want: Outcome::Failed,
            m5: 0.115,
            origin: PriceOrigin::PricingApi(at(T0 + 900)),
        },
        Step {
            secs: 51_000,
            answer: Ok(prices(&[])),
            want: Outcome::NoRegionalPrices,
            m5: 0.115,
            origin: PriceOrigin::PricingApi(at(T0 + 900)),
        },
        Step {
            secs: 100_000,
            answer: Ok(prices(&[("c5.large", 0.1)])),
            want: Outcome::Updated {
                priced: 1,
                total: 2,
            },
            // A newer answer replaces the older one whole: a type it lacks falls back to
            // the bundled table, not to an old regional price.
            m5: 0.096,
            origin: PriceOrigin::PricingApi(at(T0 + 100_000)),
        },
    ];
    for (i, step) in steps.into_iter().enumerate() {
        let got = p.apply(step.answer, at(T0 + step.secs));
        assert_eq!(outcome(&got), step.want, "step {i}");
        assert_eq!(m5(&p), Some(step.m5), "step {i}");
        assert_eq!(p.origin(), step.origin, "step {i}");
    }
}

/// A price source that counts its calls; it stands in for the Price List API only to test
/// when the prices are asked for.
struct CountingSource {
    calls: Mutex<u32>,
}

impl OnDemandPriceSource for CountingSource {
    async fn on_demand_prices(&self) -> Result<HashMap<String, f64>, AwsError> {
        if let Ok(mut c) = self.calls.lock() {
            *c += 1;
        }
        Ok(prices(&[("m5.large", 0.115)]))
    }
}

#[tokio::test]
async fn a_refresh_asks_the_source_only_when_due() {
    let source = CountingSource {
        calls: Mutex::new(0),
    };
    let calls = || source.calls.lock().map(|c| *c).unwrap_or(0);
    let mut p = OnDemandPrices::new(prices(&[("m5.large", 0.096)]));

    let first = p.refresh(&source, at(T0)).await;
    let soon = p.refresh(&source, at(T0 + 60)).await;
    assert_eq!(
        (outcome(&first), outcome(&soon), calls()),
        (
            Outcome::Updated {
                priced: 1,
                total: 1
            },
            Outcome::NotDue,
            1
        )
    );

    let later = p.refresh(&source, at(T0) + PRICE_TTL).await;
    assert!(matches!(later, PriceRefresh::Updated { .. }));
    assert_eq!(calls(), 2);
}
