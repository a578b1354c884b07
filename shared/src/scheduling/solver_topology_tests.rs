//! Topology keys beyond zone and hostname, and the details of topology spread, from
//! Karpenter's suite (kubernetes-sigs/karpenter,
//! pkg/controllers/provisioning/scheduling/topology_test.go), as our own tests.

use std::collections::{BTreeMap, BTreeSet};

use super::testkit::*;
use super::*;
use crate::api::Operator::*;
use crate::api::labels::*;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];
const RACK: &str = "example.com/rack";

/// The value a planned claim gives its node for `key`: a label, or the one value its
/// requirements leave.
fn value_of(c: &PlannedClaim, key: &str) -> String {
    if key == CAPACITY_TYPE {
        return c.capacity_type.as_str().to_string();
    }
    if let Some(v) = c.labels.get(key) {
        return v.clone();
    }
    let values = c
        .requirements
        .get(key)
        .and_then(|r| r.finite_values())
        .unwrap_or_else(|| panic!("claim {:?} leaves {key} open", c.instance_types));
    assert_eq!(values.len(), 1, "claim pinned to one {key}: {values:?}");
    values.iter().next().unwrap().clone()
}

/// Pods per value of `key` over the planned claims.
fn per_value(plan: &ProvisioningPlan, key: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for c in &plan.node_claims {
        *out.entry(value_of(c, key)).or_default() += c.pods.len();
    }
    out
}

fn label(key: &str) -> TopologyKey {
    TopologyKey::Label(key.to_string())
}

#[test]
fn a_capacity_type_spread_balances_pods_across_spot_and_on_demand() {
    // Karpenter: "should balance pods across capacity types".
    let pools = [pool("default")
        .req(CAPACITY_TYPE, In, &["spot", "on-demand"])
        .build()];
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            4,
            |p| p.label("app", "s").spread(label(CAPACITY_TYPE), 1, "s"),
            500,
            GI,
        ),
        &pools,
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        per_value(&plan, CAPACITY_TYPE),
        [("on-demand".to_string(), 2), ("spot".to_string(), 2)].into()
    );
    for c in &plan.node_claims {
        assert_eq!(
            c.capacity_types,
            vec![c.capacity_type],
            "one capacity type per claim"
        );
    }
}

#[test]
fn an_arch_spread_balances_pods_across_amd64_and_arm64_and_every_type_has_the_claims_arch() {
    // kubernetes.io/arch as a topology key, like Karpenter's capacity-type case.
    let catalog = catalog(
        &[
            (itype("c5.large", 2, 4), 0.085),
            (itype("c5.xlarge", 4, 8), 0.17),
            (itype("c6g.large", 2, 4), 0.068),
            (itype("c6g.xlarge", 4, 8), 0.136),
        ],
        ZONES,
    );
    let pools = [pool("default").req(ARCH, In, &["amd64", "arm64"]).build()];
    let plan = solve(
        &Snapshot {
            pods: pods(
                "p",
                4,
                |p| p.label("app", "s").spread(label(ARCH), 1, "s"),
                500,
                GI,
            ),
            ..Default::default()
        },
        &catalog,
        &pools,
        &[class("default")],
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        per_value(&plan, ARCH),
        [("amd64".to_string(), 2), ("arm64".to_string(), 2)].into()
    );
    for c in &plan.node_claims {
        let arm = value_of(c, ARCH) == "arm64";
        for t in &c.instance_types {
            let family = t.split('.').next().unwrap();
            assert_eq!(
                family.contains('g'),
                arm,
                "{t} on a claim pinned to {}",
                value_of(c, ARCH)
            );
        }
    }
}

#[test]
fn a_spread_over_a_label_the_nodepool_requires_balances_pods_across_its_values() {
    // A custom label the NodePool requirement lists (In [...]) as the topology key.
    let pools = [pool("default").req(RACK, In, &["r1", "r2", "r3"]).build()];
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            6,
            |p| p.label("app", "s").spread(label(RACK), 1, "s"),
            500,
            GI,
        ),
        &pools,
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        per_value(&plan, RACK),
        [
            ("r1".to_string(), 2),
            ("r2".to_string(), 2),
            ("r3".to_string(), 2)
        ]
        .into()
    );
    for c in &plan.node_claims {
        assert!(
            c.labels.contains_key(RACK),
            "the node carries its rack label"
        );
    }
}

