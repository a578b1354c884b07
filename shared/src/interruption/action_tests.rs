//! Action selection, one row per (message, node) situation.

use jiff::Timestamp;

use super::*;

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

fn node(rebalance: RebalancePolicy) -> NodeFacts {
    NodeFacts {
        node: "ip-10-0-1-5".into(),
        owned: true,
        rebalance,
    }
}

#[test]
fn each_message_and_node_gets_its_action() {
    let deadline = ts("2026-11-21T09:17:00Z");
    let now = ts("2026-11-21T09:15:01Z");
    let spot = msg(Detail::SpotInterruption {
        action: InstanceAction::Terminate,
        deadline,
    });
    let reservation = msg(Detail::CapacityReservationInterruption {
        action: InstanceAction::Terminate,
        deadline,
    });
    let state = |s| msg(Detail::StateChange { state: s });
    let maintenance = msg(Detail::ScheduledChange {
        event_type_code: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".into(),
        start: ts("2026-11-30T14:00:00Z"),
        end: None,
    });
    let owned = node(RebalancePolicy::Replace);
    let foreign = NodeFacts {
        owned: false,
        ..owned.clone()
    };
    let cases: Vec<(&str, Message, Option<NodeFacts>, Timestamp, &str)> = vec![
        (
            "spot warning on an owned node",
            spot.clone(),
            Some(owned.clone()),
            now,
            "replace-and-drain",
        ),
        (
            "spot warning for another cluster's instance",
            spot.clone(),
            Some(foreign.clone()),
            now,
            "none",
        ),
        (
            "spot warning for an instance with no node",
            spot.clone(),
            None,
            now,
            "none",
        ),
        (
            "spot warning read after the instance is gone",
            spot.clone(),
            Some(owned.clone()),
            ts("2026-11-21T09:30:00Z"),
            "delete-node",
        ),
        (
            "spot warning read just past the deadline",
            spot.clone(),
            Some(owned.clone()),
            ts("2026-11-21T09:17:30Z"),
            "replace-and-drain",
        ),
        (
            "capacity reservation warning",
            reservation,
            Some(owned.clone()),
            now,
            "replace-and-drain",
        ),
        (
            "rebalance, pool replaces",
            msg(Detail::RebalanceRecommendation),
            Some(owned.clone()),
            now,
            "replace-and-drain",
        ),
        (
            "rebalance, pool cordons",
            msg(Detail::RebalanceRecommendation),
            Some(node(RebalancePolicy::Cordon)),
            now,
            "cordon",
        ),
        (
            "rebalance, pool ignores",
            msg(Detail::RebalanceRecommendation),
            Some(node(RebalancePolicy::Ignore)),
            now,
            "none",
        ),
        (
            "stopping",
            state(InstanceStateName::Stopping),
            Some(owned.clone()),
            now,
            "delete-node",
        ),
        (
            "stopped",
            state(InstanceStateName::Stopped),
            Some(owned.clone()),
            now,
            "delete-node",
        ),
        (
            "shutting-down",
            state(InstanceStateName::ShuttingDown),
            Some(owned.clone()),
            now,
            "delete-node",
        ),
        (
            "terminated",
            state(InstanceStateName::Terminated),
            Some(owned.clone()),
            now,
            "delete-node",
        ),
        (
            "terminated, not ours",
            state(InstanceStateName::Terminated),
            Some(foreign),
            now,
            "none",
        ),
        (
            "pending",
            state(InstanceStateName::Pending),
            Some(owned.clone()),
            now,
            "none",
        ),
        (
            "running",
            state(InstanceStateName::Running),
            Some(owned.clone()),
            now,
            "none",
        ),
        (
            "scheduled maintenance",
            maintenance,
            Some(owned.clone()),
            now,
            "replace-and-drain",
        ),
    ];
    for (what, m, facts, at, want) in cases {
        assert_eq!(action_for(&m, facts.as_ref(), at).as_str(), want, "{what}");
    }
}

#[test]
fn interruptions_carry_their_deadline_and_an_involuntary_reason() {
    let deadline = ts("2026-11-21T09:17:00Z");
    let spot = msg(Detail::SpotInterruption {
        action: InstanceAction::Stop,
        deadline,
    });
    let action = action_for(
        &spot,
        Some(&node(RebalancePolicy::Replace)),
        ts("2026-11-21T09:15:00Z"),
    );
    assert_eq!(
        action,
        Action::ReplaceAndDrain {
            reason: Reason::SpotInterrupted,
            deadline: Some(deadline)
        }
    );
    assert_eq!(
        Reason::SpotInterrupted.disruption(),
        crate::drain::Disruption::Involuntary
    );
    assert_eq!(
        Reason::ScheduledMaintenance.disruption(),
        crate::drain::Disruption::Involuntary
    );
    assert_eq!(
        Reason::RebalanceRecommendation.disruption(),
        crate::drain::Disruption::Voluntary
    );
}

#[test]
fn an_ignored_rebalance_still_leaves_an_event() {
    let action = action_for(
        &msg(Detail::RebalanceRecommendation),
        Some(&node(RebalancePolicy::Ignore)),
        ts("2026-11-21T09:15:00Z"),
    );
    assert!(matches!(
        action,
        Action::None {
            event: Some(Reason::RebalanceRecommendation),
            ..
        }
    ));
}

#[test]
fn a_follow_up_continues_with_the_step_it_carries() {
    let base = FollowUp {
        instance_id: "i-0b662ef9931388ba0".into(),
        node: "n".into(),
        step: Step::Drain,
        reason: Reason::SpotInterrupted,
        deadline: Some(ts("2026-11-21T09:17:00Z")),
        origin_event: "e".into(),
        round: 1,
    };
    let until = ts("2026-11-21T09:40:00Z");
    let cases = [
        (Step::Drain, "drain"),
        (Step::DeleteNode, "delete-node"),
        (
            Step::AwaitReplacement {
                instances: vec!["i-0aaaaaaaaaaaaaaaa".into()],
                until,
            },
            "await-replacement",
        ),
    ];
    for (step, want) in cases {
        let m = msg(Detail::FollowUp(base.next(step.clone())));
        let got = action_for(
            &m,
            Some(&node(RebalancePolicy::Replace)),
            ts("2026-11-21T09:16:00Z"),
        );
        assert_eq!(got.as_str(), want, "{step:?}");
    }
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
