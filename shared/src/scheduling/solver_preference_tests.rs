//! Preferred node affinity, preferred pod (anti-)affinity and `ScheduleAnyway` spread,
//! from Karpenter's "Preferential Fallback" and topology cases
//! (kubernetes-sigs/karpenter, pkg/controllers/provisioning/scheduling/suite_test.go) and
//! the plain case of a preference that can be met. Pods are parsed from their Kubernetes
//! spec, so weights and ordering go through `PodDemand::from_pod`.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::testkit::*;
use super::*;
use crate::api::NodePool;
use crate::api::Operator::*;
use crate::api::labels::*;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];

fn term(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]})
}

/// A 500m / 1 GiB pod with the given `affinity.nodeAffinity`.
fn pod_with(node_affinity: Value) -> PodDemand {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
            "affinity": {"nodeAffinity": node_affinity}
        }
    }))
    .unwrap();
    PodDemand::from_pod(&pod).unwrap()
}

fn preferring(terms: &[(i32, Value)]) -> PodDemand {
    let preferred: Vec<Value> = terms
        .iter()
        .map(|(w, t)| json!({"weight": w, "preference": t}))
        .collect();
    pod_with(json!({"preferredDuringSchedulingIgnoredDuringExecution": preferred}))
}

fn plan_on(pool: NodePool, pods: Vec<PodDemand>) -> ProvisioningPlan {
    solve(
        &Snapshot {
            pods,
            ..Default::default()
        },
        &standard_catalog(ZONES),
        &[pool],
        &[class("default")],
    )
}

/// The one claim's zones, asserting the pod was placed.
fn zones_of(plan: &ProvisioningPlan) -> Vec<String> {
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims.len(), 1, "{:?}", plan.node_claims);
    plan.node_claims[0].zones.clone()
}

#[test]
fn a_preferred_zone_the_nodepool_offers_is_where_the_pod_goes() {
    let pod = preferring(&[(1, term(ZONE, "In", &["us-east-1b"]))]);
    let plan = plan_on(pool("default").build(), vec![pod]);
    assert_eq!(zones_of(&plan), vec!["us-east-1b"]);
}

#[test]
fn the_heaviest_preference_is_honoured_before_a_lighter_one() {
    let pod = preferring(&[
        (10, term(ZONE, "In", &["us-east-1a"])),
        (90, term(ZONE, "In", &["us-east-1c"])),
    ]);
    let plan = plan_on(pool("default").build(), vec![pod]);
    assert_eq!(zones_of(&plan), vec!["us-east-1c"]);
}

#[test]
fn a_preferred_instance_type_is_the_only_type_the_claim_offers() {
    let pod = preferring(&[(1, term(INSTANCE_TYPE, "In", &["m5.2xlarge"]))]);
    let plan = plan_on(pool("default").build(), vec![pod]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims[0].instance_types, vec!["m5.2xlarge"]);
}

#[test]
fn preferences_that_cannot_be_met_are_all_relaxed_and_the_pod_schedules() {
    // Karpenter: "should relax all terms".
    let pod = preferring(&[
        (1, term(ZONE, "In", &["invalid"])),
        (1, term(INSTANCE_TYPE, "In", &["invalid"])),
    ]);
    let plan = plan_on(pool("default").build(), vec![pod]);
    assert_eq!(plan.node_claims.len(), 1);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn an_unmet_heavy_preference_falls_back_to_the_next_lighter_one() {
    // Karpenter: "should relax to use lighter weights".
    let pool = pool("default")
        .req(ZONE, In, &["us-east-1a", "us-east-1b"])
        .build();
    let pod = preferring(&[
        (100, term(INSTANCE_TYPE, "In", &["us-east-1c"])),
        (50, term(ZONE, "In", &["us-east-1b"])),
        (1, term(ZONE, "In", &["us-east-1a"])),
    ]);
    assert_eq!(zones_of(&plan_on(pool, vec![pod])), vec!["us-east-1b"]);
}

#[test]
fn a_preference_against_the_pods_requirement_is_dropped_and_the_requirement_kept() {
    // Karpenter: "should schedule even if preference is conflicting with requirement".
    let pod = pod_with(json!({
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": term(ZONE, "NotIn", &["us-east-1c"])}
        ],
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            term(ZONE, "In", &["us-east-1c"])
        ]}
    }));
    let plan = plan_on(pool("default").build(), vec![pod]);
    assert_eq!(zones_of(&plan), vec!["us-east-1c"]);
}

