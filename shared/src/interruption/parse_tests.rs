//! Table tests for the dispatcher and the kind parsers, on the documented sample envelopes
//! (`testdata/`, copied from the AWS documentation's formats) and edits of them.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;

fn sample(name: &str) -> Value {
    let path = format!(
        "{}/src/interruption/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// When the function read the message, for envelopes that carry no `time`.
fn received() -> Timestamp {
    ts("2026-11-21T09:20:00Z")
}

fn ts(s: &str) -> Timestamp {
    s.parse().expect("a timestamp")
}

fn here() -> Origin {
    Origin {
        account: "123456789012".into(),
        region: "us-east-1".into(),
    }
}

fn parsed(v: &Value) -> Result<Parsed, ParseError> {
    parse(&v.to_string(), Some(&here()), received())
}

fn message(v: &Value) -> Message {
    match parsed(v) {
        Ok(Parsed::Act(m)) => m,
        other => panic!("expected a message, got {other:?}"),
    }
}

fn edited(name: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let mut v = sample(name);
    edit(&mut v);
    v
}

#[test]
fn each_documented_sample_parses_into_its_kind_instances_and_deadline() {
    let cases = [
        (
            "spot-interruption-warning.json",
            Kind::SpotInterruption,
            "i-0b662ef9931388ba0",
            Some(ts("2026-11-21T09:17:00Z")),
        ),
        (
            "rebalance-recommendation.json",
            Kind::RebalanceRecommendation,
            "i-0f2e6c3b1a9d84c77",
            None,
        ),
        (
            "instance-state-change-stopping.json",
            Kind::StateChange,
            "i-0a1b2c3d4e5f60718",
            None,
        ),
        (
            "capacity-reservation-interruption-warning.json",
            Kind::CapacityReservationInterruption,
            "i-0d4c3b2a1908f7e6d",
            Some(ts("2026-11-21T11:02:00Z")),
        ),
        (
            "health-scheduled-change.json",
            Kind::ScheduledChange,
            "i-0c7e4d6d1e9a2b3f4",
            Some(ts("2026-11-30T14:00:00Z")),
        ),
    ];
    for (file, kind, instance, deadline) in cases {
        let m = message(&sample(file));
        assert_eq!(m.kind(), kind, "{file}");
        assert_eq!(m.instance_ids, [instance], "{file}");
        assert_eq!(m.deadline(), deadline, "{file}");
        assert!(!m.event_id.is_empty(), "{file}");
    }
}

#[test]
fn the_details_keep_what_the_actions_need() {
    let spot = message(&sample("spot-interruption-warning.json"));
    assert_eq!(
        spot.detail,
        Detail::SpotInterruption {
            action: InstanceAction::Terminate,
            deadline: ts("2026-11-21T09:17:00Z"),
        }
    );
    let stopping = message(&sample("instance-state-change-stopping.json"));
    assert_eq!(
        stopping.detail,
        Detail::StateChange {
            state: InstanceStateName::Stopping
        }
    );
    let health = message(&sample("health-scheduled-change.json"));
    assert_eq!(
        health.detail,
        Detail::ScheduledChange {
            event_type_code: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".into(),
            start: ts("2026-11-30T14:00:00Z"),
            end: Some(ts("2026-11-30T16:00:00Z")),
        }
    );
}

#[test]
fn a_capacity_reservation_warning_without_a_termination_time_gets_two_minutes() {
    let v = edited("capacity-reservation-interruption-warning.json", |v| {
        v["detail"]
            .as_object_mut()
            .unwrap()
            .remove("instance-termination-time");
    });
    assert_eq!(message(&v).deadline(), Some(ts("2026-11-21T11:02:00Z")));
}

#[test]
fn unknown_fields_anywhere_are_ignored() {
    let v = edited("spot-interruption-warning.json", |v| {
        v["replay-name"] = json!("x");
        v["detail"]["azId"] = json!("use1-az1");
        v["detail"]["something-new"] = json!({"nested": [1, 2]});
    });
    assert_eq!(message(&v).kind(), Kind::SpotInterruption);
}

#[test]
fn events_nodewright_does_not_handle_are_ignored_with_the_reason() {
    let cases: Vec<(&str, Value, IgnoreReason)> = vec![
        (
            "unknown detail-type",
            edited("spot-interruption-warning.json", |v| {
                v["detail-type"] = json!("EC2 Fleet Spot Instance Request Change")
            }),
            IgnoreReason::UnknownEvent,
        ),
        (
            "known detail-type from another source",
            edited("spot-interruption-warning.json", |v| {
                v["source"] = json!("custom.app")
            }),
            IgnoreReason::UnknownEvent,
        ),
        (
            "another envelope version",
            edited("rebalance-recommendation.json", |v| {
                v["version"] = json!("1")
            }),
            IgnoreReason::UnsupportedVersion("1".into()),
        ),
        (
            "health event for another service",
            edited("health-scheduled-change.json", |v| {
                v["detail"]["service"] = json!("RDS")
            }),
            IgnoreReason::OtherService("RDS".into()),
        ),
        (
            "health issue, not a scheduled change",
            edited("health-scheduled-change.json", |v| {
                v["detail"]["eventTypeCategory"] = json!("issue")
            }),
            IgnoreReason::OtherCategory("issue".into()),
        ),
        (
            "health event about a volume",
            edited("health-scheduled-change.json", |v| {
                v["detail"]["affectedEntities"] = json!([{"entityValue": "vol-0123456789abcdef0"}]);
                v["resources"] =
                    json!(["arn:aws:ec2:us-east-1:123456789012:volume/vol-0123456789abcdef0"]);
            }),
            IgnoreReason::NoInstance,
        ),
    ];
    for (what, v, want) in cases {
        match parsed(&v) {
            Ok(Parsed::Ignored(i)) => {
                assert_eq!(i.reason, want, "{what}");
                assert!(!i.reason.is_suspicious(), "{what}");
                assert_eq!(i.event_id.as_deref(), v["id"].as_str(), "{what}");
            }
            other => panic!("{what}: expected ignored, got {other:?}"),
        }
    }
}

#[test]
fn an_event_from_another_account_or_region_is_ignored_as_suspicious() {
    let cases = [
        ("account", "999999999999", "us-east-1"),
        ("region", "123456789012", "eu-west-1"),
    ];
    for (what, account, region) in cases {
        let v = edited("spot-interruption-warning.json", |v| {
            v["account"] = json!(account);
            v["region"] = json!(region);
        });
        match parsed(&v) {
            Ok(Parsed::Ignored(i)) => {
                assert!(i.reason.is_suspicious(), "{what}: {:?}", i.reason);
                assert!(i.reason.to_string().contains(account), "{what}");
            }
            other => panic!("{what}: expected ignored, got {other:?}"),
        }
    }
    let no_account = edited("spot-interruption-warning.json", |v| {
        v.as_object_mut().unwrap().remove("account");
    });
    assert!(matches!(parsed(&no_account), Ok(Parsed::Ignored(i)) if i.reason.is_suspicious()));
    // Without an origin (explain-event offline) the same event is read as it is.
    let foreign = edited("spot-interruption-warning.json", |v| {
        v["account"] = json!("999999999999")
    });
    assert!(matches!(
        parse(&foreign.to_string(), None, received()),
        Ok(Parsed::Act(_))
    ));
}

#[test]
fn malformed_or_incomplete_events_are_errors_naming_the_field() {
    let remove = |file: &str, field: &'static str| {
        edited(file, |v| {
            v["detail"].as_object_mut().unwrap().remove(field);
        })
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "not JSON",
            "{\"version\": ".into(),
            "not an EventBridge event",
        ),
        ("a JSON array", "[1, 2]".into(), "not an EventBridge event"),
        (
            "no detail-type",
            edited("spot-interruption-warning.json", |v| {
                v.as_object_mut().unwrap().remove("detail-type");
            })
            .to_string(),
            "detail-type",
        ),
        (
            "a time that is not a time",
            edited("spot-interruption-warning.json", |v| {
                v["time"] = json!("soon")
            })
            .to_string(),
            "time",
        ),
        (
            "spot warning without instance-id",
            remove("spot-interruption-warning.json", "instance-id").to_string(),
            "detail.instance-id",
        ),
        (
            "spot warning without instance-action",
            remove("spot-interruption-warning.json", "instance-action").to_string(),
            "detail.instance-action",
        ),
        (
            "spot warning with an unknown action",
            edited("spot-interruption-warning.json", |v| {
                v["detail"]["instance-action"] = json!("explode")
            })
            .to_string(),
            "detail.instance-action",
        ),
        (
            "instance id that is not one",
            edited("rebalance-recommendation.json", |v| {
                v["detail"]["instance-id"] = json!("node-1")
            })
            .to_string(),
            "detail.instance-id",
        ),
        (
            "state change without state",
            remove("instance-state-change-stopping.json", "state").to_string(),
            "detail.state",
        ),
        (
            "state change to an unknown state",
            edited("instance-state-change-stopping.json", |v| {
                v["detail"]["state"] = json!("melting")
            })
            .to_string(),
            "detail.state",
        ),
        (
            "health event with an unreadable startTime",
            edited("health-scheduled-change.json", |v| {
                v["detail"]["startTime"] = json!("next Tuesday")
            })
            .to_string(),
            "detail.startTime",
        ),
        (
            "no id",
            edited("spot-interruption-warning.json", |v| {
                v.as_object_mut().unwrap().remove("id");
            })
            .to_string(),
            "id",
        ),
    ];
    for (what, body, field) in cases {
        match parse(&body, Some(&here()), received()) {
            Err(e) => assert!(
                e.to_string().contains(field),
                "{what}: {e} should name {field}"
            ),
            Ok(p) => panic!("{what}: expected an error, got {p:?}"),
        }
    }
}

