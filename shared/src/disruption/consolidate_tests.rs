//! Consolidation, decided by `plan_disruption` on a fleet described once: each node is
//! both the decision's `NodeView` and the solver's `ExistingNode`, priced from the
//! standard test catalog (m5 $0.048 per vCPU-hour, c5 $0.0425, r5 $0.063).

use std::time::Duration;

use super::budget::NodesLimit;
use super::consolidate::{Outcome, Simulator};
use super::simulation::Simulation;
use super::snapshot::{NodeView, PodKind, Snapshot};
use super::testkit::{count_budget, node, pod, pool, t};
use super::{Action, KeptWhy, Plan, Reason, plan_disruption};
use crate::api::ConsolidationPolicy;
use crate::api::labels::{CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, ZONE};
use crate::catalog::CapacityType;
use crate::resources::Resources;
use crate::scheduling::testkit::{GI, class, pool as node_pool, standard_catalog};
use crate::scheduling::{ExistingNode, PodDemand, PreferencePolicy};

const ZONE_A: &str = "us-east-1a";

/// (cpu in milli, memory in GiB) of m5 types, and their price.
fn shape(instance_type: &str) -> (i64, i64, f64) {
    let catalog = standard_catalog(&[ZONE_A]);
    let entry = catalog
        .entries
        .iter()
        .find(|e| e.instance_type.name == instance_type)
        .unwrap();
    let it = &entry.instance_type;
    (
        i64::from(it.vcpu) * 1000,
        (it.memory_mib / 1024) as i64,
        entry.offerings[0].price,
    )
}

struct Fleet {
    snapshot: Snapshot,
}

impl Fleet {
    fn new() -> Fleet {
        let mut p = pool("default");
        p.consolidation = ConsolidationPolicy::WhenEmptyOrUnderutilized;
        p.budgets = Ok(vec![count_budget(NodesLimit::Percent(100))]);
        Fleet {
            snapshot: Snapshot {
                pools: vec![p],
                nodes: vec![],
                instances: None,
                simulation: Some(Simulation {
                    pools: vec![node_pool("default").build()],
                    classes: vec![class("default")],
                    catalog: standard_catalog(&[ZONE_A]),
                    ..Default::default()
                }),
            },
        }
    }

    /// `big`: an m5.2xlarge with room to spare that cannot go itself (a do-not-disrupt pod).
    fn big_with_room(mut self) -> Fleet {
        self.add(
            "big",
            "m5.2xlarge",
            "on-demand",
            pods("db", 1, 2000, 4),
            |mut v| {
                v.pods[0].do_not_disrupt = true;
                v
            },
        );
        self
    }

    /// A node of `instance_type` holding `pods` (1-CPU, 2-GiB each unless given).
    fn node(mut self, name: &str, instance_type: &str, pods: Vec<PodDemand>) -> Fleet {
        self.add(name, instance_type, "on-demand", pods, |v| v);
        self
    }

    fn add(
        &mut self,
        name: &str,
        instance_type: &str,
        capacity_type: &str,
        pods: Vec<PodDemand>,
        edit: impl FnOnce(NodeView) -> NodeView,
    ) {
        let (cpu, gib, price) = shape(instance_type);
        let price = if capacity_type == "spot" {
            price * 0.4
        } else {
            price
        };
        let mut view = node(name, "default");
        view.instance_type = instance_type.into();
        view.capacity_type = capacity_type.into();
        view.price_per_hour = Some(price);
        view.pods = pods
            .iter()
            .map(|p| pod(&p.name, PodKind::Workload))
            .collect();
        let view = edit(view);
        let mut requested = Resources::default();
        for p in &pods {
            requested.add(&p.requests);
        }
        let sim = self.snapshot.simulation.as_mut().unwrap();
        sim.nodes.push(ExistingNode {
            name: name.into(),
            nodepool: view.pool.clone(),
            instance_type: instance_type.into(),
            zone: ZONE_A.into(),
            capacity_type: Some(if capacity_type == "spot" {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            }),
            labels: [
                (NODEPOOL.to_string(), "default".to_string()),
                (ZONE.to_string(), ZONE_A.to_string()),
                (INSTANCE_TYPE.to_string(), instance_type.to_string()),
                (CAPACITY_TYPE.to_string(), capacity_type.to_string()),
            ]
            .into(),
            taints: vec![],
            capacity: Resources {
                cpu,
                memory: gib * GI,
                pods: 58_000,
                ..Default::default()
            },
            allocatable: Resources {
                cpu: cpu - 100,
                memory: (gib - 1) * GI,
                ephemeral_storage: 17 * GI,
                pods: 58_000,
                ..Default::default()
            },
            requested,
            pods: vec![],
            anti_affinity: vec![],
            schedulable: true,
        });
        sim.pods.insert(name.into(), pods);
        self.snapshot.nodes.push(view);
    }
}

fn pods(prefix: &str, n: usize, cpu_milli: i64, gib: i64) -> Vec<PodDemand> {
    (0..n)
        .map(|i| {
            PodDemand::simple(
                "default",
                &format!("{prefix}-{i}"),
                Resources {
                    cpu: cpu_milli,
                    memory: gib * GI,
                    ..Default::default()
                },
            )
        })
        .collect()
}

