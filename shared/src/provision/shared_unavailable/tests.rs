use std::time::Duration;

use super::*;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

fn offering(t: &str, zone: &str, c: CapacityType) -> Exclusion {
    Exclusion::Offering {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type: c,
    }
}

fn shared(exclusion: Exclusion, until: u64) -> SharedExclusion {
    SharedExclusion {
        exclusion,
        until: at(until),
    }
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn stamp(secs: u64) -> String {
    value_of(at(secs)).expect("in range")
}

#[test]
fn each_shared_kind_of_exclusion_round_trips_through_its_key() {
    let cases = [
        offering("m5.large", "us-east-1b", CapacityType::Spot),
        offering("c7i.metal-24xl", "us-west-2-lax-1a", CapacityType::OnDemand),
        Exclusion::Zone("us-east-1c".into()),
        Exclusion::CapacityType(CapacityType::Spot),
    ];
    for x in cases {
        let key = key_of(&x).expect("shared");
        let back = exclusion_of(key.strip_prefix(KEY_PREFIX).unwrap());
        assert_eq!(back, Ok(x.clone()), "{key}");
    }
}

#[test]
fn a_quota_exclusion_and_a_name_a_key_cannot_hold_are_not_shared() {
    let cases = [
        Exclusion::Quota {
            group: "standard",
            capacity_type: CapacityType::Spot,
        },
        offering("m5.large", "zone with spaces", CapacityType::Spot),
        offering("m5.large", "us-east.1b", CapacityType::Spot),
        Exclusion::Zone("a/b".into()),
    ];
    for x in cases {
        assert_eq!(key_of(&x), None, "{x:?}");
    }
}

#[test]
fn reading_keeps_live_entries_skips_expired_ones_and_names_every_unreadable_key() {
    let (t100, t10) = (stamp(100), stamp(10));
    let map = data(&[
        (
            "unavailable.offering.spot.us-east-1b.m5.large",
            t100.as_str(),
        ),
        ("unavailable.zone.us-east-1a", t10.as_str()),
        ("unavailable.capacity-type.on-demand", "yesterday"),
        (
            "unavailable.offering.dedicated.us-east-1b.m5.large",
            t100.as_str(),
        ),
        ("unavailable.offering.spot.us-east-1b.", t100.as_str()),
        ("unavailable.nonsense", t100.as_str()),
        ("something-else", "kept out of this"),
    ]);
    let (found, problems) = read(&map, at(50));
    assert_eq!(
        found,
        vec![shared(
            offering("m5.large", "us-east-1b", CapacityType::Spot),
            100
        )]
    );
    assert_eq!(problems.len(), 4, "{problems:#?}");
    for key in [
        "capacity-type.on-demand",
        "offering.dedicated",
        "offering.spot.us-east-1b.\"",
        "unavailable.nonsense",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(key)),
            "{key} is named: {problems:#?}"
        );
    }
}

#[test]
fn merging_keeps_the_later_expiry_prunes_expired_and_unreadable_keys_and_leaves_others_alone() {
    let spot_b = offering("m5.large", "us-east-1b", CapacityType::Spot);
    let key_b = key_of(&spot_b).unwrap();
    struct Case {
        name: &'static str,
        current: Vec<(String, String)>,
        add: Vec<SharedExclusion>,
        want: Vec<(String, String)>,
    }
    let other = ("other-fact".to_string(), "x".to_string());
    let cases = [
        Case {
            name: "a new exclusion is added to an empty map",
            current: vec![],
            add: vec![shared(spot_b.clone(), 200)],
            want: vec![(key_b.clone(), stamp(200))],
        },
        Case {
            name: "a later expiry replaces an earlier one",
            current: vec![(key_b.clone(), stamp(100))],
            add: vec![shared(spot_b.clone(), 200)],
            want: vec![(key_b.clone(), stamp(200))],
        },
        Case {
            name: "an earlier expiry does not shorten a later one",
            current: vec![(key_b.clone(), stamp(300))],
            add: vec![shared(spot_b.clone(), 200)],
            want: vec![(key_b.clone(), stamp(300))],
        },
        Case {
            name: "expired and unreadable entries are pruned, other keys kept",
            current: vec![
                ("unavailable.zone.us-east-1a".into(), stamp(10)),
                ("unavailable.zone.us-east-1c".into(), "garbage".into()),
                other.clone(),
            ],
            add: vec![shared(Exclusion::Zone("us-east-1d".into()), 120)],
            want: vec![
                other.clone(),
                ("unavailable.zone.us-east-1d".into(), stamp(120)),
            ],
        },
        Case {
            name: "an addition already expired is not written",
            current: vec![],
            add: vec![shared(spot_b.clone(), 40)],
            want: vec![],
        },
        Case {
            name: "a quota exclusion is not written",
            current: vec![],
            add: vec![shared(
                Exclusion::Quota {
                    group: "standard",
                    capacity_type: CapacityType::Spot,
                },
                200,
            )],
            want: vec![],
        },
    ];
    for case in cases {
        let current: BTreeMap<String, String> = case.current.into_iter().collect();
        let got = merge(&current, &case.add, at(50));
        let want: BTreeMap<String, String> = case.want.into_iter().collect();
        assert_eq!(got, want, "{}", case.name);
    }
}

#[test]
fn what_is_merged_reads_back_as_what_was_added() {
    let add = vec![
        shared(offering("m5.large", "us-east-1b", CapacityType::Spot), 200),
        shared(Exclusion::CapacityType(CapacityType::Spot), 90),
    ];
    let (found, problems) = read(&merge(&BTreeMap::new(), &add, at(50)), at(50));
    assert!(problems.is_empty(), "{problems:?}");
    let mut want = add.clone();
    want.sort_by_key(|x| key_of(&x.exclusion));
    let mut found = found;
    found.sort_by_key(|x| key_of(&x.exclusion));
    assert_eq!(found, want);
}
