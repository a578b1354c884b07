//! Scenario tables for `solve`: snapshot in, plan out.

use std::collections::{BTreeMap, BTreeSet};

use super::testkit::*;
use super::*;
use crate::api::Operator::*;
use crate::api::labels::*;
use crate::catalog::CapacityType;
use crate::resources::Resources;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];

fn snapshot(pods: Vec<PodDemand>) -> Snapshot {
    Snapshot {
        pods,
        ..Default::default()
    }
}

fn plan(pods: Vec<PodDemand>, pools: &[crate::api::NodePool]) -> ProvisioningPlan {
    solve(
        &snapshot(pods),
        &standard_catalog(ZONES),
        pools,
        &[class("default")],
    )
}

#[test]
fn five_one_cpu_pods_on_the_c5_xlarge_pool_need_exactly_two_nodes() {
    // The seed lab's provisioner2: c5.xlarge only, on-demand, one zone, a taint.
    let pool = pool("provisioner2")
        .req(INSTANCE_TYPE, In, &["c5.xlarge"])
        .req(ZONE, In, &["us-east-1a"])
        .req(CAPACITY_TYPE, In, &["on-demand"])
        .taint("cpuIntensive", "true")
        .label("nodeType", "cpu-node")
        .build();
    let pods = pods(
        "inflate2",
        5,
        |p| {
            p.tolerate("cpuIntensive", "true")
                .select("nodeType", "cpu-node")
        },
        1000,
        0,
    );
    let plan = plan(pods, &[pool]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims.len(), 2);
    let mut sizes: Vec<usize> = plan.node_claims.iter().map(|c| c.pods.len()).collect();
    sizes.sort();
    assert_eq!(
        sizes,
        vec![2, 3],
        "a c5.xlarge holds three 1-cpu pods after overhead, not four"
    );
    for c in &plan.node_claims {
        assert_eq!(c.instance_types, vec!["c5.xlarge".to_string()]);
        assert_eq!(
            (c.capacity_type, c.zone.as_str()),
            (CapacityType::OnDemand, "us-east-1a")
        );
        assert_eq!(
            c.labels.get("nodeType").map(String::as_str),
            Some("cpu-node")
        );
        assert_eq!(
            c.labels.get(NODEPOOL).map(String::as_str),
            Some("provisioner2")
        );
    }
}

#[test]
fn pods_that_do_not_tolerate_the_only_pools_taint_are_unschedulable_with_the_taint_named() {
    let pool = pool("p").taint("cpuIntensive", "true").build();
    let plan = plan(pods("web", 1, |p| p, 500, GI), &[pool]);
    assert!(plan.node_claims.is_empty());
    assert_eq!(
        plan.unschedulable[0].reason,
        "NodePool p has taint cpuIntensive=true:NoSchedule that the pod does not tolerate"
    );
}

#[test]
fn a_node_selector_no_pool_offers_is_reported_in_one_sentence() {
    let pools = [
        pool("a").label("nodeType", "cpu").build(),
        pool("b").build(),
    ];
    let plan = plan(
        pods("gpu", 1, |p| p.select("nodeType", "gpu"), 500, GI),
        &pools,
    );
    assert_eq!(
        plan.unschedulable[0].reason,
        "node selector nodeType=gpu matches no NodePool"
    );
}

#[test]
fn a_pod_larger_than_every_type_says_which_resource_and_how_much_there_is() {
    let plan = plan(
        pods("big", 1, |p| p, 1000, 500 * GI),
        &[pool("default").build()],
    );
    let reason = &plan.unschedulable[0].reason;
    assert!(
        reason.starts_with(
            "no instance type in NodePool default has 500Gi memory free after overhead"
        ),
        "{reason}"
    );
}

#[test]
fn spot_is_chosen_when_a_pool_allows_both_capacity_types() {
    let pool = pool("default")
        .req(CAPACITY_TYPE, In, &["spot", "on-demand"])
        .build();
    let plan = plan(pods("web", 2, |p| p, 1000, GI), &[pool]);
    assert_eq!(plan.node_claims.len(), 1);
    assert_eq!(plan.node_claims[0].capacity_type, CapacityType::Spot);
    assert_eq!(
        plan.node_claims[0].capacity_types,
        vec![CapacityType::Spot, CapacityType::OnDemand]
    );
}

