//! Situations from Karpenter's scheduling suite (kubernetes-sigs/karpenter,
//! pkg/controllers/provisioning/scheduling/suite_test.go), as our own tests.

use super::testkit::*;
use super::*;
use crate::api::Operator::*;
use crate::api::labels::*;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];

fn plan(pods: Vec<PodDemand>) -> ProvisioningPlan {
    solve(
        &Snapshot {
            pods,
            ..Default::default()
        },
        &standard_catalog(ZONES),
        &[pool("default").build()],
        &[class("default")],
    )
}

#[test]
fn a_deprecated_beta_instance_type_selector_picks_that_instance_type() {
    // Karpenter: "should support well known deprecated labels" (NormalizedLabels).
    let plan = plan(pods(
        "p",
        1,
        |p| p.select("beta.kubernetes.io/instance-type", "m5.xlarge"),
        500,
        GI,
    ));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        plan.node_claims[0].instance_types,
        vec!["m5.xlarge".to_string()]
    );
}

#[test]
fn a_deprecated_beta_zone_selector_pins_the_zone() {
    let plan = plan(pods(
        "p",
        2,
        |p| p.select("failure-domain.beta.kubernetes.io/zone", "us-east-1b"),
        500,
        GI,
    ));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    for c in &plan.node_claims {
        assert_eq!(c.zones, vec!["us-east-1b".to_string()]);
    }
}

#[test]
fn exists_on_a_key_no_nodepool_or_instance_type_defines_leaves_the_pod_pending() {
    // Karpenter: "should not schedule pods with an Exists operator on an undefined key".
    for key in ["example.com/undefined", "karpenter.k8s.aws/undefined"] {
        let plan = plan(pods("p", 1, |p| p.require(key, Exists, &[]), 500, GI));
        assert!(plan.node_claims.is_empty(), "{key}: {:?}", plan.node_claims);
        assert_eq!(plan.unschedulable.len(), 1, "{key}");
    }
}

#[test]
fn does_not_exist_on_an_undefined_key_schedules_the_pod() {
    let plan = plan(pods(
        "p",
        1,
        |p| p.require("example.com/undefined", DoesNotExist, &[]),
        500,
        GI,
    ));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims.len(), 1);
}

#[test]
fn a_zone_outside_the_catalog_leaves_the_pod_pending_rather_than_placed_elsewhere() {
    let plan = plan(pods("p", 1, |p| p.select(ZONE, "us-west-2a"), 500, GI));
    assert!(plan.node_claims.is_empty());
    assert_eq!(plan.unschedulable.len(), 1);
}

#[test]
fn min_values_on_instance_type_splits_a_claim_instead_of_stranding_its_pods() {
    // Karpenter adds a pod to a claim only while minValues still holds and opens another
    // claim otherwise. Six 1-cpu pods fit together only on a c5.2xlarge; three fit a
    // c5.xlarge, an m5.xlarge and a c5.2xlarge: two claims of three.
    let pool = pool("default")
        .min_values(
            INSTANCE_TYPE,
            In,
            &["c5.large", "c5.xlarge", "m5.xlarge", "c5.2xlarge"],
            3,
        )
        .build();
    let plan = solve(
        &Snapshot {
            pods: pods("p", 6, |p| p, 1000, 0),
            ..Default::default()
        },
        &standard_catalog(ZONES),
        &[pool],
        &[class("default")],
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let placed: usize = plan.node_claims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 6);
    for c in &plan.node_claims {
        assert!(c.instance_types.len() >= 3, "{:?}", c.instance_types);
    }
}

#[test]
fn exists_on_a_key_only_another_nodepool_defines_leaves_the_pod_pending() {
    // Each NodePool answers for its own requirements: pool `a` defines `team`, pool `b` does
    // not, and a pod that selects `b` (by name, by a template label, by a requirement `b`
    // defines) and requires `team` to exist fits neither.
    let pools = [
        pool("a").req("team", In, &["payments"]).build(),
        pool("b")
            .label("tier", "general")
            .req("size", In, &["small"])
            .build(),
    ];
    let solve_one = |select: &dyn Fn(PodBuilder) -> PodBuilder| {
        solve(
            &Snapshot {
                pods: pods("p", 1, select, 500, GI),
                ..Default::default()
            },
            &standard_catalog(ZONES),
            &pools,
            &[class("default")],
        )
    };
    let selections: [(&str, &dyn Fn(PodBuilder) -> PodBuilder); 3] = [
        ("by name", &|p| p.select(NODEPOOL, "b")),
        ("by template label", &|p| p.select("tier", "general")),
        ("by requirement", &|p| p.select("size", "small")),
    ];
    for (how, select) in selections {
        let pending = solve_one(&|p| select(p).require("team", Exists, &[]));
        assert!(
            pending.node_claims.is_empty(),
            "{how}: {:?}",
            pending.node_claims
        );
        assert_eq!(pending.unschedulable.len(), 1, "{how}");
        // Without `team` the same selection lands on `b`.
        let placed = solve_one(select);
        assert!(
            placed.unschedulable.is_empty(),
            "{how}: {:?}",
            placed.unschedulable
        );
        assert_eq!(placed.node_claims[0].nodepool, "b", "{how}");
    }
    // Without a selection, `team` takes it to `a`, which defines the key.
    let placed = solve_one(&|p| p.require("team", Exists, &[]));
    assert!(
        placed.unschedulable.is_empty(),
        "{:?}",
        placed.unschedulable
    );
    assert_eq!(placed.node_claims[0].nodepool, "a");
}

