//! What next for a node being removed: one row per rule of `decide.rs`.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::decide::*;
use super::{Cause, Record, Replacement};

fn at(minutes: i64, seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60 + seconds).unwrap()
}

fn pod(name: &str, extra: serde_json::Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    });
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

fn web() -> Vec<Pod> {
    vec![pod("web-1", json!({})), pod("web-2", json!({}))]
}

fn daemon() -> Pod {
    pod(
        "ds",
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
            "name": "ds", "uid": "u", "controller": true}]}}),
    )
}

fn situation<'a>(record: Option<Record>, pods: &'a [Pod]) -> Situation<'a> {
    Situation {
        tainted: record.is_some(),
        written: record.is_some(),
        record,
        instance: Instance::Running,
        pods,
        ready: &[],
        lost: &[],
        grace: None,
        budget: Budget::Allows,
    }
}

fn spot(started: Timestamp) -> Record {
    Record::new(
        Cause::SpotInterrupted,
        started,
        Some(started + SignedDuration::from_secs(120)),
    )
}

fn kinds(next: &Next) -> Vec<&'static str> {
    next.acts
        .iter()
        .map(|a| match a {
            Act::Take => "take",
            Act::Untaint => "untaint",
            Act::DeleteNode => "delete-node",
            Act::Drain(_) => "drain",
            Act::Replace => "replace",
            Act::Terminate => "terminate",
            Act::Restore(_) => "restore",
        })
        .collect()
}

fn drain_of(next: &Next) -> &crate::drain::DrainPlan {
    next.acts
        .iter()
        .find_map(|a| match a {
            Act::Drain(p) => Some(p),
            _ => None,
        })
        .expect("a drain")
}

fn launched(ids: &[&str], when: Timestamp) -> Replacement {
    Replacement::Launched {
        instances: ids.iter().map(|s| s.to_string()).collect(),
        at: when,
    }
}

#[test]
fn a_node_nobody_is_removing_is_left_alone_and_a_stale_taint_is_removed() {
    let pods = web();
    let mut s = situation(None, &pods);
    assert_eq!(kinds(&next(&s, at(0, 0))), Vec::<&str>::new());
    s.tainted = true;
    let n = next(&s, at(0, 0));
    assert_eq!((kinds(&n), n.state), (vec!["untaint"], "stale taint"));
}

#[test]
fn a_gone_instance_s_node_and_pods_are_deleted_at_once_whatever_the_cause() {
    let pods = web();
    for cause in [
        Cause::InstanceStopping,
        Cause::SpotInterrupted,
        Cause::Expired,
    ] {
        let mut s = situation(Some(Record::new(cause, at(0, 0), None)), &pods);
        s.instance = Instance::Gone;
        assert_eq!(kinds(&next(&s, at(0, 5))), ["delete-node"], "{cause:?}");
    }
}

#[test]
fn a_spot_warning_takes_the_node_drains_at_once_and_asks_for_capacity_after_the_first_evictions() {
    let pods = web();
    let mut s = situation(Some(spot(at(0, 0))), &pods);
    s.written = false;
    s.tainted = false;
    let n = next(&s, at(0, 0));
    assert_eq!(kinds(&n), ["take", "drain", "replace"]);
    assert_eq!(drain_of(&n).evict.len(), 2);
    let record = n.record.unwrap();
    assert_eq!(record.drain_started, Some(at(0, 0)));
    // Looked at again within two seconds, and so on while pods are left: a budget lets a
    // pod go as the last one's successor is Ready, and each look missed is a pod deleted
    // at the deadline instead of evicted. However long nothing moved.
    assert_eq!(n.recheck, Some(at(0, 2)));
    let mut stalled = s.clone();
    stalled.record = Some(record);
    stalled.written = true;
    stalled.tainted = true;
    assert_eq!(next(&stalled, at(1, 0)).recheck, Some(at(1, 2)));
}

