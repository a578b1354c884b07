//! A NodePool prepared for packing: its requirements, taints, limits and the instance
//! types it may launch, each with allocatable after overhead and DaemonSets, and the
//! offerings its requirements allow.

use std::collections::BTreeMap;

use super::pod::PodDemand;
use super::requirements::{Requirement, Requirements};
use super::taints::{Toleration, first_untolerated};
use crate::api::{EC2NodeClass, KubeletConfiguration, NodePool, Taint, labels};
use crate::catalog::{CapacityType, Catalog};
use crate::resources::Resources;

/// The NodePool limit on the number of nodes, counted in milli-units like every resource.
pub const NODES: &str = "nodes";

/// Keys a new node's instance type (or offering) decides, so a template need not name them
/// for a pod to ask for them.
pub fn defined_by_instance(key: &str) -> bool {
    key.starts_with("karpenter.k8s.aws/")
        || matches!(
            key,
            labels::INSTANCE_TYPE
                | labels::ARCH
                | labels::OS
                | labels::ZONE
                | labels::REGION
                | labels::CAPACITY_TYPE
                | "beta.kubernetes.io/instance-type"
                | "beta.kubernetes.io/arch"
                | "beta.kubernetes.io/os"
                | "failure-domain.beta.kubernetes.io/zone"
        )
}

#[derive(Debug, Clone)]
pub struct OfferingView {
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
}

#[derive(Debug, Clone)]
pub struct TypeOption {
    pub name: String,
    /// Capacity as NodePool limits count it.
    pub capacity: Resources,
    /// Allocatable minus the DaemonSet pods that will land on every such node.
    pub free: Resources,
    pub labels: BTreeMap<String, String>,
    /// Available offerings the NodePool's zone and capacity-type requirements allow.
    pub offerings: Vec<OfferingView>,
}

impl TypeOption {
    /// The cheapest offering that `reqs` (zone, capacity type) allows.
    pub fn cheapest(&self, reqs: &Requirements) -> Option<&OfferingView> {
        let zone = reqs.get(labels::ZONE);
        let ct = reqs.get(labels::CAPACITY_TYPE);
        self.offerings
            .iter()
            .filter(|o| zone.is_none_or(|r| r.allows(Some(&o.zone))))
            .filter(|o| ct.is_none_or(|r| r.allows(Some(o.capacity_type.as_str()))))
            .min_by(|a, b| {
                a.price
                    .total_cmp(&b.price)
                    .then(a.capacity_type.cmp(&b.capacity_type))
            })
    }

    /// Whether this type's labels satisfy the instance-decided keys of `reqs` and it has
    /// an offering those requirements allow.
    pub fn satisfies(&self, reqs: &Requirements) -> bool {
        reqs.iter().all(|(k, r)| {
            if k == labels::ZONE || k == labels::CAPACITY_TYPE || !defined_by_instance(k) {
                true
            } else {
                r.allows(self.labels.get(k).map(String::as_str))
            }
        }) && self.cheapest(reqs).is_some()
    }
}

#[derive(Debug, Clone)]
pub struct Template {
    pub nodepool: String,
    pub node_class: String,
    pub weight: i32,
    pub requirements: Requirements,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub kubelet: Option<KubeletConfiguration>,
    /// Only the limits the NodePool sets, in milli-units (`nodes` too: 1000 per node).
    pub limits: Option<BTreeMap<String, i64>>,
    pub daemon_overhead: Resources,
    /// Types sorted cheapest first.
    pub types: Vec<TypeOption>,
    /// Set when the NodePool cannot be used at all, with the reason.
    pub unusable: Option<String>,
}

