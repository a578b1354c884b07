//! NodeOverlays in the solver, one row or scenario each (Karpenter's
//! `pkg/controllers/nodeoverlay/suite_test.go` and `store_test.go` are the reference).

use super::testkit::*;
use super::*;
use crate::api::NodeOverlay;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b"];

fn overlay(name: &str, spec: &str) -> NodeOverlay {
    serde_yaml::from_str(&format!("metadata: {{name: {name}}}\nspec: {spec}")).unwrap()
}

fn plan_with(
    overlays: &[NodeOverlay],
    pods: Vec<PodDemand>,
    pools: &[crate::api::NodePool],
) -> ProvisioningPlan {
    solve(
        &Snapshot {
            pods,
            overlays: Overlays::new(overlays),
            ..Default::default()
        },
        &standard_catalog(ZONES),
        pools,
        &[class("default")],
    )
}

/// The first claim's cheapest type and its price, for one 1-CPU pod.
fn first_choice(overlays: &[NodeOverlay], pools: &[crate::api::NodePool]) -> (String, f64) {
    let plan = plan_with(overlays, pods("p", 1, |p| p, 1000, GI), pools);
    let c = &plan.node_claims[0];
    (c.instance_types[0].clone(), c.price_per_hour)
}

#[test]
fn the_heaviest_overlay_that_selects_an_offering_sets_its_price() {
    let pools = [pool("default").build()];
    // (overlays, the type chosen first, its price)
    let none = first_choice(&[], &pools);
    assert_eq!(none.0, "c5.large");
    let m5_half = overlay(
        "m5-half",
        "{priceAdjustment: '-50%', requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]}",
    );
    let (ty, price) = first_choice(std::slice::from_ref(&m5_half), &pools);
    assert_eq!(ty, "m5.large");
    assert!((price - 0.048).abs() < 1e-9, "{price}");
    // A heavier overlay on the same offerings wins; its weight, not its order of listing.
    let m5_set = overlay(
        "m5-set",
        "{weight: 10, price: '0.5', requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]}",
    );
    let (ty, _) = first_choice(&[m5_half.clone(), m5_set.clone()], &pools);
    assert_ne!(ty, "m5.large", "m5.large now costs $0.5");
    // Equal weights: the later name first, as Karpenter orders them.
    let a = overlay("a", "{priceAdjustment: '-90%'}");
    let b = overlay("b", "{priceAdjustment: '+0%'}");
    let (_, price) = first_choice(&[a, b], &pools);
    assert!(
        (price - 0.085).abs() < 1e-9,
        "b, named later, applies: {price}"
    );
}

#[test]
fn an_overlay_selects_by_pool_template_label_zone_and_capacity_type() {
    let pools = [
        pool("general").build(),
        pool("batch").label("team", "batch").weight(10).build(),
    ];
    // Only the batch pool's nodes are discounted: the batch pool's price falls, general's not.
    let team = overlay(
        "team",
        "{priceAdjustment: '-0.05', requirements: [{key: team, operator: In, values: [batch]}]}",
    );
    let (_, price) = first_choice(std::slice::from_ref(&team), &pools);
    assert!(
        (price - 0.035).abs() < 1e-9,
        "batch (heavier) pool, discounted: {price}"
    );
    let by_pool = overlay(
        "by-pool",
        "{priceAdjustment: '-0.05', requirements: [{key: karpenter.sh/nodepool, operator: In, values: [general]}]}",
    );
    let (_, price) = first_choice(&[by_pool], &pools);
    assert!(
        (price - 0.085).abs() < 1e-9,
        "general's discount leaves batch's: {price}"
    );
    // One zone only: the claim's cheapest offering is there.
    let zone_b = overlay(
        "zone-b",
        "{price: '0.01', requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}]}",
    );
    let plan = plan_with(
        &[zone_b],
        pods("p", 1, |p| p, 1000, GI),
        &[pool("default").build()],
    );
    assert!((plan.node_claims[0].price_per_hour - 0.01).abs() < 1e-9);
    assert!(
        plan.node_claims[0]
            .zones
            .contains(&"us-east-1b".to_string())
    );
    // Spot only: on-demand keeps its price (the pool launches on-demand by default).
    let spot = overlay(
        "spot",
        "{price: '0.001', requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]}",
    );
    let (_, price) = first_choice(&[spot], &[pool("default").build()]);
    assert!((price - 0.085).abs() < 1e-9, "{price}");
}

#[test]
fn an_overlay_s_capacity_lets_pods_asking_for_it_schedule() {
    let pools = [pool("default").build()];
    let wants_widget = || pods("w", 1, |p| p.extended("example.com/widget", 2), 500, GI);
    let plan = plan_with(&[], wants_widget(), &pools);
    assert!(plan.node_claims.is_empty() && plan.unschedulable.len() == 1);
    let widgets = overlay(
        "widgets",
        "{capacity: {example.com/widget: '4'}, requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [r5]}]}",
    );
    let plan = plan_with(&[widgets], wants_widget(), &pools);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert!(
        plan.node_claims[0]
            .instance_types
            .iter()
            .all(|t| t.starts_with("r5."))
    );
}