#[test]
fn a_removal_resumed_without_its_taint_taints_again_before_evicting() {
    let pods = web();
    let mut record = spot(at(0, 0));
    record.drain_started = Some(at(0, 0));
    record.replacement = launched(&["i-new"], at(0, 2));
    let mut s = situation(Some(record), &pods);
    s.tainted = false;
    assert_eq!(kinds(&next(&s, at(0, 30))), ["take", "drain"]);
    s.tainted = true;
    assert_eq!(kinds(&next(&s, at(0, 30))), ["drain"]);
}

#[test]
fn a_drained_node_s_instance_is_terminated() {
    let pods = vec![daemon()];
    let mut record = spot(at(0, 0));
    record.drain_started = Some(at(0, 0));
    let s = situation(Some(record), &pods);
    let n = next(&s, at(0, 40));
    assert_eq!((kinds(&n), n.state), (vec!["terminate"], "drained"));
}

#[test]
fn an_involuntary_drain_deletes_each_pod_at_the_deadline_less_its_grace_past_its_budget() {
    let pods = vec![
        pod(
            "slow",
            json!({"spec": {"terminationGracePeriodSeconds": 90}}),
        ),
        pod(
            "quick",
            json!({"spec": {"terminationGracePeriodSeconds": 10}}),
        ),
    ];
    let mut record = spot(at(0, 0));
    record.drain_started = Some(at(0, 0));
    record.replacement = Replacement::NotNeeded;
    let s = situation(Some(record), &pods);
    let early = next(&s, at(0, 10));
    let plan = drain_of(&early);
    assert_eq!((plan.evict.len(), plan.delete.len()), (2, 0), "{plan:?}");
    let later = next(&s, at(0, 31));
    let plan = drain_of(&later);
    let deleted: Vec<(&str, i64)> = plan
        .delete
        .iter()
        .map(|p| (p.pod.name.as_str(), p.grace_seconds))
        .collect();
    assert_eq!(deleted, [("slow", 89)]);
    // Looked at again before the next deletion is due (quick's, at 1:50).
    let recheck = later.recheck.expect("a recheck");
    assert!(recheck > at(0, 31) && recheck <= at(1, 50), "{recheck}");
}

#[test]
fn an_expired_node_asks_for_its_replacement_before_anything_else() {
    let pods = web();
    let mut s = situation(Some(Record::new(Cause::Expired, at(0, 0), None)), &pods);
    s.written = false;
    s.tainted = false;
    let n = next(&s, at(0, 0));
    assert_eq!(
        (kinds(&n), n.state),
        (vec!["take", "replace"], "asking for a replacement")
    );
    assert_eq!(n.record.unwrap().drain_started, None);
}

#[test]
fn a_voluntary_removal_waits_for_every_replacement_instance_to_be_a_ready_node() {
    let pods = web();
    let mut record = Record::new(Cause::Drifted, at(0, 0), None);
    record.replacement = launched(&["i-1", "i-2"], at(0, 5));
    let ready = ["i-1".to_string()];
    let mut s = situation(Some(record), &pods);
    s.ready = &ready;
    let n = next(&s, at(3, 0));
    assert_eq!((kinds(&n), n.state), (vec![], "awaiting the replacement"));
    assert_eq!(n.recheck, Some(at(3, 20)));
}

#[test]
fn no_voluntary_drain_without_somewhere_to_go() {
    let pods = web();
    let cases = [
        (
            "unschedulable",
            Replacement::Failed {
                why: "pod web-1 fits no instance type".into(),
                at: at(0, 1),
            },
            at(0, 30),
            &[][..],
        ),
        (
            "not ready in time",
            launched(&["i-1"], at(0, 1)),
            at(15, 0),
            &[][..],
        ),
        (
            "lost",
            launched(&["i-1"], at(0, 1)),
            at(3, 0),
            &["i-1".to_string()][..],
        ),
    ];
    for (what, replacement, now, lost) in cases {
        let mut record = Record::new(Cause::Expired, at(0, 0), None);
        record.replacement = replacement;
        let mut s = situation(Some(record), &pods);
        s.lost = lost;
        let n = next(&s, now);
        assert_eq!(kinds(&n), ["restore"], "{what}");
        assert_eq!(n.record, None, "{what}: the record goes");
        assert_eq!(n.state, "given up", "{what}");
    }
}