impl Template {
    pub fn build(
        pool: &NodePool,
        classes: &[EC2NodeClass],
        catalog: &Catalog,
        daemon_sets: &[PodDemand],
    ) -> Template {
        let spec = &pool.spec.template.spec;
        let name = pool.metadata.name.clone();
        let class = classes
            .iter()
            .find(|c| c.metadata.name == spec.node_class_ref.name);
        let kubelet = class.and_then(|c| c.spec.kubelet.clone());

        let mut template_labels = pool.spec.template.metadata.labels.clone();
        template_labels.insert(labels::NODEPOOL.into(), name.clone());
        let mut requirements = Requirements::from_api(&spec.requirements);
        // Karpenter launches on-demand when a NodePool does not name a capacity type; spot
        // must be asked for.
        if requirements.get(labels::CAPACITY_TYPE).is_none() {
            requirements.add(
                labels::CAPACITY_TYPE,
                Requirement::in_values([labels::ON_DEMAND.to_string()]),
            );
        }
        for (k, v) in &template_labels {
            requirements.add(k, Requirement::in_values([v.clone()]));
        }

        let mut unusable = None;
        let limits = if pool.spec.limits.is_empty() {
            None
        } else {
            let mut parsed = BTreeMap::new();
            for (k, q) in &pool.spec.limits {
                match q.milli() {
                    Ok(v) => {
                        parsed.insert(k.clone(), v);
                    }
                    Err(e) => unusable = Some(format!("spec.limits.{k}: {e}")),
                }
            }
            Some(parsed)
        };
        if class.is_none() {
            unusable = Some(format!(
                "its nodeClassRef names EC2NodeClass {:?}, which does not exist",
                spec.node_class_ref.name
            ));
        }

        let taints = spec.taints.clone();
        let daemon_overhead = daemon_sets
            .iter()
            .filter(|ds| lands_on(ds, &requirements, &taints))
            .fold(Resources::default(), |mut acc, ds| {
                acc.add(&ds.requests);
                acc
            });

        let mut types: Vec<TypeOption> = catalog
            .entries
            .iter()
            .filter_map(|e| {
                let it = &e.instance_type;
                let labels = it.labels();
                let mut free = it.allocatable(kubelet.as_ref());
                free.sub(&daemon_overhead);
                if free.cpu < 0 || free.memory < 0 || free.pods < 0 {
                    return None;
                }
                let offerings = e
                    .offerings
                    .iter()
                    .filter(|o| o.available)
                    .map(|o| OfferingView {
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type,
                        price: o.price,
                    })
                    .collect();
                let option = TypeOption {
                    name: it.name.clone(),
                    capacity: it.capacity(kubelet.as_ref()),
                    free,
                    labels,
                    offerings,
                };
                option.satisfies(&requirements).then_some(option)
            })
            .collect();
        types.sort_by(|a, b| {
            let pa = a.cheapest(&requirements).map_or(f64::MAX, |o| o.price);
            let pb = b.cheapest(&requirements).map_or(f64::MAX, |o| o.price);
            pa.total_cmp(&pb).then_with(|| a.name.cmp(&b.name))
        });

        Template {
            nodepool: name,
            node_class: spec.node_class_ref.name.clone(),
            weight: pool.spec.weight.unwrap_or(0),
            requirements,
            labels: template_labels,
            taints,
            startup_taints: spec.startup_taints.clone(),
            kubelet,
            limits,
            daemon_overhead,
            types,
            unusable,
        }
    }

    pub fn tolerated_by(&self, tolerations: &[Toleration]) -> Result<(), &Taint> {
        match first_untolerated(&self.taints, tolerations) {
            Some(t) => Err(t),
            None => Ok(()),
        }
    }
}

/// Whether a DaemonSet's pod would run on nodes of this template: it tolerates the taints
/// and one of its node-affinity alternatives fits the template's requirements.
fn lands_on(ds: &PodDemand, reqs: &Requirements, taints: &[Taint]) -> bool {
    first_untolerated(taints, &ds.tolerations).is_none()
        && ds
            .requirements
            .iter()
            .any(|alt| reqs.compatible(alt, defined_by_instance).is_ok())
}
