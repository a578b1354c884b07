//! Nodes that exist or are being launched, turned into the solver's `ExistingNode`s: what
//! room each has left, whether new pods may go there, and what it counts for limits and
//! topology.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::provider_id::parse_provider_id;
use crate::api::{Taint, TaintEffect, labels};
use crate::catalog::CapacityType;
use crate::resources::{Resources, parse_milli};
use crate::scheduling::{ExistingNode, bound_anti_affinity, effective_requests};

/// The kubelet's own label for the instance type (`node.kubernetes.io/instance-type`), with
/// the beta label older AMIs still set as a fallback.
const INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
/// Taints the node lifecycle controller and the cloud provider put on every new node and take
/// off when it becomes Ready: a starting node will lose them, so pods need not tolerate them.
const STARTUP_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.cloudprovider.kubernetes.io/uninitialized",
];

/// An instance nodewright launched (found by its tags) that has no Node object yet. The
/// caller builds it from EC2 and the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlight {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: Option<CapacityType>,
    pub nodepool: Option<String>,
    /// The `nodewright.io/nodeclaim` tag: one id per launch decision.
    pub nodeclaim: String,
    /// The labels the node will register with (the NodePool template's labels).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub capacity: Resources,
    pub allocatable: Resources,
}

/// How far a node is from taking pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Launched by nodewright and its kubelet has not reported Ready yet: capacity on the way.
    Starting,
    /// Not Ready and not one we are waiting for (or its kubelet stopped reporting).
    Lost,
}

/// A node is `Ready` when its Ready condition is True. One of ours (it carries the
/// nodeclaim label) that is not Ready counts as starting while its kubelet itself reports
/// False or has not reported yet; `Unknown` is what the node lifecycle controller writes when
/// the kubelet stops posting status, i.e. the node is gone rather than starting.
pub fn readiness(node: &Node) -> Readiness {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let ours = node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(labels::NODECLAIM));
    match ready.map(|c| c.status.as_str()) {
        Some("True") => Readiness::Ready,
        None | Some("False") if ours => Readiness::Starting,
        _ => Readiness::Lost,
    }
}

/// Converts nodes, the pods bound to them and in-flight instances into `ExistingNode`s.
///
/// Every node is listed, because limits and topology count it whatever its state; only a
/// node that is Ready or starting, not cordoned, not tainted `nodewright.io/disrupted` and
/// not being deleted is `schedulable`. An in-flight instance whose Node already exists
/// (matched by provider ID or by nodeclaim label) is the node and is not listed twice;
/// otherwise it is listed as `nodeclaim/<id>` with all of its allocatable free.
pub fn existing_nodes(
    nodes: &[Node],
    bound: &HashMap<String, Vec<Pod>>,
    in_flight: &[InFlight],
) -> Vec<ExistingNode> {
    let mut out = Vec::with_capacity(nodes.len() + in_flight.len());
    let mut registered_instances = HashSet::new();
    let mut registered_claims = HashSet::new();
    for node in nodes {
        let spec = node.spec.as_ref();
        if let Some(id) = spec
            .and_then(|s| s.provider_id.as_deref())
            .and_then(parse_provider_id)
        {
            registered_instances.insert(id.instance_id);
        }
        let node_labels: BTreeMap<String, String> =
            node.metadata.labels.clone().unwrap_or_default();
        if let Some(claim) = node_labels.get(labels::NODECLAIM) {
            registered_claims.insert(claim.clone());
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let state = readiness(node);
        let mut taints: Vec<Taint> = spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter_map(taint)
            .collect();
        if state == Readiness::Starting {
            taints.retain(|t| !STARTUP_TAINTS.contains(&t.key.as_str()));
        }
        let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        let disrupted = taints.iter().any(|t| t.key == labels::DISRUPTED_TAINT);
        let deleting = node.metadata.deletion_timestamp.is_some();
        let status = node.status.as_ref();
        let pods = bound.get(&name).map(Vec::as_slice).unwrap_or_default();
        let mut requested = Resources::default();
        let mut pod_labels = Vec::with_capacity(pods.len());
        let mut anti_affinity = vec![];
        for pod in pods {
            // The API server validated these quantities when it admitted the pod; one that
            // still fails to parse counts as zero rather than hiding the whole node.
            if let Some(r) = pod.spec.as_ref().and_then(|s| effective_requests(s).ok()) {
                requested.add(&r);
            }
            // Likewise a selector the API server admitted; one that fails here only loses
            // that pod's anti-affinity, not the node.
            if let Ok(terms) = bound_anti_affinity(pod) {
                anti_affinity.extend(terms);
            }
            pod_labels.push((
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.labels.clone().unwrap_or_default(),
            ));
        }
        let zone = node_labels.get(labels::ZONE).cloned().or_else(|| {
            spec.and_then(|s| s.provider_id.as_deref())
                .and_then(parse_provider_id)
                .map(|p| p.zone)
        });
        out.push(ExistingNode {
            nodepool: node_labels.get(labels::NODEPOOL).cloned(),
            instance_type: node_labels
                .get(labels::INSTANCE_TYPE)
                .or_else(|| node_labels.get(INSTANCE_TYPE_BETA))
                .cloned()
                .unwrap_or_default(),
            zone: zone.unwrap_or_default(),
            capacity_type: node_labels
                .get(labels::CAPACITY_TYPE)
                .and_then(|c| capacity_type(c)),
            taints,
            capacity: resources(status.and_then(|s| s.capacity.as_ref())),
            allocatable: resources(status.and_then(|s| s.allocatable.as_ref())),
            requested,
            pods: pod_labels,
            anti_affinity,
            schedulable: state != Readiness::Lost && !cordoned && !disrupted && !deleting,
            labels: node_labels,
            name,
        });
    }
    for f in in_flight {
        if registered_instances.contains(&f.instance_id)
            || (!f.nodeclaim.is_empty() && registered_claims.contains(&f.nodeclaim))
        {
            continue;
        }
        out.push(in_flight_node(f));
    }
    out
}

/// Whether the node carries nodewright's disruption taint: it is being drained (an
/// interruption, a removal) and takes no new pod.
pub fn tainted_for_disruption(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == labels::DISRUPTED_TAINT))
}