const NOW: &str = "12:00:00";

#[test]
fn a_node_whose_pods_fit_on_the_others_free_room_is_deleted() {
    // `big` has room and cannot go itself (a do-not-disrupt pod); `small`'s pod fits there.
    let mut fleet = Fleet::new().node("small", "m5.large", pods("web", 1, 500, 1));
    fleet = fleet.big_with_room();
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    let c = &plan.commands[0];
    assert_eq!(
        (c.action, c.reason),
        (Action::Delete, Reason::Underutilized)
    );
    assert_eq!(c.nodes, ["small"]);
    assert!(c.replacement.is_empty());
    assert!((c.savings_per_hour - shape("m5.large").2).abs() < 1e-9);
    assert!(
        plan.kept
            .iter()
            .any(|k| k.node == "big" && matches!(k.why, KeptWhy::DoNotDisruptPod { .. }))
    );
}

#[test]
fn two_half_empty_nodes_are_replaced_by_one_cheaper_node() {
    // Each r5.xlarge ($0.252/h) holds 3.75 CPU: neither has room for the other's pods, and
    // all ten fit one c5.2xlarge ($0.34/h).
    let fleet = Fleet::new()
        .node("a", "r5.xlarge", pods("a", 5, 750, 1))
        .node("b", "r5.xlarge", pods("b", 5, 750, 1));
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    let c = &plan.commands[0];
    assert_eq!(
        (c.action, c.reason),
        (Action::Replace, Reason::Underutilized)
    );
    assert_eq!(c.nodes, ["a", "b"]);
    assert_eq!(c.replacement.len(), 1);
    let claim = &c.replacement[0];
    assert_eq!(claim.pods.len(), 10);
    let before = 2.0 * shape("r5.xlarge").2;
    assert!(claim.price_per_hour <= before * 0.9, "{claim:#?}");
    assert!((c.savings_per_hour - (before - claim.price_per_hour)).abs() < 1e-9);
    assert!((plan.price_after - claim.price_per_hour).abs() < 1e-9);
}

#[test]
fn a_set_of_nodes_whose_pods_need_several_new_nodes_is_replaced_by_them_in_one_command() {
    // Three m5.12xlarge ($2.304/h each) each hold one 20-CPU pod: no type holds all three
    // pods (48 CPU at most), so the cheapest set is two nodes. Karpenter replaces at most
    // two of them by one node (a many-to-one move) and leaves the third for later.
    let fleet = Fleet::new()
        .node("a", "m5.12xlarge", pods("a", 1, 20_000, 8))
        .node("b", "m5.12xlarge", pods("b", 1, 20_000, 8))
        .node("c", "m5.12xlarge", pods("c", 1, 20_000, 8));
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    let c = &plan.commands[0];
    assert_eq!(
        (c.action, c.nodes.as_slice()),
        (
            Action::Replace,
            &["a".to_string(), "b".into(), "c".into()][..]
        )
    );
    assert_eq!(c.replacement.len(), 2, "{:#?}", c.replacement);
    let placed: usize = c.replacement.iter().map(|claim| claim.pods.len()).sum();
    assert_eq!(placed, 3);
    let before = 3.0 * shape("m5.12xlarge").2;
    let after: f64 = c.replacement.iter().map(|claim| claim.price_per_hour).sum();
    assert!(after <= before * 0.9, "${after}/h for ${before}/h");
    assert!((c.savings_per_hour - (before - after)).abs() < 1e-9);
    assert!((plan.price_after - after).abs() < 1e-9);
}

#[test]
fn within_the_budget_the_nodes_that_pay_most_for_what_they_hold_are_repacked_together() {
    // Karpenter's order takes the m5.xlarge first (more saved per pod moved), but their
    // pods (3.5 CPU and 12 GiB each) need a node as dear as both: they cannot go. The two
    // r5.2xlarge hold half of their CPU and a fifth of their memory; together they become
    // one c5.4xlarge, saving twice what one of them alone would.
    let mut fleet = Fleet::new()
        .node("a", "m5.xlarge", pods("a", 1, 3500, 12))
        .node("b", "m5.xlarge", pods("b", 1, 3500, 12))
        .node("c", "r5.2xlarge", pods("c", 6, 1000, 2))
        .node("d", "r5.2xlarge", pods("d", 6, 1000, 2));
    fleet.snapshot.pools[0].budgets = Ok(vec![count_budget(NodesLimit::Count(2))]);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    let c = &plan.commands[0];
    assert_eq!(
        (c.action, c.nodes.as_slice()),
        (Action::Replace, &["c".to_string(), "d".into()][..])
    );
    let after: f64 = c.replacement.iter().map(|claim| claim.price_per_hour).sum();
    assert!(
        after <= 2.0 * shape("r5.2xlarge").2 * 0.9,
        "{:#?}",
        c.replacement
    );
}

