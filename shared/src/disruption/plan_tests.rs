//! The disruption rules, one table row or scenario each.

use std::time::Duration;

use super::testkit::{count_budget, empty_node, node, pod, pool, snapshot, t};
use super::*;

fn deleted(plan: &Plan) -> Vec<(&str, Reason)> {
    plan.commands
        .iter()
        .flat_map(|c| c.nodes.iter().map(move |n| (n.as_str(), c.reason)))
        .collect()
}

fn kept(plan: &Plan) -> Vec<(&str, String)> {
    plan.kept
        .iter()
        .map(|k| (k.node.as_str(), k.why.to_string()))
        .collect()
}

fn unlimited(mut p: PoolPolicy) -> PoolPolicy {
    p.budgets = Ok(vec![count_budget(NodesLimit::Percent(100))]);
    p
}

#[test]
fn an_empty_node_goes_once_empty_for_consolidate_after_and_is_kept_before_with_the_time_left() {
    let cases = [
        ("09:59:30", true, None),
        (
            "09:59:50",
            false,
            Some("empty, but not yet for consolidateAfter (20s to go)"),
        ),
    ];
    for (since, goes, why) in cases {
        let plan = plan_disruption(
            &snapshot(
                vec![unlimited(pool("default"))],
                vec![empty_node("a", "default", since)],
            ),
            t("10:00:00"),
        );
        assert_eq!(!plan.commands.is_empty(), goes, "empty since {since}");
        assert_eq!(
            kept(&plan).first().map(|k| k.1.as_str()),
            why,
            "empty since {since}"
        );
        if goes {
            assert_eq!(plan.commands[0].action, Action::Delete);
            assert_eq!(plan.commands[0].reason, Reason::Empty);
            assert_eq!(plan.commands[0].savings_per_hour, 0.096);
        }
    }
}

#[test]
fn a_node_first_seen_empty_is_only_marked_and_a_marked_node_that_gained_pods_is_unmarked() {
    let mut fresh = node("fresh", "default");
    fresh.pods.push(pod("ds", PodKind::DaemonSet));
    fresh.pods.push(pod("done", PodKind::Finished));
    fresh.pods.push(pod("static", PodKind::Mirror));
    let mut leaving = pod("leaving", PodKind::Terminating);
    leaving.do_not_disrupt = true;
    fresh.pods.push(leaving);
    let mut busy = node("busy", "default");
    busy.empty_since = Some(t("09:00:00"));
    busy.pods.push(pod("web", PodKind::Workload));
    let plan = plan_disruption(
        &snapshot(vec![unlimited(pool("default"))], vec![fresh, busy]),
        t("10:00:00"),
    );
    assert!(plan.commands.is_empty());
    assert_eq!(
        plan.empty_marks,
        vec![
            EmptyMark {
                node: "fresh".into(),
                since: Some(t("10:00:00"))
            },
            EmptyMark {
                node: "busy".into(),
                since: None
            },
        ]
    );
}

#[test]
fn consolidate_after_never_keeps_empty_nodes_out_of_the_plan() {
    let mut p = unlimited(pool("default"));
    p.consolidate_after = None;
    let plan = plan_disruption(
        &snapshot(vec![p], vec![empty_node("a", "default", "01:00:00")]),
        t("10:00:00"),
    );
    assert_eq!(
        plan,
        Plan {
            price_before: 0.096,
            price_after: 0.096,
            ..Plan::default()
        }
    );
}

#[test]
fn nodes_of_pools_nodewright_does_not_serve_and_nodes_without_a_pool_are_never_candidates() {
    let mut no_pool = empty_node("no-pool", "default", "01:00:00");
    no_pool.pool = None;
    let plan = plan_disruption(
        &snapshot(
            vec![unlimited(pool("default"))],
            vec![empty_node("other", "karpenters-own", "01:00:00"), no_pool],
        ),
        t("10:00:00"),
    );
    assert!(plan.commands.is_empty() && plan.kept.is_empty() && plan.empty_marks.is_empty());
}

#[test]
fn a_node_whose_instance_is_not_this_clusters_is_never_a_candidate_nor_counted() {
    let mut foreign = empty_node("foreign", "default", "01:00:00");
    foreign.owned_instance = false;
    let plan = plan_disruption(
        &snapshot(vec![unlimited(pool("default"))], vec![foreign]),
        t("10:00:00"),
    );
    assert_eq!(plan, Plan::default());
}

