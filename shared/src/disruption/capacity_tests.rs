//! Capacity windows: reading the annotation, when a floor holds, and the plan keeping it.

use std::time::Duration;

use super::testkit::{count_budget, empty_node, pool, t};
use super::*;
use crate::api::NodePool;

fn nodepool(windows: Option<&str>) -> NodePool {
    let mut np: NodePool = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
    }))
    .unwrap();
    if let Some(w) = windows {
        np.metadata
            .annotations
            .insert(CAPACITY_WINDOWS_ANNOTATION.into(), w.into());
    }
    np
}

fn windows(text: &str) -> Vec<CapacityWindow> {
    pool_capacity(&nodepool(Some(text))).expect("readable windows")
}

#[test]
fn a_pool_without_the_annotation_has_no_floor() {
    assert!(pool_capacity(&nodepool(None)).unwrap().is_empty());
    assert_eq!(floor(&[], t("10:00:00")), 0);
}

#[test]
fn a_window_holds_from_its_lead_until_its_duration_ends_in_its_time_zone() {
    // 09:00 in Seoul is 00:00 UTC; the test day (2026-03-02) is a Monday.
    let w = windows(
        "- schedule: \"0 9 * * MON-FRI\"\n  timeZone: Asia/Seoul\n  duration: 9h\n  lead: 15m\n  nodes: 4\n",
    );
    let cases = [
        ("23:44:00", 0),
        ("23:45:00", 4),
        ("00:00:00", 4),
        ("08:59:00", 4),
        ("09:00:00", 0),
    ];
    for (at, want) in cases {
        // Times before midnight UTC are the previous (Sunday) evening in UTC, Monday
        // morning in Seoul.
        let now = if at.starts_with("23") {
            t(at) - jiff::SignedDuration::from_hours(24)
        } else {
            t(at)
        };
        assert_eq!(floor(&w, now), want, "at {now}");
    }
}

#[test]
fn a_window_across_midnight_holds_after_midnight() {
    let w = windows("- schedule: \"0 22 * * *\"\n  duration: 4h\n  nodes: 2\n");
    assert_eq!(floor(&w, t("01:59:00")), 2);
    assert_eq!(floor(&w, t("02:00:00")), 0);
    assert_eq!(floor(&w, t("21:59:00")), 0);
    assert_eq!(floor(&w, t("22:00:00")), 2);
}

#[test]
fn a_window_without_a_schedule_is_a_static_minimum_and_the_largest_floor_wins() {
    let w = windows("- nodes: 1\n- schedule: \"0 10 * * *\"\n  duration: 1h\n  nodes: 3\n");
    assert_eq!(floor(&w, t("09:00:00")), 1);
    assert_eq!(floor(&w, t("10:30:00")), 3);
}

