//! Reserved capacity in plans: a NodePool that allows `reserved` fills its class's
//! reservations before buying, and no other pool sees them.

use std::time::{Duration, SystemTime};

use super::testkit::*;
use super::*;
use crate::api::Operator::*;
use crate::api::labels::*;
use crate::catalog::{CapacityType, Reservation, ReservationKind};
use crate::scheduling::PodDemand;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b"];

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn reservation(ty: &str, zone: &str, available: u32) -> Reservation {
    Reservation::odcr(&format!("cr-{}", ty.replace('.', "")), ty, zone, available)
}

fn plan(pods: Vec<PodDemand>, pools: &[crate::api::NodePool], reserve: bool) -> ProvisioningPlan {
    let mut catalog = standard_catalog(ZONES);
    if reserve {
        catalog.add_reservations(
            "default",
            vec![reservation("m5.2xlarge", "us-east-1b", 1)],
            now(),
        );
    }
    solve(
        &Snapshot {
            pods,
            ..Default::default()
        },
        &catalog,
        pools,
        &[class("default"), class("other")],
    )
}

fn claims(plan: &ProvisioningPlan) -> Vec<(String, String, CapacityType)> {
    plan.node_claims
        .iter()
        .map(|c| (c.instance_type.clone(), c.zone.clone(), c.capacity_type))
        .collect()
}

#[test]
fn a_pool_that_allows_reserved_fills_its_reservation_before_buying() {
    let pods = || {
        (0..3)
            .map(|i| pod(&format!("p{i}"), 2000, 4 << 30).build())
            .collect()
    };
    let allowing = pool("default")
        .req(CAPACITY_TYPE, In, &["reserved", "on-demand"])
        .build();
    let got = plan(pods(), std::slice::from_ref(&allowing), true);
    assert_eq!(
        claims(&got),
        [(
            "m5.2xlarge".to_string(),
            "us-east-1b".to_string(),
            CapacityType::Reserved
        )]
    );
    assert_eq!(
        got.node_claims[0]
            .labels
            .get(CAPACITY_TYPE)
            .map(String::as_str),
        Some("reserved")
    );
    // Without the reservation the same pods are bought on demand.
    let bought = plan(pods(), std::slice::from_ref(&allowing), false);
    assert!(
        bought
            .node_claims
            .iter()
            .all(|c| c.capacity_type == CapacityType::OnDemand),
        "{:?}",
        claims(&bought)
    );
}

#[test]
fn a_pool_that_does_not_allow_reserved_or_uses_another_class_never_plans_into_it() {
    let pods = || vec![pod("p", 2000, 4 << 30).build()];
    // No capacity-type requirement: on-demand only, as Karpenter.
    let silent = pool("default").build();
    let other_class = {
        let mut p = pool("default")
            .req(CAPACITY_TYPE, In, &["reserved", "on-demand"])
            .build();
        p.spec.template.spec.node_class_ref.name = "other".into();
        p
    };
    for p in [silent, other_class] {
        let got = plan(pods(), std::slice::from_ref(&p), true);
        assert!(
            got.node_claims
                .iter()
                .all(|c| c.capacity_type == CapacityType::OnDemand),
            "{:?}",
            claims(&got)
        );
    }
}

#[test]
fn a_reserved_only_pool_leaves_pods_pending_that_no_reservation_fits() {
    let only = pool("default")
        .req(CAPACITY_TYPE, In, &["reserved"])
        .build();
    let got = plan(
        vec![pod("big", 16_000, 8 << 30).build()],
        std::slice::from_ref(&only),
        true,
    );
    assert!(got.node_claims.is_empty(), "{:?}", claims(&got));
    assert_eq!(got.unschedulable.len(), 1);
    let fits = plan(vec![pod("small", 1000, 1 << 30).build()], &[only], true);
    assert_eq!(
        claims(&fits),
        [(
            "m5.2xlarge".to_string(),
            "us-east-1b".to_string(),
            CapacityType::Reserved
        )]
    );
}

fn two_reservations() -> crate::catalog::Catalog {
    let mut catalog = standard_catalog(ZONES);
    let block = Reservation {
        id: "cr-0blk".into(),
        kind: ReservationKind::CapacityBlock,
        end: Some(now() + Duration::from_secs(24 * 3600)),
        ..reservation("m5.2xlarge", "us-east-1a", 1)
    };
    catalog.add_reservations(
        "default",
        vec![reservation("m5.2xlarge", "us-east-1b", 1), block],
        now(),
    );
    catalog
}

fn plan_on(
    catalog: &crate::catalog::Catalog,
    pod: PodDemand,
    pool: crate::api::NodePool,
) -> ProvisioningPlan {
    solve(
        &Snapshot {
            pods: vec![pod],
            ..Default::default()
        },
        catalog,
        &[pool],
        &[class("default")],
    )
}

/// (what, the pool, the pod, the zone and capacity type its claim gets; a zone "" is any).
type Case = (
    &'static str,
    crate::api::NodePool,
    PodDemand,
    Option<(&'static str, CapacityType)>,
);

#[test]
fn requirements_on_the_reservation_labels_choose_among_reservations_as_karpenters_do() {
    let catalog = two_reservations();
    let pool = || pool("default").req(CAPACITY_TYPE, In, &["reserved", "on-demand"]);
    let pod = || pod("p", 2000, 4 << 30);
    let cases: Vec<Case> = vec![
        (
            "a pool pinned to one reservation",
            pool()
                .req(CAPACITY_RESERVATION_ID, In, &["cr-m52xlarge"])
                .build(),
            pod().build(),
            Some(("us-east-1b", CapacityType::Reserved)),
        ),
        (
            "a pod asking for capacity blocks",
            pool().build(),
            pod()
                .select(CAPACITY_RESERVATION_TYPE, "capacity-block")
                .build(),
            Some(("us-east-1a", CapacityType::Reserved)),
        ),
        (
            "a pod that must not run in a reservation",
            pool().build(),
            pod()
                .require(CAPACITY_RESERVATION_ID, DoesNotExist, &[])
                .build(),
            Some(("", CapacityType::OnDemand)),
        ),
        (
            "a pool pinned to a reservation the class does not select",
            pool()
                .req(CAPACITY_RESERVATION_ID, In, &["cr-0other"])
                .build(),
            pod().build(),
            None,
        ),
    ];
    for (what, pool, pod, want) in cases {
        let got = plan_on(&catalog, pod, pool);
        let placed = got
            .node_claims
            .first()
            .map(|c| (c.zone.as_str(), c.capacity_type));
        match want {
            Some(("", ct)) => assert_eq!(placed.map(|p| p.1), Some(ct), "{what}"),
            want => assert_eq!(placed, want, "{what}: {:?}", got.unschedulable),
        }
    }
}