#[test]
fn a_node_not_ready_or_already_being_disrupted_is_not_a_candidate() {
    let mut starting = empty_node("starting", "default", "01:00:00");
    starting.ready = false;
    let mut going = empty_node("going", "default", "01:00:00");
    going.disrupting = true;
    let plan = plan_disruption(
        &snapshot(vec![unlimited(pool("default"))], vec![starting, going]),
        t("10:00:00"),
    );
    assert!(plan.commands.is_empty() && plan.kept.is_empty());
}

#[test]
fn do_not_disrupt_on_the_node_or_a_moving_pod_and_a_blocking_pdb_keep_the_node_with_the_reason() {
    let mut expiring = pool("default");
    expiring.expire_after = Some(Duration::from_secs(3600));
    let expiring = unlimited(expiring);
    let mut annotated = empty_node("annotated", "default", "01:00:00");
    annotated.do_not_disrupt = true;
    let mut with_pod = node("with-pod", "default");
    let mut p = pod("batch", PodKind::Workload);
    p.do_not_disrupt = true;
    with_pod.pods.push(p);
    let mut with_pdb = node("with-pdb", "default");
    let mut p = pod("db-0", PodKind::Workload);
    p.blocked_by_pdb = Some("db".into());
    with_pdb.pods.push(p);
    let mut with_two = node("with-two-pdbs", "default");
    let mut p = pod("web-0", PodKind::Workload);
    p.blocked_by_pdb = Some("web and web-strict".into());
    with_two.pods.push(p);
    // A do-not-disrupt DaemonSet pod holds its node too, as in Karpenter; a finished pod's
    // annotation does not.
    let mut ds_only = empty_node("ds-only", "default", "01:00:00");
    ds_only.pods[0].do_not_disrupt = true;
    let mut finished = empty_node("finished", "default", "01:00:00");
    let mut done = pod("job", PodKind::Finished);
    done.do_not_disrupt = true;
    finished.pods.push(done);
    // A budget allowing no disruption of a DaemonSet's pod holds the node (it is evicted
    // too); of a mirror pod's, nothing (it is not), as in Karpenter.
    let mut ds_pdb = empty_node("ds-pdb", "default", "01:00:00");
    ds_pdb.pods[0].blocked_by_pdb = Some("agents".into());
    let mut mirror_pdb = empty_node("mirror-pdb", "default", "01:00:00");
    let mut static_pod = pod("kube-proxy", PodKind::Mirror);
    static_pod.blocked_by_pdb = Some("proxies".into());
    mirror_pdb.pods.push(static_pod);
    let plan = plan_disruption(
        &snapshot(
            vec![expiring],
            vec![
                annotated, with_pod, with_pdb, with_two, ds_only, finished, ds_pdb, mirror_pdb,
            ],
        ),
        t("10:00:00"),
    );
    assert_eq!(
        deleted(&plan),
        vec![("finished", Reason::Empty), ("mirror-pdb", Reason::Empty)]
    );
    assert_eq!(
        kept(&plan),
        vec![
            (
                "annotated",
                "the node has karpenter.sh/do-not-disrupt".to_string()
            ),
            (
                "with-pod",
                "a pod has karpenter.sh/do-not-disrupt (default/batch)".to_string()
            ),
            (
                "with-pdb",
                "PodDisruptionBudget default/db allows no disruption of pod default/db-0"
                    .to_string()
            ),
            (
                "with-two-pdbs",
                "PodDisruptionBudgets default/web and default/web-strict both cover pod default/web-0: the Eviction API refuses to evict it"
                    .to_string()
            ),
            (
                "ds-only",
                "a pod has karpenter.sh/do-not-disrupt (default/ds-ds-only)".to_string()
            ),
            (
                "ds-pdb",
                "PodDisruptionBudget default/agents allows no disruption of pod default/ds-ds-pdb"
                    .to_string()
            ),
        ]
    );
}

#[test]
fn an_expired_node_with_pods_is_replaced_and_an_expired_empty_one_deleted_as_empty_first() {
    let mut p = pool("default");
    p.expire_after = Some(Duration::from_secs(24 * 3600));
    p.consolidate_after = None;
    let mut old = node("old", "default");
    old.pods.push(pod("web", PodKind::Workload));
    let mut young = node("young", "default");
    young.created = t("00:00:00");
    young.pods.push(pod("web2", PodKind::Workload));
    let plan = plan_disruption(
        &snapshot(vec![unlimited(p)], vec![old, young]),
        t("10:00:00"),
    );
    assert_eq!(deleted(&plan), vec![("old", Reason::Expired)]);
    assert_eq!(plan.commands[0].action, Action::Replace);
    assert_eq!(plan.commands[0].savings_per_hour, 0.0);
    assert_eq!(plan.price_after, plan.price_before);
}

