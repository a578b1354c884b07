//! What consolidation simulates with: the cluster as the core's solver sees it (every node
//! with its room, each node's pods that would move as demands, the DaemonSets) and what a
//! replacement could be launched from (NodePools, EC2NodeClasses, a catalog). Built from
//! the same objects as the rest of the [`super::Snapshot`], by the function and offline.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::from_k8s::pod_kind;
use super::snapshot::PodKind;
use crate::api::labels::ZONE;
use crate::api::{EC2NodeClass, NodePool};
use crate::catalog::Catalog;
use crate::kube::{existing_nodes, is_provisionable};
use crate::provision::spoken_for::book;
use crate::scheduling::{
    ExistingNode, NamespaceLabels, PodDemand, Snapshot as SolverSnapshot, solve,
};

#[derive(Debug, Clone, Default)]
pub struct Simulation {
    /// Every node, nodewright's or not: the pods of a node that goes may land on any.
    pub nodes: Vec<ExistingNode>,
    /// Per node: its pods that would have to move (not DaemonSet, mirror or finished).
    pub pods: HashMap<String, Vec<PodDemand>>,
    pub daemon_sets: Vec<PodDemand>,
    pub pools: Vec<NodePool>,
    pub classes: Vec<EC2NodeClass>,
    /// What a replacement may be: the bundled catalog in the zones the nodes run in.
    pub catalog: Catalog,
    /// The Namespaces' labels, for pod (anti-)affinity terms with a `namespaceSelector`.
    pub namespace_labels: NamespaceLabels,
    /// Pending pods the cluster's room already holds, by the node the solver places them
    /// on; their requests are booked on `nodes`. A consolidation of that node must find
    /// them room too: a move may not take the room a pending pod needs.
    pub pending_on: HashMap<String, Vec<PodDemand>>,
}

pub struct SimulationInputs<'a> {
    pub pools: &'a [NodePool],
    pub classes: &'a [EC2NodeClass],
    pub nodes: &'a [Node],
    pub pods: &'a [Pod],
    pub daemon_sets: &'a [DaemonSet],
    /// Spot's discount from on-demand when the catalog has no spot price of its own.
    pub spot_discount: f64,
    /// The Namespaces' labels; needed only when a pod's (anti-)affinity term has a
    /// `namespaceSelector` with terms ([`crate::scheduling::selects_namespaces`]).
    pub namespace_labels: &'a NamespaceLabels,
}

/// The simulation, or why there is none (no zone known, the catalog unreadable), and one
/// message per pod or DaemonSet whose spec cannot be read. A node holding such a pod is
/// left out of `pods`, so it is never consolidated on a guess. `inputs.pods` may hold
/// pending pods too: those the provisioner would act on are placed first
/// ([`Simulation::pending_on`]).
pub fn simulation(inputs: &SimulationInputs<'_>) -> (Result<Simulation, String>, Vec<String>) {
    let mut bound: HashMap<String, Vec<Pod>> = HashMap::new();
    for pod in inputs.pods {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            bound.entry(node.to_string()).or_default().push(pod.clone());
        }
    }
    let nodes = existing_nodes(inputs.nodes, &bound, &[]);
    let (ds, errors) = SolverSnapshot::from_k8s(&[], inputs.daemon_sets);
    let mut problems: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let mut pods = HashMap::new();
    for (node, list) in &bound {
        let mut demands = Vec::new();
        let mut readable = true;
        for pod in list.iter().filter(|p| pod_kind(p) == PodKind::Workload) {
            match PodDemand::from_pod(pod) {
                Ok(d) => demands.push(d),
                Err(e) => {
                    problems.push(e.to_string());
                    readable = false;
                }
            }
        }
        if readable {
            pods.insert(node.clone(), demands);
        }
    }
    let zones: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.labels.get(ZONE).cloned().filter(|z| !z.is_empty()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let catalog = Catalog::offline(&zones, inputs.spot_discount)
        .map_err(|e| format!("no catalog to price replacements with: {e}"));
    // A pending pod whose spec cannot be read is the provisioner's to report.
    let pending: Vec<PodDemand> = inputs
        .pods
        .iter()
        .filter(|p| is_provisionable(p))
        .filter_map(|p| PodDemand::from_pod(p).ok())
        .collect();
    let sim = catalog.map(|catalog| {
        let mut sim = Simulation {
            nodes,
            pods,
            daemon_sets: ds.daemon_sets,
            pools: inputs.pools.to_vec(),
            classes: inputs.classes.to_vec(),
            catalog,
            namespace_labels: inputs.namespace_labels.clone(),
            pending_on: HashMap::new(),
        };
        book_pending(&mut sim, pending);
        sim
    });
    (sim, problems)
}

/// Places `pending` on the cluster as it is and books each on the node it lands on; the
/// ones that need new capacity are the provisioner's and hold no node's room.
pub fn book_pending(sim: &mut Simulation, pending: Vec<PodDemand>) {
    if pending.is_empty() {
        return;
    }
    let snapshot = SolverSnapshot {
        pods: pending,
        daemon_sets: sim.daemon_sets.clone(),
        nodes: sim.nodes.clone(),
        namespace_labels: sim.namespace_labels.clone(),
    };
    let plan = solve(&snapshot, &sim.catalog, &sim.pools, &sim.classes);
    book(&mut sim.nodes, &snapshot.pods, &plan.nominations);
    let by_key: HashMap<String, &PodDemand> = snapshot.pods.iter().map(|p| (p.key(), p)).collect();
    for nomination in plan.nominations {
        let on = sim.pending_on.entry(nomination.node).or_default();
        on.extend(
            nomination
                .pods
                .iter()
                .filter_map(|k| by_key.get(k).map(|p| (*p).clone())),
        );
    }
}
