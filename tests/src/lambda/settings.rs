//! What Lambda, the SQS event source mapping, EventBridge Scheduler and SQS do with a
//! function, as the deployed stack configures them: read from the template CloudFormation
//! holds (after the SAM transform), with AWS's defaults where the template says nothing.

use std::time::Duration;

use serde_json::Value;

use crate::sqs::model::QueueSettings;

/// Lambda's own defaults (AWS::Lambda::Function, AWS::Lambda::EventInvokeConfig).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
const DEFAULT_MEMORY_MB: u32 = 128;
/// Asynchronous invocation: two retries after a function error, events kept six hours.
const DEFAULT_ASYNC_RETRIES: u32 = 2;
const DEFAULT_ASYNC_MAX_AGE: Duration = Duration::from_secs(6 * 3600);
/// SQS's defaults (AWS::SQS::Queue).
const DEFAULT_VISIBILITY: Duration = Duration::from_secs(30);
const DEFAULT_RETENTION: Duration = Duration::from_secs(345_600);
/// The event source mapping's default batch size for SQS.
const DEFAULT_BATCH_SIZE: usize = 10;

/// `RecursiveLoop` of AWS::Lambda::Function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecursiveLoop {
    /// Lambda's default: a chain is stopped after 16 invocations.
    Terminate,
    Allow,
}

/// An SQS event source mapping of the function.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSource {
    /// The queue's logical id in the template.
    pub queue: String,
    pub batch_size: usize,
    pub batching_window: Duration,
    /// `ScalingConfig.MaximumConcurrency`: batches in flight at once (`None`: Lambda scales
    /// its pollers up to the function's concurrency).
    pub max_concurrency: Option<usize>,
    pub report_batch_item_failures: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSettings {
    pub logical_id: String,
    pub timeout: Duration,
    pub memory_mb: u32,
    pub reserved_concurrency: Option<usize>,
    pub recursive_loop: RecursiveLoop,
    /// EventInvokeConfig: retries after a function error, and how long an event waits.
    pub async_retries: u32,
    pub async_max_age: Duration,
    pub queue: Option<QueueSource>,
    /// The period of an EventBridge Scheduler `rate(...)` schedule targeting it.
    pub schedule: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
#[error("deployed template: {at}: {why}")]
pub struct SettingsError {
    at: String,
    why: String,
}

fn err(at: impl Into<String>, why: impl Into<String>) -> SettingsError {
    SettingsError {
        at: at.into(),
        why: why.into(),
    }
}

fn resources(template: &Value) -> Result<&serde_json::Map<String, Value>, SettingsError> {
    template["Resources"]
        .as_object()
        .ok_or_else(|| err("Resources", "missing"))
}

/// The logical id a `Ref` or `Fn::GetAtt` names.
fn referenced(v: &Value) -> Option<&str> {
    v.get("Ref")
        .and_then(Value::as_str)
        .or_else(|| v.pointer("/Fn::GetAtt/0").and_then(Value::as_str))
}

fn seconds(v: &Value) -> Option<Duration> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .map(Duration::from_secs)
}

/// `rate(N unit)` as EventBridge Scheduler reads it.
pub fn rate(expression: &str) -> Option<Duration> {
    let inner = expression.strip_prefix("rate(")?.strip_suffix(')')?;
    let (n, unit) = inner.trim().split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    let unit = match unit.trim() {
        "minute" | "minutes" => 60,
        "hour" | "hours" => 3600,
        "day" | "days" => 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(n * unit))
}