/// `n` nodes of pool `default`, each with one pod, created on 2026-03-01.
fn busy_nodes(n: usize) -> Vec<NodeView> {
    (0..n)
        .map(|i| {
            let mut n = node(&format!("n{i:02}"), "default");
            n.pods.push(pod(&format!("p{i}"), PodKind::Workload));
            n
        })
        .collect()
}

#[test]
fn expired_nodes_go_a_few_at_a_time_within_the_budget_and_the_rest_are_kept_for_it() {
    let mut p = pool("default");
    p.expire_after = Some(Duration::from_secs(3600));
    p.budgets = Ok(vec![count_budget(NodesLimit::Count(2))]);
    // 25 nodes: the expiration cap (3) is above the budget (2), so the budget holds.
    let plan = plan_disruption(&snapshot(vec![p], busy_nodes(25)), t("10:00:00"));
    assert_eq!(plan.commands.len(), 2);
    assert_eq!(plan.kept.len(), 23);
    assert!(
        kept(&plan).iter().all(|(_, why)| why
            == "NodePool default's disruption budget allows no more expired nodes now")
    );
}

#[test]
fn a_budget_that_allows_every_node_still_expires_only_a_tenth_of_the_pool_at_once() {
    let cap = "NodePool default replaces at most 1 expired nodes at once (10% of its nodes, at least one)";
    let mut p = unlimited(pool("default"));
    p.expire_after = Some(Duration::from_secs(3600));
    let mut only_drifted = p.clone();
    only_drifted.budgets = Ok(vec![BudgetRule {
        reasons: vec![Reason::Drifted],
        ..count_budget(NodesLimit::Count(0))
    }]);
    for pool in [p, only_drifted] {
        let plan = plan_disruption(&snapshot(vec![pool.clone()], busy_nodes(10)), t("10:00:00"));
        assert_eq!(deleted(&plan), vec![("n00", Reason::Expired)], "{pool:?}");
        assert_eq!(plan.kept.len(), 9, "{pool:?}");
        assert!(kept(&plan).iter().all(|(_, why)| why == cap), "{plan:?}");
        // One already being replaced for expiry: none more begins.
        let mut nodes = busy_nodes(10);
        nodes[3].disrupting = true;
        nodes[3].removing = Some(Reason::Expired);
        let plan = plan_disruption(&snapshot(vec![pool.clone()], nodes), t("10:00:00"));
        assert!(plan.commands.is_empty(), "{plan:?}");
        assert_eq!(plan.kept.len(), 9, "{pool:?}");
        // Another kind of removal under way does not use the cap up.
        let mut nodes = busy_nodes(10);
        nodes[3].disrupting = true;
        nodes[3].removing = Some(Reason::Empty);
        let plan = plan_disruption(&snapshot(vec![pool.clone()], nodes), t("10:00:00"));
        assert_eq!(deleted(&plan), vec![("n00", Reason::Expired)], "{pool:?}");
    }
}

#[test]
fn nodes_already_being_disrupted_use_up_the_budget() {
    let mut p = pool("default");
    p.budgets = Ok(vec![count_budget(NodesLimit::Count(1))]);
    let mut going = node("going", "default");
    going.disrupting = true;
    let plan = plan_disruption(
        &snapshot(vec![p], vec![going, empty_node("a", "default", "01:00:00")]),
        t("10:00:00"),
    );
    assert!(plan.commands.is_empty());
    assert_eq!(
        plan.kept[0].why,
        KeptWhy::Budget {
            pool: "default".into(),
            reason: Reason::Empty,
            alone: None,
        }
    );
}

/// Karpenter's base for a percentage: initialized nodes only. Four empty nodes and four
/// still starting under `nodes: "50%"`: two go, not four; and a node no longer Ready uses
/// the budget up as one being disrupted does.
#[test]
fn starting_nodes_are_not_in_a_percentage_and_a_node_no_longer_ready_uses_the_budget() {
    let mut p = pool("default");
    p.budgets = Ok(vec![count_budget(NodesLimit::Percent(50))]);
    let mut nodes: Vec<_> = (0..4)
        .map(|i| empty_node(&format!("e{i}"), "default", "01:00:00"))
        .collect();
    for i in 0..4 {
        let mut starting = node(&format!("s{i}"), "default");
        starting.ready = false;
        starting.initialized = false;
        nodes.push(starting);
    }
    let plan = plan_disruption(&snapshot(vec![p.clone()], nodes.clone()), t("10:00:00"));
    assert_eq!(plan.commands.len(), 2, "{plan:#?}");
    let mut lost = node("lost", "default");
    lost.ready = false;
    nodes.push(lost);
    let plan = plan_disruption(&snapshot(vec![p], nodes), t("10:00:00"));
    // Five in the base: 50% is three, less the one no longer Ready.
    assert_eq!(plan.commands.len(), 2, "{plan:#?}");
}

