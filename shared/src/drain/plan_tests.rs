//! The drain plan, one row per kind of pod and moment.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().expect("a timestamp")
}

fn pod(name: &str, extra: serde_json::Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    });
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).expect("a pod")
}

fn names(steps: &[PodStep]) -> Vec<&str> {
    steps.iter().map(|s| s.pod.name.as_str()).collect()
}

fn involuntary(deadline: &str) -> DrainPolicy {
    DrainPolicy {
        disruption: Disruption::Involuntary,
        deadline: Some(ts(deadline)),
    }
}

fn pods() -> Vec<Pod> {
    vec![
        pod("web", json!({})),
        pod(
            "ds",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]}}),
        ),
        pod(
            "mirror",
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "abc"}}}),
        ),
        pod(
            "stays",
            json!({"spec": {"tolerations": [{"key": "nodewright.io/disrupted", "operator": "Exists", "effect": "NoSchedule"}]}}),
        ),
        pod(
            "stays-as-on-karpenter",
            json!({"spec": {"tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}}),
        ),
        pod("done", json!({"status": {"phase": "Succeeded"}})),
        pod(
            "pinned",
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
        ),
        pod(
            "dns",
            json!({"spec": {"priorityClassName": "system-cluster-critical"}}),
        ),
    ]
}

#[test]
fn daemonset_mirror_tolerating_either_disruption_taint_and_finished_pods_are_left_alone() {
    let plan = plan_drain(
        &pods(),
        &involuntary("2026-11-21T09:17:00Z"),
        ts("2026-11-21T09:15:00Z"),
    );
    let skipped: Vec<(&str, Skip)> = plan
        .skipped
        .iter()
        .map(|(p, s)| (p.name.as_str(), *s))
        .collect();
    assert_eq!(
        skipped,
        [
            ("ds", Skip::DaemonSet),
            ("mirror", Skip::Mirror),
            ("stays", Skip::ToleratesDisruption),
            ("stays-as-on-karpenter", Skip::ToleratesDisruption),
            ("done", Skip::Finished),
        ]
    );
}

#[test]
fn do_not_disrupt_holds_a_pod_for_voluntary_drains_only() {
    let now = ts("2026-11-21T09:15:00Z");
    let forced = plan_drain(&pods(), &involuntary("2026-11-21T09:17:00Z"), now);
    assert_eq!(names(&forced.evict), ["web", "pinned"]);
    assert!(forced.held.is_empty());
    let chosen = plan_drain(
        &pods(),
        &DrainPolicy {
            disruption: Disruption::Voluntary,
            deadline: None,
        },
        now,
    );
    assert_eq!(names(&chosen.evict), ["web"]);
    assert_eq!(
        chosen
            .held
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["pinned"]
    );
    assert!(!chosen.finished());
}

#[test]
fn critical_pods_go_only_after_the_others_are_gone() {
    let now = ts("2026-11-21T09:15:00Z");
    let policy = involuntary("2026-11-21T09:17:00Z");
    let first = plan_drain(&pods(), &policy, now);
    assert_eq!(
        first
            .later
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["dns"]
    );
    let terminating = pod(
        "web",
        json!({"metadata": {"deletionTimestamp": "2026-11-21T09:15:01Z"}}),
    );
    let critical = pod(
        "dns",
        json!({"spec": {"priorityClassName": "system-cluster-critical"}}),
    );
    let still_going = plan_drain(&[terminating, critical.clone()], &policy, now);
    assert_eq!(names(&still_going.evict), Vec::<&str>::new());
    assert_eq!(still_going.terminating.len(), 1);
    let alone = plan_drain(&[critical], &policy, now);
    assert_eq!(names(&alone.evict), ["dns"]);
}

#[test]
fn grace_periods_are_capped_by_the_time_left_never_below_a_second_and_a_pod_whose_grace_outlasts_it_is_deleted_now()
 {
    let long = pod(
        "slow",
        json!({"spec": {"terminationGracePeriodSeconds": 600}}),
    );
    let short = pod(
        "quick",
        json!({"spec": {"terminationGracePeriodSeconds": 5}}),
    );
    let default = pod("plain", json!({}));
    let all = [long, short, default];
    let grace = |steps: &[PodStep]| -> Vec<(String, i64)> {
        steps
            .iter()
            .map(|s| (s.pod.name.clone(), s.grace_seconds))
            .collect()
    };
    let own = |v: &[(&str, i64)]| -> Vec<(String, i64)> {
        v.iter().map(|(n, g)| (n.to_string(), *g)).collect()
    };
    // Two minutes left: the 600 s pod's deletion was due long ago; it is deleted with the
    // two minutes as its grace. The others are evicted with their own.
    let plan = plan_drain(
        &all,
        &involuntary("2026-11-21T09:17:00Z"),
        ts("2026-11-21T09:15:00Z"),
    );
    assert_eq!(grace(&plan.delete), own(&[("slow", 120)]));
    assert_eq!(grace(&plan.evict), own(&[("quick", 5), ("plain", 30)]));
    // Past the deadline no time is left, yet no pod is deleted with grace 0 (a forced
    // deletion): each gets one second, as a pod whose own grace is 0 does.
    let plan = plan_drain(
        &all,
        &involuntary("2026-11-21T09:15:00Z"),
        ts("2026-11-21T09:16:00Z"),
    );
    assert_eq!(
        grace(&plan.delete),
        own(&[("slow", 1), ("quick", 1), ("plain", 1)])
    );
    let zero = pod(
        "zero",
        json!({"spec": {"terminationGracePeriodSeconds": 0}}),
    );
    let plan = plan_drain(
        std::slice::from_ref(&zero),
        &involuntary("2026-11-21T09:17:00Z"),
        ts("2026-11-21T09:15:00Z"),
    );
    assert_eq!(grace(&plan.evict), own(&[("zero", 1)]));
    let unbounded = DrainPolicy {
        disruption: Disruption::Involuntary,
        deadline: None,
    };
    let plan = plan_drain(&all, &unbounded, ts("2026-11-21T09:15:00Z"));
    assert_eq!(
        grace(&plan.evict),
        own(&[("slow", 600), ("quick", 5), ("plain", 30)])
    );
}

#[test]
fn each_pod_is_deleted_at_the_deadline_less_its_own_grace_never_all_at_once() {
    let policy = involuntary("2026-11-21T09:17:00Z");
    let pods = [
        pod(
            "sixty",
            json!({"spec": {"terminationGracePeriodSeconds": 60}}),
        ),
        pod("thirty", json!({})),
        pod(
            "zero",
            json!({"spec": {"terminationGracePeriodSeconds": 0}}),
        ),
    ];
    let cases = [
        ("09:15:30", &[][..], "09:16:00"),
        ("09:16:00", &["sixty"][..], "09:16:30"),
        ("09:16:30", &["sixty", "thirty"][..], "09:16:55"),
        ("09:16:55", &["sixty", "thirty", "zero"][..], ""),
    ];
    for (now, deleted, next) in cases {
        let plan = plan_drain(&pods, &policy, ts(&format!("2026-11-21T{now}Z")));
        assert_eq!(names(&plan.delete), deleted, "at {now}");
        let want = (!next.is_empty()).then(|| ts(&format!("2026-11-21T{next}Z")));
        assert_eq!(plan.next_delete, want, "at {now}");
    }
}

#[test]
fn a_pod_stuck_terminating_a_minute_past_its_deletion_no_longer_holds_the_drain() {
    let policy = involuntary("2026-11-21T10:17:00Z");
    let stuck = pod(
        "stuck",
        json!({"metadata": {"deletionTimestamp": "2026-11-21T09:15:00Z"}}),
    );
    let waited = plan_drain(
        std::slice::from_ref(&stuck),
        &policy,
        ts("2026-11-21T09:16:00Z"),
    );
    assert_eq!(waited.terminating.len(), 1);
    assert!(!waited.finished());
    let past = plan_drain(&[stuck], &policy, ts("2026-11-21T09:16:01Z"));
    assert_eq!(past.stuck.len(), 1);
    assert!(past.finished(), "{past:?}");
}

#[test]
fn shortly_before_the_deadline_everything_left_is_deleted_not_evicted() {
    let policy = involuntary("2026-11-21T09:17:00Z");
    let cases = [
        ("31 s before: still evicting", "2026-11-21T09:16:29Z", 2, 0),
        ("30 s before: deleting", "2026-11-21T09:16:30Z", 0, 2),
        ("past the deadline: deleting", "2026-11-21T09:17:10Z", 0, 2),
    ];
    let two = [
        pod("a", json!({})),
        pod(
            "b",
            json!({"spec": {"priorityClassName": "system-node-critical"}}),
        ),
    ];
    for (what, now, evict, delete) in cases {
        let plan = plan_drain(&two, &policy, ts(now));
        assert_eq!(
            (plan.evict.len() + plan.later.len(), plan.delete.len()),
            (evict, delete),
            "{what}"
        );
    }
    let late = plan_drain(&two, &policy, ts("2026-11-21T09:16:50Z"));
    assert!(
        late.delete.iter().all(|s| s.grace_seconds == 10),
        "{late:?}"
    );
}

#[test]
fn a_voluntary_drain_with_a_termination_grace_period_deletes_held_pods_at_its_end() {
    let pinned = pod(
        "pinned",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
    );
    let policy = DrainPolicy {
        disruption: Disruption::Voluntary,
        deadline: Some(ts("2026-11-21T10:00:00Z")),
    };
    let before = plan_drain(
        std::slice::from_ref(&pinned),
        &policy,
        ts("2026-11-21T09:00:00Z"),
    );
    assert_eq!(before.held.len(), 1);
    let at_end = plan_drain(&[pinned], &policy, ts("2026-11-21T09:59:40Z"));
    assert_eq!(names(&at_end.delete), ["pinned"]);
}

#[test]
fn an_unfinished_drain_is_looked_at_again_soon_and_never_after_deletion_is_due() {
    let policy = involuntary("2026-11-21T09:17:00Z");
    let plan = plan_drain(&[pod("a", json!({}))], &policy, ts("2026-11-21T09:15:00Z"));
    assert_eq!(
        plan.recheck_at(ts("2026-11-21T09:15:00Z"), DRAIN_RECHECK),
        Some(ts("2026-11-21T09:15:05Z"))
    );
    let plan = plan_drain(&[pod("a", json!({}))], &policy, ts("2026-11-21T09:16:28Z"));
    assert_eq!(
        plan.recheck_at(ts("2026-11-21T09:16:28Z"), DRAIN_RECHECK),
        Some(ts("2026-11-21T09:16:30Z"))
    );
    let empty = plan_drain(
        &[pod("ds", json!({"status": {"phase": "Failed"}}))],
        &policy,
        ts("2026-11-21T09:15:00Z"),
    );
    assert!(empty.finished());
    assert_eq!(
        empty.recheck_at(ts("2026-11-21T09:15:00Z"), DRAIN_RECHECK),
        None
    );
}

#[test]
fn a_terminating_pod_is_waited_for_and_only_cut_short_when_its_grace_outlasts_the_deadline() {
    let deadline = "2026-11-21T09:17:00Z";
    let terminating = |name: &str, stops_at: &str| {
        pod(
            name,
            json!({"metadata": {"deletionTimestamp": stops_at, "deletionGracePeriodSeconds": 30}}),
        )
    };
    let pods = vec![
        terminating("stops-in-time", "2026-11-21T09:16:30Z"),
        terminating("stops-too-late", "2026-11-21T09:18:00Z"),
    ];
    // Well before the deadline: both are waited for, neither evicted again.
    let early = plan_drain(&pods, &involuntary(deadline), ts("2026-11-21T09:15:10Z"));
    assert!(
        early.evict.is_empty() && early.delete.is_empty(),
        "{early:?}"
    );
    let waited: Vec<&str> = early.terminating.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(waited, ["stops-in-time", "stops-too-late"]);
    assert!(!early.finished());
    // Close to the deadline: the one that would outlive it is deleted with the time left.
    let late = plan_drain(&pods, &involuntary(deadline), ts("2026-11-21T09:16:55Z"));
    assert_eq!(names(&late.delete), ["stops-too-late"]);
    assert_eq!(late.delete[0].grace_seconds, 5);
    let waited: Vec<&str> = late.terminating.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(waited, ["stops-in-time"]);
}

#[test]
fn a_terminating_pod_needs_no_new_home_from_a_replacement() {
    let pods = vec![
        pod("web", json!({})),
        pod(
            "going",
            json!({"metadata": {"deletionTimestamp": "2026-11-21T09:16:30Z"}}),
        ),
        pod("done", json!({"status": {"phase": "Succeeded"}})),
    ];
    let moving: Vec<&str> = reschedulable(&pods)
        .map(|p| p.metadata.name.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(moving, ["web"]);
}

#[test]
fn do_not_disrupt_is_true_forever_or_a_duration_from_the_pods_start_and_anything_else_is_ignored() {
    let now = ts("2026-11-21T10:00:00Z");
    // (annotation, started, protected)
    let table = [
        (None, Some("2026-11-21T09:00:00Z"), false),
        (Some("true"), Some("2026-01-01T00:00:00Z"), true),
        (Some("true"), None, true),
        (Some("30m"), Some("2026-11-21T09:45:00Z"), true),
        (Some("30m"), Some("2026-11-21T09:30:00Z"), false),
        (Some("1h30m"), Some("2026-11-21T09:00:00Z"), true),
        (Some("1.5h"), Some("2026-11-21T08:29:59Z"), false),
        (Some("1.5h"), Some("2026-11-21T08:31:00Z"), true),
        // Not started yet, or its start unknown: still protected (Karpenter fails safe).
        (Some("5m"), None, true),
        (Some("5m"), Some("2026-11-21T10:01:00Z"), true),
        // Values Karpenter treats as absent.
        (Some("false"), Some("2026-11-21T09:59:00Z"), false),
        (Some("0s"), Some("2026-11-21T09:59:00Z"), false),
        (Some("soon"), Some("2026-11-21T09:59:00Z"), false),
        (Some("TRUE"), Some("2026-11-21T09:59:00Z"), false),
    ];
    for (value, started, protected) in table {
        let mut extra = json!({});
        if let Some(v) = value {
            extra["metadata"] = json!({"annotations": {"karpenter.sh/do-not-disrupt": v}});
        }
        if let Some(t) = started {
            extra["status"] = json!({"startTime": t});
        }
        assert_eq!(
            do_not_disrupt(&pod("p", extra), now),
            protected,
            "{value:?} started {started:?}"
        );
    }
}
