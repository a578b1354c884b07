//! Lambda's own CloudWatch metrics for the world's invocations: `AWS/Lambda`
//! `Invocations`, `Errors` and `Throttles` per function name, one-minute sums, as Lambda
//! publishes them for every function. Emulated: Lambda publishes as invocations happen;
//! the world publishes its records when a test asks ([`super::Lambda::publish_metrics`]),
//! which a reader after that moment cannot tell apart.
//!
//! Lambda's counting, which this follows: an invocation that ran counts in `Invocations`
//! whatever its end; a function error, a timeout and a crash also count in `Errors`; a
//! throttled request counts only in `Throttles`.

use std::collections::BTreeMap;

use anyhow::Context as _;
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit};
use jiff::Timestamp;

use super::{Outcome, Record};

/// PutMetricData takes at most 1,000 data a call.
const PER_CALL: usize = 1000;

/// The one-minute sums of `records`: (minute, [invocations, errors, throttles]).
pub fn minute_sums(records: &[Record]) -> BTreeMap<i64, [f64; 3]> {
    let mut sums: BTreeMap<i64, [f64; 3]> = BTreeMap::new();
    for r in records {
        let minute = r.started.as_second().div_euclid(60) * 60;
        let counts = match r.outcome {
            Outcome::Response(_) => [1.0, 0.0, 0.0],
            Outcome::Error(_) | Outcome::TimedOut | Outcome::Died => [1.0, 1.0, 0.0],
            Outcome::Throttled => [0.0, 0.0, 1.0],
        };
        let sum = sums.entry(minute).or_default();
        for (s, c) in sum.iter_mut().zip(counts) {
            *s += c;
        }
    }
    sums
}

/// Puts the sums of `records` into CloudWatch as `function`'s (its deployed name).
pub async fn publish(
    cloudwatch: &aws_sdk_cloudwatch::Client,
    function: &str,
    records: &[Record],
) -> anyhow::Result<()> {
    const NAMES: [&str; 3] = ["Invocations", "Errors", "Throttles"];
    let mut data = Vec::new();
    for (minute, sums) in minute_sums(records) {
        let at = Timestamp::from_second(minute)?;
        for (name, value) in NAMES.iter().zip(sums) {
            data.push(
                MetricDatum::builder()
                    .metric_name(*name)
                    .dimensions(
                        Dimension::builder()
                            .name("FunctionName")
                            .value(function)
                            .build(),
                    )
                    .timestamp(aws_smithy_types::DateTime::from_secs(at.as_second()))
                    .value(value)
                    .unit(StandardUnit::Count)
                    .build(),
            );
        }
    }
    for chunk in data.chunks(PER_CALL) {
        cloudwatch
            .put_metric_data()
            .namespace("AWS/Lambda")
            .set_metric_data(Some(chunk.to_vec()))
            .send()
            .await
            .with_context(|| format!("PutMetricData of {function}'s AWS/Lambda metrics"))?;
    }
    Ok(())
}
