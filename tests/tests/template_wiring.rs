//! The stack's wiring, read from `template.yaml`: each EventBridge rule's pattern against
//! the sample event of its kind (`shared/src/interruption/testdata`, the events the parser
//! is tested with) and its target, the queue policy naming exactly those rules, each
//! function's trigger, and the alarms watching what fails.

use serde_yaml::Value as Yaml;

fn template() -> Yaml {
    let path = nodewright_world::moto::workspace_root().join("template.yaml");
    let text = std::fs::read_to_string(&path).expect("template.yaml is readable");
    serde_yaml::from_str(&text).expect("template.yaml is YAML")
}

fn resources(t: &Yaml) -> Vec<(String, &Yaml)> {
    t["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), v))
        .collect()
}

fn of_type<'a>(t: &'a Yaml, kind: &str) -> Vec<(String, &'a Yaml)> {
    resources(t)
        .into_iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .collect()
}

/// An intrinsic as written (`!GetAtt InterruptionQueue.Arn`), a plain string as itself.
fn written(v: &Yaml) -> String {
    match v {
        Yaml::Tagged(t) => format!("{} {}", t.tag, written(&t.value)),
        Yaml::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

/// EventBridge's matching for the pattern subset the rules use: a list matches when the
/// event's value (or one of its values) is in it, a mapping matches field by field.
fn matches(pattern: &Yaml, event: &serde_json::Value) -> bool {
    match pattern {
        Yaml::Mapping(m) => m.iter().all(|(k, p)| {
            let key = k.as_str().unwrap_or_default();
            event.get(key).is_some_and(|e| matches(p, e))
        }),
        Yaml::Sequence(allowed) => {
            let values: Vec<&serde_json::Value> = match event {
                serde_json::Value::Array(items) => items.iter().collect(),
                one => vec![one],
            };
            values.iter().any(|v| {
                allowed
                    .iter()
                    .any(|a| a.as_str().is_some_and(|a| v.as_str() == Some(a)))
            })
        }
        _ => false,
    }
}

fn sample(name: &str) -> serde_json::Value {
    let path = nodewright_world::moto::workspace_root()
        .join("shared/src/interruption/testdata")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Rule -> the sample event it exists for.
const RULES: [(&str, &str); 5] = [
    ("SpotInterruptionRule", "spot-interruption-warning.json"),
    ("RebalanceRule", "rebalance-recommendation.json"),
    (
        "InstanceStateChangeRule",
        "instance-state-change-stopping.json",
    ),
    ("ScheduledChangeRule", "health-scheduled-change.json"),
    (
        "CapacityReservationRule",
        "capacity-reservation-interruption-warning.json",
    ),
];

const QUEUE: &str = "!GetAtt InterruptionQueue.Arn";

#[test]
fn each_rule_matches_the_event_of_its_kind_and_no_other_and_sends_it_to_the_queue() {
    let t = template();
    let rules = of_type(&t, "AWS::Events::Rule");
    let mut names: Vec<&str> = rules.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    let mut want: Vec<&str> = RULES.iter().map(|(r, _)| *r).collect();
    want.sort();
    assert_eq!(names, want, "the stack's rules");
    for (rule, resource) in &rules {
        let pattern = &resource["Properties"]["EventPattern"];
        for (other, file) in RULES {
            let hit = matches(pattern, &sample(file));
            assert_eq!(
                hit,
                other == rule,
                "{rule} {} {file}",
                if hit { "matches" } else { "does not match" }
            );
        }
        let targets: Vec<String> = resource["Properties"]["Targets"]
            .as_sequence()
            .expect("Targets")
            .iter()
            .map(|t| written(&t["Arn"]))
            .collect();
        assert_eq!(targets, [QUEUE], "{rule} targets the queue only");
    }
}

#[test]
fn the_queue_accepts_events_from_exactly_the_stacks_rules_and_only_over_tls() {
    let t = template();
    let statements =
        t["Resources"]["InterruptionQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
            .as_sequence()
            .expect("the queue policy's statements");
    let from_rules = statements
        .iter()
        .find(|s| s["Principal"]["Service"].as_str() == Some("events.amazonaws.com"))
        .expect("a statement for EventBridge");
    let mut sources: Vec<String> = from_rules["Condition"]["ArnEquals"]["aws:SourceArn"]
        .as_sequence()
        .expect("aws:SourceArn list")
        .iter()
        .map(written)
        .collect();
    sources.sort();
    let mut want: Vec<String> = RULES
        .iter()
        .map(|(r, _)| format!("!GetAtt {r}.Arn"))
        .collect();
    want.sort();
    assert_eq!(sources, want);
    let tls = statements
        .iter()
        .find(|s| s["Effect"].as_str() == Some("Deny"))
        .expect("a Deny statement");
    assert_eq!(
        tls["Condition"]["Bool"]["aws:SecureTransport"].as_str(),
        Some("false")
    );
}

#[test]
fn the_provisioner_and_sweeper_run_every_minute_within_their_concurrency_and_the_interruption_function_drains_the_queue()
 {
    let t = template();
    let r = &t["Resources"];
    // The provisioner's invocations overlap by design (a Lease lets one act; two is the
    // cap on cost); the sweeper has no Lease yet, so one at a time is its guard.
    for (function, concurrency) in [("ProvisionerFunction", 2), ("SweeperFunction", 1)] {
        let events = r[function]["Properties"]["Events"]
            .as_mapping()
            .expect("Events");
        assert_eq!(events.len(), 1, "{function}: one trigger");
        let (_, event) = events.iter().next().unwrap();
        assert_eq!(event["Type"].as_str(), Some("ScheduleV2"), "{function}");
        assert_eq!(
            event["Properties"]["ScheduleExpression"].as_str(),
            Some("rate(1 minute)"),
            "{function}"
        );
        assert_eq!(
            r[function]["Properties"]["ReservedConcurrentExecutions"].as_u64(),
            Some(concurrency),
            "{function}: invocations at a time"
        );
    }
    let events = r["InterruptionFunction"]["Properties"]["Events"]
        .as_mapping()
        .expect("Events");
    assert_eq!(events.len(), 1, "InterruptionFunction: one trigger");
    let (_, event) = events.iter().next().unwrap();
    assert_eq!(event["Type"].as_str(), Some("SQS"));
    assert_eq!(written(&event["Properties"]["Queue"]), QUEUE);
    let responses: Vec<String> = event["Properties"]["FunctionResponseTypes"]
        .as_sequence()
        .expect("FunctionResponseTypes")
        .iter()
        .map(written)
        .collect();
    assert_eq!(responses, ["ReportBatchItemFailures"]);
    assert_eq!(
        written(&r["InterruptionQueue"]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]),
        "!GetAtt InterruptionDeadLetterQueue.Arn"
    );
}

#[test]
fn the_rule_matcher_tells_a_wrong_source_and_a_missing_detail_field_apart() {
    let pattern: Yaml = serde_yaml::from_str(
        "{source: [aws.health], detail-type: [AWS Health Event], detail: {service: [EC2]}}",
    )
    .unwrap();
    let event = |source: &str, detail: serde_json::Value| serde_json::json!({"source": source, "detail-type": "AWS Health Event", "detail": detail});
    assert!(matches(
        &pattern,
        &event("aws.health", serde_json::json!({"service": "EC2"}))
    ));
    assert!(!matches(
        &pattern,
        &event("aws.ec2", serde_json::json!({"service": "EC2"}))
    ));
    assert!(!matches(
        &pattern,
        &event("aws.health", serde_json::json!({}))
    ));
    assert!(!matches(
        &pattern,
        &event("aws.health", serde_json::json!({"service": "RDS"}))
    ));
}

/// One metric an alarm watches: namespace, name, and its dimensions' values as written.
struct Watched {
    namespace: String,
    metric: String,
    dimensions: Vec<(String, String)>,
}

/// The metrics `alarm` reads: its own, or each `MetricStat` of a metric-math alarm.
fn watched(alarm: &Yaml) -> Vec<Watched> {
    let p = &alarm["Properties"];
    let one = |m: &Yaml| Watched {
        namespace: written(&m["Namespace"]),
        metric: m["MetricName"].as_str().unwrap_or_default().to_string(),
        dimensions: m["Dimensions"]
            .as_sequence()
            .into_iter()
            .flatten()
            .map(|d| (written(&d["Name"]), written(&d["Value"])))
            .collect(),
    };
    match p["Metrics"].as_sequence() {
        Some(metrics) => metrics
            .iter()
            .filter(|m| !m["MetricStat"].is_null())
            .map(|m| one(&m["MetricStat"]["Metric"]))
            .collect(),
        None => vec![one(p)],
    }
}

#[test]
fn alarms_cover_what_an_on_call_engineer_needs_each_notifies_the_topic_and_says_when_it_clears() {
    use nodewright::telemetry::{NAMESPACE, names};
    let t = template();
    let alarms = of_type(&t, "AWS::CloudWatch::Alarm");
    // (namespace, metric, a dimension value it must be read by)
    let needed: Vec<(&str, &str, String)> = vec![
        (
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "!GetAtt InterruptionDeadLetterQueue.QueueName".into(),
        ),
        (
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "!GetAtt InterruptionQueue.QueueName".into(),
        ),
        (
            "AWS/SQS",
            "ApproximateAgeOfOldestMessage",
            "!GetAtt InterruptionQueue.QueueName".into(),
        ),
        ("AWS/Lambda", "Errors", "!Ref ProvisionerFunction".into()),
        ("AWS/Lambda", "Errors", "!Ref InterruptionFunction".into()),
        ("AWS/Lambda", "Errors", "!Ref SweeperFunction".into()),
        (
            "AWS/Lambda",
            "Invocations",
            "!Ref ProvisionerFunction".into(),
        ),
        ("AWS/Lambda", "Invocations", "!Ref SweeperFunction".into()),
        ("AWS/Lambda", "Throttles", "!Ref ProvisionerFunction".into()),
        (
            "AWS/Lambda",
            "Throttles",
            "!Ref InterruptionFunction".into(),
        ),
        (NAMESPACE, names::LAUNCH_FAILURES, "!Ref ClusterName".into()),
        (
            NAMESPACE,
            names::OLDEST_PENDING_POD_AGE,
            "!Ref ClusterName".into(),
        ),
        (NAMESPACE, names::LAUNCHES, "!Ref ClusterName".into()),
        (NAMESPACE, names::FLEET_COST, "!Ref ClusterName".into()),
    ];
    for (namespace, metric, dimension) in &needed {
        let by: Vec<&String> = alarms
            .iter()
            .filter(|(_, a)| {
                watched(a).iter().any(|w| {
                    w.namespace == *namespace
                        && w.metric == *metric
                        && w.dimensions.iter().any(|(_, v)| v == dimension)
                })
            })
            .map(|(n, _)| n)
            .collect();
        assert_eq!(by.len(), 1, "{namespace} {metric} by {dimension}: {by:?}");
    }
    // Delivery failures of every rule that feeds the queue, summed in one alarm.
    let rules: Vec<String> = of_type(&t, "AWS::Events::Rule")
        .into_iter()
        .map(|(name, _)| format!("!Ref {name}"))
        .collect();
    let delivery = &t["Resources"]["EventDeliveryFailuresAlarm"];
    let mut read: Vec<String> = watched(delivery)
        .into_iter()
        .filter(|w| w.namespace == "AWS/Events" && w.metric == "FailedInvocations")
        .flat_map(|w| w.dimensions.into_iter().map(|(_, v)| v))
        .collect();
    read.sort();
    let mut expected = rules.clone();
    expected.sort();
    assert_eq!(read, expected, "every rule's FailedInvocations");

    let Yaml::Tagged(body) = &t["Resources"]["Dashboard"]["Properties"]["DashboardBody"] else {
        panic!("DashboardBody is not a !Sub");
    };
    let body = body.value[0].as_str().unwrap_or_default();
    let alarm_widget = body
        .lines()
        .find(|l| l.contains(r#""title": "Alarms""#))
        .expect("the dashboard's alarm widget");
    let runbook =
        std::fs::read_to_string(nodewright_world::moto::workspace_root().join("docs/operate.md"))
            .unwrap();
    for (name, alarm) in &alarms {
        let p = &alarm["Properties"];
        let actions = |key: &str| -> Vec<String> {
            p[key]
                .as_sequence()
                .map(|a| a.iter().map(written).collect())
                .unwrap_or_default()
        };
        assert_eq!(actions("AlarmActions"), ["!Ref AlarmTopic"], "{name}");
        assert_eq!(
            actions("OKActions"),
            ["!Ref AlarmTopic"],
            "{name} says it cleared"
        );
        assert!(
            alarm_widget.contains(&format!(r#""${{{name}.Arn}}""#)),
            "the dashboard's alarm widget shows {name}"
        );
        assert!(
            runbook.contains(&format!("| `{name}` |")),
            "docs/operate.md's runbook has a row for {name}"
        );
    }
    let subscription = &t["Resources"]["AlarmEmailSubscription"];
    assert_eq!(subscription["Condition"].as_str(), Some("HasAlarmEmail"));
    assert_eq!(
        written(&subscription["Properties"]["Endpoint"]),
        "!Ref AlarmEmail"
    );
}

/// The interruption function's reserved concurrency is what its event source may use at
/// once, so a wave of warnings never waits for the account's unreserved pool.
#[test]
fn the_interruption_function_reserves_the_concurrency_its_event_source_uses() {
    let t = template();
    let function = &t["Resources"]["InterruptionFunction"]["Properties"];
    let reserved = function["ReservedConcurrentExecutions"].as_u64();
    let mapping =
        function["Events"]["Queue"]["Properties"]["ScalingConfig"]["MaximumConcurrency"].as_u64();
    assert!(reserved.is_some(), "no reserved concurrency");
    assert_eq!(reserved, mapping);
}

#[test]
fn each_function_logs_to_its_own_log_group_with_a_retention_which_its_role_may_write() {
    let t = template();
    let r = &t["Resources"];
    for (function, role, group) in [
        (
            "ProvisionerFunction",
            "ProvisionerRole",
            "ProvisionerLogGroup",
        ),
        (
            "InterruptionFunction",
            "InterruptionRole",
            "InterruptionLogGroup",
        ),
        ("SweeperFunction", "SweeperRole", "SweeperLogGroup"),
    ] {
        assert_eq!(
            written(&r[function]["Properties"]["LoggingConfig"]["LogGroup"]),
            format!("!Ref {group}")
        );
        assert_eq!(
            written(&r[group]["Properties"]["RetentionInDays"]),
            "!Ref LogRetentionDays"
        );
        let name = written(&r[group]["Properties"]["LogGroupName"]);
        let name = name.strip_prefix("!Sub ").expect("!Sub name");
        let statements = r[role]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            .as_sequence()
            .expect("statements");
        let logs = statements
            .iter()
            .find(|s| s["Sid"].as_str() == Some("OwnLogs"))
            .expect("an OwnLogs statement");
        assert_eq!(
            written(&logs["Resource"]),
            format!(
                "!Sub arn:${{AWS::Partition}}:logs:${{AWS::Region}}:${{AWS::AccountId}}:log-group:{name}:*"
            ),
            "{role} writes {group}"
        );
    }
}

/// The dashboard's JSON body with every `${...}` of its `!Sub` replaced by `X`.
fn dashboard(t: &Yaml) -> serde_json::Value {
    let body = &t["Resources"]["Dashboard"]["Properties"]["DashboardBody"];
    let Yaml::Tagged(sub) = body else {
        panic!("DashboardBody is not a !Sub: {body:?}");
    };
    let text = sub.value[0].as_str().expect("the !Sub's text");
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('}').expect("a closed ${...}");
        out.push('X');
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("the dashboard is not JSON: {e}\n{out}"))
}

#[test]
fn the_dashboard_and_alarms_read_every_metric_the_functions_emit_in_one_namespace_per_cluster() {
    use nodewright::telemetry::{NAMESPACE, counted, dims, names};
    let t = template();
    assert!(
        of_type(&t, "AWS::Logs::MetricFilter").is_empty(),
        "metrics come from the functions' EMF lines, not log filters"
    );
    for (name, alarm) in of_type(&t, "AWS::CloudWatch::Alarm") {
        let read = watched(alarm);
        assert!(!read.is_empty(), "{name} reads no metric");
        for w in read {
            if w.namespace == NAMESPACE {
                assert!(
                    names::ALL.contains(&w.metric.as_str()),
                    "{name}: {}",
                    w.metric
                );
                assert_eq!(
                    w.dimensions,
                    [(dims::CLUSTER.to_string(), "!Ref ClusterName".to_string())],
                    "{name} reads the cluster's total, the dimension set every metric has"
                );
            } else {
                assert!(
                    w.namespace.starts_with("AWS/"),
                    "{name}: namespace {}",
                    w.namespace
                );
            }
        }
    }

    let body = dashboard(&t);
    let mut shown: Vec<String> = Vec::new();
    let mut counts: Vec<String> = Vec::new();
    for widget in body["widgets"].as_array().expect("widgets") {
        for metric in widget["properties"]["metrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let entry = metric.as_array().expect("a metric is an array");
            if entry[0] == NAMESPACE {
                let name = entry[1].as_str().expect("a metric name");
                assert_eq!(entry[2], dims::CLUSTER, "{name} is read per cluster");
                shown.push(name.to_string());
            } else {
                let namespace = entry[0].as_str().unwrap_or_default();
                assert!(namespace.starts_with("AWS/"), "{metric}");
            }
        }
        let query = widget["properties"]["query"].as_str().unwrap_or_default();
        if let Some((_, rest)) = query.split_once("fields.counted = '") {
            let name = rest.split('\'').next().unwrap_or_default();
            assert!(
                query.contains(&format!("fields.message = '{}'", counted::MESSAGE)),
                "{query}"
            );
            counts.push(name.to_string());
        }
    }
    for name in &counts {
        assert!(
            counted::ALL.contains(&name.as_str()),
            "the dashboard queries unknown count {name}"
        );
    }
    for name in counted::ALL {
        assert!(
            counts.iter().any(|s| s == name),
            "the dashboard does not show the count {name}"
        );
    }
    for name in &shown {
        assert!(
            names::ALL.contains(&name.as_str()),
            "the dashboard reads unknown {name}"
        );
    }
    for name in names::ALL {
        assert!(
            shown.iter().any(|s| s == name),
            "the dashboard does not show {name}"
        );
    }
}
