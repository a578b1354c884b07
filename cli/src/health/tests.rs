use super::*;

fn at(minute: i64) -> Timestamp {
    Timestamp::new(1_800_000_000 + minute * 60, 0).unwrap()
}

fn points(p: &[(i64, f64)]) -> Vec<(Timestamp, f64)> {
    p.iter().map(|(m, v)| (at(*m), *v)).collect()
}

/// Per-minute sums (minute, value) at minute `now`, and what the health says of them.
struct Case {
    invocations: &'static [(i64, f64)],
    errors: &'static [(i64, f64)],
    throttles: &'static [(i64, f64)],
    now: i64,
    last_success: Option<i64>,
    last_invoked: Option<i64>,
    counted: (u64, u64),
}

#[test]
fn the_last_success_is_the_last_minute_with_more_invocations_than_errors() {
    let cases = [
        // Every invocation succeeded.
        Case {
            invocations: &[(0, 1.0), (5, 1.0)],
            errors: &[],
            throttles: &[],
            now: 10,
            last_success: Some(5),
            last_invoked: Some(5),
            counted: (0, 0),
        },
        // The last minute failed: the success before it is the last.
        Case {
            invocations: &[(0, 1.0), (5, 2.0), (9, 1.0)],
            errors: &[(5, 1.0), (9, 1.0)],
            throttles: &[],
            now: 10,
            last_success: Some(5),
            last_invoked: Some(9),
            counted: (2, 0),
        },
        // Nothing but failures.
        Case {
            invocations: &[(1, 3.0)],
            errors: &[(1, 3.0)],
            throttles: &[],
            now: 10,
            last_success: None,
            last_invoked: Some(1),
            counted: (3, 0),
        },
        // Throttled only: Lambda counts no invocation.
        Case {
            invocations: &[],
            errors: &[],
            throttles: &[(2, 4.0)],
            now: 10,
            last_success: None,
            last_invoked: None,
            counted: (0, 4),
        },
        // Errors and throttles older than an hour are not counted; the success still is.
        Case {
            invocations: &[(0, 2.0)],
            errors: &[(0, 1.0)],
            throttles: &[(0, 1.0)],
            now: 61,
            last_success: Some(0),
            last_invoked: Some(0),
            counted: (0, 0),
        },
        // A minute of zeros (CloudWatch answers them for a sparse metric) is no invocation.
        Case {
            invocations: &[(0, 1.0), (3, 0.0)],
            errors: &[],
            throttles: &[],
            now: 10,
            last_success: Some(0),
            last_invoked: Some(0),
            counted: (0, 0),
        },
    ];
    for (i, c) in cases.iter().enumerate() {
        let series = Series {
            invocations: points(c.invocations),
            errors: points(c.errors),
            throttles: points(c.throttles),
        };
        let h = usage(&series, at(c.now));
        assert_eq!(
            h.last_success,
            c.last_success.map(at),
            "case {i}: last success"
        );
        assert_eq!(
            h.last_invoked,
            c.last_invoked.map(at),
            "case {i}: last invoked"
        );
        assert_eq!((h.errors, h.throttles), c.counted, "case {i}: counts");
    }
}

fn resource(logical: &str, kind: &str, physical: &str) -> Resource {
    Resource {
        logical_id: logical.into(),
        resource_type: kind.into(),
        physical_id: physical.into(),
    }
}