#[test]
fn operators_select_as_node_selectors_do_with_gte_and_lte() {
    use crate::api::OverlayRequirement;
    let labels: std::collections::BTreeMap<String, String> = [
        ("cpu".to_string(), "4".to_string()),
        ("family".to_string(), "m5".to_string()),
    ]
    .into();
    let look = overlay_labels(&labels);
    let req = |key: &str, op: &str, values: &[&str]| -> OverlayRequirement {
        serde_yaml::from_str(&format!(
            "{{key: {key}, operator: {op}, values: {values:?}}}"
        ))
        .unwrap()
    };
    let cases = [
        (req("family", "In", &["m5"]), true),
        (req("family", "NotIn", &["m5"]), false),
        (req("absent", "NotIn", &["x"]), true),
        (req("family", "Exists", &[]), true),
        (req("absent", "DoesNotExist", &[]), true),
        (req("cpu", "Gt", &["4"]), false),
        (req("cpu", "Gte", &["4"]), true),
        (req("cpu", "Lt", &["4"]), false),
        (req("cpu", "Lte", &["4"]), true),
        (req("family", "Gt", &["1"]), false),
    ];
    for (r, want) in cases {
        assert_eq!(
            overlay_selects(std::slice::from_ref(&r), &look),
            want,
            "{r:?}"
        );
    }
}

#[test]
fn equal_weights_over_the_same_offerings_conflict_and_the_later_applies_nowhere() {
    let pools = [pool("default").build()];
    let on = |name: &str, family: &str, change: &str| {
        overlay(
            name,
            &format!(
                "{{priceAdjustment: '{change}', requirements: [{{key: karpenter.k8s.aws/instance-family, operator: In, values: [{family}]}}]}}"
            ),
        )
    };
    let plan =
        |overlays: &[NodeOverlay]| plan_with(overlays, pods("p", 1, |p| p, 1000, GI), &pools);
    // "zz" comes first (reverse name order) and takes c5; "aa" over c5 too, same weight:
    // in conflict, and not applied to m5 either, where nothing else is.
    let zz = on("zz", "c5", "+0%");
    let aa = overlay("aa", "{priceAdjustment: '-90%'}");
    let p = plan(&[zz.clone(), aa.clone()]);
    assert_eq!(p.overlay_conflicts, ["aa"]);
    assert!(
        (p.node_claims[0].price_per_hour - 0.085).abs() < 1e-9,
        "{:?}",
        p.node_claims[0]
    );
    // Apart (c5 and m5): no conflict, both apply.
    let m5 = on("m5", "m5", "-90%");
    let p = plan(&[zz.clone(), m5]);
    assert!(p.overlay_conflicts.is_empty());
    assert_eq!(p.node_claims[0].instance_types[0], "m5.large");
    // A different weight: no conflict; the heavier prices what both select.
    let heavy = overlay("aa", "{weight: 5, priceAdjustment: '-90%'}");
    let p = plan(&[zz, heavy]);
    assert!(p.overlay_conflicts.is_empty());
    assert!((p.node_claims[0].price_per_hour - 0.0085).abs() < 1e-9);
}

#[test]
fn capacity_overlays_conflict_only_on_the_same_resource_at_the_same_weight() {
    let pools = [pool("default").build()];
    let cap =
        |name: &str, resource: &str| overlay(name, &format!("{{capacity: {{{resource}: '1'}}}}"));
    let conflicts = |overlays: &[NodeOverlay]| {
        plan_with(overlays, pods("p", 1, |p| p, 1000, GI), &pools).overlay_conflicts
    };
    assert_eq!(
        conflicts(&[cap("b", "example.com/a"), cap("a", "example.com/a")]),
        ["a"]
    );
    assert!(conflicts(&[cap("b", "example.com/a"), cap("a", "example.com/b")]).is_empty());
    // A pod asking for both resources schedules when both apply.
    let both = plan_with(
        &[cap("b", "example.com/a"), cap("a", "example.com/b")],
        pods(
            "w",
            1,
            |p| p.extended("example.com/a", 1).extended("example.com/b", 1),
            500,
            GI,
        ),
        &pools,
    );
    assert!(both.unschedulable.is_empty(), "{:?}", both.unschedulable);
}

#[test]
fn an_overlay_s_capacity_replaces_what_the_type_has_as_gpu_time_slicing_needs() {
    // One GPU time-sliced four ways is four GPUs, not five (Karpenter assigns).
    let mut g5 = itype("g5.xlarge", 4, 16);
    g5.gpu = Some(crate::catalog::Gpu {
        count: 1,
        name: "A10G".into(),
        manufacturer: "NVIDIA".into(),
        memory_mib: 24 * 1024,
    });
    let catalog = catalog(&[(g5, 1.0)], ZONES);
    let sliced = overlay("slices", "{capacity: {nvidia.com/gpu: '4'}}");
    let fit = |gpus: i64| {
        solve(
            &Snapshot {
                pods: pods("g", 1, |p| p.gpu(gpus), 500, GI),
                overlays: Overlays::new(std::slice::from_ref(&sliced)),
                ..Default::default()
            },
            &catalog,
            &[pool("default").build()],
            &[class("default")],
        )
        .unschedulable
        .is_empty()
    };
    assert!(fit(4));
    assert!(!fit(5));
}

#[test]
fn a_replacement_is_judged_in_overlay_prices_not_list_prices() {
    let plan = plan_with(
        &[],
        pods("p", 1, |p| p, 1000, GI),
        &[pool("default").build()],
    );
    let claim = &plan.node_claims[0];
    let catalog = standard_catalog(ZONES);
    // At list prices c5.large ($0.085) is over a $0.05 ceiling; half off, it is under.
    assert_eq!(
        claim.cheaper_than(&catalog, &Overlays::default(), 0.05, &[]),
        None
    );
    let half = Overlays::new(&[overlay("half", "{priceAdjustment: '-50%'}")]);
    let cheaper = claim.cheaper_than(&catalog, &half, 0.05, &[]).unwrap();
    assert_eq!(cheaper.instance_type, "c5.large");
    assert!(
        (cheaper.price_per_hour - 0.0425).abs() < 1e-9,
        "{cheaper:?}"
    );
}
