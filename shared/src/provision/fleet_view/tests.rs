use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::*;
use crate::api::labels::REPLACEMENT_ANNOTATION;
use crate::aws::{InstanceState, LaunchedInstance};
use crate::catalog::CapacityType;

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
}

fn listed(id: &str) -> OwnedInstance {
    OwnedInstance {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        state: InstanceState::Running,
        capacity_type: CapacityType::Spot,
        launch_time: None,
        tags: BTreeMap::new(),
        private_dns_name: None,
        subnet_id: None,
        image_id: None,
        security_groups: Vec::new(),
    }
}

fn launch(id: &str) -> LaunchedInstance {
    LaunchedInstance {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::Spot,
    }
}

fn node(name: &str, replacement: Option<&str>, instance: &str) -> Node {
    let annotations = replacement.map(|r| serde_json::json!({REPLACEMENT_ANNOTATION: r}));
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"providerID": format!("aws:///us-east-1a/{instance}")},
    }))
    .unwrap()
}

fn ids(instances: &[OwnedInstance]) -> Vec<&str> {
    let mut v: Vec<&str> = instances.iter().map(|i| i.id.as_str()).collect();
    v.sort();
    v
}

fn turn(since: Option<u64>) -> Turn<'static> {
    Turn {
        since: since.map(at),
        ..Turn::OUTSIDE
    }
}

#[test]
fn a_read_plans_with_the_kept_listing_only_in_the_turn_it_holds_every_earlier_launch_for() {
    let mut view = FleetView::default();
    view.keep_listing(vec![listed("i-0a")], at(10), true);
    // (case, turn since, read at, plans with the kept listing)
    let cases = [
        ("asked after the turn's bound, young", Some(5), 15, true),
        ("asked before the turn's bound", Some(11), 15, false),
        ("too old", Some(5), 31, false),
        ("outside a turn every read lists", None, 15, false),
    ];
    for (case, since, now, kept) in cases {
        let source = view.source(&turn(since), at(now));
        assert_eq!(matches!(source, Source::Kept(_)), kept, "{case}");
    }
    let mut outside = FleetView::default();
    outside.keep_listing(vec![listed("i-0a")], at(10), false);
    assert!(
        matches!(outside.source(&turn(Some(5)), at(15)), Source::List),
        "a read outside a turn keeps nothing"
    );
}

#[test]
fn a_kept_listing_is_completed_by_the_launches_others_recorded_on_nodes_published_or_the_lease_named()
 {
    let mut view = FleetView::default();
    view.adopt_published([
        (InstanceId::new("i-0floor"), at(12)),
        (InstanceId::new("i-0listed"), at(1)),
    ]);
    let nodes = [
        node("going", Some("i-0replacement, none"), "i-0going"),
        node("plain", None, "i-0plain"),
    ];
    let listing = [listed("i-0listed"), listed("i-0going")];
    let named = [InstanceId::new("i-0earlier"), InstanceId::new("i-0listed")];
    let missing: Vec<String> = view
        .recorded_missing(&listing, &nodes, &named)
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(missing, ["i-0earlier", "i-0floor", "i-0replacement"]);
}

#[test]
fn own_launches_a_listing_lacks_count_until_it_shows_them_their_node_registers_or_ec2_says_gone() {
    let mut view = FleetView::default();
    view.launched(&launch("i-0before"), BTreeMap::new(), at(5));
    view.launched(&launch("i-0after"), BTreeMap::new(), at(20));
    view.launched(&launch("i-0123456789abcdef0"), BTreeMap::new(), at(5));
    view.launched(&launch("i-0gone"), BTreeMap::new(), at(5));
    let listing = vec![listed("i-0other")];
    let nodes = [node("joined", None, "i-0123456789abcdef0")];
    // Asked at 10: the launch at 20 is missing as a rule; older ones are asked about.
    let unlisted = view.own_unlisted(&listing, at(10), &nodes);
    assert_eq!(unlisted, ["i-0before", "i-0gone"]);
    view.forget_terminated(&HashMap::from([(
        "i-0gone".to_string(),
        InstanceState::Terminated,
    )]));
    let on_its_way = view.on_its_way(listing, at(21));
    assert_eq!(ids(&on_its_way), ["i-0after", "i-0before", "i-0other"]);
}

#[test]
fn the_fleets_estimate_is_the_young_kept_listing_and_the_launches_since() {
    let mut view = FleetView::default();
    assert!(view.estimate(at(0)).is_none(), "nothing kept: EC2 is asked");
    view.keep_listing(vec![listed("i-0a")], at(10), true);
    view.launched(&launch("i-0before"), BTreeMap::new(), at(9));
    view.launched(&launch("i-0since"), BTreeMap::new(), at(11));
    let estimate = view.estimate(at(20)).unwrap();
    assert_eq!(ids(&estimate), ["i-0a", "i-0since"]);
    assert!(
        view.estimate(at(31)).is_none(),
        "past MAX_AGE: EC2 is asked"
    );
}