#[test]
fn of_empty_nodes_the_dearest_goes_first() {
    let mut p = pool("default");
    p.budgets = Ok(vec![count_budget(NodesLimit::Count(1))]);
    let mut cheap = empty_node("a-cheap", "default", "01:00:00");
    cheap.price_per_hour = Some(0.05);
    let mut dear = empty_node("b-dear", "default", "01:00:00");
    dear.price_per_hour = Some(0.5);
    let plan = plan_disruption(&snapshot(vec![p], vec![cheap, dear]), t("10:00:00"));
    assert_eq!(deleted(&plan), vec![("b-dear", Reason::Empty)]);
}

#[test]
fn the_default_ten_percent_budget_rounds_up_so_a_small_pool_still_loses_one_node_at_a_time() {
    let nodes: Vec<_> = (0..3)
        .map(|i| empty_node(&format!("e{i}"), "default", "01:00:00"))
        .collect();
    let plan = plan_disruption(&snapshot(vec![pool("default")], nodes), t("10:00:00"));
    assert_eq!(plan.commands.len(), 1);
    assert_eq!(plan.kept.len(), 2);
}

#[test]
fn budgets_are_counted_per_pool() {
    let nodes = vec![
        empty_node("a1", "a", "01:00:00"),
        empty_node("a2", "a", "01:00:00"),
        empty_node("b1", "b", "01:00:00"),
    ];
    let plan = plan_disruption(&snapshot(vec![pool("a"), pool("b")], nodes), t("10:00:00"));
    assert_eq!(
        deleted(&plan),
        vec![("a1", Reason::Empty), ("b1", Reason::Empty)]
    );
}

#[test]
fn candidates_go_cheapest_to_disrupt_first_emptiness_before_expiration() {
    let mut p = pool("default");
    p.expire_after = Some(Duration::from_secs(48 * 3600));
    p.budgets = Ok(vec![count_budget(NodesLimit::Count(3))]);
    // Created 2026-03-01T00:00; at 2026-03-03T01:00 every node is expired (49 h).
    let mut two_pods = node("two-pods", "default");
    two_pods.pods = vec![pod("a", PodKind::Workload), pod("b", PodKind::Workload)];
    let mut one_pod = node("one-pod", "default");
    one_pod.pods = vec![pod("c", PodKind::Workload)];
    let plan = plan_disruption(
        &snapshot(
            vec![p.clone()],
            vec![
                two_pods.clone(),
                one_pod.clone(),
                empty_node("empty", "default", "01:00:00"),
            ],
        ),
        "2026-03-03T01:00:00Z".parse().unwrap(),
    );
    // Of two expired nodes in a pool of three, the expiration cap (one at a time) takes the
    // cheaper to disrupt.
    assert_eq!(
        deleted(&plan),
        vec![("empty", Reason::Empty), ("one-pod", Reason::Expired)]
    );
    assert_eq!(
        plan.kept[0].why,
        KeptWhy::ExpirationCap {
            pool: "default".into(),
            cap: 1
        }
    );
    assert_eq!(plan.kept[0].node, "two-pods");
    // Before expiry, cost scales with the lifetime left: the same pods on an older node
    // cost less to disrupt; with two slots of budget for expiry only the older goes.
    let mut q = p;
    q.expire_after = Some(Duration::from_secs(24 * 3600));
    q.consolidate_after = None;
    q.budgets = Ok(vec![count_budget(NodesLimit::Count(1))]);
    let mut older = two_pods;
    older.name = "older".into();
    older.created = t("00:00:00");
    let mut newer = one_pod;
    newer.name = "newer".into();
    newer.pods = older.pods.clone();
    newer.created = t("05:00:00");
    let plan = plan_disruption(
        &snapshot(vec![q], vec![newer, older]),
        "2026-03-03T04:00:00Z".parse().unwrap(),
    );
    assert_eq!(deleted(&plan), vec![("older", Reason::Expired)]);
}