#[test]
fn the_termination_grace_period_counts_from_the_drain_not_from_the_taint() {
    let pods = web();
    let mut record = Record::new(Cause::Expired, at(0, 0), None);
    record.replacement = launched(&["i-1"], at(0, 1));
    let ready = ["i-1".to_string()];
    let mut s = situation(Some(record), &pods);
    s.ready = &ready;
    s.grace = Some(Duration::from_secs(300));
    // Ready six minutes after the taint: a grace of five minutes counted from the taint
    // would already be over and every pod deleted; counted from the drain it begins now.
    let n = next(&s, at(6, 0));
    assert_eq!(kinds(&n), ["take", "drain"]);
    let plan = drain_of(&n);
    assert_eq!((plan.evict.len(), plan.delete.len()), (2, 0));
    assert_eq!(n.record.as_ref().unwrap().drain_started, Some(at(6, 0)));
    // Four minutes into the drain: still evicting; past it less the default grace: deleting.
    let mut s2 = s.clone();
    s2.record = n.record.clone();
    assert_eq!(drain_of(&next(&s2, at(10, 0))).delete.len(), 0);
    assert_eq!(drain_of(&next(&s2, at(10, 30))).delete.len(), 2);
}

#[test]
fn a_voluntary_drain_without_progress_is_given_up_unless_a_deadline_will_end_it() {
    let pods = web();
    let mut record = Record::new(Cause::Expired, at(0, 0), None);
    record.replacement = Replacement::NotNeeded;
    record.drain_started = Some(at(0, 0));
    record.progress = at(1, 0);
    let s = situation(Some(record), &pods);
    assert_eq!(kinds(&next(&s, at(20, 0))), ["drain"]);
    let n = next(&s, at(21, 0));
    assert_eq!(kinds(&n), ["restore"]);
    assert!(n.note.unwrap().contains("no progress"));
    let mut bounded = s.clone();
    bounded.grace = Some(Duration::from_secs(3600));
    assert_eq!(kinds(&next(&bounded, at(21, 0))), ["drain"]);
}

#[test]
fn a_drain_that_does_not_move_is_looked_at_less_often() {
    let pods = web();
    let mut record = Record::new(Cause::Expired, at(0, 0), None);
    record.replacement = Replacement::NotNeeded;
    record.drain_started = Some(at(0, 0));
    let moving = situation(Some(record.clone()), &pods);
    assert_eq!(next(&moving, at(0, 0)).recheck, Some(at(0, 5)));
    record.progress = at(0, 0);
    let stalled = situation(Some(record), &pods);
    assert_eq!(next(&stalled, at(10, 0)).recheck, Some(at(11, 0)));
}

#[test]
fn an_empty_node_is_taken_and_terminated_without_a_replacement() {
    let pods = vec![daemon()];
    let mut s = situation(Some(Record::new(Cause::Empty, at(0, 0), None)), &pods);
    s.written = false;
    s.tainted = false;
    assert_eq!(kinds(&next(&s, at(0, 0))), ["take", "terminate"]);
}

#[test]
fn a_rebalance_removal_begins_only_when_its_pool_s_budget_allows_and_is_not_held_once_begun() {
    let pods = web();
    let record = Record::new(Cause::RebalanceRecommendation, at(0, 0), None);
    let mut s = situation(Some(record), &pods);
    s.written = false;
    s.tainted = false;
    s.budget = Budget::Holds("NodePool default: 0 of 2 nodes may be disrupted now".into());
    let n = next(&s, at(0, 0));
    assert_eq!(
        (kinds(&n), n.state),
        (vec![], "held by the disruption budget")
    );
    assert_eq!(n.record, None, "nothing written, nothing launched");
    assert_eq!(n.recheck, Some(at(0, 30)));
    assert!(n.note.unwrap().contains("NodePool default"));
    s.budget = Budget::Allows;
    assert_eq!(kinds(&next(&s, at(0, 30))), ["take", "replace"]);
    // Begun (its taint counts against the budget): the budget no longer holds it.
    let mut begun = s.clone();
    begun.written = true;
    begun.tainted = true;
    begun.budget = Budget::Holds("full".into());
    assert_eq!(kinds(&next(&begun, at(1, 0))), ["replace"]);
}