#[test]
fn template_labels_of_several_nodepools_are_the_domains_of_a_custom_key() {
    // Each NodePool's template label gives one domain of the key.
    let pools = [
        pool("one").label(RACK, "r1").build(),
        pool("two").label(RACK, "r2").build(),
    ];
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            4,
            |p| p.label("app", "s").spread(label(RACK), 1, "s"),
            500,
            GI,
        ),
        &pools,
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        per_value(&plan, RACK),
        [("r1".to_string(), 2), ("r2".to_string(), 2)].into()
    );
    for c in &plan.node_claims {
        let expected = if c.nodepool == "one" { "r1" } else { "r2" };
        assert_eq!(value_of(c, RACK), expected);
    }
}

#[test]
fn a_spread_on_a_key_no_nodepool_provides_leaves_the_pod_pending_with_a_reason() {
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            2,
            |p| {
                p.label("app", "s")
                    .spread(label("example.com/undefined"), 1, "s")
            },
            500,
            GI,
        ),
        &[pool("default").build()],
    );
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    assert_eq!(plan.unschedulable.len(), 2);
    for u in &plan.unschedulable {
        assert!(u.reason.contains("example.com/undefined"), "{}", u.reason);
    }
}

#[test]
fn a_required_affinity_on_a_key_no_nodepool_provides_leaves_the_pod_pending() {
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            1,
            |p| {
                p.label("app", "s")
                    .affinity(label("example.com/undefined"), "s")
            },
            500,
            GI,
        ),
        &[pool("default").build()],
    );
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("example.com/undefined"),
        "{}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn anti_affinity_on_a_key_no_node_carries_does_not_hold_the_pod_back() {
    // kube-scheduler: a node without the topology label is outside every domain of the
    // term, so anti-affinity on it never conflicts.
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            3,
            |p| {
                p.label("app", "s")
                    .anti(label("example.com/undefined"), "s")
            },
            500,
            GI,
        ),
        &[pool("default").build()],
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn capacity_type_anti_affinity_puts_one_pod_on_each_capacity_type_and_leaves_the_third_pending() {
    let pools = [pool("default")
        .req(CAPACITY_TYPE, In, &["spot", "on-demand"])
        .build()];
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            3,
            |p| p.label("app", "s").anti(label(CAPACITY_TYPE), "s"),
            500,
            GI,
        ),
        &pools,
    );
    assert_eq!(
        per_value(&plan, CAPACITY_TYPE),
        [("on-demand".to_string(), 1), ("spot".to_string(), 1)].into()
    );
    assert_eq!(plan.unschedulable.len(), 1, "{:?}", plan.unschedulable);
}

#[test]
fn an_affinity_on_a_custom_label_follows_its_target_to_the_targets_value() {
    let pools = [pool("default").req(RACK, In, &["r1", "r2", "r3"]).build()];
    let mut all = pods(
        "db",
        1,
        |p| p.label("app", "db").select(RACK, "r2"),
        2000,
        4 * GI,
    );
    all.extend(pods(
        "web",
        3,
        |p| p.label("app", "web").affinity(label(RACK), "db"),
        500,
        GI,
    ));
    let plan = solve_with(ZONES, all, &pools);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(per_value(&plan, RACK), [("r2".to_string(), 4)].into());
}

#[test]
fn fewer_domains_than_min_domains_count_the_global_minimum_as_zero() {
    // kube-scheduler's minDomains: with 3 zones and
    // minDomains 5 every zone may hold at most maxSkew pods of the group.
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            6,
            |p| {
                p.label("app", "s")
                    .spread(TopologyKey::Zone, 1, "s")
                    .with_spread(|s| s.min_domains = 5)
            },
            500,
            GI,
        ),
        &[pool("default").build()],
    );
    assert_eq!(
        per_value(&plan, ZONE),
        ZONES.iter().map(|z| (z.to_string(), 1)).collect()
    );
    assert_eq!(plan.unschedulable.len(), 3, "{:?}", plan.unschedulable);
}

#[test]
fn min_domains_met_by_the_zones_changes_nothing() {
    let plan = solve_with(
        ZONES,
        pods(
            "p",
            6,
            |p| {
                p.label("app", "s")
                    .spread(TopologyKey::Zone, 1, "s")
                    .with_spread(|s| s.min_domains = 3)
            },
            500,
            GI,
        ),
        &[pool("default").build()],
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        per_value(&plan, ZONE),
        ZONES.iter().map(|z| (z.to_string(), 2)).collect()
    );
}

/// Pool `open` in zones a and b; pool `tainted` in zone c, with a taint the pods do not
/// tolerate.
fn split_pools() -> [crate::api::NodePool; 2] {
    [
        pool("open")
            .req(ZONE, In, &["us-east-1a", "us-east-1b"])
            .build(),
        pool("tainted")
            .req(ZONE, In, &["us-east-1c"])
            .taint("dedicated", "batch")
            .build(),
    ]
}