#[test]
fn a_static_nodepool_launches_only_for_its_own_floor_never_for_pending_pods() {
    // Karpenter's static NodePools: the provisioner creates no NodeClaim of theirs for pods.
    let pools = [pool("fixed").replicas(2).build(), pool("dynamic").build()];
    let solve_for = |pods, pools: &[crate::api::NodePool]| solve_with(ZONES, pods, pools);
    let claim_pools = |plan: &ProvisioningPlan| -> Vec<String> {
        plan.node_claims
            .iter()
            .map(|c| c.nodepool.clone())
            .collect()
    };
    // A pending pod goes to the dynamic pool, however the static one is ordered.
    let plan = solve_for(pods("p", 1, |p| p, 500, GI), &pools);
    assert_eq!(claim_pools(&plan), ["dynamic"]);
    // Pinned to the static pool only: pending, and the reason says why.
    let pinned = pods("p", 1, |p| p.select(NODEPOOL, "fixed"), 500, GI);
    let plan = solve_for(pinned, &pools);
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("static NodePool (replicas: 2)"),
        "{:?}",
        plan.unschedulable
    );
    // The static pool's floor placeholder (its label names the pool) launches in it; one
    // naming another pool does not.
    let floor = |of: &str| {
        pods(
            "floor",
            1,
            |p| p.label(CAPACITY_FLOOR, of).select(NODEPOOL, "fixed"),
            1,
            1 << 20,
        )
    };
    assert_eq!(claim_pools(&solve_for(floor("fixed"), &pools)), ["fixed"]);
    assert!(solve_for(floor("dynamic"), &pools).node_claims.is_empty());
}

#[test]
fn only_a_floor_placeholder_keeps_the_floor_label_a_real_pod_cannot_claim_a_static_pool() {
    let pod = |uid: &str| -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": uid,
                "labels": {CAPACITY_FLOOR: "fixed"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap()
    };
    let label = |uid: &str| {
        PodDemand::from_pod(&pod(uid))
            .unwrap()
            .labels
            .get(CAPACITY_FLOOR)
            .cloned()
    };
    assert_eq!(label("capacity-floor/fixed/493000/0"), Some("fixed".into()));
    assert_eq!(label("6f1c2a8e-0d7b-4c55-9a1e-1b2c3d4e5f60"), None);
}

/// Karpenter's `--min-values-policy`: six 1-cpu pods under a pool asking for three distinct
/// types; a 5-cpu pod fits only c5.2xlarge of them.
#[test]
fn min_values_short_even_alone_leaves_pods_pending_unless_best_effort_relaxes_it() {
    let pool = || {
        pool("default")
            .min_values(
                INSTANCE_TYPE,
                In,
                &["c5.large", "c5.xlarge", "m5.xlarge", "c5.2xlarge"],
                3,
            )
            .build()
    };
    let plan = |pods: Vec<PodDemand>, min_values: MinValuesPolicy| {
        solve(
            &Snapshot {
                pods,
                min_values,
                ..Default::default()
            },
            &standard_catalog(ZONES),
            &[pool()],
            &[class("default")],
        )
    };
    // A claim that can be split keeps minValues under either policy: nothing relaxed.
    for policy in [MinValuesPolicy::Strict, MinValuesPolicy::BestEffort] {
        let split = plan(pods("p", 6, |p| p, 1000, 0), policy);
        assert!(split.unschedulable.is_empty(), "{policy:?}");
        assert!(
            split
                .node_claims
                .iter()
                .all(|c| !c.min_values_relaxed && c.instance_types.len() >= 3),
            "{policy:?}: {:?}",
            split.node_claims
        );
    }
    // One pod no three types hold.
    let big = || pods("big", 1, |p| p, 5000, 0);
    let strict = plan(big(), MinValuesPolicy::Strict);
    assert!(strict.node_claims.is_empty(), "{:?}", strict.node_claims);
    assert_eq!(strict.unschedulable.len(), 1);
    assert!(
        strict.unschedulable[0].reason.contains("minValues"),
        "{:?}",
        strict.unschedulable
    );
    let relaxed = plan(big(), MinValuesPolicy::BestEffort);
    assert!(
        relaxed.unschedulable.is_empty(),
        "{:?}",
        relaxed.unschedulable
    );
    let [claim] = relaxed.node_claims.as_slice() else {
        panic!("{:?}", relaxed.node_claims);
    };
    assert!(claim.min_values_relaxed);
    assert_eq!(claim.instance_types, ["c5.2xlarge"]);
    assert_eq!(
        claim
            .requirements
            .get(INSTANCE_TYPE)
            .and_then(|r| r.min_values),
        Some(1),
        "lowered to the distinct types that fit"
    );
}

#[test]
fn a_min_values_policy_is_read_as_karpenter_spells_it() {
    assert_eq!("Strict".parse(), Ok(MinValuesPolicy::Strict));
    assert_eq!("BestEffort".parse(), Ok(MinValuesPolicy::BestEffort));
    for text in ["besteffort", "", "Relaxed"] {
        let e = text.parse::<MinValuesPolicy>().unwrap_err();
        assert!(e.contains("Strict or BestEffort"), "{text}: {e}");
    }
}