#[test]
fn an_interruption_takes_over_a_voluntary_removal_and_keeps_what_it_launched() {
    let mut expiring = Record::new(Cause::Expired, at(0, 0), None);
    expiring.replacement = launched(&["i-1"], at(0, 1));
    let warned = spot(at(5, 0));
    let merged = merge(Some(expiring), Some(warned.clone())).unwrap();
    assert_eq!(merged.cause, Cause::SpotInterrupted);
    assert_eq!(merged.deadline, warned.deadline);
    assert_eq!(merged.replacement, launched(&["i-1"], at(0, 1)));
    // A second warning for the same node keeps the first record, with the earlier deadline.
    let first = spot(at(0, 0));
    let again = merge(Some(first.clone()), Some(spot(at(0, 30)))).unwrap();
    assert_eq!(again, first);
    let sooner = merge(Some(spot(at(1, 0))), Some(spot(at(0, 0)))).unwrap();
    assert_eq!(sooner.deadline, Some(at(2, 0)));
    assert_eq!(merge(None, None), None);
}

#[test]
fn an_empty_node_that_gained_a_pod_is_called_off_not_drained() {
    let pods = vec![daemon(), pod("late", json!({}))];
    let s = situation(Some(Record::new(Cause::Empty, at(0, 0), None)), &pods);
    let n = next(&s, at(0, 1));
    assert_eq!(kinds(&n), ["restore"]);
    assert!(n.note.unwrap().contains("pod was scheduled"));
}

#[test]
fn a_consolidation_that_launched_first_waits_for_its_replacement_like_any_other() {
    let pods = web();
    let mut record = Record::new(Cause::Underutilized, at(0, 0), None);
    record.replacement = launched(&["i-1"], at(0, 0));
    let s = situation(Some(record.clone()), &pods);
    assert_eq!(next(&s, at(1, 0)).state, "awaiting the replacement");
    // A consolidation that deletes (nothing launched) drains at once.
    let deletes = situation(
        Some(Record::new(Cause::Underutilized, at(0, 0), None)),
        &pods,
    );
    assert_eq!(kinds(&next(&deletes, at(1, 0))), ["take", "drain"]);
}

#[test]
fn a_do_not_disrupt_pod_of_any_running_kind_gives_up_a_voluntary_removal_but_not_expiry_or_an_interruption()
 {
    let held = pod(
        "critical",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
    );
    let pods = vec![pod("web-1", json!({})), held];
    for cause in [
        Cause::RebalanceRecommendation,
        Cause::Drifted,
        Cause::Underutilized,
    ] {
        let s = situation(Some(Record::new(cause, at(0, 0), None)), &pods);
        let n = next(&s, at(0, 5));
        assert_eq!(kinds(&n), vec!["restore"], "{cause:?}");
        assert!(n.note.unwrap().contains("critical"), "{cause:?}");
    }
    // A DaemonSet's do-not-disrupt pod holds the node too, as in Karpenter, though it never
    // moves; a finished one does not.
    let mut ds = daemon();
    ds.metadata.annotations = Some(
        [(
            "karpenter.sh/do-not-disrupt".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let only_daemon = vec![pod("web-1", json!({})), ds];
    let drift = situation(
        Some(Record::new(Cause::Drifted, at(0, 0), None)),
        &only_daemon,
    );
    assert_eq!(kinds(&next(&drift, at(0, 5))), vec!["restore"]);
    let done = pod(
        "job",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}},
               "status": {"phase": "Succeeded"}}),
    );
    let finished = vec![pod("web-1", json!({})), done];
    let drift = situation(Some(Record::new(Cause::Drifted, at(0, 0), None)), &finished);
    assert_ne!(kinds(&next(&drift, at(0, 5))), vec!["restore"]);
    let expired = situation(Some(Record::new(Cause::Expired, at(0, 0), None)), &pods);
    assert_ne!(kinds(&next(&expired, at(0, 5))), vec!["restore"]);
    let spot = situation(Some(spot(at(0, 0))), &pods);
    assert!(kinds(&next(&spot, at(0, 5))).contains(&"drain"));
}