impl FunctionSettings {
    /// The settings of function `logical_id` in the deployed `template`.
    pub fn read(template: &Value, logical_id: &str) -> Result<FunctionSettings, SettingsError> {
        let all = resources(template)?;
        let function = all
            .get(logical_id)
            .filter(|r| r["Type"] == "AWS::Lambda::Function")
            .ok_or_else(|| err(logical_id, "no AWS::Lambda::Function of that name"))?;
        let p = &function["Properties"];
        let mut settings = FunctionSettings {
            logical_id: logical_id.to_string(),
            timeout: seconds(&p["Timeout"]).unwrap_or(DEFAULT_TIMEOUT),
            memory_mb: p["MemorySize"]
                .as_u64()
                .map_or(DEFAULT_MEMORY_MB, |m| m as u32),
            reserved_concurrency: p["ReservedConcurrentExecutions"]
                .as_u64()
                .map(|n| n as usize),
            recursive_loop: match p["RecursiveLoop"].as_str() {
                Some("Allow") => RecursiveLoop::Allow,
                None | Some("Terminate") => RecursiveLoop::Terminate,
                Some(other) => {
                    return Err(err(
                        format!("{logical_id}.RecursiveLoop"),
                        format!("{other:?} is neither Allow nor Terminate"),
                    ));
                }
            },
            async_retries: DEFAULT_ASYNC_RETRIES,
            async_max_age: DEFAULT_ASYNC_MAX_AGE,
            queue: None,
            schedule: None,
        };
        for (id, r) in all {
            let p = &r["Properties"];
            let targets_me = |v: &Value| referenced(v) == Some(logical_id);
            match r["Type"].as_str() {
                Some("AWS::Lambda::EventInvokeConfig") if targets_me(&p["FunctionName"]) => {
                    if let Some(n) = p["MaximumRetryAttempts"].as_u64() {
                        settings.async_retries = n as u32;
                    }
                    if let Some(age) = seconds(&p["MaximumEventAgeInSeconds"]) {
                        settings.async_max_age = age;
                    }
                }
                Some("AWS::Lambda::EventSourceMapping") if targets_me(&p["FunctionName"]) => {
                    let queue = referenced(&p["EventSourceArn"])
                        .ok_or_else(|| err(format!("{id}.EventSourceArn"), "names no resource"))?;
                    settings.queue = Some(QueueSource {
                        queue: queue.to_string(),
                        batch_size: p["BatchSize"]
                            .as_u64()
                            .map_or(DEFAULT_BATCH_SIZE, |n| n as usize),
                        batching_window: seconds(&p["MaximumBatchingWindowInSeconds"])
                            .unwrap_or_default(),
                        max_concurrency: p
                            .pointer("/ScalingConfig/MaximumConcurrency")
                            .and_then(Value::as_u64)
                            .map(|n| n as usize),
                        report_batch_item_failures: p["FunctionResponseTypes"]
                            .as_array()
                            .is_some_and(|t| t.iter().any(|t| t == "ReportBatchItemFailures")),
                    });
                }
                Some("AWS::Scheduler::Schedule") if targets_me(&p["Target"]["Arn"]) => {
                    let expression = p["ScheduleExpression"].as_str().unwrap_or_default();
                    settings.schedule = Some(rate(expression).ok_or_else(|| {
                        err(
                            format!("{id}.ScheduleExpression"),
                            format!("{expression:?} is not a rate the world runs"),
                        )
                    })?);
                }
                _ => {}
            }
        }
        Ok(settings)
    }
}

