//! What the interruption function does, one row per (message, node) situation.

use jiff::Timestamp;

use super::*;
use crate::removal::{Avoid, Cause, Record};

fn ts(s: &str) -> Timestamp {
    s.parse().expect("a timestamp")
}

fn msg(detail: Detail) -> Message {
    Message {
        event_id: "e-1".into(),
        time: ts("2026-11-21T09:15:00Z"),
        instance_ids: vec!["i-0b662ef9931388ba0".into()],
        detail,
    }
}

fn offering() -> Avoid {
    Avoid {
        instance_type: "m5.large".into(),
        zone: "us-east-1b".into(),
        capacity_type: "spot".into(),
    }
}

fn node(rebalance: RebalancePolicy) -> NodeFacts {
    NodeFacts {
        node: "ip-10-0-1-5".into(),
        owned: true,
        rebalance,
        offering: Some(offering()),
    }
}

fn removal(intent: Intent) -> Record {
    match intent {
        Intent::Remove(r) => *r,
        other => panic!("not a removal: {other:?}"),
    }
}

#[test]
fn each_message_and_node_gets_its_intent() {
    let deadline = ts("2026-11-21T09:17:00Z");
    let now = ts("2026-11-21T09:15:01Z");
    let spot = msg(Detail::SpotInterruption {
        action: InstanceAction::Terminate,
        deadline,
    });
    let state = |s| msg(Detail::StateChange { state: s });
    let owned = node(RebalancePolicy::Replace);
    let foreign = NodeFacts {
        owned: false,
        ..owned.clone()
    };
    let follow_up = msg(Detail::FollowUp(FollowUp {
        instance_id: "i-0b662ef9931388ba0".into(),
        node: "n".into(),
        step: Step::Continue,
        reason: Cause::SpotInterrupted,
        deadline: Some(deadline),
        due: Some(now),
        origin_event: "e".into(),
        round: 3,
    }));
    let cases: Vec<(&str, Message, Option<NodeFacts>, &str)> = vec![
        (
            "spot warning, owned node",
            spot.clone(),
            Some(owned.clone()),
            "remove",
        ),
        (
            "spot warning, another cluster's",
            spot.clone(),
            Some(foreign),
            "none",
        ),
        ("spot warning, no node", spot, None, "none"),
        (
            "rebalance, replace",
            msg(Detail::RebalanceRecommendation),
            Some(owned.clone()),
            "remove",
        ),
        (
            "rebalance, cordon",
            msg(Detail::RebalanceRecommendation),
            Some(node(RebalancePolicy::Cordon)),
            "cordon",
        ),
        (
            "rebalance, ignore",
            msg(Detail::RebalanceRecommendation),
            Some(node(RebalancePolicy::Ignore)),
            "none",
        ),
        (
            "stopping",
            state(InstanceStateName::Stopping),
            Some(owned.clone()),
            "remove",
        ),
        (
            "terminated",
            state(InstanceStateName::Terminated),
            Some(owned.clone()),
            "remove",
        ),
        (
            "running",
            state(InstanceStateName::Running),
            Some(owned.clone()),
            "none",
        ),
        ("follow-up", follow_up, Some(owned), "continue"),
    ];
    for (what, m, facts, want) in cases {
        assert_eq!(intent_for(&m, facts.as_ref(), now).as_str(), want, "{what}");
    }
}

#[test]
fn an_interruption_s_removal_carries_its_deadline_and_avoids_the_reclaimed_offering() {
    let deadline = ts("2026-11-21T09:17:00Z");
    let now = ts("2026-11-21T09:15:00Z");
    for (detail, cause) in [
        (
            Detail::SpotInterruption {
                action: InstanceAction::Stop,
                deadline,
            },
            Cause::SpotInterrupted,
        ),
        (
            Detail::CapacityReservationInterruption {
                action: InstanceAction::Terminate,
                deadline,
            },
            Cause::CapacityReservationInterrupted,
        ),
    ] {
        let r = removal(intent_for(
            &msg(detail),
            Some(&node(RebalancePolicy::Replace)),
            now,
        ));
        assert_eq!((r.cause, r.deadline), (cause, Some(deadline)));
        assert_eq!(r.avoid, Some(offering()));
        assert_eq!(r.origin, "e-1");
        assert!(!r.cause.voluntary());
    }
}

