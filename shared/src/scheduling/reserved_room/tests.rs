use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::*;
use crate::api::Operator::In;
use crate::api::labels::CAPACITY_TYPE;
use crate::catalog::{Reservation, ReservationKind};
use crate::scheduling::testkit::*;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b"];

fn room(reservations: &[(&str, &str, &str, u32)]) -> Catalog {
    let mut catalog = standard_catalog(ZONES);
    catalog.add_reservations(
        "default",
        reservations
            .iter()
            .map(|(id, ty, zone, available)| Reservation {
                id: id.to_string(),
                instance_type: ty.to_string(),
                zone: zone.to_string(),
                owner_id: "111122223333".into(),
                available: *available,
                kind: ReservationKind::Default,
                end: None,
            })
            .collect(),
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    );
    catalog
}

fn trainers(n: usize) -> Snapshot {
    Snapshot {
        pods: (0..n)
            .map(|i| pod(&format!("t{i}"), 6000, 8 << 30).build())
            .collect(),
        ..Default::default()
    }
}

fn pools() -> Vec<NodePool> {
    vec![
        pool("default")
            .req(CAPACITY_TYPE, In, &["reserved", "on-demand"])
            .build(),
    ]
}

/// Reserved claims per (type, zone), and every pod placed once.
fn reserved_per_offering(
    plan: &ProvisioningPlan,
    pods: usize,
) -> BTreeMap<(String, String), usize> {
    let mut placed: Vec<&String> = plan.node_claims.iter().flat_map(|c| &c.pods).collect();
    placed.extend(plan.nominations.iter().flat_map(|n| &n.pods));
    placed.sort();
    let before = placed.len();
    placed.dedup();
    assert_eq!(placed.len(), before, "a pod placed twice: {placed:?}");
    assert_eq!(placed.len() + plan.unschedulable.len(), pods);
    let mut out = BTreeMap::new();
    for c in plan
        .node_claims
        .iter()
        .filter(|c| c.capacity_type == CapacityType::Reserved)
    {
        *out.entry((c.instance_type.clone(), c.zone.clone()))
            .or_insert(0) += 1;
    }
    out
}

#[test]
fn no_reservation_is_planned_past_its_room_and_the_rest_is_bought() {
    let catalog = room(&[("cr-0c5", "c5.2xlarge", "us-east-1b", 1)]);
    let snapshot = trainers(4);
    // One solve alone plans all four into the reservation.
    let unbounded = solve(&snapshot, &catalog, &pools(), &[class("default")]);
    assert_eq!(
        reserved_per_offering(&unbounded, 4).values().sum::<usize>(),
        4
    );

    let plan = solve_within_room(&snapshot, &catalog, &pools(), &[class("default")]);
    assert_eq!(
        reserved_per_offering(&plan, 4),
        BTreeMap::from([(("c5.2xlarge".to_string(), "us-east-1b".to_string()), 1)])
    );
    assert!(plan.unschedulable.is_empty());
    assert!(
        plan.node_claims
            .iter()
            .filter(|c| c.capacity_type != CapacityType::Reserved)
            .all(|c| c.capacity_type == CapacityType::OnDemand)
    );
}

#[test]
fn several_reservations_are_each_filled_to_their_room() {
    let catalog = room(&[
        ("cr-0c5", "c5.2xlarge", "us-east-1b", 1),
        ("cr-0m5", "m5.2xlarge", "us-east-1a", 2),
    ]);
    let plan = solve_within_room(&trainers(6), &catalog, &pools(), &[class("default")]);
    let reserved = reserved_per_offering(&plan, 6);
    assert_eq!(
        reserved,
        BTreeMap::from([
            (("c5.2xlarge".to_string(), "us-east-1b".to_string()), 1),
            (("m5.2xlarge".to_string(), "us-east-1a".to_string()), 2),
        ])
    );
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn without_reservations_it_is_one_solve() {
    let catalog = standard_catalog(ZONES);
    let snapshot = trainers(3);
    let plain = solve(&snapshot, &catalog, &pools(), &[class("default")]);
    let within = solve_within_room(&snapshot, &catalog, &pools(), &[class("default")]);
    let claims = |p: &ProvisioningPlan| {
        p.node_claims
            .iter()
            .map(|c| (c.instance_type.clone(), c.pods.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(claims(&within), claims(&plain));
}

#[test]
fn a_later_pass_does_not_fill_an_existing_node_again() {
    // An existing node with room for one trainer: the first pass nominates one there and
    // plans the rest into the reservation, which has room for one; the pass after must
    // not nominate a second trainer onto the node the first one took.
    let catalog = room(&[("cr-0c5", "c5.2xlarge", "us-east-1b", 1)]);
    let mut snapshot = trainers(3);
    let free = Resources {
        cpu: 7_000,
        memory: 16 << 30,
        pods: 110_000,
        ..Default::default()
    };
    snapshot.nodes.push(ExistingNode {
        name: "node-a".into(),
        nodepool: Some("default".into()),
        instance_type: "m5.2xlarge".into(),
        zone: "us-east-1a".into(),
        capacity_type: Some(CapacityType::OnDemand),
        labels: BTreeMap::from([
            (labels::ZONE.to_string(), "us-east-1a".to_string()),
            (labels::NODEPOOL.to_string(), "default".to_string()),
            (CAPACITY_TYPE.to_string(), "on-demand".to_string()),
        ]),
        taints: vec![],
        capacity: free.clone(),
        allocatable: free,
        requested: Resources::default(),
        pods: vec![],
        anti_affinity: vec![],
        schedulable: true,
    });
    let plan = solve_within_room(&snapshot, &catalog, &pools(), &[class("default")]);
    let on_node_a: usize = plan
        .nominations
        .iter()
        .filter(|n| n.node == "node-a")
        .map(|n| n.pods.len())
        .sum();
    assert_eq!(on_node_a, 1, "{:?}", plan.nominations);
    reserved_per_offering(&plan, 3);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn a_claim_pinned_to_a_reservation_counts_that_reservation_down() {
    // Two reservations of one type in one zone; the pool may use only the smaller one.
    let catalog = room(&[
        ("cr-0a", "c5.2xlarge", "us-east-1b", 1),
        ("cr-0b", "c5.2xlarge", "us-east-1b", 3),
    ]);
    let pinned = vec![
        pool("default")
            .req(CAPACITY_TYPE, In, &["reserved", "on-demand"])
            .req(labels::CAPACITY_RESERVATION_ID, In, &["cr-0a"])
            .build(),
    ];
    let plan = solve_within_room(&trainers(2), &catalog, &pinned, &[class("default")]);
    let reserved: usize = reserved_per_offering(&plan, 2).values().sum();
    assert_eq!(reserved, 1, "{:?}", plan.node_claims);
}