/// The settings of queue `logical_id` and its redrive policy's dead-letter queue.
pub fn queue_settings(template: &Value, logical_id: &str) -> Result<QueueSettings, SettingsError> {
    let all = resources(template)?;
    let queue = all
        .get(logical_id)
        .filter(|r| r["Type"] == "AWS::SQS::Queue")
        .ok_or_else(|| err(logical_id, "no AWS::SQS::Queue of that name"))?;
    let p = &queue["Properties"];
    let redrive = &p["RedrivePolicy"];
    let dead_letter_retention = referenced(&redrive["deadLetterTargetArn"])
        .and_then(|dlq| all.get(dlq))
        .and_then(|dlq| seconds(&dlq["Properties"]["MessageRetentionPeriod"]))
        .unwrap_or(DEFAULT_RETENTION);
    Ok(QueueSettings {
        visibility_timeout: seconds(&p["VisibilityTimeout"]).unwrap_or(DEFAULT_VISIBILITY),
        retention: seconds(&p["MessageRetentionPeriod"]).unwrap_or(DEFAULT_RETENTION),
        delay: seconds(&p["DelaySeconds"]).unwrap_or_default(),
        max_receive_count: redrive["maxReceiveCount"]
            .as_u64()
            .or_else(|| redrive["maxReceiveCount"].as_str()?.parse().ok())
            .map(|n| n as u32),
        dead_letter_retention,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn template() -> Value {
        json!({"Resources": {
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
                "Timeout": 60, "ReservedConcurrentExecutions": 1, "RecursiveLoop": "Allow"}},
            "FnInvokeConfig": {"Type": "AWS::Lambda::EventInvokeConfig", "Properties": {
                "FunctionName": {"Ref": "Fn"}, "MaximumRetryAttempts": 0,
                "MaximumEventAgeInSeconds": 60, "Qualifier": "$LATEST"}},
            "FnQueue": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {
                "FunctionName": {"Ref": "Fn"}, "EventSourceArn": {"Fn::GetAtt": ["Q", "Arn"]},
                "BatchSize": 10, "FunctionResponseTypes": ["ReportBatchItemFailures"],
                "ScalingConfig": {"MaximumConcurrency": 5}}},
            "FnEvery": {"Type": "AWS::Scheduler::Schedule", "Properties": {
                "ScheduleExpression": "rate(5 minutes)",
                "Target": {"Arn": {"Fn::GetAtt": ["Fn", "Arn"]}}}},
            "Q": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 120,
                "MessageRetentionPeriod": 3600, "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": ["Dlq", "Arn"]}, "maxReceiveCount": 5}}},
            "Dlq": {"Type": "AWS::SQS::Queue", "Properties": {"MessageRetentionPeriod": 1209600}},
            "Bare": {"Type": "AWS::Lambda::Function", "Properties": {}},
        }})
    }

    #[test]
    fn a_function_s_settings_come_from_its_resource_and_the_resources_that_name_it() {
        let s = FunctionSettings::read(&template(), "Fn").unwrap();
        assert_eq!(s.timeout, Duration::from_secs(60));
        assert_eq!(s.reserved_concurrency, Some(1));
        assert_eq!(s.recursive_loop, RecursiveLoop::Allow);
        assert_eq!(
            (s.async_retries, s.async_max_age),
            (0, Duration::from_secs(60))
        );
        let q = s.queue.unwrap();
        assert_eq!(
            (
                q.queue.as_str(),
                q.batch_size,
                q.max_concurrency,
                q.report_batch_item_failures
            ),
            ("Q", 10, Some(5), true)
        );
        assert_eq!(s.schedule, Some(Duration::from_secs(300)));
    }

    #[test]
    fn what_the_template_leaves_out_takes_aws_s_defaults() {
        let s = FunctionSettings::read(&template(), "Bare").unwrap();
        assert_eq!(s.timeout, Duration::from_secs(3));
        assert_eq!(s.reserved_concurrency, None);
        assert_eq!(s.recursive_loop, RecursiveLoop::Terminate);
        assert_eq!(s.async_retries, 2);
        assert_eq!(s.async_max_age, Duration::from_secs(21_600));
        assert_eq!((s.queue, s.schedule), (None, None));
    }

    #[test]
    fn a_queue_s_settings_include_its_redrive_and_its_dead_letter_queue_s_retention() {
        let q = queue_settings(&template(), "Q").unwrap();
        assert_eq!(q.visibility_timeout, Duration::from_secs(120));
        assert_eq!(q.retention, Duration::from_secs(3600));
        assert_eq!(q.max_receive_count, Some(5));
        assert_eq!(q.dead_letter_retention, Duration::from_secs(1_209_600));
    }

    #[test]
    fn rates_read_as_scheduler_reads_them_and_anything_else_is_none() {
        let cases = [
            ("rate(1 minute)", Some(60)),
            ("rate(2 minutes)", Some(120)),
            ("rate(1 hour)", Some(3600)),
            ("cron(0 * * * ? *)", None),
            ("rate(1 fortnight)", None),
        ];
        for (e, want) in cases {
            assert_eq!(rate(e), want.map(Duration::from_secs), "{e}");
        }
    }

    #[test]
    fn a_missing_function_or_an_unknown_recursion_setting_is_an_error_naming_it() {
        let e = FunctionSettings::read(&template(), "Nope").unwrap_err();
        assert!(e.to_string().contains("Nope"), "{e}");
        let mut t = template();
        t["Resources"]["Fn"]["Properties"]["RecursiveLoop"] = json!("Sometimes");
        let e = FunctionSettings::read(&t, "Fn").unwrap_err();
        assert!(e.to_string().contains("Fn.RecursiveLoop"), "{e}");
    }
}