/// The name the solver knows capacity in flight by, until its Node registers.
pub fn in_flight_name(f: &InFlight) -> String {
    let claim = if f.nodeclaim.is_empty() {
        &f.instance_id
    } else {
        &f.nodeclaim
    };
    format!("nodeclaim/{claim}")
}

fn in_flight_node(f: &InFlight) -> ExistingNode {
    // The labels the kubelet and nodewright's user data will set, so affinity and topology
    // see the future node as they will see the real one.
    let mut node_labels = f.labels.clone();
    let mut fill = |key: &str, value: Option<&str>| {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            node_labels
                .entry(key.to_owned())
                .or_insert_with(|| v.to_owned());
        }
    };
    fill(labels::ZONE, Some(&f.zone));
    fill(labels::INSTANCE_TYPE, Some(&f.instance_type));
    fill(labels::NODEPOOL, f.nodepool.as_deref());
    fill(labels::CAPACITY_TYPE, f.capacity_type.map(|c| c.as_str()));
    fill(labels::NODECLAIM, Some(&f.nodeclaim));
    ExistingNode {
        name: in_flight_name(f),
        nodepool: f.nodepool.clone(),
        instance_type: f.instance_type.clone(),
        zone: f.zone.clone(),
        capacity_type: f.capacity_type,
        labels: node_labels,
        taints: f.taints.clone(),
        capacity: f.capacity.clone(),
        allocatable: f.allocatable.clone(),
        requested: Resources::default(),
        pods: vec![],
        anti_affinity: vec![],
        schedulable: true,
    }
}

fn capacity_type(value: &str) -> Option<CapacityType> {
    match value {
        labels::SPOT => Some(CapacityType::Spot),
        labels::ON_DEMAND => Some(CapacityType::OnDemand),
        _ => None,
    }
}

fn taint(t: &k8s_openapi::api::core::v1::Taint) -> Option<Taint> {
    let effect = match t.effect.as_str() {
        "NoSchedule" => TaintEffect::NoSchedule,
        "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
        "NoExecute" => TaintEffect::NoExecute,
        _ => return None,
    };
    Some(Taint {
        key: t.key.clone(),
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect,
    })
}

/// A node's capacity or allocatable map; a quantity the kubelet reported that does not parse
/// is left out (counted as zero) rather than failing the whole snapshot.
fn resources(map: Option<&BTreeMap<String, K8sQuantity>>) -> Resources {
    let mut out = Resources::default();
    for (name, q) in map.into_iter().flatten() {
        if let Ok(milli) = parse_milli(&q.0) {
            out.set(name, milli);
        }
    }
    out
}

#[cfg(test)]
mod tests;