#[test]
fn a_preference_contradicting_itself_still_lets_the_pod_schedule() {
    // Karpenter: "should schedule even if preference requirements are conflicting".
    let pod = preferring(&[(
        1,
        json!({"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["invalid"]},
            {"key": ZONE, "operator": "NotIn", "values": ["invalid"]}
        ]}),
    )]);
    let plan = plan_on(pool("default").build(), vec![pod]);
    assert_eq!(plan.node_claims.len(), 1);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn a_required_term_is_never_relaxed_however_many_preferences_there_are() {
    // Karpenter: "should not relax the final term".
    let pool = pool("default").req(ZONE, In, &["us-east-1a"]).build();
    let pod = pod_with(json!({
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": term(ZONE, "In", &["us-east-1a"])}
        ],
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            term(ZONE, "In", &["invalid"])
        ]}
    }));
    let plan = plan_on(pool, vec![pod]);
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    assert_eq!(plan.unschedulable.len(), 1);
}

#[test]
fn pods_sharing_a_preference_share_its_nodes() {
    // Ten small pods preferring one zone: a few shared nodes there (as cheap a mix as
    // unconstrained pods get), not one node per pod.
    let pods: Vec<PodDemand> = (0..10)
        .map(|i| {
            let mut p = preferring(&[(1, term(ZONE, "In", &["us-east-1a"]))]);
            p.name = format!("p{i}");
            p
        })
        .collect();
    let plan = plan_on(pool("default").build(), pods);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert!(plan.node_claims.len() <= 2, "{:?}", plan.node_claims);
    for c in &plan.node_claims {
        assert_eq!(c.zones, vec!["us-east-1a"]);
    }
}

#[test]
fn a_preference_weight_outside_1_to_100_is_an_error_naming_the_field() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "a"}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "preference": term(ZONE, "In", &["us-east-1a"])}
            ]}}
        }
    }))
    .unwrap();
    let e = PodDemand::from_pod(&pod).unwrap_err();
    assert_eq!(
        e.field,
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"
    );
}

fn spread_plan(pool: NodePool, soft: bool) -> ProvisioningPlan {
    let pods = pods(
        "s",
        3,
        |p| {
            let p = p.label("app", "s");
            if soft {
                p.spread_anyway(TopologyKey::Hostname, 1, "s")
            } else {
                p.spread(TopologyKey::Hostname, 1, "s")
            }
        },
        500,
        GI,
    );
    plan_on(pool, pods)
}

#[test]
fn a_schedule_anyway_zone_spread_that_can_be_met_is_met() {
    let pods = pods(
        "s",
        3,
        |p| p.label("app", "s").spread_anyway(TopologyKey::Zone, 1, "s"),
        500,
        GI,
    );
    let plan = plan_on(pool("default").build(), pods);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let mut zones: Vec<String> = plan.node_claims.iter().map(|c| c.zone.clone()).collect();
    zones.sort();
    assert_eq!(zones, ZONES);
    for c in &plan.node_claims {
        assert_eq!(c.zones.len(), 1, "a spread pod on an unpinned claim");
    }
}

#[test]
fn a_schedule_anyway_spread_the_limits_cannot_meet_is_dropped_where_do_not_schedule_leaves_pods_pending()
 {
    // Karpenter: "should violate max-skew when unsat = schedule anyway". One pod per node
    // would need three nodes; the NodePool's 4 CPUs allow two.
    let limited = || pool("default").limit("cpu", "4").build();
    let hard = spread_plan(limited(), false);
    assert_eq!(hard.unschedulable.len(), 1, "{:?}", hard.node_claims);
    let soft = spread_plan(limited(), true);
    assert!(soft.unschedulable.is_empty(), "{:?}", soft.unschedulable);
    let placed: usize = soft.node_claims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 3);
    assert!(soft.node_claims.len() <= 2, "{:?}", soft.node_claims);
}

#[test]
fn a_preferred_hostname_anti_affinity_that_can_be_met_puts_each_pod_on_its_own_node() {
    let pods = pods(
        "w",
        3,
        |p| p.label("app", "w").prefer_anti(TopologyKey::Hostname, "w"),
        500,
        GI,
    );
    let plan = plan_on(pool("default").build(), pods);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims.len(), 3, "{:?}", plan.node_claims);
}

#[test]
fn a_preferred_anti_affinity_the_limits_cannot_meet_is_dropped_and_every_pod_schedules() {
    // Karpenter: "should violate preferred pod anti-affinity" when it cannot be met.
    let pods = pods(
        "w",
        3,
        |p| p.label("app", "w").prefer_anti(TopologyKey::Hostname, "w"),
        500,
        GI,
    );
    let plan = plan_on(pool("default").limit("cpu", "4").build(), pods);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let placed: usize = plan.node_claims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 3);
}

