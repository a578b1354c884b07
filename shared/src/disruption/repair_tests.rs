//! Node repair, one table row or scenario each (Karpenter's node health controller and its
//! `suite_test.go` are the reference).

use super::testkit::{empty_node, node, pod, pool, snapshot, t};
use super::*;

fn sick(mut n: NodeView, condition: &str, status: &str, since: &str) -> NodeView {
    n.unhealthy = unhealthy([(condition, status, Some(t(since)))], t(since));
    n
}

fn repaired(plan: &Plan) -> Vec<(&str, Action)> {
    plan.commands
        .iter()
        .filter(|c| c.reason == Reason::Unhealthy)
        .flat_map(|c| c.nodes.iter().map(move |n| (n.as_str(), c.action)))
        .collect()
}

#[test]
fn a_condition_is_unhealthy_by_karpenter_s_aws_policies() {
    // (type, status, minutes it has held at 10:00, repaired now)
    let cases = [
        ("Ready", "False", 31, Some(true)),
        ("Ready", "Unknown", 30, Some(true)),
        ("Ready", "Unknown", 29, Some(false)),
        ("Ready", "True", 600, None),
        ("AcceleratedHardwareReady", "False", 10, Some(true)),
        ("AcceleratedHardwareReady", "False", 9, Some(false)),
        ("StorageReady", "False", 20, Some(false)),
        ("NetworkingReady", "False", 30, Some(true)),
        ("KernelReady", "False", 30, Some(true)),
        ("ContainerRuntimeReady", "False", 45, Some(true)),
        ("ContainerRuntimeReady", "True", 45, None),
        // A condition no policy names, however long it holds.
        ("MemoryPressure", "True", 600, None),
        ("DiskPressure", "True", 600, None),
    ];
    let now = t("10:00:00");
    for (kind, status, minutes, due) in cases {
        let since = now - jiff::SignedDuration::from_mins(minutes);
        let u = unhealthy([(kind, status, Some(since))], now);
        assert_eq!(
            u.as_ref().map(|u| u.due() <= now),
            due,
            "{kind}={status} for {minutes}m"
        );
    }
}

#[test]
fn of_several_matching_conditions_the_one_due_first_counts_and_no_time_counts_from_now() {
    let now = t("10:00:00");
    let u = unhealthy(
        [
            ("Ready", "False", Some(t("09:50:00"))),
            ("AcceleratedHardwareReady", "False", Some(t("09:55:00"))),
        ],
        now,
    )
    .unwrap();
    assert_eq!(u.condition, "AcceleratedHardwareReady");
    assert_eq!(u.due(), t("10:05:00"));
    let u = unhealthy([("Ready", "Unknown", None)], now).unwrap();
    assert_eq!(u.due(), t("10:30:00"));
}

#[test]
fn at_most_a_fifth_of_a_pool_rounded_up_may_be_unhealthy_for_repair_to_go_on() {
    for (nodes, allowed) in [(1, 1), (3, 1), (5, 1), (6, 2), (10, 2), (11, 3), (100, 20)] {
        assert_eq!(unhealthy_allowed(nodes), allowed, "{nodes} nodes");
    }
}

#[test]
fn a_node_past_its_toleration_is_replaced_if_its_pods_move_and_deleted_if_not() {
    let mut busy = node("busy", "default");
    busy.pods.push(pod("web", PodKind::Workload));
    let nodes = vec![
        sick(busy, "Ready", "Unknown", "09:00:00"),
        sick(
            empty_node("idle", "default", "08:00:00"),
            "KernelReady",
            "False",
            "09:00:00",
        ),
        node("ok-1", "default"),
        node("ok-2", "default"),
        node("ok-3", "default"),
        node("ok-4", "default"),
        node("ok-5", "default"),
        node("ok-6", "default"),
        node("ok-7", "default"),
        node("ok-8", "default"),
    ];
    let plan = plan_disruption(&snapshot(vec![pool("default")], nodes), t("10:00:00"));
    assert_eq!(
        repaired(&plan),
        vec![("busy", Action::Replace), ("idle", Action::Delete)]
    );
    // Repair comes before everything else and spends no budget: the 10% budget of ten
    // nodes (one) would have held the second.
    assert_eq!(plan.commands[0].reason, Reason::Unhealthy);
}

#[test]
fn more_unhealthy_nodes_than_a_fifth_of_the_pool_hold_every_repair_in_it_and_say_why() {
    let nodes = vec![
        sick(node("a", "default"), "Ready", "Unknown", "09:00:00"),
        sick(node("b", "default"), "Ready", "Unknown", "09:00:00"),
        // Not due yet, but unhealthy: it counts.
        sick(node("c", "default"), "Ready", "False", "09:59:00"),
        node("d", "default"),
        node("e", "default"),
        node("f", "default"),
        node("g", "default"),
        node("h", "default"),
        node("i", "default"),
        node("j", "default"),
    ];
    let plan = plan_disruption(&snapshot(vec![pool("default")], nodes), t("10:00:00"));
    assert!(repaired(&plan).is_empty(), "{:?}", plan.commands);
    let why: Vec<(String, String)> = plan
        .kept
        .iter()
        .filter(|k| k.reason == Reason::Unhealthy)
        .map(|k| (k.node.clone(), k.why.to_string()))
        .collect();
    assert_eq!(why.len(), 2, "{why:?}");
    assert_eq!(
        why[0].1,
        "not repaired: 3 of NodePool default's 10 nodes are unhealthy, more than 20% (a shared cause new nodes would have too)"
    );
}