#[test]
fn a_tainted_nodepools_zone_counts_as_a_domain_unless_node_taints_policy_is_honor() {
    // Karpenter: "should balance pods across a label when discovered from the nodepool
    // (NodeTaintsPolicy=ignore / honor)".
    let spread = |honor: bool| {
        move |p: PodBuilder| {
            p.label("app", "s")
                .spread(TopologyKey::Zone, 1, "s")
                .with_spread(|s| s.honor_taints = honor)
        }
    };
    // Ignore (the default): zone c can never get a pod, its count stays 0, so a and b
    // hold one each.
    let ignore = solve_with(ZONES, pods("p", 4, spread(false), 500, GI), &split_pools());
    assert_eq!(
        per_value(&ignore, ZONE),
        [("us-east-1a".to_string(), 1), ("us-east-1b".to_string(), 1)].into()
    );
    assert_eq!(ignore.unschedulable.len(), 2);
    // Honor: zone c is not a domain for these pods.
    let honor = solve_with(ZONES, pods("p", 4, spread(true), 500, GI), &split_pools());
    assert!(honor.unschedulable.is_empty(), "{:?}", honor.unschedulable);
    assert_eq!(
        per_value(&honor, ZONE),
        [("us-east-1a".to_string(), 2), ("us-east-1b".to_string(), 2)].into()
    );
}

#[test]
fn zones_the_pods_affinity_excludes_count_as_domains_only_when_node_affinity_policy_is_ignore() {
    // nodeAffinityPolicy, as kube-scheduler defines it (Honor by default).
    let spread = |honor: bool| {
        move |p: PodBuilder| {
            p.label("app", "s")
                .require(ZONE, In, &["us-east-1a", "us-east-1b"])
                .spread(TopologyKey::Zone, 1, "s")
                .with_spread(|s| s.honor_affinity = honor)
        }
    };
    let pools = [pool("default").build()];
    let honor = solve_with(ZONES, pods("p", 4, spread(true), 500, GI), &pools);
    assert!(honor.unschedulable.is_empty(), "{:?}", honor.unschedulable);
    assert_eq!(
        per_value(&honor, ZONE),
        [("us-east-1a".to_string(), 2), ("us-east-1b".to_string(), 2)].into()
    );
    let ignore = solve_with(ZONES, pods("p", 4, spread(false), 500, GI), &pools);
    assert_eq!(ignore.unschedulable.len(), 2, "{:?}", ignore.unschedulable);
}

#[test]
fn match_label_keys_spread_each_revision_on_its_own() {
    // kube-scheduler's matchLabelKeys: the pods of a new ReplicaSet revision are spread
    // among themselves, not against the old revision crowding zone a.
    let pod = |name: &str, hash: &str| {
        let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"app": "web", "pod-template-hash": hash}},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
                "topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "matchLabelKeys": ["pod-template-hash"]
                }]
            }
        }))
        .unwrap();
        PodDemand::from_pod(&p).unwrap()
    };
    let old_pods: Vec<(String, BTreeMap<String, String>)> = (0..3)
        .map(|_| {
            (
                "default".to_string(),
                [
                    ("app".to_string(), "web".to_string()),
                    ("pod-template-hash".to_string(), "old".to_string()),
                ]
                .into(),
            )
        })
        .collect();
    let mut node = full_node("old", "us-east-1a");
    node.pods = old_pods;
    let plan = solve(
        &Snapshot {
            pods: (0..3).map(|i| pod(&format!("new-{i}"), "new")).collect(),
            nodes: vec![node],
            ..Default::default()
        },
        &standard_catalog(ZONES),
        &[pool("default").build()],
        &[class("default")],
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    // Without matchLabelKeys the three old pods in zone a would keep the new ones out of it.
    assert_eq!(
        per_value(&plan, ZONE),
        ZONES.iter().map(|z| (z.to_string(), 1)).collect()
    );
}

/// An existing node with no room left, in `zone`.
pub(super) fn full_node(name: &str, zone: &str) -> ExistingNode {
    let capacity = crate::resources::Resources {
        cpu: 2000,
        memory: 4 * GI,
        pods: 29_000,
        ..Default::default()
    };
    ExistingNode {
        name: name.into(),
        nodepool: Some("default".into()),
        instance_type: "c5.large".into(),
        zone: zone.into(),
        capacity_type: Some(crate::catalog::CapacityType::OnDemand),
        labels: [
            (NODEPOOL.to_string(), "default".to_string()),
            (ZONE.to_string(), zone.to_string()),
        ]
        .into(),
        taints: vec![],
        capacity: capacity.clone(),
        allocatable: capacity.clone(),
        requested: capacity,
        pods: vec![],
        anti_affinity: vec![],
        schedulable: true,
    }
}

