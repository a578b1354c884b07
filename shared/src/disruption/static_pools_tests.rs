//! A static NodePool (`replicas`), one table row or scenario each (Karpenter's
//! `static/deprovisioning/suite_test.go` is the reference).

use super::testkit::{empty_node, node, pod, pool, snapshot, t};
use super::*;

const SIX: &str = "06:00:00";

fn fixed(name: &str, replicas: usize) -> PoolPolicy {
    let mut p = pool(name);
    p.replicas = Some(replicas);
    p.consolidation = crate::api::ConsolidationPolicy::WhenEmptyOrUnderutilized;
    p
}

fn scaled_down(plan: &Plan) -> Vec<&str> {
    plan.commands
        .iter()
        .filter(|c| c.reason == Reason::ScaleDown)
        .inspect(|c| assert_eq!(c.action, Action::Delete, "{c:?}"))
        .flat_map(|c| c.nodes.iter().map(String::as_str))
        .collect()
}

fn busy(name: &str, cost: f64) -> NodeView {
    let mut n = node(name, "fixed");
    let mut p = pod(&format!("{name}-app"), PodKind::Workload);
    p.eviction_cost = cost;
    n.pods.push(p);
    n
}

#[test]
fn a_static_pool_at_or_under_its_count_loses_nothing_however_empty() {
    let now = t("10:00:00");
    for (replicas, nodes) in [(3, 3), (3, 2), (0, 0)] {
        // Empty for hours and marked so: a dynamic pool would have lost them long ago.
        let all: Vec<NodeView> = (0..nodes)
            .map(|i| empty_node(&format!("n{i}"), "fixed", SIX))
            .collect();
        let plan = plan_disruption(&snapshot(vec![fixed("fixed", replicas)], all), now);
        assert_eq!(plan.commands, vec![], "{replicas} replicas, {nodes} nodes");
        assert!(plan.empty_marks.is_empty());
    }
}

#[test]
fn a_static_pool_s_nodes_are_never_consolidated() {
    let now = t("10:00:00");
    // With a simulation, a dynamic twin's nodes are tried (and kept: the empty simulation
    // has room for nothing); a static pool's are not even tried.
    let considered = |pool: PoolPolicy| {
        let mut nodes = vec![busy("a", 1.0), busy("b", 1.0)];
        for n in &mut nodes {
            n.pool = Some(pool.name.clone());
        }
        let mut s = snapshot(vec![pool], nodes);
        s.simulation = Some(super::simulation::Simulation::default());
        let plan = plan_disruption(&s, now);
        assert!(plan.commands.is_empty(), "{plan:?}");
        plan.kept
            .iter()
            .filter(|k| k.reason == Reason::Underutilized)
            .count()
    };
    let mut dynamic = fixed("dynamic", 2);
    dynamic.replicas = None;
    assert_eq!(considered(dynamic), 2);
    assert_eq!(considered(fixed("fixed", 2)), 0);
}

#[test]
fn the_surplus_goes_starting_nodes_first_then_empty_then_cheapest_to_move() {
    let now = t("10:00:00");
    let mut starting = empty_node("starting", "fixed", SIX);
    starting.initialized = false;
    starting.ready = false;
    let mut held = empty_node("held", "fixed", SIX);
    held.do_not_disrupt = true;
    let nodes = || {
        vec![
            busy("dear", 10.0),
            held.clone(),
            busy("cheap", 1.0),
            empty_node("empty", "fixed", SIX),
            starting.clone(),
        ]
    };
    // (replicas, the nodes that go, in order)
    let cases: [(usize, &[&str]); 5] = [
        (4, &["starting"]),
        (3, &["starting", "empty"]),
        (2, &["starting", "empty", "cheap"]),
        (1, &["starting", "empty", "cheap", "dear"]),
        (0, &["starting", "empty", "cheap", "dear", "held"]),
    ];
    for (replicas, gone) in cases {
        let plan = plan_disruption(&snapshot(vec![fixed("fixed", replicas)], nodes()), now);
        assert_eq!(scaled_down(&plan), gone, "replicas {replicas}");
    }
}

