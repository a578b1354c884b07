//! kube-scheduler's VolumeBinding filter, simulated for claims, and the EBS CSI driver's
//! provisioning of a volume that waits for its first consumer:
//! - a claim bound to a volume with node affinity admits only the nodes that affinity
//!   matches ("node(s) had volume node affinity conflict");
//! - an unbound claim of a `WaitForFirstConsumer` class admits only the nodes its class's
//!   `allowedTopologies` match ("node(s) didn't find available persistent volumes to bind");
//!   once the pod is bound, the volume is created in the node's zone and the claim bound
//!   to it, so the pod's next placement is held to that zone;
//! - a claim that does not exist, or an unbound one of an `Immediate` class (or of none),
//!   leaves the pod unschedulable with upstream's message.
//!
//! Not simulated: binding an unbound claim to an existing volume, capacity, access modes,
//! and the volume limits per node.

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::json;

use super::super::podspec::{node_labels, term_matches};
use super::super::resources::{CLAIMS, STORAGE_CLASSES, VOLUMES};
use super::super::store::{Store, Write};

const ZONE: &str = "topology.kubernetes.io/zone";

/// Where one of the pod's claims lets it run.
#[derive(Debug, Clone)]
pub enum ClaimPlace {
    /// Bound: the volume's node affinity terms (ORed; none: anywhere).
    Bound(Vec<NodeSelectorTerm>),
    /// Waiting for its first consumer: the class's allowed topologies (ORed; none:
    /// anywhere), and the claim to bind once the pod is placed.
    Waiting {
        namespace: String,
        claim: String,
        terms: Vec<NodeSelectorTerm>,
    },
}

/// The pod's claims as the filter sees them, or the message that leaves it unschedulable
/// whatever the node.
pub fn claims_of(pod: &Pod, store: &Store) -> Result<Vec<ClaimPlace>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref());
    let mut out = Vec::new();
    for v in volumes.unwrap_or_default() {
        let name = match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(c), _) => c.claim_name.clone(),
            (None, Some(_)) => format!("{pod_name}-{}", v.name),
            (None, None) => continue,
        };
        let claim: PersistentVolumeClaim = store
            .get(CLAIMS, namespace, &name)
            .ok()
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .ok_or_else(|| format!("persistentvolumeclaim \"{name}\" not found"))?;
        out.push(place_of(store, namespace, &name, &claim)?);
    }
    Ok(out)
}

fn place_of(
    store: &Store,
    namespace: &str,
    name: &str,
    claim: &PersistentVolumeClaim,
) -> Result<ClaimPlace, String> {
    let spec = claim.spec.as_ref();
    if let Some(volume) = spec
        .and_then(|s| s.volume_name.as_deref())
        .filter(|v| !v.is_empty())
    {
        let pv = store
            .get(VOLUMES, "", volume)
            .map_err(|_| format!("persistentvolume \"{volume}\" not found"))?;
        let terms = pv
            .pointer("/spec/nodeAffinity/required/nodeSelectorTerms")
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        return Ok(ClaimPlace::Bound(terms));
    }
    let class: Option<StorageClass> = spec
        .and_then(|s| s.storage_class_name.as_deref())
        .and_then(|c| store.get(STORAGE_CLASSES, "", c).ok())
        .and_then(|c| serde_json::from_value(c.clone()).ok());
    let waits = class
        .as_ref()
        .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
    if !waits {
        return Err("pod has unbound immediate PersistentVolumeClaims".into());
    }
    let terms = class
        .iter()
        .flat_map(|c| c.allowed_topologies.iter().flatten())
        .map(|t| NodeSelectorTerm {
            match_expressions: Some(
                t.match_label_expressions
                    .iter()
                    .flatten()
                    .map(|e| NodeSelectorRequirement {
                        key: e.key.clone(),
                        operator: "In".into(),
                        values: Some(e.values.clone()),
                    })
                    .collect(),
            ),
            match_fields: None,
        })
        .collect();
    Ok(ClaimPlace::Waiting {
        namespace: namespace.to_string(),
        claim: name.to_string(),
        terms,
    })
}

/// Whether `node` can take a pod with these claims; upstream's reason when not.
pub fn admits(claims: &[ClaimPlace], node: &Node) -> Result<(), String> {
    let labels = node_labels(node);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let matches = |terms: &[NodeSelectorTerm]| {
        terms.is_empty() || terms.iter().any(|t| term_matches(t, &labels, name))
    };
    for c in claims {
        match c {
            ClaimPlace::Bound(terms) if !matches(terms) => {
                return Err("node(s) had volume node affinity conflict".into());
            }
            ClaimPlace::Waiting { terms, .. } if !matches(terms) => {
                return Err("node(s) didn't find available persistent volumes to bind".into());
            }
            _ => {}
        }
    }
    Ok(())
}

/// The EBS CSI driver's answer to a claim waiting for its first consumer, now bound to
/// `node`: a volume in the node's zone, and the claim bound to it.
pub fn provision(store: &mut Store, claims: &[ClaimPlace], node: &Node, now: &str) {
    let zone = node_labels(node).get(ZONE).cloned().unwrap_or_default();
    for c in claims {
        let ClaimPlace::Waiting {
            namespace, claim, ..
        } = c
        else {
            continue;
        };
        let volume = format!("pvc-{namespace}-{claim}");
        let pv = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": namespace, "name": claim},
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": format!("vol-{claim}")},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                ]}}
            },
            "status": {"phase": "Bound"}
        });
        if store.create(VOLUMES, "", pv, now, Write::Internal).is_err() {
            continue;
        }
        if let Ok(stored) = store.get(CLAIMS, namespace, claim).cloned() {
            let mut bound = stored;
            bound["spec"]["volumeName"] = json!(volume);
            bound["status"] = json!({"phase": "Bound"});
            let _ = store.replace(CLAIMS, namespace, claim, bound, Write::Internal);
        }
    }
}