#[test]
fn an_affinity_with_an_empty_namespace_selector_follows_a_target_in_another_namespace() {
    // `namespaceSelector: {}` selects every namespace; without it the term looks only in
    // the pod's own namespace and finds no target.
    let db = || {
        let mut db = pods(
            "db",
            1,
            |p| p.label("app", "db").select(ZONE, "us-east-1b"),
            2000,
            4 * GI,
        );
        db[0].namespace = "data".into();
        db
    };
    let web = |every_namespace: bool| {
        let mut web = pods(
            "web",
            2,
            |p| p.label("app", "web").affinity(TopologyKey::Zone, "db"),
            500,
            GI,
        );
        if every_namespace {
            for w in &mut web {
                w.affinity[0].namespaces.clear();
            }
        }
        web
    };
    let pools = [pool("default").build()];
    let mut all = db();
    all.extend(web(true));
    let plan = solve_with(ZONES, all, &pools);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        per_value(&plan, ZONE),
        [("us-east-1b".to_string(), 3)].into()
    );
    let mut all = db();
    all.extend(web(false));
    let own_namespace_only = solve_with(ZONES, all, &pools);
    assert_eq!(own_namespace_only.unschedulable.len(), 2);
}

#[test]
fn a_namespace_selector_with_terms_looks_in_the_namespaces_whose_labels_it_matches() {
    // db pods in "data" (team=storage) pinned to 1b, and in "scratch" (no team) pinned to
    // 1c. A web pod follows db pods of namespaces labelled team=storage only.
    let db = |namespace: &str, zone: &str| {
        let mut db = pods(
            &format!("db-{namespace}"),
            1,
            |p| p.label("app", "db").select(ZONE, zone),
            2000,
            4 * GI,
        );
        db[0].namespace = namespace.into();
        db
    };
    let storage: Selector = Selector::from_k8s(
        &serde_json::from_value(serde_json::json!({"matchLabels": {"team": "storage"}})).unwrap(),
    )
    .unwrap();
    let web = |anti: bool| {
        let mut web = pods(
            "web",
            2,
            |p| {
                let p = p.label("app", "web");
                if anti {
                    p.anti(TopologyKey::Zone, "db")
                } else {
                    p.affinity(TopologyKey::Zone, "db")
                }
            },
            500,
            GI,
        );
        for w in &mut web {
            let term = if anti {
                &mut w.anti_affinity[0]
            } else {
                &mut w.affinity[0]
            };
            term.namespaces.clear();
            term.namespace_selector = Some(storage.clone());
        }
        web
    };
    let namespace_labels: super::NamespaceLabels = [
        (
            "data".to_string(),
            [("team".to_string(), "storage".to_string())].into(),
        ),
        ("scratch".to_string(), Default::default()),
    ]
    .into();
    let plan_of = |pods: Vec<PodDemand>, labels: &super::NamespaceLabels| {
        solve(
            &Snapshot {
                pods,
                namespace_labels: labels.clone(),
                ..Default::default()
            },
            &standard_catalog(ZONES),
            &[pool("default").build()],
            &[class("default")],
        )
    };
    let web_zones = |plan: &ProvisioningPlan| -> BTreeSet<String> {
        plan.node_claims
            .iter()
            .filter(|c| c.pods.iter().any(|p| p.contains("web")))
            .map(|c| value_of(c, ZONE))
            .collect()
    };
    let mut all = db("data", "us-east-1b");
    all.extend(db("scratch", "us-east-1c"));
    all.extend(web(false));
    let follows = plan_of(all, &namespace_labels);
    assert!(
        follows.unschedulable.is_empty(),
        "{:?}",
        follows.unschedulable
    );
    assert_eq!(web_zones(&follows), ["us-east-1b".to_string()].into());

    // Anti-affinity: away from team=storage's db (1b), not from scratch's (1c).
    let mut all = db("data", "us-east-1b");
    all.extend(db("scratch", "us-east-1c"));
    all.extend(web(true));
    let avoids = plan_of(all, &namespace_labels);
    assert!(
        avoids.unschedulable.is_empty(),
        "{:?}",
        avoids.unschedulable
    );
    assert!(
        !web_zones(&avoids).contains("us-east-1b"),
        "{:?}",
        web_zones(&avoids)
    );

    // Without the Namespaces' labels the selector matches no namespace: no target to follow.
    let mut all = db("data", "us-east-1b");
    all.extend(web(false));
    let unknown = plan_of(all, &Default::default());
    assert_eq!(
        unknown.unschedulable.len(),
        2,
        "{:?}",
        unknown.unschedulable
    );
}