#[test]
fn the_cheapest_type_that_holds_the_pods_is_chosen_and_every_listed_type_holds_them() {
    let pool = pool("default")
        .req(CAPACITY_TYPE, In, &["on-demand"])
        .build();
    let plan = plan(pods("web", 1, |p| p, 1500, 2 * GI), &[pool]);
    let c = &plan.node_claims[0];
    assert_eq!(
        c.instance_type, "c5.large",
        "1.5 cpu / 2Gi fits the cheapest 2-vCPU type"
    );
    assert_eq!(c.instance_types[0], "c5.large");
    assert!((c.price_per_hour - 0.085).abs() < 1e-9);
    let cat = standard_catalog(ZONES);
    for name in &c.instance_types {
        let it = &cat
            .entries
            .iter()
            .find(|e| &e.instance_type.name == name)
            .unwrap()
            .instance_type;
        assert!(
            c.requests.fits_in(&it.allocatable(None)),
            "{name} cannot hold {}",
            c.requests
        );
    }
}

#[test]
fn higher_weight_pools_are_used_first() {
    let pools = [
        pool("cheap").build(),
        pool("preferred")
            .weight(50)
            .req(INSTANCE_TYPE, In, &["m5.xlarge", "m5.2xlarge"])
            .build(),
    ];
    let plan = plan(pods("web", 3, |p| p, 1000, GI), &pools);
    assert!(plan.node_claims.iter().all(|c| c.nodepool == "preferred"));
}

#[test]
fn nodepool_limits_leave_pods_pending_with_the_limit_named() {
    // 8 vCPU of limit: one c5.2xlarge (8) fits, the remaining pods cannot get a node.
    let pool = pool("default")
        .req(CAPACITY_TYPE, In, &["on-demand"])
        .limit("cpu", "8")
        .build();
    let plan = plan(pods("web", 12, |p| p, 1000, GI), &[pool]);
    let vcpus: i64 = plan
        .node_claims
        .iter()
        .map(|c| {
            standard_catalog(ZONES)
                .entries
                .iter()
                .find(|e| e.instance_type.name == c.instance_type)
                .unwrap()
                .instance_type
                .vcpu as i64
        })
        .sum();
    assert!(vcpus <= 8, "launched {vcpus} vCPU over a limit of 8");
    assert!(!plan.unschedulable.is_empty());
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("would exceed its limits (cpu"),
        "{}",
        plan.unschedulable[0].reason
    );
    let cat = standard_catalog(ZONES);
    for c in &plan.node_claims {
        // Candidates must not be larger than what the limit was checked against.
        for name in &c.instance_types {
            let it = &cat
                .entries
                .iter()
                .find(|e| &e.instance_type.name == name)
                .unwrap()
                .instance_type;
            assert!(it.vcpu <= 8, "{name}");
        }
    }
}

#[test]
fn hostname_anti_affinity_puts_each_replica_on_its_own_node() {
    let pods = pods(
        "db",
        4,
        |p| p.label("app", "db").anti(TopologyKey::Hostname, "db"),
        500,
        GI,
    );
    let plan = plan(pods, &[pool("default").build()]);
    assert_eq!(plan.node_claims.len(), 4);
    assert!(plan.node_claims.iter().all(|c| c.pods.len() == 1));
}

#[test]
fn zone_spread_with_max_skew_one_balances_replicas_across_zones() {
    let pods = pods(
        "web",
        7,
        |p| p.label("app", "web").spread(TopologyKey::Zone, 1, "web"),
        1000,
        GI,
    );
    let plan = plan(pods, &[pool("default").build()]);
    assert!(plan.unschedulable.is_empty());
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &plan.node_claims {
        assert_eq!(
            c.zones,
            vec![c.zone.clone()],
            "a spread claim is pinned to one zone"
        );
        *per_zone.entry(&c.zone).or_default() += c.pods.len();
    }
    let counts: Vec<usize> = per_zone.values().copied().collect();
    assert_eq!(counts.len(), 3);
    assert!(
        counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
        "{per_zone:?}"
    );
}