#[test]
fn several_replacement_nodes_must_save_ten_percent_in_all() {
    // Each r5.8xlarge ($2.016/h) holds one pod of 30 CPU and 200 GiB: no two share a node,
    // so the pair's pods need two nodes as large again, which save nothing.
    let fleet = Fleet::new()
        .node("a", "r5.8xlarge", pods("a", 1, 30_000, 200))
        .node("b", "r5.8xlarge", pods("b", 1, 30_000, 200));
    let sim = fleet.snapshot.simulation.as_ref().unwrap();
    let pair: Vec<&NodeView> = fleet.snapshot.nodes.iter().collect();
    let settling = Default::default();
    let outcome = Simulator::new(sim, &settling, &Default::default()).simulate(&pair);
    assert_eq!(
        outcome,
        Outcome::No("a replacement (2 nodes at $4.0320/h) would not save 10% of $4.0320/h".into())
    );
}

#[test]
fn an_oversized_node_alone_is_replaced_by_a_smaller_one() {
    let fleet = Fleet::new().node("big", "m5.4xlarge", pods("w", 1, 1000, 2));
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    let c = &plan.commands[0];
    assert_eq!(
        (c.action, c.nodes.as_slice()),
        (Action::Replace, &["big".to_string()][..])
    );
    assert!(c.replacement[0].price_per_hour < shape("m5.4xlarge").2 * 0.9);
}

#[test]
fn a_delete_that_saves_as_much_is_preferred_to_replacing_several_nodes() {
    // Both m5.2xlarge hold 3 CPU: b's pods fit on a (saving $0.384/h without a launch);
    // replacing both by one m5.2xlarge would save the same.
    let fleet = Fleet::new()
        .node("a", "m5.2xlarge", pods("a", 3, 1000, 5))
        .node("b", "m5.2xlarge", pods("b", 3, 1000, 5));
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    let c = &plan.commands[0];
    assert_eq!(c.action, Action::Delete);
    assert_eq!(c.nodes.len(), 1);
    assert!((c.savings_per_hour - shape("m5.2xlarge").2).abs() < 1e-9);
}

#[test]
fn a_replacement_that_saves_less_than_ten_percent_is_not_made() {
    // 7.5 CPU and 25 GiB on an m5.2xlarge: nothing cheaper holds it, so the node stays.
    let fleet = Fleet::new().node("full", "m5.2xlarge", pods("w", 5, 1500, 5));
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(plan.commands.is_empty(), "{plan:#?}");
    let k = &plan.kept[0];
    assert_eq!((k.node.as_str(), k.reason), ("full", Reason::Underutilized));
    assert!(
        matches!(&k.why, KeptWhy::NotConsolidatable { why } if why.contains("would not save")),
        "{k:?}"
    );
}

#[test]
fn a_node_that_gained_pods_within_consolidate_after_waits() {
    let mut fleet = Fleet::new().node("a", "m5.2xlarge", pods("a", 3, 1000, 5));
    fleet.add(
        "b",
        "m5.2xlarge",
        "on-demand",
        pods("b", 3, 1000, 5),
        |mut v| {
            v.last_pod_arrival = Some(t("11:59:50"));
            v
        },
    );
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    let b = plan.kept.iter().find(|k| k.node == "b").unwrap();
    assert_eq!(
        b.why,
        KeptWhy::TooRecent {
            remaining: Duration::from_secs(20)
        }
    );
    // `a` alone: its pods would need a node as large as itself.
    assert!(plan.commands.iter().all(|c| !c.nodes.contains(&"b".into())));
}

#[test]
fn a_pool_that_consolidates_only_when_empty_keeps_underutilized_nodes() {
    let mut fleet = Fleet::new()
        .node("a", "m5.2xlarge", pods("a", 1, 1000, 1))
        .node("b", "m5.2xlarge", pods("b", 1, 1000, 1));
    fleet.snapshot.pools[0].consolidation = ConsolidationPolicy::WhenEmpty;
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(plan.commands.is_empty());
    assert_eq!(kept_messages(&plan), [NON_EMPTY_OFF, NON_EMPTY_OFF]);
}

/// Karpenter's `Unconsolidatable` messages for a pool that does not consolidate.
const NON_EMPTY_OFF: &str = "NodePool \"default\" has non-empty consolidation disabled";
const ALL_OFF: &str = "NodePool \"default\" has consolidation disabled";

fn kept_messages(plan: &Plan) -> Vec<String> {
    plan.kept.iter().map(|k| k.why.to_string()).collect()
}

#[test]
fn consolidate_after_never_turns_consolidation_off() {
    let mut fleet = Fleet::new()
        .node("a", "m5.2xlarge", pods("a", 1, 1000, 1))
        .node("b", "m5.2xlarge", pods("b", 1, 1000, 1));
    fleet.snapshot.pools[0].consolidate_after = None;
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(plan.commands.is_empty());
    assert_eq!(kept_messages(&plan), [ALL_OFF, ALL_OFF]);
    // What keeps any candidate is said first.
    fleet.snapshot.nodes[0].do_not_disrupt = true;
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(
        kept_messages(&plan),
        ["the node has karpenter.sh/do-not-disrupt", ALL_OFF]
    );
}

