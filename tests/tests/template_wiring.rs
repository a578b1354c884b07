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

#[test]
fn alarms_watch_the_dead_letter_queue_each_functions_errors_and_unprovisioned_pods_and_notify_the_topic()
 {
    let t = template();
    let alarms = of_type(&t, "AWS::CloudWatch::Alarm");
    let watching = |namespace: &str, metric: &str, dimension: Option<&str>| -> Vec<String> {
        alarms
            .iter()
            .filter(|(_, a)| {
                let p = &a["Properties"];
                written(&p["Namespace"]) == namespace
                    && p["MetricName"].as_str() == Some(metric)
                    && dimension.is_none_or(|d| {
                        p["Dimensions"]
                            .as_sequence()
                            .is_some_and(|ds| ds.iter().any(|x| written(&x["Value"]) == d))
                    })
            })
            .map(|(n, _)| n.clone())
            .collect()
    };
    let mut watched = vec![watching(
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        Some("!GetAtt InterruptionDeadLetterQueue.QueueName"),
    )];
    for function in [
        "ProvisionerFunction",
        "InterruptionFunction",
        "SweeperFunction",
    ] {
        watched.push(watching(
            "AWS/Lambda",
            "Errors",
            Some(&format!("!Ref {function}")),
        ));
    }
    watched.push(watching(
        "!Sub nodewright/${ClusterName}",
        "PollsWithFailedLaunches",
        None,
    ));
    for (i, names) in watched.iter().enumerate() {
        assert_eq!(names.len(), 1, "alarm {i} of the list: {names:?}");
    }
    for (name, alarm) in &alarms {
        let actions: Vec<String> = alarm["Properties"]["AlarmActions"]
            .as_sequence()
            .map(|a| a.iter().map(written).collect())
            .unwrap_or_default();
        assert_eq!(actions, ["!Ref AlarmTopic"], "{name} notifies the topic");
    }
    // The metric the launch-failure alarm reads is made from the provisioner's log.
    let filters = of_type(&t, "AWS::Logs::MetricFilter");
    let made = filters.iter().any(|(_, f)| {
        let p = &f["Properties"];
        written(&p["LogGroupName"]) == "!Ref ProvisionerLogGroup"
            && p["MetricTransformations"][0]["MetricName"].as_str()
                == Some("PollsWithFailedLaunches")
    });
    assert!(
        made,
        "PollsWithFailedLaunches comes from the provisioner's log group"
    );
    let subscription = &t["Resources"]["AlarmEmailSubscription"];
    assert_eq!(subscription["Condition"].as_str(), Some("HasAlarmEmail"));
    assert_eq!(
        written(&subscription["Properties"]["Endpoint"]),
        "!Ref AlarmEmail"
    );
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

/// The `!= "*...*"` wildcard of a JSON metric filter pattern, without its stars.
fn excluded_text(pattern: &str) -> Option<&str> {
    let (_, rest) = pattern.split_once("!= \"*")?;
    let (text, _) = rest.split_once("*\"")?;
    Some(text)
}

#[test]
fn the_launch_failure_filter_excludes_exactly_the_poll_reports_without_failed_claims() {
    let t = template();
    let pattern = t["Resources"]["LaunchFailuresMetric"]["Properties"]["FilterPattern"]
        .as_str()
        .expect("a pattern");
    assert!(
        pattern.contains(r#"$.fields.message = "poll""#),
        "{pattern}"
    );
    let excluded = excluded_text(pattern).expect("a != wildcard on the report");
    // The provisioner logs `?report`: the report's Debug form is what the filter reads.
    let clean = nodewright::provision::PollReport::default();
    let failed = nodewright::provision::PollReport {
        failed_claims: 2,
        ..Default::default()
    };
    assert!(format!("{clean:?}").contains(excluded), "{clean:?}");
    assert!(!format!("{failed:?}").contains(excluded), "{failed:?}");
    assert_eq!(excluded_text(r#"{ $.a != "*x: 0,*" }"#), Some("x: 0,"));
    assert_eq!(excluded_text(r#"{ $.a = "x" }"#), None);
}
