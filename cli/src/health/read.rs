//! The stack's health as AWS reports it: CloudFormation's resource list, Lambda's
//! AWS/Lambda metrics in CloudWatch, the queues' attributes and the alarms' states. One
//! part that cannot be read leaves that part unknown and says why; the others are still
//! shown.

use anyhow::Context as _;
use aws_sdk_cloudwatch::types::{
    Dimension, Metric, MetricDataQuery, MetricStat, StateValue, StatusCode,
};
use jiff::{SignedDuration, Timestamp};

use super::{
    Depth, FiringAlarm, FunctionHealth, Health, LOOKBACK, Resource, Series, StackParts,
    stack_parts, usage,
};

/// DescribeAlarms takes at most 100 names a call.
const ALARM_NAMES_PER_CALL: usize = 100;
const LAMBDA_METRICS: [&str; 3] = ["Invocations", "Errors", "Throttles"];
const MINUTE: SignedDuration = SignedDuration::from_secs(60);

/// Reads the health of `stack` at `now`; the second value names each part that could not
/// be read. Only a stack that cannot be listed is an error.
pub async fn health(
    sdk: &aws_config::SdkConfig,
    stack: &str,
    region: &str,
    now: Timestamp,
) -> anyhow::Result<(Health, Vec<String>)> {
    let parts = stack_parts(&resources(sdk, stack).await?);
    let mut problems = Vec::new();
    let cloudwatch = aws_sdk_cloudwatch::Client::new(sdk);
    let series = match metrics(&cloudwatch, &parts, now).await {
        Ok((series, unanswered)) => {
            problems.extend(unanswered);
            series
        }
        Err(e) => {
            problems.push(format!("the functions' metrics: {e:#}"));
            vec![None; parts.functions.len()]
        }
    };
    let functions = parts
        .functions
        .iter()
        .zip(&series)
        .map(|((shown, name), s)| FunctionHealth {
            shown: shown.clone(),
            name: name.clone(),
            metrics: s.as_ref().map(|s| usage(s, now)),
        })
        .collect();
    let mut note = |what: &str, e: anyhow::Error| problems.push(format!("{what}: {e:#}"));
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let queue = match &parts.queue_url {
        Some(url) => depth(&sqs, url)
            .await
            .map_err(|e| note("the interruption queue", e))
            .ok(),
        None => None,
    };
    let dead_letters = match &parts.dead_letter_url {
        Some(url) => depth(&sqs, url)
            .await
            .map_err(|e| note("the dead-letter queue", e))
            .ok()
            .map(|d| d.waiting + d.in_flight),
        None => None,
    };
    let firing = firing(&cloudwatch, &parts.alarms)
        .await
        .map_err(|e| note("the alarms", e))
        .ok();
    let health = Health {
        stack: stack.to_string(),
        region: region.to_string(),
        functions,
        queue,
        dead_letters,
        alarms: parts.alarms.len(),
        firing,
    };
    Ok((health, problems))
}

async fn resources(sdk: &aws_config::SdkConfig, stack: &str) -> anyhow::Result<Vec<Resource>> {
    let summaries = aws_sdk_cloudformation::Client::new(sdk)
        .list_stack_resources()
        .stack_name(stack)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(aws_sdk_cloudformation::Error::from)
        .with_context(|| format!("ListStackResources of stack {stack:?}"))?;
    Ok(summaries
        .into_iter()
        .map(|s| Resource {
            logical_id: s.logical_resource_id.unwrap_or_default(),
            resource_type: s.resource_type.unwrap_or_default(),
            physical_id: s.physical_resource_id.unwrap_or_default(),
        })
        .collect())
}

