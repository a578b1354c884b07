//! Golden file: `shared/src/provision/testdata/*.golden`; `UPDATE_GOLDEN=1 cargo test -p
//! nodewright --lib provision::launch` rewrites it (then read the diff).

use std::path::PathBuf;

use super::*;
use crate::api::TaintEffect;
use crate::catalog::{CapacityType, Catalog};
use crate::provision::UnavailableOfferings;
use crate::resources::Resources;
use crate::scheduling::Requirements;

fn check_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/provision/testdata")
        .join(format!("{name}.golden"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        if let Err(e) = std::fs::write(&path, actual) {
            panic!("{}: {e}", path.display());
        }
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "{name}: differs from {}", path.display());
}

fn zones() -> Vec<String> {
    ["us-east-1a", "us-east-1b", "us-east-1c"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn catalog() -> Catalog {
    match Catalog::offline(&zones(), crate::catalog::DEFAULT_SPOT_DISCOUNT) {
        Ok(c) => c,
        Err(e) => panic!("offline catalog: {e}"),
    }
}

fn subnet(id: &str, zone: &str) -> Subnet {
    Subnet {
        id: id.into(),
        zone: zone.into(),
        zone_id: String::new(),
        available_ips: 100,
        tags: BTreeMap::new(),
    }
}

/// Like the seed's `provisioner1` (spot, c/m families, team label, a dedicated taint) as the
/// solver plans it for five pods: candidates cheapest first, one of them arm64.
fn seed_claim() -> PlannedClaim {
    PlannedClaim {
        nodepool: "provisioner1".into(),
        node_class: "default".into(),
        instance_types: vec![
            "c6i.2xlarge".into(),
            "m6g.2xlarge".into(),
            "c5.2xlarge".into(),
            "m5.2xlarge".into(),
        ],
        instance_type: "c6i.2xlarge".into(),
        capacity_type: CapacityType::Spot,
        zone: "us-east-1a".into(),
        price_per_hour: 0.136,
        zones: vec!["us-east-1a".into(), "us-east-1b".into()],
        capacity_types: vec![CapacityType::Spot, CapacityType::OnDemand],
        pods: (1..=5).map(|i| format!("default/web-{i}")).collect(),
        requests: Resources::default(),
        daemon_overhead: Resources::default(),
        allocatable: Resources::default(),
        labels: [
            ("karpenter.sh/capacity-type", "spot"),
            ("karpenter.sh/nodepool", "provisioner1"),
            ("team", "web"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        taints: vec![Taint {
            key: "dedicated".into(),
            value: Some("web".into()),
            effect: TaintEffect::NoSchedule,
        }],
        startup_taints: vec![Taint {
            key: "node.cilium.io/agent-not-ready".into(),
            value: Some("true".into()),
            effect: TaintEffect::NoExecute,
        }],
        requirements: Requirements::default(),
        min_values_relaxed: false,
    }
}

fn subnets() -> BTreeMap<String, Subnet> {
    // us-east-1b has no subnet discovered; us-east-1c is not among the claim's zones.
    [("us-east-1a", "subnet-aaa"), ("us-east-1c", "subnet-ccc")]
        .iter()
        .map(|(z, id)| (z.to_string(), subnet(id, z)))
        .collect()
}

fn template() -> LaunchTemplateRef {
    LaunchTemplateRef {
        id: "lt-0123".into(),
        name: "nodewright/demo/0011223344556677".into(),
    }
}

fn class_tags() -> BTreeMap<String, String> {
    [("team", "web"), ("Name", "user-chosen-name")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_seed_like_claim_becomes_this_fleet_request() {
    let req = fleet_request(
        &seed_claim(),
        &catalog(),
        None,
        "nw-3f2a00000000",
        "nw-3f2a00000000-0",
        &template(),
        &subnets(),
        "demo",
        &class_tags(),
    );
    check_golden("fleet_request_seed", &format!("{req:#?}\n"));
}

#[test]
fn only_types_of_the_cheapest_types_architecture_are_launched() {
    let claim = seed_claim();
    let (arch, types) = launch_types(&claim, &catalog());
    assert_eq!(arch, "amd64");
    assert_eq!(types, ["c6i.2xlarge", "c5.2xlarge", "m5.2xlarge"]);
}

#[test]
fn overrides_are_types_times_claim_zones_with_a_subnet_and_an_offering() {
    let mut cat = catalog();
    let mut unavailable = UnavailableOfferings::default();
    let now = std::time::SystemTime::UNIX_EPOCH;
    unavailable.mark("c5.2xlarge", "us-east-1a", CapacityType::Spot, now);
    unavailable.apply(&mut cat, now);
    let req = fleet_request(
        &seed_claim(),
        &cat,
        None,
        "nw-3f2a00000000",
        "nw-3f2a00000000-0",
        &template(),
        &subnets(),
        "demo",
        &BTreeMap::new(),
    );
    let got: Vec<(&str, &str, &str)> = req
        .overrides
        .iter()
        .map(|o| {
            (
                o.instance_type.as_str(),
                o.zone.as_str(),
                o.subnet_id.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("c6i.2xlarge", "us-east-1a", "subnet-aaa"),
            ("m5.2xlarge", "us-east-1a", "subnet-aaa"),
        ]
    );
    assert_eq!(req.capacity_type, CapacityType::Spot);
}

#[test]
fn the_client_token_is_the_attempts_whatever_the_offer_drifts_to() {
    let make = |cat: &Catalog, subnets: &BTreeMap<String, Subnet>| {
        fleet_request(
            &seed_claim(),
            cat,
            None,
            "nw-3f2a00000000",
            "nw-3f2a00000000-0",
            &template(),
            subnets,
            "demo",
            &BTreeMap::new(),
        )
    };
    let first = make(&catalog(), &subnets());
    // The exclusion cache lost in a crash, or a type just excluded, changes the overrides;
    // another subnet with more free addresses changes them too: the token stays.
    let mut cat = catalog();
    let mut unavailable = UnavailableOfferings::default();
    let now = std::time::SystemTime::UNIX_EPOCH;
    unavailable.mark("c6i.2xlarge", "us-east-1a", CapacityType::Spot, now);
    unavailable.apply(&mut cat, now);
    let mut moved = subnets();
    for s in moved.values_mut() {
        s.id.push_str("-other");
    }
    for drifted in [make(&cat, &subnets()), make(&catalog(), &moved)] {
        assert_ne!(first.overrides, drifted.overrides);
        assert_eq!(first.client_token, drifted.client_token);
    }
    assert_eq!(first.client_token, "nw-3f2a00000000-0");
}

#[test]
fn class_tags_cannot_replace_nodewrights_own() {
    let tags = instance_tags("demo", "provisioner1", "nw-1", &class_tags());
    assert_eq!(
        tags.get("Name").map(String::as_str),
        Some("demo/provisioner1/nw-1")
    );
    assert_eq!(tags.get("team").map(String::as_str), Some("web"));
    assert_eq!(
        tags.get("kubernetes.io/cluster/demo").map(String::as_str),
        Some("owned")
    );
}

#[test]
fn the_node_registers_with_the_claim_labels_and_all_taints_but_not_the_claim_id() {
    let claim = seed_claim();
    let labels = node_labels(&claim);
    // The id would make each launch's template unique; it is labelled after joining.
    assert_eq!(labels.get("nodewright.io/nodeclaim"), None);
    assert_eq!(labels, claim.labels);
    let keys: Vec<String> = node_taints(&claim).into_iter().map(|t| t.key).collect();
    assert_eq!(keys, ["dedicated", "node.cilium.io/agent-not-ready"]);
}

#[test]
fn the_tags_a_launch_adds_are_the_ones_validation_leaves_room_for() {
    use crate::api::validation::nodeclass::{EC2_MAX_TAGS, MAX_NODECLASS_TAGS, OWN_INSTANCE_TAGS};
    let class: crate::api::EC2NodeClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "default"},
        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}
    }))
    .unwrap();
    let own = instance_tags("demo", "default", "nw-1", &BTreeMap::new()).len()
        + crate::disruption::drift_tags(Some("hash"), &class, "ami-1", &["sg-1".into()]).len();
    assert_eq!(own, OWN_INSTANCE_TAGS);
    // A class at the limit launches with exactly EC2's maximum.
    let user: BTreeMap<String, String> = (0..MAX_NODECLASS_TAGS)
        .map(|i| (format!("team/t{i}"), "v".to_string()))
        .collect();
    assert_eq!(
        instance_tags("demo", "default", "nw-1", &user).len()
            + crate::disruption::drift_tags(Some("hash"), &class, "ami-1", &["sg-1".into()]).len(),
        EC2_MAX_TAGS
    );
}

#[test]
fn only_a_claim_launched_with_relaxed_min_values_is_tagged_so() {
    for relaxed in [false, true] {
        let claim = PlannedClaim {
            min_values_relaxed: relaxed,
            ..seed_claim()
        };
        let req = fleet_request(
            &claim,
            &catalog(),
            None,
            "nw-3f2a00000000",
            "nw-3f2a00000000-0",
            &template(),
            &subnets(),
            "demo",
            &BTreeMap::new(),
        );
        assert_eq!(
            req.tags.get(MIN_VALUES_RELAXED_TAG).map(String::as_str),
            relaxed.then_some("true"),
            "{relaxed}"
        );
    }
}

fn reserved_claim() -> PlannedClaim {
    PlannedClaim {
        capacity_type: CapacityType::Reserved,
        ..seed_claim()
    }
}

#[test]
fn a_reserved_claim_launches_into_one_reservation_of_its_types_in_a_zone_with_a_subnet() {
    let now = std::time::SystemTime::UNIX_EPOCH;
    // (reservations of class "default", the one chosen)
    let cases: Vec<(Vec<Reservation>, Option<&str>)> = vec![
        (vec![], None),
        // The planned type first, though another has more room.
        (
            vec![
                Reservation::odcr("cr-0m5", "m5.2xlarge", "us-east-1a", 9),
                Reservation::odcr("cr-0c6", "c6i.2xlarge", "us-east-1a", 1),
            ],
            Some("cr-0c6"),
        ),
        // Then the one with the most room.
        (
            vec![
                Reservation::odcr("cr-0a1", "m5.2xlarge", "us-east-1a", 1),
                Reservation::odcr("cr-0a3", "m5.2xlarge", "us-east-1a", 3),
            ],
            Some("cr-0a3"),
        ),
        // us-east-1b has no subnet; us-east-1c is not the claim's; full ones give nothing.
        (
            vec![
                Reservation::odcr("cr-0b", "c6i.2xlarge", "us-east-1b", 5),
                Reservation::odcr("cr-0c", "c6i.2xlarge", "us-east-1c", 5),
                Reservation::odcr("cr-0full", "c6i.2xlarge", "us-east-1a", 0),
            ],
            None,
        ),
        // Not a type of the claim (nor of its arch).
        (
            vec![Reservation::odcr("cr-0r", "r5.large", "us-east-1a", 5)],
            None,
        ),
    ];
    for (reservations, want) in cases {
        let mut cat = catalog();
        cat.add_reservations("default", reservations.clone(), now);
        let got = reservation_for(&reserved_claim(), &cat, &subnets()).map(|r| r.id.as_str());
        assert_eq!(got, want, "{reservations:?}");
        // A claim that is not reserved never launches into one.
        assert_eq!(reservation_for(&seed_claim(), &cat, &subnets()), None);
    }
}

#[test]
fn a_reserved_request_asks_for_its_reservations_type_and_zone_only() {
    let block = Reservation {
        kind: crate::catalog::ReservationKind::CapacityBlock,
        ..Reservation::odcr("cr-0blk", "m5.2xlarge", "us-east-1a", 2)
    };
    let req = fleet_request(
        &reserved_claim(),
        &catalog(),
        Some(&block),
        "nw-3f2a00000000",
        "nw-3f2a00000000-0",
        &template(),
        &subnets(),
        "demo",
        &BTreeMap::new(),
    );
    let overrides: Vec<(&str, &str, &str)> = req
        .overrides
        .iter()
        .map(|o| {
            (
                o.instance_type.as_str(),
                o.zone.as_str(),
                o.subnet_id.as_str(),
            )
        })
        .collect();
    assert_eq!(overrides, [("m5.2xlarge", "us-east-1a", "subnet-aaa")]);
    assert_eq!(req.capacity_type, CapacityType::Reserved);
    assert_eq!(
        req.reservation_kind,
        Some(crate::catalog::ReservationKind::CapacityBlock)
    );
    let labels = reservation_labels(&block);
    assert_eq!(
        labels
            .get(labels::CAPACITY_RESERVATION_ID)
            .map(String::as_str),
        Some("cr-0blk")
    );
    assert_eq!(
        labels
            .get(labels::CAPACITY_RESERVATION_TYPE)
            .map(String::as_str),
        Some("capacity-block")
    );
}

#[test]
fn a_claim_pinned_to_a_reservation_launches_only_into_it() {
    let mut cat = catalog();
    cat.add_reservations(
        "default",
        vec![
            Reservation::odcr("cr-0a1", "c6i.2xlarge", "us-east-1a", 1),
            Reservation::odcr("cr-0a3", "c6i.2xlarge", "us-east-1a", 3),
        ],
        std::time::SystemTime::UNIX_EPOCH,
    );
    let mut claim = reserved_claim();
    claim.requirements.add(
        labels::CAPACITY_RESERVATION_ID,
        crate::scheduling::Requirement::in_values(["cr-0a1".to_string()]),
    );
    let got = reservation_for(&claim, &cat, &subnets()).map(|r| r.id.as_str());
    assert_eq!(got, Some("cr-0a1"));
    // Without the pin, the one with more room.
    let free = reservation_for(&reserved_claim(), &cat, &subnets()).map(|r| r.id.as_str());
    assert_eq!(free, Some("cr-0a3"));
}