#[test]
fn a_pod_that_fits_nowhere_else_keeps_its_node() {
    // The pod asks for this node's zone label value that no other node or pool offers.
    let mut only_here = pods("pinned", 1, 1000, 1);
    only_here[0].requirements[0].add(
        "example.com/rack",
        crate::scheduling::Requirement::in_values(["r1"]),
    );
    let mut fleet = Fleet::new().node("a", "m5.2xlarge", only_here);
    fleet.snapshot.simulation.as_mut().unwrap().nodes[0]
        .labels
        .insert("example.com/rack".into(), "r1".into());
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(plan.commands.is_empty());
    assert!(matches!(
        &plan.kept[0].why,
        KeptWhy::NotConsolidatable { why } if why.contains("default/pinned-0")
    ));
}

#[test]
fn spot_is_replaced_by_spot_only_when_the_choice_of_types_stays_wide() {
    let spot_pool = |fleet: &mut Fleet, families: &[&str]| {
        fleet.snapshot.simulation.as_mut().unwrap().pools = vec![
            node_pool("default")
                .req(
                    "karpenter.sh/capacity-type",
                    crate::api::Operator::In,
                    &["spot"],
                )
                .req(
                    "karpenter.k8s.aws/instance-family",
                    crate::api::Operator::In,
                    families,
                )
                .build(),
        ];
    };
    // A pool of c5 only: at most 6 types, fewer than spot-to-spot needs.
    let mut fleet = Fleet::new();
    fleet.add("a", "r5.xlarge", "spot", pods("a", 5, 750, 1), |v| v);
    fleet.add("b", "r5.xlarge", "spot", pods("b", 5, 750, 1), |v| v);
    spot_pool(&mut fleet, &["c5"]);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(plan.commands.is_empty(), "{plan:#?}");
    assert!(!plan.kept.is_empty());
    assert!(plan.kept.iter().all(|k| matches!(
        &k.why,
        KeptWhy::NotConsolidatable { why } if why.contains("spot-to-spot")
    )));
    // A small pod on a large node leaves the choice wide: every type holds it, and 16 of
    // them cost less than the node by the saving needed (not the node's own type).
    let mut fleet = Fleet::new();
    fleet.add("a", "m5.12xlarge", "spot", pods("a", 1, 250, 1), |v| v);
    spot_pool(&mut fleet, &["c5", "m5", "r5"]);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    assert_eq!(plan.commands[0].action, Action::Replace);
    let offered = &plan.commands[0].replacement[0].instance_types;
    assert_eq!(offered.len(), 16, "{offered:?}");
    assert!(
        !offered
            .iter()
            .any(|t| t == "m5.12xlarge" || t == "r5.12xlarge")
    );
    // The same pod on a node only a little larger than it needs: few types are cheaper.
    let mut fleet = Fleet::new();
    fleet.add("a", "m5.4xlarge", "spot", pods("a", 1, 250, 1), |v| v);
    spot_pool(&mut fleet, &["c5", "m5", "r5"]);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(plan.commands.is_empty(), "{plan:#?}");
}

/// The replacement offers EC2 only types cheaper than the nodes it replaces by the saving,
/// cheapest first, and never their own type: offered a dearer one, EC2 could pick it.
#[test]
fn a_replacement_offers_only_types_cheaper_than_the_node_and_not_its_own() {
    let mut fleet = Fleet::new();
    fleet.add("a", "m5.2xlarge", "on-demand", pods("a", 1, 1500, 2), |v| v);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    let claim = &plan.commands[0].replacement[0];
    let ceiling = super::price_ceiling(shape("m5.2xlarge").2);
    let catalog = standard_catalog(&[ZONE_A]);
    let cheapest = |t: &str| {
        catalog
            .get(t)
            .unwrap()
            .offerings
            .iter()
            .map(|o| o.price)
            .fold(f64::MAX, f64::min)
    };
    assert!(!claim.instance_types.is_empty());
    assert!(
        !claim.instance_types.iter().any(|t| t == "m5.2xlarge"),
        "{claim:?}"
    );
    for t in &claim.instance_types {
        assert!(
            cheapest(t) <= ceiling,
            "{t} at {} over {ceiling}",
            cheapest(t)
        );
    }
    let prices: Vec<f64> = claim.instance_types.iter().map(|t| cheapest(t)).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    assert_eq!(claim.instance_type, claim.instance_types[0]);
}

#[test]
fn the_underutilized_budget_limits_how_many_nodes_go_together() {
    let mut fleet = Fleet::new()
        .node("a", "r5.xlarge", pods("a", 5, 750, 6))
        .node("b", "r5.xlarge", pods("b", 5, 750, 6));
    fleet.snapshot.pools[0].budgets = Ok(vec![count_budget(NodesLimit::Count(1))]);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    // Only one may go, and one alone saves too little (30 GiB of pods need a node like it).
    assert!(plan.commands.is_empty(), "{plan:#?}");
    let budget = plan.kept.iter().find(|k| k.node == "b").unwrap();
    let KeptWhy::Budget {
        reason: Reason::Underutilized,
        alone: Some(alone),
        ..
    } = &budget.why
    else {
        panic!("{budget:?}");
    };
    // Its Event says both: the budget, and why it could not go on its own.
    let told = budget.why.to_string();
    assert!(
        told.contains("disruption budget allows no more underutilized nodes now")
            && told.ends_with(&format!("alone it is not consolidated: {alone}")),
        "{told}"
    );
}

