use std::collections::BTreeMap;

use super::*;
use crate::catalog::CapacityType;

fn instance(tags: &[(&str, &str)], state: InstanceState) -> OwnedInstance {
    OwnedInstance {
        id: "i-1".into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        state,
        capacity_type: CapacityType::Spot,
        launch_time: None,
        tags: tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        private_dns_name: None,
        subnet_id: None,
        image_id: Some("ami-1".into()),
        security_groups: vec!["sg-2".into(), "sg-1".into()],
    }
}

const KARPENTERS: &[(&str, &str)] = &[
    ("karpenter.sh/nodepool", "general"),
    ("karpenter.sh/nodeclaim", "general-x7k2p"),
    ("karpenter.k8s.aws/ec2nodeclass", "default"),
    ("kubernetes.io/cluster/prod", "owned"),
    ("eks:eks-cluster-name", "prod"),
];

fn keys(tags: &BTreeMap<String, String>) -> Vec<&str> {
    tags.keys().map(String::as_str).collect()
}

#[test]
fn a_karpenter_instance_of_this_cluster_gets_every_tag_a_launch_of_ours_carries() {
    let hashes = Hashes {
        nodepool: Some("np".into()),
        nodeclass: Some("nc".into()),
        images: Some(vec!["ami-0".into(), "ami-1".into()]),
    };
    let tags = missing_tags(
        &instance(KARPENTERS, InstanceState::Running),
        "prod",
        &hashes,
    );
    let want = BTreeMap::from(
        [
            ("nodewright.io/cluster", "prod"),
            ("nodewright.io/adopted-from", "karpenter"),
            ("nodewright.io/nodepool", "general"),
            ("nodewright.io/nodeclaim", "general-x7k2p"),
            ("nodewright.io/image-id", "ami-1"),
            ("nodewright.io/nodepool-hash", "np"),
            ("nodewright.io/ec2nodeclass-hash", "nc"),
            (
                "nodewright.io/security-groups-hash",
                &crate::disruption::security_groups_hash(&["sg-1".into(), "sg-2".into()]),
            ),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    assert_eq!(tags, want);
}

#[test]
fn only_what_is_missing_is_written_so_adoption_repeats_safely() {
    let mut tagged = KARPENTERS.to_vec();
    tagged.extend([
        ("nodewright.io/cluster", "prod"),
        ("nodewright.io/adopted-from", "karpenter"),
        ("nodewright.io/nodepool", "general"),
        ("nodewright.io/nodeclaim", "general-x7k2p"),
        ("nodewright.io/image-id", "ami-1"),
        ("nodewright.io/nodepool-hash", "then"),
    ]);
    let mut i = instance(&tagged, InstanceState::Running);
    i.security_groups.clear();
    // The interruption function knows no hashes: it writes nothing more.
    assert!(missing_tags(&i, "prod", &Hashes::default()).is_empty());
    // The sweeper later adds the class hash; the pool's stamped at adoption stays.
    let later = Hashes {
        nodepool: Some("now".into()),
        nodeclass: Some("nc".into()),
        images: None,
    };
    assert_eq!(
        keys(&missing_tags(&i, "prod", &later)),
        ["nodewright.io/ec2nodeclass-hash"]
    );
}

#[test]
fn what_is_not_karpenters_for_this_cluster_or_is_leaving_is_never_adopted() {
    let none = Hashes::default();
    let other_cluster: Vec<_> = KARPENTERS
        .iter()
        .map(|&(k, v)| match k {
            "eks:eks-cluster-name" => (k, "staging"),
            _ => (k, v),
        })
        .collect();
    let before_the_cluster_name_tag: Vec<_> = KARPENTERS
        .iter()
        .copied()
        .filter(|(k, _)| *k != "eks:eks-cluster-name")
        .collect();
    let no_class: Vec<_> = KARPENTERS
        .iter()
        .copied()
        .filter(|(k, _)| *k != "karpenter.k8s.aws/ec2nodeclass")
        .collect();
    let no_pool: Vec<_> = KARPENTERS
        .iter()
        .copied()
        .filter(|(k, _)| *k != "karpenter.sh/nodepool")
        .collect();
    let mut another_nodewright = KARPENTERS.to_vec();
    another_nodewright.push(("nodewright.io/cluster", "staging"));
    type Tags<'a> = Vec<(&'a str, &'a str)>;
    let cases: [(&str, Tags, InstanceState); 7] = [
        (
            "no EC2NodeClass tag (not Karpenter's)",
            no_class,
            InstanceState::Running,
        ),
        (
            "another cluster's Karpenter",
            other_cluster,
            InstanceState::Running,
        ),
        (
            "no eks:eks-cluster-name (Karpenter before v1)",
            before_the_cluster_name_tag,
            InstanceState::Running,
        ),
        (
            "no NodePool tag (not Karpenter's)",
            no_pool,
            InstanceState::Running,
        ),
        (
            "another cluster's nodewright",
            another_nodewright,
            InstanceState::Running,
        ),
        (
            "shutting down",
            KARPENTERS.to_vec(),
            InstanceState::ShuttingDown,
        ),
        ("stopped", KARPENTERS.to_vec(), InstanceState::Stopped),
    ];
    for (why, tags, state) in cases {
        assert!(
            missing_tags(&instance(&tags, state), "prod", &none).is_empty(),
            "{why}"
        );
    }
}

#[test]
fn a_node_claim_tag_karpenter_has_not_written_yet_falls_back_to_the_instance_id() {
    let tags: Vec<_> = KARPENTERS
        .iter()
        .copied()
        .filter(|(k, _)| *k != "karpenter.sh/nodeclaim")
        .collect();
    let missing = missing_tags(
        &instance(&tags, InstanceState::Pending),
        "prod",
        &Hashes::default(),
    );
    assert_eq!(missing["nodewright.io/nodeclaim"], "i-1");
}

#[test]
fn the_setting_is_off_unless_the_template_says_true_and_a_typo_is_an_error() {
    for (value, want) in [
        (None, Ok(false)),
        (Some("false"), Ok(false)),
        (Some("true"), Ok(true)),
        (
            Some("True"),
            Err("TAKE_OVER_KARPENTER=\"True\": expected true or false".to_string()),
        ),
    ] {
        assert_eq!(setting_from(value), want, "{value:?}");
    }
}

#[test]
fn the_instance_s_ami_is_recorded_only_when_its_class_selects_it_now() {
    let i = instance(KARPENTERS, InstanceState::Running);
    let image = |images: Option<Vec<&str>>| {
        let hashes = Hashes {
            images: images.map(|v| v.into_iter().map(String::from).collect()),
            ..Hashes::default()
        };
        missing_tags(&i, "prod", &hashes)
            .get("nodewright.io/image-id")
            .cloned()
    };
    assert_eq!(image(Some(vec!["ami-1"])), Some("ami-1".to_string()));
    // An AMI nodewright would not select (an accelerated variant): no tag, no drift.
    assert_eq!(image(Some(vec!["ami-standard"])), None);
    // Not resolved (the interruption function, or a failed lookup): left to a later sweep.
    assert_eq!(image(None), None);
}

#[test]
fn nothing_is_adopted_while_karpenter_holds_its_lease() {
    let now: jiff::Timestamp = "2026-11-27T12:00:00Z".parse().unwrap();
    let lease = |holder: &str, renewed_ago: i64| -> k8s_openapi::api::coordination::v1::Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": KARPENTER_LEASE, "namespace": "karpenter"},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 15,
                "renewTime": (now - jiff::SignedDuration::from_secs(renewed_ago)).to_string(),
            },
        }))
        .unwrap()
    };
    let cases = [
        (vec![], false),
        (vec![lease("karpenter-7d9f", 3)], true),
        (vec![lease("karpenter-7d9f", 16)], false),
        (vec![lease("", 3)], false),
        (
            vec![lease("karpenter-7d9f", 60), lease("karpenter-b2c1", 1)],
            true,
        ),
    ];
    for (leases, running) in cases {
        let why = karpenter_running(&leases, now);
        assert_eq!(why.is_some(), running, "{why:?}");
        if let Some(why) = why {
            assert!(why.contains("karpenter/karpenter-leader-election"), "{why}");
        }
    }
}
