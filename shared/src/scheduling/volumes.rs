//! Where a pod's volumes let it run (Karpenter's volume topology). A claim bound to a
//! PersistentVolume follows the volume's node affinity: a zonal EBS volume holds its pod
//! to the volume's zone. An unbound claim follows its StorageClass's `allowedTopologies`,
//! since a `WaitForFirstConsumer` class provisions the volume where the pod lands. Each
//! term is an alternative, and several volumes multiply them.
//!
//! Pods without claims need none of this, so the claims, volumes and classes are read
//! only when some pod has a claim ([`claims_volumes`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;

use super::pod::{FieldError, PodDemand, PodError, term_requirements};
use super::requirements::{Requirement, Requirements};
use crate::api::labels;

/// The cluster's PersistentVolumeClaims, PersistentVolumes and StorageClasses.
#[derive(Debug, Clone, Default)]
pub struct VolumeObjects {
    claims: BTreeMap<(String, String), PersistentVolumeClaim>,
    volumes: BTreeMap<String, PersistentVolume>,
    classes: BTreeMap<String, StorageClass>,
}

/// Whether some pod mounts a PersistentVolumeClaim, its own or a generic ephemeral one.
pub fn claims_volumes<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> bool {
    pods.into_iter().any(|p| {
        volumes(p)
            .iter()
            .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
    })
}

fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec
        .as_ref()
        .map_or(&[], |s| s.volumes.as_deref().unwrap_or_default())
}

impl VolumeObjects {
    pub fn new(
        claims: Vec<PersistentVolumeClaim>,
        volumes: Vec<PersistentVolume>,
        classes: Vec<StorageClass>,
    ) -> Self {
        let mut objects = VolumeObjects::default();
        claims.into_iter().for_each(|c| objects.add_claim(c));
        volumes.into_iter().for_each(|v| objects.add_volume(v));
        classes.into_iter().for_each(|c| objects.add_class(c));
        objects
    }

    pub fn add_claim(&mut self, claim: PersistentVolumeClaim) {
        let namespace = claim.metadata.namespace.clone();
        let key = (
            namespace.unwrap_or_else(|| "default".into()),
            claim.metadata.name.clone().unwrap_or_default(),
        );
        self.claims.insert(key, claim);
    }

    pub fn add_volume(&mut self, volume: PersistentVolume) {
        let name = volume.metadata.name.clone().unwrap_or_default();
        self.volumes.insert(name, volume);
    }

    pub fn add_class(&mut self, class: StorageClass) {
        let name = class.metadata.name.clone().unwrap_or_default();
        self.classes.insert(name, class);
    }