/// Each function's per-minute Invocations, Errors and Throttles over [`LOOKBACK`], in the
/// order of `parts.functions`, from one paginated GetMetricData; `None` for a function
/// whose queries CloudWatch did not answer in full, named in the second value.
async fn metrics(
    cloudwatch: &aws_sdk_cloudwatch::Client,
    parts: &StackParts,
    now: Timestamp,
) -> anyhow::Result<(Vec<Option<Series>>, Vec<String>)> {
    let queries: Vec<MetricDataQuery> = parts
        .functions
        .iter()
        .enumerate()
        .flat_map(|(i, (_, name))| (0..LAMBDA_METRICS.len()).map(move |m| query(i, m, name)))
        .collect();
    let mut series = vec![Some(Series::default()); parts.functions.len()];
    if queries.is_empty() {
        return Ok((series, Vec::new()));
    }
    let pages = cloudwatch
        .get_metric_data()
        .set_metric_data_queries(Some(queries))
        .start_time(minute_of(now - LOOKBACK))
        .end_time(minute_of(now + MINUTE))
        .into_paginator()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(aws_sdk_cloudwatch::Error::from)
        .context("GetMetricData of AWS/Lambda")?;
    let mut unanswered = Vec::new();
    for result in pages.iter().flat_map(|p| p.metric_data_results()) {
        let Some((i, m)) = result.id().and_then(query_of) else {
            continue;
        };
        // PartialData: the rest of the points come on the next page.
        if !matches!(
            result.status_code(),
            Some(StatusCode::Complete | StatusCode::PartialData)
        ) {
            let (shown, _) = &parts.functions[i];
            unanswered.push(format!(
                "the {shown} function's {} metric: GetMetricData answered {:?} {:?}",
                LAMBDA_METRICS[m],
                result.status_code(),
                result.messages()
            ));
            series[i] = None;
            continue;
        }
        let Some(target) = series[i].as_mut() else {
            continue;
        };
        let points = result
            .timestamps()
            .iter()
            .zip(result.values())
            .filter_map(|(t, v)| Some((timestamp(t)?, *v)));
        match m {
            0 => target.invocations.extend(points),
            1 => target.errors.extend(points),
            _ => target.throttles.extend(points),
        }
    }
    Ok((series, unanswered))
}

/// The one-minute sum of function `i`'s metric `m`, under an id that names both.
fn query(i: usize, m: usize, function: &str) -> MetricDataQuery {
    let metric = Metric::builder()
        .namespace("AWS/Lambda")
        .metric_name(LAMBDA_METRICS[m])
        .dimensions(
            Dimension::builder()
                .name("FunctionName")
                .value(function)
                .build(),
        )
        .build();
    let stat = MetricStat::builder()
        .metric(metric)
        .period(60)
        .stat("Sum")
        .build();
    MetricDataQuery::builder()
        .id(format!("m{i}_{m}"))
        .metric_stat(stat)
        .return_data(true)
        .build()
}

fn timestamp(t: &aws_smithy_types::DateTime) -> Option<Timestamp> {
    Timestamp::new(t.secs(), 0).ok()
}

/// `m{function}_{metric}` back to its indices.
fn query_of(id: &str) -> Option<(usize, usize)> {
    let (f, m) = id.strip_prefix('m')?.split_once('_')?;
    Some((f.parse().ok()?, m.parse().ok()?))
}

/// The start of `t`'s minute: CloudWatch's one-minute periods start on the minute, and
/// a query's bounds are rounded to them.
fn minute_of(t: Timestamp) -> aws_smithy_types::DateTime {
    aws_smithy_types::DateTime::from_secs(t.as_second().div_euclid(60) * 60)
}

async fn depth(sqs: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<Depth> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let answer = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(aws_sdk_sqs::Error::from)
        .with_context(|| format!("GetQueueAttributes of {url}"))?;
    let count = |name: A| -> anyhow::Result<u64> {
        let value = answer.attributes().and_then(|a| a.get(&name));
        value
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("GetQueueAttributes of {url}: {name} is {value:?}"))
    };
    Ok(Depth {
        waiting: count(A::ApproximateNumberOfMessages)?,
        in_flight: count(A::ApproximateNumberOfMessagesNotVisible)?,
    })
}

/// The stack's alarms in ALARM, longest-firing first.
async fn firing(
    cloudwatch: &aws_sdk_cloudwatch::Client,
    alarms: &[String],
) -> anyhow::Result<Vec<FiringAlarm>> {
    let mut firing = Vec::new();
    for names in alarms.chunks(ALARM_NAMES_PER_CALL) {
        let pages = cloudwatch
            .describe_alarms()
            .set_alarm_names(Some(names.to_vec()))
            .state_value(StateValue::Alarm)
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(aws_sdk_cloudwatch::Error::from)
            .context("DescribeAlarms")?;
        let alarms = pages.iter().flat_map(|p| p.metric_alarms());
        firing.extend(alarms.map(|a| {
            FiringAlarm {
                name: a.alarm_name().unwrap_or_default().to_string(),
                reason: a.state_reason().unwrap_or_default().to_string(),
                since: a
                    .state_updated_timestamp()
                    .and_then(|t| Timestamp::new(t.secs(), 0).ok()),
            }
        }));
    }
    firing.sort_by(|a, b| (a.since, &a.name).cmp(&(b.since, &b.name)));
    Ok(firing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_id_names_its_function_and_metric() {
        assert_eq!(query_of("m0_0"), Some((0, 0)));
        assert_eq!(query_of("m2_1"), Some((2, 1)));
        assert_eq!(query_of("x2_1"), None);
        assert_eq!(query_of("m2"), None);
    }
}
