use std::time::{Duration, SystemTime};

use super::*;
use crate::catalog::InstanceType;

fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn catalog() -> Catalog {
    let zones = ["us-east-1a".to_string(), "us-east-1b".to_string()];
    Catalog {
        entries: ["m5.large", "p5.48xlarge"]
            .iter()
            .zip([0.096, 98.32])
            .map(|(name, price)| crate::catalog::CatalogEntry {
                instance_type: InstanceType {
                    name: name.to_string(),
                    ..Default::default()
                },
                offerings: crate::catalog::offerings_for(&zones, price, Some(price / 3.0)),
            })
            .collect(),
        ..Default::default()
    }
}

fn reserved(c: &Catalog, ty: &str) -> Vec<(String, f64, bool)> {
    c.get(ty)
        .map(|e| {
            e.offerings
                .iter()
                .filter(|o| o.capacity_type == CapacityType::Reserved)
                .map(|o| (o.zone.clone(), o.price, o.available))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_reservation_offers_its_type_in_its_zone_at_a_ten_millionth_of_on_demand() {
    let mut c = catalog();
    c.add_reservations(
        "gpu",
        vec![
            Reservation::odcr("cr-0aa", "p5.48xlarge", "us-east-1a", 2),
            Reservation::odcr("cr-0bb", "p5.48xlarge", "us-east-1a", 1),
            // Types the catalog does not know cannot be planned for.
            Reservation::odcr("cr-0cc", "u-24tb1.metal", "us-east-1a", 1),
        ],
        t0(),
    );
    assert_eq!(
        reserved(&c, "p5.48xlarge"),
        [(
            "us-east-1a".to_string(),
            98.32 / RESERVED_PRICE_DIVISOR,
            true
        )]
    );
    assert!(reserved(&c, "m5.large").is_empty());
    // The most room first; the same offering serves both.
    let ids: Vec<&str> = c
        .reserved_for("gpu", "p5.48xlarge", "us-east-1a")
        .iter()
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(ids, ["cr-0aa", "cr-0bb"]);
    assert!(
        c.reserved_for("other", "p5.48xlarge", "us-east-1a")
            .is_empty()
    );
    assert!(
        c.reserved_for("gpu", "p5.48xlarge", "us-east-1b")
            .is_empty()
    );
}

#[test]
fn launches_use_up_a_reservation_for_every_class_that_selects_it() {
    let mut c = catalog();
    c.add_reservations(
        "a",
        vec![Reservation::odcr("cr-0aa", "m5.large", "us-east-1b", 1)],
        t0(),
    );
    c.add_reservations(
        "b",
        vec![Reservation::odcr("cr-0aa", "m5.large", "us-east-1b", 1)],
        t0(),
    );
    c.launched_into("cr-0aa");
    assert!(c.reserved_for("a", "m5.large", "us-east-1b").is_empty());
    assert!(c.reserved_for("b", "m5.large", "us-east-1b").is_empty());
    c.launched_into("cr-0aa");
    assert_eq!(c.reservations["a"][0].available, 0);
}

#[test]
fn a_full_or_ending_reservation_offers_nothing() {
    let ending = |minutes: u64, kind| Reservation {
        kind,
        end: Some(t0() + Duration::from_secs(minutes * 60)),
        ..Reservation::odcr("cr-0dd", "m5.large", "us-east-1a", 4)
    };
    let cases = [
        (
            Reservation::odcr("cr-0ee", "m5.large", "us-east-1a", 0),
            false,
        ),
        (ending(41, ReservationKind::CapacityBlock), true),
        (ending(40, ReservationKind::CapacityBlock), false),
        (ending(10, ReservationKind::Default), false),
    ];
    for (r, offered) in cases {
        let mut c = catalog();
        c.add_reservations("a", vec![r.clone()], t0());
        assert_eq!(!reserved(&c, "m5.large").is_empty(), offered, "{r:?}");
        assert_eq!(
            c.reserved_for("a", "m5.large", "us-east-1a").len(),
            usize::from(offered),
            "{r:?}"
        );
    }
}

#[test]
fn kinds_read_as_karpenters_label_values() {
    for kind in [ReservationKind::Default, ReservationKind::CapacityBlock] {
        assert_eq!(ReservationKind::parse(kind.as_str()), Some(kind));
    }
    assert_eq!(ReservationKind::CapacityBlock.as_str(), "capacity-block");
    assert_eq!(ReservationKind::parse("capacity_block"), None);
}
