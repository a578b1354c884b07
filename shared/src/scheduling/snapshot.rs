//! The solver's input: pending pods, DaemonSets, and the nodes that exist or are being
//! launched, reduced to what placement needs.

use std::collections::BTreeMap;

use super::namespaces::NamespaceLabels;
use super::pod::{AffinityTerm, PodDemand};
use crate::api::Taint;
use crate::catalog::CapacityType;
use crate::resources::Resources;

/// A node that exists (Ready or not yet registered but launched: "in flight").
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingNode {
    pub name: String,
    pub nodepool: Option<String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: Option<CapacityType>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Capacity as NodePool limits count it.
    pub capacity: Resources,
    pub allocatable: Resources,
    /// Requests of pods bound or nominated to it, DaemonSets included.
    pub requested: Resources,
    /// (namespace, labels) of the pods on it, for topology counts.
    pub pods: Vec<(String, BTreeMap<String, String>)>,
    /// The required pod anti-affinity terms of the pods on it: pending pods they select
    /// must stay off this node's domain (symmetry).
    pub anti_affinity: Vec<AffinityTerm>,
    /// False when cordoned or tainted for disruption: it still counts for limits and
    /// topology, but no new pod is planned onto it.
    pub schedulable: bool,
}

/// Whether pods' preferences shape scheduling: Karpenter's `--preference-policy`, the
/// same two values, for every simulation (provisioning, replacements, consolidation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PreferencePolicy {
    /// Held as if required, then relaxed one at a time (`preferences.rs`).
    #[default]
    Respect,
    /// Left out: preferred node and pod (anti-)affinity and `ScheduleAnyway` spreads
    /// neither steer placement nor hold a node, so consolidation may pack more tightly.
    Ignore,
}

impl std::str::FromStr for PreferencePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Respect" => Ok(PreferencePolicy::Respect),
            "Ignore" => Ok(PreferencePolicy::Ignore),
            other => Err(format!(
                "{other:?} is not a preference policy: Respect or Ignore"
            )),
        }
    }
}

/// What a launch does when the types that fit a claim's pods fall short of a NodePool's
/// `minValues`: Karpenter's `--min-values-policy`, the same two values. Consolidation never
/// relaxes: it simulates with `Strict` whatever the setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MinValuesPolicy {
    /// The claim is split into claims that each keep `minValues`; pods that cannot be
    /// placed so stay pending.
    #[default]
    Strict,
    /// As `Strict` first; a claim that still falls short launches with the types there
    /// are, its `minValues` lowered to them and marked relaxed.
    BestEffort,
}

impl std::str::FromStr for MinValuesPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Strict" => Ok(MinValuesPolicy::Strict),
            "BestEffort" => Ok(MinValuesPolicy::BestEffort),
            other => Err(format!(
                "{other:?} is not a minValues policy: Strict or BestEffort"
            )),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub pods: Vec<PodDemand>,
    /// One entry per DaemonSet: its pod template as a demand.
    pub daemon_sets: Vec<PodDemand>,
    pub nodes: Vec<ExistingNode>,
    /// The Namespaces' labels, for pod (anti-)affinity terms with a `namespaceSelector`;
    /// read only when some term has one ([`Snapshot::selects_namespaces`]).
    pub namespace_labels: NamespaceLabels,
    /// The NodeOverlays the NodePools' instance types are priced and sized with.
    pub overlays: super::Overlays,
    pub preferences: PreferencePolicy,
    pub min_values: MinValuesPolicy,
}

impl Snapshot {
    /// This snapshot as [`PreferencePolicy::Ignore`] schedules it: every pod and DaemonSet
    /// without its preferences.
    pub fn without_preferences(&self) -> Snapshot {
        let strip = |p: &PodDemand| PodDemand {
            preferred: Vec::new(),
            soft_spread: Vec::new(),
            soft_affinity: Vec::new(),
            soft_anti_affinity: Vec::new(),
            ..p.clone()
        };
        Snapshot {
            pods: self.pods.iter().map(strip).collect(),
            daemon_sets: self.daemon_sets.iter().map(strip).collect(),
            ..self.clone()
        }
    }

    /// Whether a pod (anti-)affinity term here selects namespaces by label, so the
    /// Namespaces' labels must be read before solving.
    pub fn selects_namespaces(&self) -> bool {
        let pods = self.pods.iter().chain(&self.daemon_sets).flat_map(|p| {
            p.affinity
                .iter()
                .chain(&p.anti_affinity)
                .chain(&p.soft_affinity)
                .chain(&p.soft_anti_affinity)
        });
        let nodes = self.nodes.iter().flat_map(|n| &n.anti_affinity);
        pods.chain(nodes).any(|t| t.namespace_selector.is_some())
    }

    /// Holds each of `pods` planned here to where its volumes allow, `objects` being the
    /// cluster's claims, volumes and classes ([`super::claims_volumes`] says whether they
    /// are needed). A pod whose claims cannot be used is taken out and returned as an
    /// error: kube-scheduler would not place it either.
    pub fn narrow_to_volumes(
        &mut self,
        pods: &[k8s_openapi::api::core::v1::Pod],
        objects: &super::VolumeObjects,
    ) -> Vec<super::PodError> {
        let mut errors = Vec::new();
        for pod in pods {
            if !super::claims_volumes([pod]) {
                continue;
            }
            let key = format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                pod.metadata.name.as_deref().unwrap_or_default()
            );
            let Some(at) = self.pods.iter().position(|d| d.key() == key) else {
                continue;
            };
            if let Err(e) = objects.narrow(&mut self.pods[at], pod) {
                self.pods.remove(at);
                errors.push(e);
            }
        }
        errors
    }

    /// Builds the solver's view of pending pods and DaemonSets. A pod or DaemonSet whose
    /// spec cannot be read is returned as an error rather than dropped, so the caller can
    /// say which object is wrong.
    pub fn from_k8s(
        pods: &[k8s_openapi::api::core::v1::Pod],
        daemon_sets: &[k8s_openapi::api::apps::v1::DaemonSet],
    ) -> (Snapshot, Vec<super::PodError>) {
        let mut snapshot = Snapshot::default();
        let mut errors = vec![];
        for pod in pods {
            match PodDemand::from_pod(pod) {
                Ok(d) => snapshot.pods.push(d),
                Err(e) => errors.push(e),
            }
        }
        for ds in daemon_sets {
            let Some(spec) = ds.spec.as_ref() else {
                continue;
            };
            let pod = k8s_openapi::api::core::v1::Pod {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: ds.metadata.name.clone(),
                    namespace: ds.metadata.namespace.clone(),
                    labels: spec
                        .template
                        .metadata
                        .as_ref()
                        .and_then(|m| m.labels.clone()),
                    ..Default::default()
                },
                spec: spec.template.spec.clone(),
                status: None,
            };
            match PodDemand::from_pod(&pod) {
                Ok(mut d) => {
                    d.name = format!("daemonset/{}", d.name);
                    snapshot.daemon_sets.push(d)
                }
                Err(e) => errors.push(e),
            }
        }
        (snapshot, errors)
    }
}