#[test]
fn a_follower_packed_before_its_target_pinned_to_one_zone_goes_to_that_zone() {
    // Karpenter requeues a pod that failed while others still schedule. The followers are
    // larger than their target, so they are packed first and find no target yet.
    let mut all = pods(
        "web",
        2,
        |p| p.label("app", "web").affinity(TopologyKey::Zone, "db"),
        2000,
        4 * GI,
    );
    all.extend(pods(
        "db",
        1,
        |p| p.label("app", "db").select(ZONE, "us-east-1c"),
        250,
        GI,
    ));
    let plan = solve_with(ZONES, all, &[pool("default").build()]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        per_value(&plan, ZONE),
        [("us-east-1c".to_string(), 3)].into()
    );
}

#[test]
fn a_follower_of_a_target_that_cannot_schedule_stays_pending_and_says_why() {
    let mut all = pods(
        "web",
        1,
        |p| p.label("app", "web").affinity(TopologyKey::Zone, "db"),
        500,
        GI,
    );
    all.extend(pods(
        "db",
        1,
        |p| p.label("app", "db").select(ZONE, "us-west-2a"),
        250,
        GI,
    ));
    let plan = solve_with(ZONES, all, &[pool("default").build()]);
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    let web = plan
        .unschedulable
        .iter()
        .find(|u| u.pod == "default/web-0")
        .expect("the follower is pending");
    assert!(web.reason.contains(ZONE), "{}", web.reason);
}

/// A node in `zone` with room for 4 vCPU / 8 GiB, running one `app=db` pod whose required
/// anti-affinity on `key` selects `app=web` (or nothing, without `key`).
fn node_with_anti_affine_db(zone: &str, key: Option<TopologyKey>) -> ExistingNode {
    let mut node = full_node("db-node", zone);
    node.allocatable.cpu += 4000;
    node.allocatable.memory += 8 * GI;
    node.allocatable.pods += 10_000;
    node.pods = vec![(
        "default".to_string(),
        [("app".to_string(), "db".to_string())].into(),
    )];
    if let Some(key) = key {
        node.anti_affinity = pods("db", 1, |p| p.anti(key.clone(), "web"), 1, 1)[0]
            .anti_affinity
            .clone();
    }
    node
}

fn plan_web_next_to(node: ExistingNode) -> ProvisioningPlan {
    solve(
        &Snapshot {
            pods: pods("web", 2, |p| p.label("app", "web"), 500, GI),
            nodes: vec![node],
            ..Default::default()
        },
        &standard_catalog(ZONES),
        &[pool("default").build()],
        &[class("default")],
    )
}

#[test]
fn a_running_pods_hostname_anti_affinity_keeps_the_pods_it_selects_off_its_node() {
    // Without the running pod's term the web pods take the room on its node.
    let free = plan_web_next_to(node_with_anti_affine_db("us-east-1a", None));
    assert_eq!(free.nominations.len(), 1, "{free:?}");
    assert!(free.node_claims.is_empty());
    let kept_off = plan_web_next_to(node_with_anti_affine_db(
        "us-east-1a",
        Some(TopologyKey::Hostname),
    ));
    assert!(
        kept_off.nominations.is_empty(),
        "{:?}",
        kept_off.nominations
    );
    assert!(
        kept_off.unschedulable.is_empty(),
        "{:?}",
        kept_off.unschedulable
    );
    assert_eq!(
        kept_off
            .node_claims
            .iter()
            .map(|c| c.pods.len())
            .sum::<usize>(),
        2
    );
}

#[test]
fn a_running_pods_zone_anti_affinity_keeps_the_pods_it_selects_out_of_its_zone() {
    let plan = plan_web_next_to(node_with_anti_affine_db(
        "us-east-1a",
        Some(TopologyKey::Zone),
    ));
    assert!(plan.nominations.is_empty(), "{:?}", plan.nominations);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        plan.node_claims.iter().map(|c| c.pods.len()).sum::<usize>(),
        2
    );
    for c in &plan.node_claims {
        assert_ne!(value_of(c, ZONE), "us-east-1a", "{:?}", c.zones);
        assert!(
            !c.zones.contains(&"us-east-1a".to_string()),
            "{:?}",
            c.zones
        );
    }
}
