use std::collections::BTreeMap;

use serde_json::json;

use super::drift::*;
use crate::api::{EC2NodeClass, NodePool};

fn pool(edit: impl FnOnce(&mut serde_json::Value)) -> NodePool {
    let mut v = json!({
        "metadata": {"name": "default"},
        "spec": {"template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                "expireAfter": "720h"
            }
        }}
    });
    edit(&mut v);
    serde_json::from_value(v).expect("a NodePool")
}

fn class(edit: impl FnOnce(&mut serde_json::Value)) -> EC2NodeClass {
    let mut v = json!({
        "metadata": {"name": "default"},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "role": "KarpenterNodeRole-demo",
            "userData": "echo hello"
        }
    });
    edit(&mut v);
    serde_json::from_value(v).expect("an EC2NodeClass")
}

fn sgs(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// The tags of an instance launched from the unedited pool and class, with `ami` and the
/// groups sg-1, sg-2.
fn launched() -> BTreeMap<String, String> {
    let hash = nodepool_hash(&pool(|_| {}));
    drift_tags(
        Some(&hash),
        &class(|_| {}),
        "ami-1",
        &sgs(&["sg-1", "sg-2"]),
    )
}

fn now(
    pool_edit: impl FnOnce(&mut serde_json::Value),
    class_edit: impl FnOnce(&mut serde_json::Value),
    images: &[&str],
    groups: &[&str],
) -> CurrentLaunch {
    CurrentLaunch {
        nodepool_hash: Some(nodepool_hash(&pool(pool_edit))),
        nodeclass_hash: Some(nodeclass_hash(&class(class_edit))),
        images: Some(sgs(images)),
        security_groups_hash: Some(security_groups_hash(&sgs(groups))),
    }
}

#[test]
fn a_node_launched_from_the_objects_as_they_are_has_not_drifted() {
    assert_eq!(
        drift(
            &launched(),
            &now(|_| {}, |_| {}, &["ami-1", "ami-arm"], &["sg-2", "sg-1"])
        ),
        None
    );
}

#[test]
fn changed_template_labels_or_taints_are_drift() {
    let labels = now(
        |p| p["spec"]["template"]["metadata"]["labels"]["team"] = json!("b"),
        |_| {},
        &["ami-1"],
        &["sg-1", "sg-2"],
    );
    assert_eq!(
        drift(&launched(), &labels).as_deref(),
        Some("the NodePool template changed")
    );
    let taints = now(
        |p| {
            p["spec"]["template"]["spec"]["taints"] =
                json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
        },
        |_| {},
        &["ami-1"],
        &["sg-1", "sg-2"],
    );
    assert!(drift(&launched(), &taints).is_some());
}

#[test]
fn widened_requirements_and_a_new_expire_after_are_not_drift() {
    let current = now(
        |p| {
            p["spec"]["template"]["spec"]["requirements"][0]["values"] =
                json!(["spot", "on-demand"]);
            p["spec"]["template"]["spec"]["expireAfter"] = json!("24h");
        },
        |_| {},
        &["ami-1"],
        &["sg-1", "sg-2"],
    );
    assert_eq!(drift(&launched(), &current), None);
}

#[test]
fn changed_user_data_or_role_is_drift_but_changed_selector_terms_alone_are_not() {
    let user_data = now(
        |_| {},
        |c| c["spec"]["userData"] = json!("echo bye"),
        &["ami-1"],
        &["sg-1", "sg-2"],
    );
    assert_eq!(
        drift(&launched(), &user_data).as_deref(),
        Some("the EC2NodeClass changed")
    );
    let role = now(
        |_| {},
        |c| c["spec"]["role"] = json!("OtherRole"),
        &["ami-1"],
        &["sg-1", "sg-2"],
    );
    assert!(drift(&launched(), &role).is_some());
    // A selector that still resolves to the same AMI and groups changes nothing.
    let terms = now(
        |_| {},
        |c| c["spec"]["amiSelectorTerms"] = json!([{"id": "ami-1"}]),
        &["ami-1"],
        &["sg-1", "sg-2"],
    );
    assert_eq!(drift(&launched(), &terms), None);
}

#[test]
fn an_at_latest_alias_resolving_to_a_newer_ami_is_drift() {
    let current = now(|_| {}, |_| {}, &["ami-2", "ami-arm"], &["sg-1", "sg-2"]);
    let why = drift(&launched(), &current).expect("drifted");
    assert!(why.contains("ami-1") && why.contains("ami-2"), "{why}");
}

#[test]
fn other_security_groups_are_drift() {
    let current = now(|_| {}, |_| {}, &["ami-1"], &["sg-1", "sg-3"]);
    assert_eq!(
        drift(&launched(), &current).as_deref(),
        Some("the EC2NodeClass selects other security groups")
    );
}

#[test]
fn a_missing_tag_or_an_unresolved_current_value_is_never_drift() {
    // An instance launched before the drift tags existed.
    let current = now(
        |p| p["spec"]["template"]["metadata"]["labels"]["team"] = json!("b"),
        |c| c["spec"]["userData"] = json!("echo bye"),
        &["ami-2"],
        &["sg-9"],
    );
    assert_eq!(drift(&BTreeMap::new(), &current), None);
    // Nothing resolved now (offline, or a failed lookup), or an empty resolution.
    assert_eq!(drift(&launched(), &CurrentLaunch::default()), None);
    let empty = CurrentLaunch {
        images: Some(Vec::new()),
        ..CurrentLaunch::default()
    };
    assert_eq!(drift(&launched(), &empty), None);
}

#[test]
fn a_launch_without_its_nodepool_known_carries_the_class_tags_only() {
    let tags = drift_tags(None, &class(|_| {}), "ami-1", &sgs(&["sg-1"]));
    assert!(!tags.contains_key(NODEPOOL_HASH_TAG));
    assert_eq!(tags.get(IMAGE_TAG).map(String::as_str), Some("ami-1"));
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_node_the_narrowed_requirements_exclude_has_drifted_and_one_they_still_allow_has_not() {
    let spot_node = labels(&[
        ("karpenter.sh/capacity-type", "spot"),
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("kubernetes.io/arch", "amd64"),
    ]);
    let reqs = |r: serde_json::Value| {
        pool(|v| v["spec"]["template"]["spec"]["requirements"] = r)
            .spec
            .template
            .spec
            .requirements
    };
    let cases = [
        (
            "spot only, as launched",
            json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]),
            None,
        ),
        (
            "widened to on-demand too",
            json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}]),
            None,
        ),
        (
            "narrowed to on-demand",
            json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]),
            Some(
                "its label karpenter.sh/capacity-type=spot no longer meets the NodePool's requirements",
            ),
        ),
        (
            "its type now excluded",
            json!([{"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["m5.large"]}]),
            Some(
                "its label node.kubernetes.io/instance-type=m5.large no longer meets the NodePool's requirements",
            ),
        ),
        (
            "the deprecated name of the type label, normalised",
            json!([{"key": "beta.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}]),
            Some(
                "its label node.kubernetes.io/instance-type=m5.large no longer meets the NodePool's requirements",
            ),
        ),
        (
            "a label it carries is now forbidden",
            json!([{"key": "kubernetes.io/arch", "operator": "DoesNotExist"}]),
            Some("its label kubernetes.io/arch=amd64 no longer meets the NodePool's requirements"),
        ),
        (
            "a key the node does not carry proves nothing",
            json!([{"key": "example.com/team", "operator": "In", "values": ["a"]}]),
            None,
        ),
        (
            "a CPU count bound on a label it lacks",
            json!([{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["4"]}]),
            None,
        ),
    ];
    for (why, r, want) in cases {
        assert_eq!(
            requirements_drift(&spot_node, &reqs(r)).as_deref(),
            want,
            "{why}"
        );
    }
}

#[test]
fn a_subnet_the_class_no_longer_selects_is_drift_and_an_unknown_one_is_not() {
    let now = sgs(&["subnet-a", "subnet-b"]);
    let none: Vec<String> = Vec::new();
    // (the instance's subnet, the class's subnets now, drifted?)
    let cases = [
        (Some("subnet-a"), Some(now.as_slice()), false),
        (Some("subnet-c"), Some(now.as_slice()), true),
        (None, Some(now.as_slice()), false),
        (Some("subnet-c"), None, false),
        (Some("subnet-c"), Some(none.as_slice()), false),
    ];
    for (subnet, current, drifted) in cases {
        let got = subnet_drift(subnet, current);
        assert_eq!(
            got.is_some(),
            drifted,
            "{subnet:?} against {current:?}: {got:?}"
        );
    }
    assert_eq!(
        subnet_drift(Some("subnet-c"), Some(&now)).as_deref(),
        Some("subnet subnet-c is no longer selected by the EC2NodeClass")
    );
}

/// The hash is of the shaped fields as JSON with sorted keys, whatever order serde_json's
/// maps keep in this build (`preserve_order` is on in test builds and off in the release
/// binaries): the text below is written out by hand in sorted order.
#[test]
fn the_nodepool_hash_is_of_sorted_json_so_every_build_computes_the_same() {
    use sha2::{Digest, Sha256};
    let text = r#"{"metadata":{"labels":{"team":"a"}},"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"startupTaints":[],"taints":[]}"#;
    let expected = hex::encode(&Sha256::digest(text.as_bytes())[..8]);
    assert_eq!(nodepool_hash(&pool(|_| {})), expected);
}