#[test]
fn zone_self_affinity_keeps_every_replica_in_one_zone() {
    let pods = pods(
        "cache",
        20,
        |p| p.label("app", "cache").affinity(TopologyKey::Zone, "cache"),
        2000,
        4 * GI,
    );
    let plan = plan(pods, &[pool("default").build()]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let zones: BTreeSet<&str> = plan.node_claims.iter().map(|c| c.zone.as_str()).collect();
    assert_eq!(zones.len(), 1, "{zones:?}");
    assert!(plan.node_claims.iter().all(|c| c.zones.len() == 1));
}

#[test]
fn hostname_spread_caps_replicas_per_node_at_max_skew() {
    let pods = pods(
        "web",
        6,
        |p| {
            p.label("app", "web")
                .spread(TopologyKey::Hostname, 2, "web")
        },
        100,
        100 * MI,
    );
    let plan = plan(pods, &[pool("default").build()]);
    assert_eq!(plan.node_claims.len(), 3);
    assert!(plan.node_claims.iter().all(|c| c.pods.len() == 2));
}

#[test]
fn pods_fit_onto_existing_nodes_before_anything_is_launched() {
    let node = ExistingNode {
        name: "ip-10-0-0-1.ec2.internal".into(),
        nodepool: Some("default".into()),
        instance_type: "m5.2xlarge".into(),
        zone: "us-east-1a".into(),
        capacity_type: Some(CapacityType::OnDemand),
        labels: [
            (NODEPOOL.to_string(), "default".to_string()),
            (ZONE.to_string(), "us-east-1a".to_string()),
        ]
        .into(),
        taints: vec![],
        capacity: Resources {
            cpu: 8000,
            memory: 32 * GI,
            pods: 58_000,
            ..Default::default()
        },
        allocatable: Resources {
            cpu: 7910,
            memory: 30 * GI,
            ephemeral_storage: 17 * GI,
            pods: 58_000,
            ..Default::default()
        },
        requested: Resources {
            cpu: 4000,
            memory: 8 * GI,
            pods: 4000,
            ..Default::default()
        },
        pods: vec![],
        anti_affinity: vec![],
        schedulable: true,
    };
    let snap = Snapshot {
        pods: pods("web", 4, |p| p, 1000, GI),
        nodes: vec![node.clone()],
        ..Default::default()
    };
    let plan = solve(
        &snap,
        &standard_catalog(ZONES),
        &[pool("default").build()],
        &[class("default")],
    );
    // 3910m free holds three 1-cpu pods; only the fourth needs a new node.
    assert_eq!(plan.nominations.len(), 1);
    assert_eq!(plan.nominations[0].node, "ip-10-0-0-1.ec2.internal");
    assert_eq!(plan.nominations[0].pods.len(), 3);
    assert_eq!(plan.node_claims.len(), 1);
    assert_eq!(plan.node_claims[0].pods.len(), 1);
    let cordoned = ExistingNode {
        schedulable: false,
        ..node
    };
    let snap2 = Snapshot {
        pods: pods("web", 1, |p| p, 100, GI),
        nodes: vec![cordoned],
        ..Default::default()
    };
    let plan2 = solve(
        &snap2,
        &standard_catalog(ZONES),
        &[pool("default").build()],
        &[class("default")],
    );
    assert_eq!(
        plan2.node_claims.len(),
        1,
        "a cordoned node is not capacity"
    );
}

#[test]
fn daemonset_overhead_is_reserved_on_every_new_node() {
    // c5.xlarge has 3920m allocatable: with a 1-cpu DaemonSet only two 1-cpu pods fit.
    let pool = pool("p")
        .req(INSTANCE_TYPE, In, &["c5.xlarge"])
        .req(CAPACITY_TYPE, In, &["on-demand"])
        .build();
    let ds = pod("ds", 1000, 0).build();
    let snap = Snapshot {
        pods: pods("web", 4, |p| p, 1000, 0),
        daemon_sets: vec![ds],
        ..Default::default()
    };
    let plan = solve(
        &snap,
        &standard_catalog(ZONES),
        &[pool],
        &[class("default")],
    );
    assert_eq!(plan.node_claims.len(), 2);
    assert!(
        plan.node_claims
            .iter()
            .all(|c| c.pods.len() == 2 && c.daemon_overhead.cpu == 1000)
    );
}

#[test]
fn a_gpu_pod_only_gets_types_with_gpus() {
    let mut g5 = itype("g5.xlarge", 4, 16);
    g5.gpu = Some(crate::catalog::Gpu {
        count: 1,
        name: "a10g".into(),
        manufacturer: "NVIDIA".into(),
        memory_mib: 24576,
    });
    let cat = catalog(&[(itype("m5.xlarge", 4, 16), 0.192), (g5, 1.006)], ZONES);
    let snap = Snapshot {
        pods: vec![pod("train", 1000, GI).gpu(1).build()],
        ..Default::default()
    };
    let plan = solve(&snap, &cat, &[pool("default").build()], &[class("default")]);
    assert_eq!(
        plan.node_claims[0].instance_types,
        vec!["g5.xlarge".to_string()]
    );
}

#[test]
fn node_affinity_on_arch_and_instance_cpu_narrows_the_candidates() {
    let pods = pods(
        "web",
        1,
        |p| {
            p.require(INSTANCE_CPU, Gt, &["8"])
                .require(INSTANCE_CATEGORY, In, &["m"])
        },
        1000,
        GI,
    );
    let plan = plan(pods, &[pool("default").build()]);
    let c = &plan.node_claims[0];
    assert!(
        c.instance_types.iter().all(|t| t.starts_with("m5.")
            && !t.ends_with(".large")
            && !t.ends_with(".xlarge")
            && !t.ends_with(".2xlarge")),
        "{:?}",
        c.instance_types
    );
}

#[test]
fn min_values_that_cannot_be_met_leave_pods_pending_with_the_reason() {
    let pool = pool("default")
        .min_values(INSTANCE_FAMILY, In, &["c5", "m5", "r5"], 3)
        .build();
    // 40 cpu fits only 12xlarge-class types: c5/m5/r5.12xlarge, so three families do exist.
    let ok = plan(
        pods("big", 1, |p| p, 40_000, GI),
        std::slice::from_ref(&pool),
    );
    assert!(ok.unschedulable.is_empty(), "{:?}", ok.unschedulable);
    // 300Gi fits only r5.12xlarge (384Gi): one family, fewer than three.
    let bad = plan(pods("mem", 1, |p| p, 1000, 300 * GI), &[pool]);
    assert!(
        bad.unschedulable[0].reason.contains("minValues 3"),
        "{}",
        bad.unschedulable[0].reason
    );
}

#[test]
fn an_empty_cluster_with_no_pending_pods_plans_nothing() {
    let plan = plan(vec![], &[pool("default").build()]);
    assert_eq!(plan, ProvisioningPlan::default());
}

#[test]
fn pods_only_one_pool_can_host_get_that_pools_node_in_flight_before_pods_that_could_go_anywhere() {
    // Two nodes on their way, one per pool, each with room for five 1-cpu pods. Listed
    // first, the flexible pods would fill the spot node and leave the spot-only pods a
    // second spot launch; placed most-constrained first, everything fits what is coming.
    let in_flight = |name: &str, pool_name: &str, capacity_type: CapacityType| ExistingNode {
        name: name.into(),
        nodepool: Some(pool_name.into()),
        instance_type: "m5.2xlarge".into(),
        zone: "us-east-1a".into(),
        capacity_type: Some(capacity_type),
        labels: [
            (NODEPOOL.to_string(), pool_name.to_string()),
            (ZONE.to_string(), "us-east-1a".to_string()),
            (
                CAPACITY_TYPE.to_string(),
                capacity_type.as_str().to_string(),
            ),
        ]
        .into(),
        taints: vec![],
        capacity: Resources {
            cpu: 8000,
            memory: 32 * GI,
            pods: 58_000,
            ..Default::default()
        },
        allocatable: Resources {
            cpu: 5000,
            memory: 30 * GI,
            pods: 58_000,
            ..Default::default()
        },
        requested: Resources::default(),
        pods: vec![],
        anti_affinity: vec![],
        schedulable: true,
    };
    let mut all = pods("web", 5, |p| p, 1000, GI);
    all.extend(pods(
        "batch",
        5,
        |p| p.select(CAPACITY_TYPE, SPOT),
        1000,
        GI,
    ));
    let snap = Snapshot {
        pods: all,
        nodes: vec![
            in_flight("nodeclaim/spot", "spot", CapacityType::Spot),
            in_flight("nodeclaim/default", "default", CapacityType::OnDemand),
        ],
        ..Default::default()
    };
    let plan = solve(
        &snap,
        &standard_catalog(ZONES),
        &[
            pool("default")
                .req(CAPACITY_TYPE, In, &["on-demand", "spot"])
                .build(),
            pool("spot").req(CAPACITY_TYPE, In, &[SPOT]).build(),
        ],
        &[class("default")],
    );
    assert!(
        plan.node_claims.is_empty(),
        "nothing new is needed: {:?}",
        plan.node_claims
            .iter()
            .map(|c| (&c.nodepool, &c.pods))
            .collect::<Vec<_>>()
    );
    let on = |node: &str| {
        plan.nominations
            .iter()
            .find(|n| n.node == node)
            .map(|n| n.pods.clone())
            .unwrap_or_default()
    };
    assert!(
        on("nodeclaim/spot").iter().all(|p| p.contains("batch")),
        "{:?}",
        plan.nominations
    );
    assert_eq!(on("nodeclaim/spot").len(), 5);
    assert_eq!(on("nodeclaim/default").len(), 5);
}