#[test]
fn a_rebalance_replaces_away_from_the_offering_at_risk_without_a_deadline() {
    let r = removal(intent_for(
        &msg(Detail::RebalanceRecommendation),
        Some(&node(RebalancePolicy::Replace)),
        ts("2026-11-21T09:15:00Z"),
    ));
    assert_eq!(r.cause, Cause::RebalanceRecommendation);
    assert_eq!((r.deadline, r.avoid), (None, Some(offering())));
    assert!(r.cause.voluntary());
}

#[test]
fn a_scheduled_change_keeps_its_meaning_after_it_has_begun() {
    let start = ts("2026-11-30T14:00:00Z");
    let end = ts("2026-11-30T16:00:00Z");
    let change = |end| {
        msg(Detail::ScheduledChange {
            event_type_code: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".into(),
            start,
            end,
        })
    };
    let deadline = |m: &Message, now| {
        removal(intent_for(
            m,
            Some(&node(RebalancePolicy::Replace)),
            ts(now),
        ))
        .deadline
    };
    // Before its start: drained by the start.
    assert_eq!(
        deadline(&change(Some(end)), "2026-11-29T00:00:00Z"),
        Some(start)
    );
    // Handled during the window: still a drain within PDBs, by the window's end; never a
    // node deleted with its pods at once.
    assert_eq!(
        deadline(&change(Some(end)), "2026-11-30T15:00:00Z"),
        Some(end)
    );
    assert_eq!(
        deadline(&change(None), "2026-11-30T15:00:00Z"),
        Some(ts("2026-11-30T17:00:00Z"))
    );
    assert_eq!(
        deadline(&change(Some(end)), "2026-11-30T16:30:00Z"),
        Some(ts("2026-11-30T18:30:00Z"))
    );
}

#[test]
fn an_ignored_rebalance_still_leaves_an_event() {
    let intent = intent_for(
        &msg(Detail::RebalanceRecommendation),
        Some(&node(RebalancePolicy::Ignore)),
        ts("2026-11-21T09:15:00Z"),
    );
    assert!(matches!(
        intent,
        Intent::None {
            event: Some(Reason::RebalanceRecommendation),
            ..
        }
    ));
}

#[test]
fn the_rebalance_annotation_accepts_three_values_and_names_a_wrong_one() {
    let cases = [
        (None, Ok(RebalancePolicy::Replace)),
        (Some(""), Ok(RebalancePolicy::Replace)),
        (Some("replace"), Ok(RebalancePolicy::Replace)),
        (Some("cordon"), Ok(RebalancePolicy::Cordon)),
        (Some(" ignore "), Ok(RebalancePolicy::Ignore)),
    ];
    for (value, want) in cases {
        assert_eq!(RebalancePolicy::from_annotation(value), want, "{value:?}");
    }
    let err = RebalancePolicy::from_annotation(Some("drain")).unwrap_err();
    assert!(
        err.contains(REBALANCE_ANNOTATION) && err.contains("drain"),
        "{err}"
    );
}

#[test]
fn a_follow_up_of_an_earlier_release_is_read_as_a_look_at_the_node() {
    for step in [
        r#"{"name": "drain"}"#,
        r#"{"name": "delete-node"}"#,
        r#"{"name": "await-replacement", "instances": [], "until": "2026-11-21T09:40:00Z"}"#,
        r#"{"name": "continue"}"#,
    ] {
        let detail = format!(
            r#"{{"instance-id": "i-0b662ef9931388ba0", "node": "n", "step": {step},
               "reason": "spot-interrupted", "origin-event": "e"}}"#
        );
        let f: FollowUp = serde_json::from_str(&detail).unwrap();
        let got = intent_for(
            &msg(Detail::FollowUp(f)),
            Some(&node(RebalancePolicy::Replace)),
            ts("2026-11-21T09:16:00Z"),
        );
        assert_eq!(got, Intent::Continue { due: None }, "{step}");
    }
}
