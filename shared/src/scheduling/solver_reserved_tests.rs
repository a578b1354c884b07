//! Reserved capacity in plans: a NodePool that allows `reserved` fills its class's
//! reservations before buying, and no other pool sees them.

use std::time::{Duration, SystemTime};

use super::testkit::*;
use super::*;
use crate::api::Operator::*;
use crate::api::labels::*;
use crate::catalog::{CapacityType, Reservation, ReservationKind};

const ZONES: &[&str] = &["us-east-1a", "us-east-1b"];

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn reservation(ty: &str, zone: &str, available: u32) -> Reservation {
    Reservation {
        id: format!("cr-{}", ty.replace('.', "")),
        instance_type: ty.into(),
        zone: zone.into(),
        owner_id: "111122223333".into(),
        available,
        kind: ReservationKind::Default,
        end: None,
    }
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