#[test]
fn the_stack_parts_are_found_by_logical_id_and_every_alarm_by_type() {
    let resources = [
        resource(
            "SweeperFunction",
            "AWS::Lambda::Function",
            "nw-SweeperFunction-1",
        ),
        resource(
            "ProvisionerFunction",
            "AWS::Lambda::Function",
            "nw-ProvisionerFunction-2",
        ),
        resource("InterruptionQueue", "AWS::SQS::Queue", "https://sqs/q"),
        resource(
            "InterruptionDeadLetterQueue",
            "AWS::SQS::Queue",
            "https://sqs/dlq",
        ),
        resource(
            "DeadLetterAlarm",
            "AWS::CloudWatch::Alarm",
            "nw-DeadLetterAlarm-3",
        ),
        resource(
            "ProvisionerErrorsAlarm",
            "AWS::CloudWatch::Alarm",
            "nw-ProvisionerErrors-4",
        ),
        resource("NodeRole", "AWS::IAM::Role", "nw-node"),
    ];
    let parts = stack_parts(&resources);
    assert_eq!(
        parts.functions,
        [
            (
                "provisioner".to_string(),
                "nw-ProvisionerFunction-2".to_string()
            ),
            ("sweeper".to_string(), "nw-SweeperFunction-1".to_string()),
        ],
        "in the template's order; a function the stack lacks is left out"
    );
    assert_eq!(parts.queue_url.as_deref(), Some("https://sqs/q"));
    assert_eq!(parts.dead_letter_url.as_deref(), Some("https://sqs/dlq"));
    assert_eq!(
        parts.alarms,
        ["nw-DeadLetterAlarm-3", "nw-ProvisionerErrors-4"]
    );
}

fn health() -> Health {
    Health {
        stack: "nodewright".into(),
        region: "eu-west-1".into(),
        functions: vec![
            FunctionHealth {
                shown: "provisioner".into(),
                name: "p".into(),
                metrics: Some(Usage {
                    last_success: Some(at(9)),
                    last_invoked: Some(at(9)),
                    errors: 0,
                    throttles: 0,
                }),
            },
            FunctionHealth {
                shown: "sweeper".into(),
                name: "s".into(),
                metrics: Some(Usage {
                    last_success: None,
                    last_invoked: Some(at(8)),
                    errors: 7,
                    throttles: 0,
                }),
            },
            FunctionHealth {
                shown: "interruption".into(),
                name: "i".into(),
                metrics: None,
            },
        ],
        queue: Some(Depth {
            waiting: 2,
            in_flight: 1,
        }),
        dead_letters: Some(1),
        alarms: 12,
        firing: Some(vec![FiringAlarm {
            name: "nodewright-DeadLetterAlarm-X".into(),
            reason: "Threshold Crossed: 1 datapoint [1.0] was >= the threshold (1.0).".into(),
            since: Some(at(7)),
        }]),
    }
}

#[test]
fn the_health_block_shows_each_function_the_queues_and_what_is_in_alarm() {
    let text = render(&health(), at(10));
    let want = "\
Stack nodewright (eu-west-1)
FUNCTION      LAST SUCCESS  LAST INVOKED  ERRORS 1H  THROTTLES 1H
provisioner   60s ago       60s ago               0             0
sweeper       none in 24h   2m ago                7             0
interruption  ?             ?                     ?             ?
interruption queue: 2 waiting, 1 in flight; dead letters: 1
alarms: 1 of 12 in ALARM
  nodewright-DeadLetterAlarm-X (for 3m): Threshold Crossed: 1 datapoint [1.0] was >= the threshold (1.0).
";
    assert_eq!(text, want);
    let mut unknown = health();
    unknown.queue = None;
    unknown.dead_letters = None;
    unknown.firing = None;
    let text = render(&unknown, at(10));
    assert!(
        text.contains("interruption queue: ?; dead letters: ?\nalarms: 12 (states unknown)\n"),
        "{text}"
    );
}

#[test]
fn as_data_the_health_keeps_times_counts_and_unknown_parts_as_null() {
    let mut h = health();
    h.queue = None;
    let v = to_json(&h);
    assert_eq!(v["functions"][0]["last_success"], at(9).to_string());
    assert_eq!(v["functions"][1]["last_success"], Value::Null);
    assert_eq!(v["functions"][1]["errors_last_hour"], 7);
    assert_eq!(
        v["functions"][2]["errors_last_hour"],
        Value::Null,
        "not read"
    );
    assert_eq!(v["queue"], Value::Null);
    assert_eq!(v["dead_letters"], 1);
    assert_eq!(
        v["alarms_firing"][0]["name"],
        "nodewright-DeadLetterAlarm-X"
    );
}