#[test]
fn an_unreadable_annotation_names_the_entry_and_field() {
    let cases = [
        ("- nodes: two\n", "capacity-windows]: not a list of windows"),
        ("- nodes: 1\n  cpu: \"4\"\n", "unknown field `cpu`"),
        (
            "- schedule: \"0 9 * * *\"\n  nodes: 1\n",
            "capacity-windows][0].duration: required when schedule is set",
        ),
        (
            "- nodes: 1\n- schedule: \"0 9 * * *\"\n  duration: 1h\n  timeZone: Mars/Olympus\n  nodes: 2\n",
            "capacity-windows][1].timeZone: \"Mars/Olympus\" is not a known time zone",
        ),
        (
            "- schedule: \"61 9 * * *\"\n  duration: 1h\n  nodes: 2\n",
            "capacity-windows][0].schedule:",
        ),
        (
            "- lead: 5m\n  nodes: 2\n",
            "[0].schedule: required with timeZone or lead",
        ),
        (
            "- schedule: \"0 9 * * *\"\n  duration: 1h\n",
            "[0].nodes: required unless headroom is set",
        ),
        ("- headroom: {}\n", "[0].headroom: set cpu or memory"),
        (
            "- headroom: {cpu: lots}\n",
            "[0].headroom.cpu: \"lots\" is not a quantity",
        ),
        (
            "- headroom: {cpu: \"-1\"}\n",
            "[0].headroom.cpu: \"-1\" is negative",
        ),
        (
            "- headroom: {nvidia.com/gpu: 1}\n",
            "unknown field `nvidia.com/gpu`",
        ),
    ];
    for (text, want) in cases {
        let e = pool_capacity(&nodepool(Some(text)))
            .expect_err(text)
            .to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn emptiness_never_takes_a_pool_below_its_floor_and_says_why() {
    let mut p = pool("web");
    p.budgets = Ok(vec![count_budget(NodesLimit::Percent(100))]);
    p.capacity = windows("- schedule: \"0 9 * * *\"\n  duration: 2h\n  nodes: 2\n");
    let nodes = vec![
        empty_node("a", "web", "09:00:00"),
        empty_node("b", "web", "09:00:00"),
        empty_node("c", "web", "09:00:00"),
    ];
    let snap = Snapshot {
        pools: vec![p],
        nodes,
        instances: None,
        simulation: None,
    };
    // Inside the window: one of three goes, two stay.
    let plan = plan_disruption(&snap, t("10:00:00"));
    assert_eq!(plan.commands.len(), 1, "{plan:?}");
    assert_eq!(plan.kept.len(), 2);
    assert!(plan.kept.iter().all(|k| k.why.to_string()
        == "NodePool web keeps at least 2 nodes now (nodewright.io/capacity-windows)"));
    // After it: all three go.
    let plan = plan_disruption(&snap, t("11:00:00"));
    assert_eq!(plan.commands.len(), 3, "{plan:?}");
}

#[test]
fn a_static_minimum_keeps_its_last_empty_node_but_never_holds_an_expired_one() {
    let mut p = pool("web");
    p.budgets = Ok(vec![count_budget(NodesLimit::Percent(100))]);
    p.expire_after = Some(Duration::from_secs(3600));
    p.capacity = windows("- nodes: 1\n");
    let young = |name: &str| {
        let mut n = empty_node(name, "web", "09:00:00");
        n.created = t("09:30:00");
        n
    };
    let plan = |nodes: Vec<NodeView>| {
        let snap = Snapshot {
            pools: vec![p.clone()],
            nodes,
            instances: None,
            simulation: None,
        };
        plan_disruption(&snap, t("10:00:00"))
            .commands
            .iter()
            .map(|c| (c.nodes[0].clone(), c.reason))
            .collect::<Vec<_>>()
    };
    // Two empty nodes: one goes, the floor keeps the other, even outside any peak.
    assert_eq!(plan(vec![young("a"), young("b")]).len(), 1);
    assert!(plan(vec![young("a")]).is_empty());
    // An expired node is replaced, which keeps the count: the floor never holds it.
    let mut old = empty_node("old", "web", "09:00:00");
    old.empty_since = None;
    old.pods
        .push(super::testkit::pod("web-1", PodKind::Workload));
    assert_eq!(plan(vec![old]), vec![("old".to_string(), Reason::Expired)]);
}

#[test]
fn a_headroom_is_read_in_quantities_and_the_largest_per_resource_holds() {
    let w = windows(
        "- headroom: {cpu: \"2\", memory: 8Gi}\n- schedule: \"0 9 * * *\"\n  duration: 2h\n  nodes: 1\n  headroom: {cpu: 4500m}\n",
    );
    assert_eq!(w[0].nodes, 0, "nodes default to none with a headroom");
    let at_night = headroom(&w, t("03:00:00"));
    assert_eq!(
        (at_night.cpu, at_night.memory),
        (2_000, 8 * 1024 * 1024 * 1024 * 1000)
    );
    let at_peak = headroom(&w, t("10:00:00"));
    assert_eq!(
        (at_peak.cpu, at_peak.memory),
        (4_500, 8 * 1024 * 1024 * 1024 * 1000)
    );
    assert_eq!(floor(&w, t("10:00:00")), 1);
}

/// An empty node with `cpu` CPUs and `gib` GiB free.
fn free_node(name: &str, cpu: i64, gib: i64) -> NodeView {
    let mut n = empty_node(name, "web", "09:00:00");
    n.free = Some(crate::resources::Resources {
        cpu: cpu * 1000,
        memory: gib * 1024 * 1024 * 1024 * 1000,
        ..Default::default()
    });
    n
}

#[test]
fn emptiness_and_consolidation_keep_the_headroom_free_and_say_why() {
    let mut p = pool("web");
    p.budgets = Ok(vec![count_budget(NodesLimit::Percent(100))]);
    p.capacity = windows("- headroom: {cpu: \"4\"}\n");
    let plan_with = |p: &PoolPolicy, nodes: Vec<NodeView>| {
        let snap = Snapshot {
            pools: vec![p.clone()],
            nodes,
            instances: None,
            simulation: None,
        };
        plan_disruption(&snap, t("10:00:00"))
    };
    let plan = |nodes: Vec<NodeView>| plan_with(&p, nodes);
    // 6 CPUs free over three empty nodes: one may go (4 left), not a second.
    let three = plan(vec![
        free_node("a", 2, 4),
        free_node("b", 2, 4),
        free_node("c", 2, 4),
    ]);
    assert_eq!(three.commands.len(), 1, "{three:?}");
    assert_eq!(three.kept.len(), 2, "{three:?}");
    assert!(three.kept.iter().all(|k| k.why.to_string()
        == "NodePool web keeps cpu 4 free now (nodewright.io/capacity-windows)"));
    // The first removal is counted against the second: 4 + 3 free, x goes (3 left < 4).
    let kept: Vec<_> = plan(vec![
        free_node("x", 4, 4),
        free_node("y", 3, 4),
        free_node("z", 1, 1),
    ])
    .kept
    .into_iter()
    .map(|k| k.node)
    .collect();
    assert_eq!(kept, ["y", "z"]);
    // Without a headroom, all the empty ones go.
    let mut unbounded = p.clone();
    unbounded.capacity = Vec::new();
    assert_eq!(
        plan_with(&unbounded, vec![free_node("a", 2, 4), free_node("b", 2, 4)])
            .commands
            .len(),
        2
    );
}

#[test]
fn a_nodes_free_room_is_its_allocatable_less_what_its_running_pods_request() {
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "creationTimestamp": "2026-03-02T08:00:00Z",
            "labels": {"karpenter.sh/nodepool": "web", "nodewright.io/nodeclaim": "nw-1"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
        "status": {"allocatable": {"cpu": "3920m", "memory": "7Gi", "pods": "29"}}
    }))
    .unwrap();
    let pod = |name: &str, cpu: &str, phase: &str, owner: Option<&str>| {
        let mut v = serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-03-02T08:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": phase}
        });
        if let Some(kind) = owner {
            v["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "u", "controller": true}]);
        }
        serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(v).unwrap()
    };
    let pods = vec![
        pod("web", "1", "Running", Some("ReplicaSet")),
        pod("agent", "500m", "Running", Some("DaemonSet")),
        pod("done", "2", "Succeeded", Some("Job")),
    ];
    let price = |_: &str, _: &str| None;
    let (snap, problems) = snapshot(&Inputs {
        pools: &[nodepool(None)],
        nodes: &[node],
        pods: &pods,
        pdbs: &[],
        instances: None,
        price: &price,
        overlays: &Default::default(),
        first_sight: FirstSight::Mark,
        node_repair: false,
        now: jiff::Timestamp::UNIX_EPOCH,
    });
    assert!(problems.is_empty(), "{problems:?}");
    let n = &snap.nodes[0];
    let free = n.free.as_ref().expect("allocatable reported");
    // 3920m - 1000m - 500m (the finished Job's pod requests nothing any more).
    assert_eq!(free.cpu, 2_420);
    assert_eq!(free.memory, 5 * 1024 * 1024 * 1024 * 1000);
    assert_eq!(n.moving_requests.cpu, 1_000, "only the workload pod moves");
}