#[test]
fn a_pool_whose_budgets_cannot_be_read_is_never_disrupted_and_says_why() {
    let mut p = pool("default");
    p.budgets = Err("spec.disruption.budgets[0].schedule: bad".into());
    let plan = plan_disruption(
        &snapshot(vec![p], vec![empty_node("a", "default", "01:00:00")]),
        t("10:00:00"),
    );
    assert!(plan.commands.is_empty());
    assert!(kept(&plan)[0].1.contains("budgets[0].schedule: bad"));
}

#[test]
fn the_fleet_price_before_and_after_counts_only_nodewrights_nodes_and_the_deletions() {
    let mut other = node("other", "not-served");
    other.price_per_hour = Some(5.0);
    let mut busy = node("busy", "default");
    busy.pods.push(pod("web", PodKind::Workload));
    let plan = plan_disruption(
        &snapshot(
            vec![unlimited(pool("default"))],
            vec![busy, empty_node("a", "default", "01:00:00"), other],
        ),
        t("10:00:00"),
    );
    assert!((plan.price_before - 0.192).abs() < 1e-9);
    assert!((plan.price_after - 0.096).abs() < 1e-9);
}

#[test]
fn hygiene_is_decided_only_when_the_instances_are_known() {
    let mut n = node("gone", "default");
    n.instance_id = Some("i-0000000a".into());
    let offline = plan_disruption(
        &snapshot(vec![pool("default")], vec![n.clone()]),
        t("10:00:00"),
    );
    assert!(offline.orphans.is_empty() && offline.never_joined.is_empty());
    let mut s = snapshot(vec![pool("default")], vec![n]);
    s.instances = Some(vec![InstanceView {
        id: "i-0000000b".into(),
        launched: Some(t("09:00:00")),
    }]);
    let plan = plan_disruption(&s, t("10:00:00"));
    assert_eq!(plan.orphans.len(), 1);
    assert_eq!(plan.never_joined.len(), 1);
}

#[test]
fn a_drifted_node_with_pods_is_replaced_within_its_drifted_budget_and_one_without_is_deleted() {
    let mut p = pool("default");
    p.consolidate_after = None;
    // Drifted nodes: one at a time; other reasons unlimited.
    p.budgets = Ok(vec![
        BudgetRule {
            nodes: NodesLimit::Count(1),
            reasons: vec![Reason::Drifted],
            window: None,
        },
        count_budget(NodesLimit::Percent(100)),
    ]);
    let nodes: Vec<_> = ["a", "b"]
        .iter()
        .map(|n| {
            let mut v = node(n, "default");
            v.pods.push(pod(&format!("web-{n}"), PodKind::Workload));
            v.drifted = Some("the EC2NodeClass changed".into());
            v
        })
        .collect();
    let mut current = node("c", "default");
    current.pods.push(pod("web-c", PodKind::Workload));
    let plan = plan_disruption(
        &snapshot(vec![p.clone()], [nodes.clone(), vec![current]].concat()),
        t("10:00:00"),
    );
    assert_eq!(deleted(&plan), vec![("a", Reason::Drifted)]);
    assert_eq!(plan.commands[0].action, Action::Replace);
    assert_eq!(
        kept(&plan),
        vec![
            (
                "c",
                "NodePool \"default\" has consolidation disabled".to_string()
            ),
            (
                "b",
                "NodePool default's disruption budget allows no more drifted nodes now".to_string()
            )
        ]
    );
    // Without pods to move, a drifted node is simply deleted.
    let mut bare = node("d", "default");
    bare.drifted = Some("the NodePool template changed".into());
    bare.pods.push(pod("ds", PodKind::DaemonSet));
    let plan = plan_disruption(&snapshot(vec![p], vec![bare]), t("10:00:00"));
    assert_eq!(deleted(&plan), vec![("d", Reason::Drifted)]);
    assert_eq!(plan.commands[0].action, Action::Delete);
}

#[test]
fn a_drifted_node_is_kept_by_do_not_disrupt_and_an_expired_one_counts_as_expired_first() {
    let mut p = unlimited(pool("default"));
    p.expire_after = Some(Duration::from_secs(3600));
    let mut held = node("held", "default");
    held.created = t("09:30:00");
    held.drifted = Some("the EC2NodeClass changed".into());
    held.do_not_disrupt = true;
    let mut both = node("both", "default");
    both.drifted = Some("the EC2NodeClass changed".into());
    both.pods.push(pod("web", PodKind::Workload));
    let plan = plan_disruption(&snapshot(vec![p], vec![held, both]), t("10:00:00"));
    assert_eq!(deleted(&plan), vec![("both", Reason::Expired)]);
    assert_eq!(
        kept(&plan),
        vec![(
            "held",
            "the node has karpenter.sh/do-not-disrupt".to_string()
        )]
    );
}