#[test]
fn consolidation_waits_while_another_node_is_being_disrupted() {
    let mut fleet = Fleet::new()
        .node("a", "m5.2xlarge", pods("a", 3, 1000, 5))
        .node("b", "m5.2xlarge", pods("b", 3, 1000, 5));
    fleet.add("c", "m5.large", "on-demand", vec![], |mut v| {
        v.disrupting = true;
        v
    });
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(plan.commands.is_empty(), "{plan:#?}");
    // Each says why it stays, so its Event answers "why isn't this node going away?".
    let waiting: Vec<(&str, &KeptWhy)> = plan
        .kept
        .iter()
        .map(|k| (k.node.as_str(), &k.why))
        .collect();
    assert_eq!(
        waiting,
        [
            ("a", &KeptWhy::RemovalUnderWay),
            ("b", &KeptWhy::RemovalUnderWay)
        ]
    );
    assert_eq!(
        KeptWhy::RemovalUnderWay.to_string(),
        "consolidation waits while another removal is under way"
    );
}

#[test]
fn underutilized_nodes_wait_with_a_reason_while_an_empty_node_goes_in_the_same_sweep() {
    let mut fleet = Fleet::new()
        .node("a", "m5.2xlarge", pods("a", 1, 1000, 1))
        .node("b", "m5.2xlarge", pods("b", 1, 1000, 1));
    fleet.add("c", "m5.large", "on-demand", vec![], |mut v| {
        v.empty_since = Some(t("11:00:00"));
        v
    });
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    let going: Vec<(&[String], Reason)> = plan
        .commands
        .iter()
        .map(|c| (c.nodes.as_slice(), c.reason))
        .collect();
    assert_eq!(going, [(&["c".to_string()][..], Reason::Empty)]);
    for node in ["a", "b"] {
        let k = plan.kept.iter().find(|k| k.node == node).unwrap();
        assert_eq!(
            (k.reason, &k.why),
            (Reason::Underutilized, &KeptWhy::RemovalUnderWay)
        );
    }
}