#[test]
fn what_holds_other_disruption_holds_no_repair_but_a_removal_under_way_is_left_to_itself() {
    let mut dnd_node = sick(node("dnd", "default"), "Ready", "Unknown", "09:00:00");
    dnd_node.do_not_disrupt = true;
    let mut dnd_pod = sick(node("dnd-pod", "default"), "Ready", "Unknown", "09:00:00");
    let mut held = pod("held", PodKind::Workload);
    held.do_not_disrupt = true;
    held.blocked_by_pdb = Some("web".into());
    dnd_pod.pods.push(held);
    let mut going = sick(node("going", "default"), "Ready", "Unknown", "09:00:00");
    going.disrupting = true;
    let mut others: Vec<NodeView> = (0..12)
        .map(|i| node(&format!("ok-{i}"), "default"))
        .collect();
    others.extend([dnd_node, dnd_pod, going]);
    let plan = plan_disruption(&snapshot(vec![pool("default")], others), t("10:00:00"));
    assert_eq!(
        repaired(&plan),
        vec![("dnd", Action::Delete), ("dnd-pod", Action::Replace)]
    );
}

#[test]
fn only_owned_nodes_of_served_pools_are_repaired_and_counted() {
    let mut foreign = sick(node("foreign", "default"), "Ready", "Unknown", "09:00:00");
    foreign.owned_instance = false;
    let other_pool = sick(node("other", "elsewhere"), "Ready", "Unknown", "09:00:00");
    let nodes = vec![
        foreign,
        other_pool,
        sick(node("ours", "default"), "Ready", "Unknown", "09:00:00"),
        node("ok", "default"),
        node("ok-2", "default"),
        node("ok-3", "default"),
        node("ok-4", "default"),
    ];
    // Five of ours, one unhealthy: within a fifth; the foreign node is not counted.
    let plan = plan_disruption(&snapshot(vec![pool("default")], nodes), t("10:00:00"));
    assert_eq!(repaired(&plan), vec![("ours", Action::Delete)]);
}

#[test]
fn an_unhealthy_node_before_its_toleration_is_no_candidate_for_the_other_methods() {
    // Empty long past consolidateAfter, but its storage is failing: repair decides, later.
    let n = sick(
        empty_node("a", "default", "08:00:00"),
        "StorageReady",
        "False",
        "09:50:00",
    );
    let plan = plan_disruption(
        &snapshot(vec![pool("default")], vec![n, node("b", "default")]),
        t("10:00:00"),
    );
    assert!(plan.commands.is_empty(), "{:?}", plan.commands);
}

#[test]
fn consolidation_waits_in_a_pool_being_repaired() {
    let mut p = pool("default");
    p.consolidation = crate::api::ConsolidationPolicy::WhenEmptyOrUnderutilized;
    let mut nodes: Vec<NodeView> = (0..6)
        .map(|i| node(&format!("ok-{i}"), "default"))
        .collect();
    for n in &mut nodes {
        n.pods
            .push(pod(&format!("w-{}", n.name), PodKind::Workload));
    }
    nodes.push(sick(
        node("sick", "default"),
        "Ready",
        "Unknown",
        "09:00:00",
    ));
    let plan = plan_disruption(&snapshot(vec![p], nodes), t("10:00:00"));
    assert_eq!(repaired(&plan), vec![("sick", Action::Delete)]);
    let waiting: Vec<&KeptWhy> = plan
        .kept
        .iter()
        .filter(|k| k.reason == Reason::Underutilized)
        .map(|k| &k.why)
        .collect();
    assert_eq!(waiting, vec![&KeptWhy::RemovalUnderWay; 6]);
}

#[test]
fn an_impaired_status_check_makes_a_node_unhealthy_after_ten_minutes_unless_a_condition_is_due_first()
 {
    use crate::aws::{Impaired, StatusCheck};
    let now = t("10:00:00");
    let mut healthy = node("healthy", "default");
    healthy.instance_id = Some("i-healthy".into());
    let mut checked = node("checked", "default");
    checked.instance_id = Some("i-checked".into());
    let mut both = sick(node("both", "default"), "Ready", "Unknown", "09:20:00");
    both.instance_id = Some("i-both".into());
    let mut snap = snapshot(vec![pool("default")], vec![healthy, checked, both]);
    let impaired = [
        Impaired {
            instance_id: "i-checked".into(),
            check: StatusCheck::Instance,
            since: None,
        },
        Impaired {
            instance_id: "i-both".into(),
            check: StatusCheck::System,
            since: Some(t("09:55:00")),
        },
    ];
    mark_impaired(&mut snap, &impaired, now);
    let by = |name: &str| snap.nodes.iter().find(|n| n.name == name).unwrap();
    assert_eq!(by("healthy").unhealthy, None);
    let checked = by("checked").unhealthy.clone().unwrap();
    assert_eq!(
        (checked.condition.as_str(), checked.due()),
        ("InstanceStatus", t("10:10:00"))
    );
    // Ready Unknown since 09:20 is due at 09:50, before the check's 10:05.
    assert_eq!(by("both").unhealthy.as_ref().unwrap().condition, "Ready");
}