#[test]
fn a_follow_up_reads_back_as_it_was_sent() {
    let f = FollowUp {
        instance_id: "i-0b662ef9931388ba0".into(),
        node: "ip-10-0-1-5.ec2.internal".into(),
        step: Step::Continue,
        reason: crate::removal::Cause::RebalanceRecommendation,
        deadline: None,
        due: Some(ts("2026-11-21T09:16:20Z")),
        origin_event: "1e5527d7".into(),
        round: 2,
    };
    let body = f.envelope("123456789012", "us-east-1", ts("2026-11-21T09:16:00Z"));
    let m = message(&body);
    assert_eq!(m.kind(), Kind::FollowUp);
    assert_eq!(m.instance_ids, ["i-0b662ef9931388ba0"]);
    assert_eq!(m.detail, Detail::FollowUp(f.clone()));
}

#[test]
fn an_envelope_without_a_time_counts_its_deadline_from_when_it_was_read() {
    let spot = edited("spot-interruption-warning.json", |v| {
        v.as_object_mut().unwrap().remove("time");
    });
    let m = message(&spot);
    assert_eq!(m.time, received());
    assert_eq!(m.deadline(), Some(ts("2026-11-21T09:22:00Z")));
}

/// Shaped as NTH's scheduled-change test event (test/e2e/scheduled-change-event-sqs-test):
/// a `startTime` whose weekday does not match its date, the instance in both `resources`
/// and `affectedEntities`.
#[test]
fn nth_s_scheduled_change_is_read_as_nth_reads_it() {
    let v = json!({
        "version": "0", "id": "7fb65329-1628-4cf3-a740-95fd13cd4e3c",
        "detail-type": "AWS Health Event", "source": "aws.health", "account": "123456789012",
        "time": "2016-06-05T15:10:09Z", "region": "us-east-1",
        "resources": ["i-0b662ef9931388ba0"],
        "detail": {
            "eventArn": "arn:aws:health:region::event/EC2/AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED/id",
            "service": "EC2", "eventTypeCode": "AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED",
            "eventTypeCategory": "scheduledChange",
            "startTime": "Sat, 05 Jun 2016 15:10:09 GMT",
            "eventDescription": [{"language": "en_US", "latestDescription": "A description of the event will be provided here"}],
            "affectedEntities": [{"entityValue": "i-0b662ef9931388ba0", "tags": {}}]
        }
    });
    let m = message(&v);
    assert_eq!(
        m.instance_ids,
        ["i-0b662ef9931388ba0"],
        "named twice, read once"
    );
    assert!(
        matches!(m.detail, Detail::ScheduledChange { start, .. } if start == ts("2016-06-05T15:10:09Z"))
    );
}

/// Shaped as Karpenter's scheduled-change test message
/// (pkg/controllers/interruption/suite_test.go, `scheduledChangeMessage`): no `startTime`,
/// the instance as an ARN in `resources` and as an entity.
#[test]
fn karpenter_s_scheduled_change_without_a_start_time_starts_when_it_was_emitted() {
    let v = json!({
        "version": "0", "id": "e8a1c1f2-7e57-4b2d-9d8a-3c2f0a1b2c3d",
        "detail-type": "AWS Health Event", "source": "aws.health", "account": "123456789012",
        "time": "2026-11-21T09:15:00Z", "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1:instance/i-0b662ef9931388ba0"],
        "detail": {
            "service": "EC2", "eventTypeCategory": "scheduledChange",
            "affectedEntities": [{"entityValue": "i-0b662ef9931388ba0"}]
        }
    });
    let m = message(&v);
    assert_eq!(m.instance_ids, ["i-0b662ef9931388ba0"]);
    assert!(
        matches!(m.detail, Detail::ScheduledChange { start, end: None, .. } if start == ts("2026-11-21T09:15:00Z"))
    );
}