#[test]
fn a_just_launched_node_waits_consolidate_after_even_when_its_pods_fit_elsewhere() {
    // `small`'s one pod fits on `big`'s free room: settled, it is deleted.
    let settled = Fleet::new()
        .big_with_room()
        .node("small", "m5.large", pods("s", 1, 500, 1));
    let plan = plan_disruption(&settled.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    assert_eq!(plan.commands[0].nodes, ["small"]);
    // Launched 20 s ago (consolidateAfter is 30 s), its pod older than the node: it waits
    // the 10 s left, counted from its creation.
    let mut fresh = Fleet::new().big_with_room();
    fresh.add(
        "small",
        "m5.large",
        "on-demand",
        pods("s", 1, 500, 1),
        |mut v| {
            v.created = t("11:59:40");
            v.last_pod_arrival = Some(t("11:00:00"));
            v
        },
    );
    let plan = plan_disruption(&fresh.snapshot, t(NOW));
    assert!(plan.commands.is_empty(), "{plan:#?}");
    let small = plan.kept.iter().find(|k| k.node == "small").unwrap();
    assert_eq!(
        (small.reason, &small.why),
        (
            Reason::Underutilized,
            &KeptWhy::TooRecent {
                remaining: Duration::from_secs(10)
            }
        )
    );
}

#[test]
fn without_a_simulation_no_node_is_consolidated() {
    let mut fleet = Fleet::new()
        .node("a", "m5.2xlarge", pods("a", 3, 1000, 5))
        .node("b", "m5.2xlarge", pods("b", 3, 1000, 5));
    fleet.snapshot.simulation = None;
    assert!(plan_disruption(&fleet.snapshot, t(NOW)).commands.is_empty());
}

#[test]
fn a_node_past_the_budgets_first_candidates_still_goes_alone_when_they_cannot() {
    // Budget: one node at a time. `a-pinned` comes first (same cost, name order) and its
    // pod fits nowhere else; `b-small`'s pod fits on `big`'s room. The budget bounds how
    // many nodes go, not which are looked at: `b-small` goes.
    let mut pinned = pods("pinned", 1, 500, 1);
    pinned[0].requirements[0].add(
        "example.com/rack",
        crate::scheduling::Requirement::in_values(["r1"]),
    );
    let mut fleet = Fleet::new().node("a-pinned", "m5.large", pinned).node(
        "b-small",
        "m5.large",
        pods("web", 1, 500, 1),
    );
    fleet.snapshot.simulation.as_mut().unwrap().nodes[0]
        .labels
        .insert("example.com/rack".into(), "r1".into());
    fleet = fleet.big_with_room();
    fleet.snapshot.pools[0].budgets = Ok(vec![count_budget(NodesLimit::Count(1))]);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    assert_eq!(plan.commands[0].nodes, ["b-small"]);
    assert_eq!(plan.commands[0].action, Action::Delete);
}

#[test]
fn the_nodes_past_the_budget_a_command_does_not_take_are_kept_by_the_budget() {
    // Three nodes whose pods fit on `big`; budget two at a time: `a` and `b` go together,
    // `c` is kept by the budget (and says so), not left without a reason.
    let mut fleet = Fleet::new()
        .node("a", "m5.large", pods("a", 1, 250, 1))
        .node("b", "m5.large", pods("b", 1, 250, 1))
        .node("c", "m5.large", pods("c", 1, 250, 1));
    fleet = fleet.big_with_room();
    fleet.snapshot.pools[0].budgets = Ok(vec![count_budget(NodesLimit::Count(2))]);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    assert_eq!(plan.commands[0].nodes, ["a", "b"]);
    let c = plan.kept.iter().find(|k| k.node == "c").expect("c kept");
    assert!(
        matches!(
            c.why,
            KeptWhy::Budget {
                reason: Reason::Underutilized,
                ..
            }
        ),
        "{c:?}"
    );
}

/// The candidates' pods leave with them: a pod kept one per zone by anti-affinity to its
/// own app is judged without its own copy on the candidate, so it may move within its zone.
#[test]
fn a_pods_own_copy_on_the_candidate_does_not_keep_it_from_moving_within_its_zone() {
    use crate::scheduling::TopologyKey;
    use crate::scheduling::testkit::pod as demand;
    let web = demand("web-0", 500, GI)
        .label("app", "web")
        .anti(TopologyKey::Zone, "web")
        .build();
    let mut fleet = Fleet::new().node("small", "m5.large", vec![web]);
    fleet = fleet.big_with_room();
    let sim = fleet.snapshot.simulation.as_mut().unwrap();
    let terms = sim.pods["small"][0].anti_affinity.clone();
    let small = sim.nodes.iter_mut().find(|n| n.name == "small").unwrap();
    small.pods = vec![("default".into(), [("app".into(), "web".into())].into())];
    small.anti_affinity = terms;
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    assert_eq!(plan.commands[0].nodes, ["small"]);
    assert_eq!(plan.commands[0].action, Action::Delete);
}

/// And the other way: with its copy still counted in zone a, moving the pod to zone b
/// would look balanced (a 1, b 2) while leaving a 0, b 2, past a `DoNotSchedule` skew of 1.
#[test]
fn a_move_that_would_break_a_zone_spread_once_the_pod_has_left_is_not_made() {
    use crate::scheduling::TopologyKey;
    use crate::scheduling::testkit::pod as demand;
    const ZONE_B: &str = "us-east-1b";
    let web = |name: &str| {
        demand(name, 500, GI)
            .label("app", "web")
            .spread(TopologyKey::Zone, 1, "web")
            .build()
    };
    let mut fleet = Fleet::new().node("small", "m5.large", vec![web("web-0")]);
    fleet = fleet.big_with_room();
    let sim = fleet.snapshot.simulation.as_mut().unwrap();
    sim.catalog = standard_catalog(&[ZONE_A, ZONE_B]);
    let labelled = |n: &mut ExistingNode, app: &str| {
        n.pods
            .push(("default".into(), [("app".into(), app.into())].into()));
    };
    for n in &mut sim.nodes {
        if n.name == "big" {
            n.zone = ZONE_B.into();
            n.labels.insert(ZONE.into(), ZONE_B.into());
            labelled(n, "web");
        } else {
            labelled(n, "web");
        }
    }
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(
        plan.commands
            .iter()
            .all(|c| !(c.nodes == ["small"] && c.action == Action::Delete)),
        "{plan:#?}"
    );
}

/// Pending pods are placed first: the room they are about to take on `big` is not room
/// for `small`'s pod, so `small` is not deleted onto it.
#[test]
fn a_move_does_not_take_the_room_a_pending_pod_needs() {
    let fleet = || {
        Fleet::new()
            .node("small", "m5.large", pods("web", 1, 500, 1))
            .big_with_room()
    };
    let plan = plan_disruption(&fleet().snapshot, t(NOW));
    assert_eq!(plan.commands[0].action, Action::Delete, "{plan:#?}");

    let mut fleet = fleet();
    let sim = fleet.snapshot.simulation.as_mut().unwrap();
    super::simulation::book_pending(sim, pods("waiting", 1, 5800, 1));
    assert_eq!(
        sim.pending_on.get("big").map(|p| p[0].name.as_str()),
        Some("waiting-0"),
        "{:?}",
        sim.pending_on
    );
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert!(
        plan.commands.iter().all(|c| c.action != Action::Delete),
        "{plan:#?}"
    );
}

/// A pending pod the candidate's own room would hold goes with the candidate: the move
/// must find it room as well.
#[test]
fn a_pending_pod_the_candidate_would_hold_must_find_room_elsewhere_too() {
    let mut fleet = Fleet::new()
        .node("small", "m5.large", pods("web", 1, 500, 1))
        .big_with_room();
    let sim = fleet.snapshot.simulation.as_mut().unwrap();
    // `big` full but for 100m: the pending pod fits only on `small`.
    sim.nodes
        .iter_mut()
        .find(|n| n.name == "big")
        .unwrap()
        .requested
        .cpu = 7800;
    super::simulation::book_pending(sim, pods("waiting", 1, 1000, 1));
    assert!(sim.pending_on.contains_key("small"), "{:?}", sim.pending_on);
    let placed =
        super::consolidate::placement(sim, &Default::default(), &[&fleet.snapshot.nodes[0]])
            .unwrap();
    let claimed: Vec<&String> = placed.node_claims.iter().flat_map(|c| &c.pods).collect();
    assert!(
        claimed.iter().any(|p| p.contains("waiting-0")),
        "the pending pod is placed with the move: {placed:#?}"
    );
}

/// Underutilized nodes are tried by savings per unit of disruption, highest first
/// (Karpenter's `SavingsRatio`): with room for one move, the dearer node of one pod goes
/// before the cheaper one, and a node of one pod before one as dear with three.
#[test]
fn with_room_for_one_move_the_node_saving_most_per_pod_moved_goes_first() {
    let one_at_a_time = |mut fleet: Fleet| {
        fleet.snapshot.pools[0].budgets = Ok(vec![count_budget(NodesLimit::Count(1))]);
        plan_disruption(&fleet.snapshot, t(NOW))
    };
    let plan = one_at_a_time(
        Fleet::new()
            .node("a-cheap", "m5.large", pods("a", 1, 500, 1))
            .node("b-dear", "m5.xlarge", pods("b", 1, 500, 1))
            .big_with_room(),
    );
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    assert_eq!(plan.commands[0].nodes, ["b-dear"]);
    let plan = one_at_a_time(
        Fleet::new()
            .node("a-three", "m5.xlarge", pods("a", 3, 300, 1))
            .node("b-one", "m5.xlarge", pods("b", 1, 300, 1))
            .big_with_room(),
    );
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    assert_eq!(plan.commands[0].nodes, ["b-one"]);
}

/// An empty node the solver places a pending pod on stays, as Karpenter keeps a nominated
/// node out of disruption: it would be removed just before the pod lands.
#[test]
fn an_empty_node_a_pending_pod_is_about_to_land_on_stays() {
    let mut fleet = Fleet::new().node("idle", "m5.large", vec![]);
    fleet.snapshot.nodes[0].empty_since = Some(t("08:00:00"));
    let gone = |plan: &Plan| -> Vec<(String, Reason)> {
        plan.commands
            .iter()
            .flat_map(|c| c.nodes.iter().map(move |n| (n.clone(), c.reason)))
            .collect()
    };
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(gone(&plan), [("idle".to_string(), Reason::Empty)]);

    let sim = fleet.snapshot.simulation.as_mut().unwrap();
    super::simulation::book_pending(sim, pods("waiting", 1, 500, 1));
    assert!(sim.pending_on.contains_key("idle"), "{:?}", sim.pending_on);
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(gone(&plan), []);
    assert!(
        plan.kept
            .iter()
            .any(|k| k.node == "idle" && k.why == KeptWhy::Nominated { pods: 1 }),
        "{:?}",
        plan.kept
    );
}

/// A node still inside its pool's `consolidateAfter` is no destination for moved pods
/// (Karpenter: "should not consolidate pods onto a destination node that is under its
/// consolidateAfter window"); once out of it, it is.
#[test]
fn pods_are_not_moved_onto_a_node_still_inside_consolidate_after() {
    let fleet = |destination_created: &str| {
        let mut fleet = Fleet::new()
            .node("small", "m5.large", pods("web", 1, 500, 1))
            .big_with_room();
        let big = fleet
            .snapshot
            .nodes
            .iter_mut()
            .find(|n| n.name == "big")
            .unwrap();
        big.created = t(destination_created);
        fleet
    };
    let deletes = |fleet: &Fleet| {
        plan_disruption(&fleet.snapshot, t(NOW))
            .commands
            .iter()
            .any(|c| c.nodes == ["small"] && c.action == Action::Delete)
    };
    assert!(
        deletes(&fleet("08:00:00")),
        "settled: small's pod moves onto big"
    );
    // Ten seconds before NOW, with the pool's consolidateAfter of 30 s.
    let recent = fleet("11:59:50");
    assert!(
        !deletes(&recent),
        "big launched seconds ago takes no moved pod"
    );
}

/// A replacement keeps the NodePool's `minValues` among the types that would save, or is
/// not made (Karpenter's "Consolidation should fail if filterByPrice breaks the minimum
/// requirement from the NodePools"): fewer types than the NodePool asks for would be less
/// choice than it allows a launch.
#[test]
fn a_replacement_whose_cheaper_types_fall_short_of_min_values_is_not_made() {
    // (minValues on the instance type, whether m5.xlarge with a 1.5 CPU pod is replaced)
    let cases = [(None, true), (Some(2), true), (Some(12), false)];
    for (min, replaced) in cases {
        let mut fleet = Fleet::new();
        fleet.add("a", "m5.xlarge", "on-demand", pods("a", 1, 1500, 2), |v| v);
        let families = ["c5", "m5", "r5"];
        let pool = node_pool("default")
            .req(CAPACITY_TYPE, crate::api::Operator::In, &["on-demand"])
            .req(
                "karpenter.k8s.aws/instance-family",
                crate::api::Operator::In,
                &families,
            );
        let pool = match min {
            Some(min) => pool.min_values(INSTANCE_TYPE, crate::api::Operator::Exists, &[], min),
            None => pool,
        };
        fleet.snapshot.simulation.as_mut().unwrap().pools = vec![pool.build()];
        let plan = plan_disruption(&fleet.snapshot, t(NOW));
        if replaced {
            assert_eq!(plan.commands.len(), 1, "minValues {min:?}: {plan:#?}");
            assert_eq!(plan.commands[0].action, Action::Replace);
            let offered = plan.commands[0].replacement[0].instance_types.len();
            assert!(offered >= min.unwrap_or(1) as usize, "{offered}");
        } else {
            assert!(plan.commands.is_empty(), "minValues {min:?}: {plan:#?}");
            assert!(
                plan.kept.iter().any(|k| matches!(
                    &k.why,
                    KeptWhy::NotConsolidatable { why } if why.contains("would save") && why.contains("minValues 12")
                )),
                "{:#?}",
                plan.kept
            );
        }
    }
}

/// Karpenter's "should consolidate a node through replacement when ignoring preferences":
/// a pod preferring its node's dear type keeps it while preferences are respected (a
/// replacement would be that type again) and moves to a cheaper type when they are ignored.
#[test]
fn a_preferred_dear_type_keeps_its_node_unless_preferences_are_ignored() {
    let preferring = || {
        let mut p = pods("w", 1, 1000, 2).remove(0);
        let mut term = crate::scheduling::Requirements::new();
        term.add(
            INSTANCE_TYPE,
            crate::scheduling::Requirement::in_values(["m5.4xlarge".to_string()]),
        );
        p.preferred.push(term);
        vec![p]
    };
    for (policy, replaced) in [
        (PreferencePolicy::Respect, false),
        (PreferencePolicy::Ignore, true),
    ] {
        let mut fleet = Fleet::new().node("big", "m5.4xlarge", preferring());
        fleet.snapshot.simulation.as_mut().unwrap().preferences = policy;
        let plan = plan_disruption(&fleet.snapshot, t(NOW));
        assert_eq!(
            plan.commands.len(),
            usize::from(replaced),
            "{policy:?}: {plan:#?}"
        );
        if let Some(c) = plan.commands.first() {
            assert_eq!(c.action, Action::Replace, "{policy:?}");
            assert!(c.replacement[0].price_per_hour < shape("m5.4xlarge").2 * 0.9);
        }
    }
}

/// The fleet's pool as `consolidationPolicy: Balanced`.
fn balanced(mut fleet: Fleet) -> Fleet {
    fleet.snapshot.pools[0].consolidation = ConsolidationPolicy::Balanced;
    fleet
}

#[test]
fn a_balanced_pool_refuses_a_repack_that_saves_less_than_half_the_share_it_disrupts() {
    // Two half-empty r5.xlarge into one c5.2xlarge saves 33% of the pool's cost and moves
    // every pod it has (all of its disruption): taken under WhenEmptyOrUnderutilized,
    // refused under Balanced (score 0.33 < 0.5), each node kept with the score.
    let fleet = || {
        Fleet::new()
            .node("a", "r5.xlarge", pods("a", 5, 750, 1))
            .node("b", "r5.xlarge", pods("b", 5, 750, 1))
    };
    let plan = plan_disruption(&fleet().snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");

    let plan = plan_disruption(&balanced(fleet()).snapshot, t(NOW));
    assert!(plan.commands.is_empty(), "{plan:#?}");
    for name in ["a", "b"] {
        let kept = plan.kept.iter().find(|k| k.node == name).expect("kept");
        assert!(
            matches!(&kept.why, KeptWhy::NotConsolidatable { why } if why.contains("is Balanced")),
            "{kept:?}"
        );
    }
}

#[test]
fn a_balanced_pool_deletes_a_dear_node_whose_one_pod_fits_elsewhere() {
    // An m5.4xlarge holding one small pod is two thirds of the pool's cost and half of its
    // disruption: score 1.33, it goes under Balanced too.
    let fleet = balanced(
        Fleet::new()
            .node("dear", "m5.4xlarge", pods("web", 1, 500, 1))
            .big_with_room(),
    );
    let plan = plan_disruption(&fleet.snapshot, t(NOW));
    assert_eq!(plan.commands.len(), 1, "{plan:#?}");
    let c = &plan.commands[0];
    assert_eq!(
        (c.action, c.nodes.as_slice()),
        (Action::Delete, &["dear".to_string()][..])
    );
}
