//! Drift: a node launched from a NodePool template or EC2NodeClass that has since changed in
//! a way that affects it is replaced (within the `Drifted` budgets, replacement first).
//!
//! As Karpenter (`pkg/controllers/nodeclaim/disruption/drift.go`, and the provider's
//! `cloudprovider.IsDrifted`): the static parts of the NodePool template and of the
//! EC2NodeClass are hashed at launch and compared with the hash of the objects as they are
//! now; the dynamic parts, which selectors resolve (the AMI from an `@latest` alias or a
//! selector, the security groups), are compared with what the instance was launched with.
//! nodewright keeps what Karpenter writes on its NodeClaim as tags on the instance, set in
//! the CreateFleet call itself (so an instance never lacks them): the instance carries the
//! launch's image and security-group set as the launch template gave them.
//!
//! Two checks read the node and instance as they are rather than tags: the NodePool's
//! requirements against the node's labels ([`requirements_drift`]: narrowing a pool rolls the
//! nodes it now excludes), and the instance's subnet against the subnets the class selects
//! now ([`subnet_drift`]).
//!
//! Left out of the static hashes, as in Karpenter: the requirements (widening a NodePool
//! must not roll its nodes), `expireAfter` and `terminationGracePeriod` (they apply to
//! nodes as they are), and the selector terms (their result is what counts, compared
//! dynamically). A tag an instance lacks (launched before these tags existed) or a current
//! value that could not be resolved proves nothing: never drift on a guess.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::api::{EC2NodeClass, NodePool, NodeSelectorRequirement};
use crate::scheduling::Requirements;

/// Hash of the NodePool template's node-shaping fields at launch.
pub const NODEPOOL_HASH_TAG: &str = "nodewright.io/nodepool-hash";
/// Hash of the EC2NodeClass's static fields at launch.
pub const NODECLASS_HASH_TAG: &str = "nodewright.io/ec2nodeclass-hash";
/// The AMI the launch template gave the instance.
pub const IMAGE_TAG: &str = "nodewright.io/image-id";
/// Hash of the sorted security group ids the launch template gave the instance (a hash:
/// a tag value holds 256 characters, a list of groups may not fit).
pub const SECURITY_GROUPS_TAG: &str = "nodewright.io/security-groups-hash";

fn digest(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..8])
}

/// `value` as JSON text with every object's keys sorted. `serde_json::Value`'s maps keep
/// insertion order when the `preserve_order` feature is on, and Cargo turns it on in
/// some builds of this workspace and not others (the test builds get it through the AWS
/// SDK's test utilities; the release binaries do not): hashed as is, one NodePool had two
/// hashes, and every node launched by one build looked drifted to the other. Sorted is
/// what a build without the feature writes, so the tags already written keep their values.
fn canonical(value: &serde_json::Value) -> String {
    fn sorted(value: &serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                serde_json::Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(sorted).collect())
            }
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// The template's labels, annotations, taints, startup taints and class reference.
pub fn nodepool_hash(pool: &NodePool) -> String {
    let t = &pool.spec.template;
    let shaped = serde_json::json!({
        "metadata": t.metadata,
        "taints": t.spec.taints,
        "startupTaints": t.spec.startup_taints,
        "nodeClassRef": t.spec.node_class_ref,
    });
    digest(&canonical(&shaped))
}

/// The class's spec without its selector terms.
pub fn nodeclass_hash(class: &EC2NodeClass) -> String {
    let mut spec = class.spec.clone();
    spec.ami_selector_terms.clear();
    spec.subnet_selector_terms.clear();
    spec.security_group_selector_terms.clear();
    digest(&canonical(&serde_json::to_value(&spec).unwrap_or_default()))
}

pub fn security_groups_hash(ids: &[String]) -> String {
    let mut ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    ids.sort_unstable();
    ids.dedup();
    digest(&ids.join(","))
}

/// The tags a launch adds for later drift checks.
pub fn drift_tags(
    nodepool_hash: Option<&str>,
    class: &EC2NodeClass,
    image: &str,
    security_groups: &[String],
) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::from([
        (NODECLASS_HASH_TAG.to_string(), nodeclass_hash(class)),
        (IMAGE_TAG.to_string(), image.to_string()),
        (
            SECURITY_GROUPS_TAG.to_string(),
            security_groups_hash(security_groups),
        ),
    ]);
    if let Some(hash) = nodepool_hash {
        tags.insert(NODEPOOL_HASH_TAG.to_string(), hash.to_string());
    }
    tags
}

/// What a launch of the node's pool and class would use now. `None`: not known (not
/// resolved this sweep, or offline), so that field is not compared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CurrentLaunch {
    pub nodepool_hash: Option<String>,
    pub nodeclass_hash: Option<String>,
    /// The images the class's AMI selector resolves to now, one per architecture.
    pub images: Option<Vec<String>>,
    pub security_groups_hash: Option<String>,
}

/// Why the instance (by its tags) has drifted from `current`, if it has.
pub fn drift(instance_tags: &BTreeMap<String, String>, current: &CurrentLaunch) -> Option<String> {
    let tag = |k: &str| instance_tags.get(k).map(String::as_str);
    let differs = |k: &str, now: &Option<String>| matches!((tag(k), now.as_deref()), (Some(then), Some(now)) if then != now);
    if differs(NODEPOOL_HASH_TAG, &current.nodepool_hash) {
        return Some("the NodePool template changed".into());
    }
    if differs(NODECLASS_HASH_TAG, &current.nodeclass_hash) {
        return Some("the EC2NodeClass changed".into());
    }
    if let (Some(image), Some(images)) = (tag(IMAGE_TAG), &current.images)
        && !images.is_empty()
        && !images.iter().any(|i| i == image)
    {
        return Some(format!(
            "AMI {image} is no longer what the EC2NodeClass selects ({})",
            images.join(", ")
        ));
    }
    if differs(SECURITY_GROUPS_TAG, &current.security_groups_hash) {
        return Some("the EC2NodeClass selects other security groups".into());
    }
    None
}

/// Why the node's labels no longer meet its NodePool's `requirements`, if they do not
/// (Karpenter's requirements drift): a label whose value a requirement now excludes, or a
/// label a `DoesNotExist` now forbids. A label the node does not carry is not compared: it
/// proves nothing about the instance (kubelet may not set it), and a requirement on a key
/// no node carries would otherwise roll every node.
pub fn requirements_drift(
    labels: &BTreeMap<String, String>,
    requirements: &[NodeSelectorRequirement],
) -> Option<String> {
    let requirements = Requirements::from_api(requirements);
    requirements.iter().find_map(|(key, req)| {
        let value = labels.get(key)?;
        (!req.allows(Some(value)))
            .then(|| format!("its label {key}={value} no longer meets the NodePool's requirements"))
    })
}

/// Why the instance's subnet is no longer one the EC2NodeClass selects, if it is not.
/// Unknown on either side (no subnet reported, selectors not resolved or resolving to
/// none) is never drift.
pub fn subnet_drift(subnet: Option<&str>, current: Option<&[String]>) -> Option<String> {
    let (Some(subnet), Some(current)) = (subnet, current) else {
        return None;
    };
    (!current.is_empty() && !current.iter().any(|s| s == subnet))
        .then(|| format!("subnet {subnet} is no longer selected by the EC2NodeClass"))
}