#[test]
fn a_held_preferred_anti_affinity_binds_only_its_own_pod() {
    // The big pod avoids app=b; an app=b pod placed after it may still join its node, as
    // in Karpenter, which tracks only required anti-affinity both ways.
    let big = pod("a", 1000, GI)
        .label("app", "a")
        .prefer_anti(TopologyKey::Hostname, "b")
        .build();
    let small = pod("b", 500, GI).label("app", "b").build();
    let plan = plan_on(pool("default").build(), vec![big, small]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims.len(), 1, "{:?}", plan.node_claims);
}

#[test]
fn a_preferred_zone_affinity_follows_its_target_into_the_targets_zone() {
    let db = pod("db", 500, GI)
        .label("app", "db")
        .select(ZONE, "us-east-1b")
        .build();
    let web = pod("web", 2000, GI)
        .label("app", "web")
        .prefer_affinity(TopologyKey::Zone, "db")
        .build();
    let plan = plan_on(pool("default").build(), vec![db, web]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    for c in &plan.node_claims {
        assert_eq!(c.zones, vec!["us-east-1b"], "{:?}", c.pods);
    }
}

#[test]
fn a_preferred_affinity_to_pods_that_do_not_exist_is_dropped_and_the_pod_schedules() {
    // Karpenter: "should allow violation of preferred pod affinity".
    let web = pod("web", 500, GI)
        .label("app", "web")
        .prefer_affinity(TopologyKey::Hostname, "nothing")
        .build();
    let plan = plan_on(pool("default").build(), vec![web]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims.len(), 1);
}

/// Karpenter's `--preference-policy=Ignore`: the same pods planned with preferences left
/// out (its suite_test "Preferential Fallback" cases with `IgnorePreferences`).
fn plan_ignoring(pool: NodePool, pods: Vec<PodDemand>) -> ProvisioningPlan {
    solve(
        &Snapshot {
            pods,
            preferences: PreferencePolicy::Ignore,
            ..Default::default()
        },
        &standard_catalog(ZONES),
        &[pool],
        &[class("default")],
    )
}

#[test]
fn ignoring_preferences_each_kind_stops_steering_the_plan_and_requirements_still_hold() {
    let hostname_spread = || {
        pods(
            "s",
            3,
            |p| {
                p.label("app", "s")
                    .spread_anyway(TopologyKey::Hostname, 1, "s")
            },
            500,
            GI,
        )
    };
    let hostname_anti = || {
        pods(
            "w",
            3,
            |p| p.label("app", "w").prefer_anti(TopologyKey::Hostname, "w"),
            500,
            GI,
        )
    };
    let preferred_type = || {
        vec![preferring(&[(
            1,
            term(INSTANCE_TYPE, "In", &["m5.2xlarge"]),
        )])]
    };
    // (case, pods, claims when respected, claims when ignored)
    type Pods = fn() -> Vec<PodDemand>;
    let cases: [(&str, Pods, usize, usize); 2] = [
        ("ScheduleAnyway hostname spread", hostname_spread, 3, 1),
        ("preferred hostname anti-affinity", hostname_anti, 3, 1),
    ];
    for (case, pods, respected, ignored) in cases {
        let plan = plan_on(pool("default").build(), pods());
        assert_eq!(plan.node_claims.len(), respected, "{case}: respected");
        let plan = plan_ignoring(pool("default").build(), pods());
        assert!(
            plan.unschedulable.is_empty(),
            "{case}: {:?}",
            plan.unschedulable
        );
        assert_eq!(plan.node_claims.len(), ignored, "{case}: ignored");
    }
    // A preferred type narrows the claim only when respected.
    let respected = plan_on(pool("default").build(), preferred_type());
    assert_eq!(respected.node_claims[0].instance_types, vec!["m5.2xlarge"]);
    let ignored = plan_ignoring(pool("default").build(), preferred_type());
    assert!(
        ignored.node_claims[0].instance_types.len() > 1,
        "{:?}",
        ignored.node_claims[0].instance_types
    );
    // A required spread is no preference: it holds either way.
    let hard = pods(
        "h",
        3,
        |p| p.label("app", "h").spread(TopologyKey::Hostname, 1, "h"),
        500,
        GI,
    );
    let plan = plan_ignoring(pool("default").build(), hard);
    assert_eq!(plan.node_claims.len(), 3, "{:?}", plan.node_claims);
}

#[test]
fn a_preference_policy_is_read_as_karpenter_spells_it() {
    for (text, policy) in [
        ("Respect", Ok(PreferencePolicy::Respect)),
        ("Ignore", Ok(PreferencePolicy::Ignore)),
    ] {
        assert_eq!(text.parse::<PreferencePolicy>(), policy, "{text}");
    }
    for text in ["ignore", "", "Strict"] {
        let e = text.parse::<PreferencePolicy>().unwrap_err();
        assert!(e.contains("Respect or Ignore"), "{text}: {e}");
    }
}