    /// Whether no claim, volume or class is known.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.volumes.is_empty() && self.classes.is_empty()
    }

    /// Holds `demand`, built from `pod`, to where the pod's volumes allow.
    pub fn narrow(&self, demand: &mut PodDemand, pod: &Pod) -> Result<(), PodError> {
        let key = demand.key();
        let error = |(field, message): FieldError| PodError {
            pod: key.clone(),
            field,
            message,
        };
        let alternatives = self.topology(pod).map_err(error)?;
        demand
            .narrow_to_volumes(&alternatives)
            .map_err(|m| error(("spec.volumes".into(), m)))
    }

    /// The alternatives (ORed) the pod's volumes leave it, or none when they constrain
    /// nothing. An error, as kube-scheduler's, when a claim cannot be used: missing, being
    /// deleted, lost, or naming a volume or class that does not exist.
    pub fn topology(&self, pod: &Pod) -> Result<Vec<Requirements>, FieldError> {
        let mut alternatives: Vec<Requirements> = Vec::new();
        for (i, volume) in volumes(pod).iter().enumerate() {
            let field = format!("spec.volumes[{i}]");
            let Some(claim) = self.claim_of(pod, volume, &field)? else {
                continue;
            };
            let ours = self.claim_topology(claim, &field)?;
            if ours.is_empty() {
                continue;
            }
            alternatives = if alternatives.is_empty() {
                ours
            } else {
                combined(&alternatives, &ours).ok_or_else(|| {
                    (
                        field.clone(),
                        "its topology shares no place with the pod's other volumes".to_string(),
                    )
                })?
            };
        }
        Ok(alternatives)
    }

    fn claim_of(
        &self,
        pod: &Pod,
        volume: &Volume,
        field: &str,
    ) -> Result<Option<&PersistentVolumeClaim>, FieldError> {
        let name = match (&volume.persistent_volume_claim, &volume.ephemeral) {
            (Some(c), _) => c.claim_name.clone(),
            // The ephemeral volume controller names the claim it creates for the pod.
            (None, Some(_)) => format!(
                "{}-{}",
                pod.metadata.name.as_deref().unwrap_or_default(),
                volume.name
            ),
            (None, None) => return Ok(None),
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let claim = self
            .claims
            .get(&(namespace.to_string(), name.clone()))
            .ok_or_else(|| {
                (
                    field.to_string(),
                    format!("PersistentVolumeClaim {namespace}/{name} not found"),
                )
            })?;
        if claim.metadata.deletion_timestamp.is_some() {
            return Err((
                field.to_string(),
                format!("PersistentVolumeClaim {namespace}/{name} is being deleted"),
            ));
        }
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase == Some("Lost") {
            return Err((
                field.to_string(),
                format!(
                    "PersistentVolumeClaim {namespace}/{name} is bound to a volume that no longer exists"
                ),
            ));
        }
        Ok(Some(claim))
    }

    fn claim_topology(
        &self,
        claim: &PersistentVolumeClaim,
        field: &str,
    ) -> Result<Vec<Requirements>, FieldError> {
        let spec = claim.spec.as_ref();
        let bound_to = spec.and_then(|s| s.volume_name.as_deref()).unwrap_or("");
        if !bound_to.is_empty() {
            let volume = self.volumes.get(bound_to).ok_or_else(|| {
                (
                    field.to_string(),
                    format!("PersistentVolume {bound_to} not found"),
                )
            })?;
            return volume_topology(volume, field);
        }
        let class = spec
            .and_then(|s| s.storage_class_name.as_deref())
            .unwrap_or("");
        if class.is_empty() {
            return Ok(Vec::new());
        }
        let class = self
            .classes
            .get(class)
            .ok_or_else(|| (field.to_string(), format!("StorageClass {class} not found")))?;
        Ok(class_topology(class))
    }
}

/// A volume's node affinity terms. A local or hostPath volume's hostname is left out: the
/// pod is being placed on a new node, which cannot have the old one's name.
fn volume_topology(
    volume: &PersistentVolume,
    field: &str,
) -> Result<Vec<Requirements>, FieldError> {
    let Some(spec) = volume.spec.as_ref() else {
        return Ok(Vec::new());
    };
    let terms = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    let on_a_host = spec.local.is_some() || spec.host_path.is_some();
    let mut alternatives = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        let expressions: Vec<NodeSelectorRequirement> = term
            .match_expressions
            .iter()
            .flatten()
            .filter(|e| !(on_a_host && e.key == labels::HOSTNAME))
            .cloned()
            .collect();
        if expressions.is_empty() {
            // A term of hostnames alone allows any node once the hostname is dropped.
            if on_a_host
                && term
                    .match_expressions
                    .as_ref()
                    .is_some_and(|e| !e.is_empty())
            {
                alternatives.push(Requirements::new());
            }
            continue;
        }
        let term = NodeSelectorTerm {
            match_expressions: Some(expressions),
            match_fields: None,
        };
        let where_ = format!("{field} (PersistentVolume nodeAffinity term {i})");
        alternatives.push(term_requirements(&term, &where_)?);
    }
    Ok(alternatives)
}

/// A StorageClass's `allowedTopologies`, each term an alternative.
fn class_topology(class: &StorageClass) -> Vec<Requirements> {
    class
        .allowed_topologies
        .iter()
        .flatten()
        .filter_map(|term| {
            let mut reqs = Requirements::new();
            for e in term.match_label_expressions.iter().flatten() {
                reqs.add(&e.key, Requirement::in_values(e.values.iter().cloned()));
            }
            (!reqs.is_empty()).then_some(reqs)
        })
        .collect()
}

/// Each of `a` ANDed with each of `b`, keeping the pairs that can both hold; `None` when
/// none can.
pub(super) fn combined(a: &[Requirements], b: &[Requirements]) -> Option<Vec<Requirements>> {
    let out: Vec<Requirements> = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| (x, y)))
        .filter(|(x, y)| x.compatible(y, |_| true).is_ok())
        .map(|(x, y)| {
            let mut merged = x.clone();
            merged.merge(y);
            merged
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
#[path = "volumes_tests.rs"]
mod tests;