#[test]
fn nodes_already_being_removed_are_not_counted_nor_taken_again() {
    let now = t("10:00:00");
    let mut going = busy("going", 1.0);
    going.disrupting = true;
    going.removing = Some(Reason::Drifted);
    // Three nodes, one of them leaving for drift while its replacement ("new") starts: two
    // stay, which is the count.
    let mut new = empty_node("new", "fixed", SIX);
    new.initialized = false;
    new.ready = false;
    let nodes = vec![going, busy("b", 1.0), new];
    let plan = plan_disruption(&snapshot(vec![fixed("fixed", 2)], nodes), now);
    assert_eq!(scaled_down(&plan), Vec::<&str>::new());
}

#[test]
fn a_scale_down_ignores_the_budgets_and_a_surplus_node_is_not_also_replaced() {
    let now = t("10:00:00");
    let mut p = fixed("fixed", 1);
    p.budgets = Ok(vec![super::testkit::count_budget(NodesLimit::Count(0))]);
    p.expire_after = Some(std::time::Duration::from_secs(3600));
    // Both expired (created a day ago): one stays and is replaced within the budget (none
    // allowed: kept), the other goes for the scale-down only.
    let nodes = vec![busy("a", 1.0), busy("b", 5.0)];
    let plan = plan_disruption(&snapshot(vec![p], nodes), now);
    assert_eq!(scaled_down(&plan), ["a"]);
    assert_eq!(plan.commands.len(), 1, "{:?}", plan.commands);
    assert!(
        plan.kept
            .iter()
            .any(|k| k.node == "b" && k.reason == Reason::Expired),
        "{:?}",
        plan.kept
    );
}

#[test]
fn a_surplus_node_due_a_repair_goes_unreplaced() {
    let now = t("10:00:00");
    // Its kubelet reports Ready False: one of ours, so still counted as starting.
    let mut sick = busy("sick", 1.0);
    sick.ready = false;
    sick.initialized = false;
    sick.unhealthy = unhealthy([("Ready", "False", Some(t("09:00:00")))], now);
    let nodes = vec![sick, busy("b", 1.0), busy("c", 1.0)];
    let plan = plan_disruption(&snapshot(vec![fixed("fixed", 2)], nodes), now);
    assert_eq!(scaled_down(&plan), ["sick"]);
    assert!(
        !plan.commands.iter().any(|c| c.reason == Reason::Unhealthy),
        "{:?}",
        plan.commands
    );
}

#[test]
fn a_dynamic_pool_beside_a_static_one_is_consolidated_as_before() {
    let now = t("10:00:00");
    let idle = empty_node("idle", "dynamic", SIX);
    let fixed_idle = empty_node("fixed-idle", "fixed", SIX);
    let mut dynamic = pool("dynamic");
    dynamic.budgets = Ok(vec![super::testkit::count_budget(NodesLimit::Percent(100))]);
    let plan = plan_disruption(
        &snapshot(vec![dynamic, fixed("fixed", 1)], vec![idle, fixed_idle]),
        now,
    );
    let gone: Vec<(&str, Reason)> = plan
        .commands
        .iter()
        .flat_map(|c| c.nodes.iter().map(move |n| (n.as_str(), c.reason)))
        .collect();
    assert_eq!(gone, [("idle", Reason::Empty)]);
}

#[test]
fn cordoned_and_lost_nodes_are_neither_counted_nor_taken_as_the_floor_does_not_count_them() {
    let now = t("10:00:00");
    let mut cordoned = busy("cordoned", 1.0);
    cordoned.cordoned = true;
    // Ready Unknown: its kubelet stopped reporting.
    let mut lost = busy("lost", 1.0);
    lost.ready = false;
    // Two serving nodes at a count of two, beside them a cordoned and a lost one: nothing
    // is surplus (the floor launched the two in their place).
    let nodes = vec![
        cordoned.clone(),
        lost.clone(),
        busy("a", 1.0),
        busy("b", 1.0),
    ];
    let plan = plan_disruption(&snapshot(vec![fixed("fixed", 2)], nodes), now);
    assert_eq!(scaled_down(&plan), Vec::<&str>::new());
    // One serving node over: it goes, never the cordoned or the lost one.
    let nodes = vec![cordoned, lost, busy("a", 1.0), busy("b", 2.0)];
    let plan = plan_disruption(&snapshot(vec![fixed("fixed", 1)], nodes), now);
    assert_eq!(scaled_down(&plan), ["a"]);
}
