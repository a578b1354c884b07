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
use crate::api::{EC2NodeClass, NodeOverlay, NodePool};
use crate::catalog::Catalog;
use crate::kube::{Readiness, existing_nodes, is_provisionable, readiness};
use crate::provision::spoken_for::{book, spoken_for};
use crate::scheduling::{
    ExistingNode, MinValuesPolicy, NamespaceLabels, Overlays, PodDemand, PreferencePolicy,
    Snapshot as SolverSnapshot, VolumeObjects, solve,
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
    /// The NodeOverlays a replacement is priced and sized with.
    pub overlays: Overlays,
    pub preferences: PreferencePolicy,
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
    pub overlays: &'a [NodeOverlay],
    pub preferences: PreferencePolicy,
    /// The claims, volumes and classes; needed only when a pod has a claim
    /// ([`crate::scheduling::claims_volumes`]): a pod moves only where its volumes allow.
    pub volumes: &'a VolumeObjects,
}

/// The pod as the solver sees it, held to where its volumes allow.
fn demand_of(pod: &Pod, volumes: &VolumeObjects) -> Result<PodDemand, crate::scheduling::PodError> {
    let mut demand = PodDemand::from_pod(pod)?;
    volumes.narrow(&mut demand, pod)?;
    Ok(demand)
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
    let mut nodes = existing_nodes(inputs.nodes, &bound, &[]);
    // A node still starting is capacity on its way for the provisioner, but no place to move
    // pods to: it may never become Ready (Karpenter moves pods onto initialized nodes only).
    let starting: BTreeSet<&str> = inputs
        .nodes
        .iter()
        .filter(|n| readiness(n) == Readiness::Starting)
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    for n in &mut nodes {
        if starting.contains(n.name.as_str()) {
            n.schedulable = false;
        }
    }
    let (ds, errors) = SolverSnapshot::from_k8s(&[], inputs.daemon_sets);
    let mut problems: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let mut pods = HashMap::new();
    for (node, list) in &bound {
        let mut demands = Vec::new();
        let mut readable = true;
        for pod in list.iter().filter(|p| pod_kind(p) == PodKind::Workload) {
            match demand_of(pod, inputs.volumes) {
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
    // Pods on their way to the room a move could take, booked first as Karpenter's
    // simulation adds the pods of deleting nodes: the pending ones, and those of nodes
    // draining in any pool, unless the draining node's recorded replacement holds them
    // (that replacement then takes no moved pod). A pending pod whose spec cannot be read
    // is the provisioner's to report.
    let pending: Vec<Pod> = inputs
        .pods
        .iter()
        .filter(|p| is_provisionable(p))
        .cloned()
        .collect();
    let spoken = spoken_for(&[], inputs.nodes, &bound, pending);
    spoken.withhold(&[], inputs.nodes, &mut nodes);
    let pending: Vec<PodDemand> = spoken
        .pods
        .iter()
        .filter_map(|p| demand_of(p, inputs.volumes).ok())
        .collect();
    let sim = catalog.map(|catalog| {
        let (overlays, _) = Overlays::resolved(
            inputs.overlays,
            inputs.pools,
            inputs.classes,
            &catalog,
            &ds.daemon_sets,
        );
        let mut sim = Simulation {
            nodes,
            pods,
            daemon_sets: ds.daemon_sets,
            pools: inputs.pools.to_vec(),
            classes: inputs.classes.to_vec(),
            catalog,
            namespace_labels: inputs.namespace_labels.clone(),
            pending_on: HashMap::new(),
            overlays,
            preferences: inputs.preferences,
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
        overlays: sim.overlays.clone(),
        preferences: sim.preferences,
        // Only where pending pods land on the nodes there are matters here, not how the
        // provisioner would launch for the rest.
        min_values: MinValuesPolicy::Strict,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "topology.kubernetes.io/zone": "us-east-1a",
                "node.kubernetes.io/instance-type": "m5.xlarge",
                "karpenter.sh/nodepool": "default",
                "nodewright.io/nodeclaim": format!("claim-{name}")}},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
            "status": {
                "allocatable": {"cpu": "3900m", "memory": "15Gi", "pods": "58"},
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                "conditions": [{"type": "Ready", "status": ready}]}
        }))
        .unwrap()
    }

    fn pending(name: &str, cpu: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable"}]}
        }))
        .unwrap()
    }

    /// The simulation of `nodes` and `pods` with no pool, class or DaemonSet; it reads
    /// every one of them.
    fn simulated(nodes: &[Node], pods: &[Pod]) -> Simulation {
        let (sim, problems) = simulation(&SimulationInputs {
            pools: &[],
            classes: &[],
            nodes,
            pods,
            daemon_sets: &[],
            spot_discount: 0.6,
            namespace_labels: &NamespaceLabels::default(),
            overlays: &[],
            preferences: PreferencePolicy::Respect,
            volumes: &VolumeObjects::default(),
        });
        assert!(problems.is_empty(), "{problems:?}");
        sim.unwrap()
    }

    /// A running pod mounting `claim`, on `node`.
    fn mounting(name: &str, claim: &str, node: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"nodeName": node,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    #[test]
    fn a_moving_pod_is_held_to_its_volumes_zone_and_a_node_with_an_unusable_claim_is_kept() {
        let volumes = VolumeObjects::new(
            vec![
                serde_json::from_value(json!({
                "metadata": {"name": "data", "namespace": "default"},
                "spec": {"volumeName": "pv-b"}}))
                .unwrap(),
            ],
            vec![
                serde_json::from_value(json!({
                "metadata": {"name": "pv-b"},
                "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In",
                     "values": ["us-east-1b"]}]}]}}}}))
                .unwrap(),
            ],
            vec![],
        );
        let nodes = [node("held", "True"), node("dangling", "True")];
        let pods = [
            mounting("db", "data", "held"),
            mounting("lost", "no-such-claim", "dangling"),
        ];
        let (sim, problems) = simulation(&SimulationInputs {
            pools: &[],
            classes: &[],
            nodes: &nodes,
            pods: &pods,
            daemon_sets: &[],
            spot_discount: 0.6,
            namespace_labels: &NamespaceLabels::default(),
            overlays: &[],
            preferences: PreferencePolicy::Respect,
            volumes: &volumes,
        });
        let sim = sim.unwrap();
        let db = &sim.pods["held"][0];
        let zone = db.requirements[0].get(ZONE).and_then(|r| r.finite_values());
        assert_eq!(
            zone.map(|z| z.iter().map(String::as_str).collect::<Vec<_>>()),
            Some(vec!["us-east-1b"]),
            "wherever it moves, the pod goes where its volume is"
        );
        assert!(
            !sim.pods.contains_key("dangling"),
            "a node whose pod's claim is missing is never consolidated on a guess"
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("no-such-claim"), "{problems:?}");
    }

    #[test]
    fn a_starting_node_is_no_destination_and_a_pending_pod_is_booked_where_it_fits() {
        let nodes = [node("ready", "True"), node("starting", "False")];
        let pods = [pending("waiting", "1")];
        let sim = simulated(&nodes, &pods);
        let schedulable: Vec<(&str, bool)> = sim
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.schedulable))
            .collect();
        assert_eq!(schedulable, [("ready", true), ("starting", false)]);
        assert_eq!(
            sim.pending_on
                .get("ready")
                .map(|p| p.iter().map(|d| d.name.as_str()).collect::<Vec<_>>()),
            Some(vec!["waiting"])
        );
        let ready = sim.nodes.iter().find(|n| n.name == "ready").unwrap();
        assert_eq!(
            ready.requested.cpu, 1000,
            "the pending pod's room is booked"
        );
    }

    /// A draining node's pods are booked where they would go, as pending pods are; a
    /// draining node whose replacement is recorded has its pods held there, and the
    /// replacement takes no moved pod.
    #[test]
    fn the_pods_of_draining_nodes_are_booked_first_and_a_recorded_replacement_is_withheld() {
        let draining = |name: &str, replacement: Option<&str>| {
            let mut n = node(name, "True");
            n.spec.as_mut().unwrap().taints = Some(vec![k8s_openapi::api::core::v1::Taint {
                key: crate::api::labels::DISRUPTED_TAINT.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]);
            if let Some(r) = replacement {
                n.metadata.annotations = Some(
                    [(
                        crate::api::labels::REPLACEMENT_ANNOTATION.to_string(),
                        r.to_string(),
                    )]
                    .into(),
                );
            }
            n
        };
        let mut fresh = node("fresh", "True");
        fresh.spec.as_mut().unwrap().provider_id =
            Some("aws:///us-east-1a/i-0f0e0d0c0b0a09080".into());
        let nodes = [
            node("ready", "True"),
            draining("draining", None),
            draining("replaced", Some("i-0f0e0d0c0b0a09080")),
            fresh,
        ];
        let bound = |name: &str, on: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"nodeName": on, "containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Running"}
            }))
            .unwrap()
        };
        let pods = [bound("moving", "draining"), bound("held", "replaced")];
        let sim = simulated(&nodes, &pods);
        let booked: Vec<(&str, Vec<&str>)> = sim
            .pending_on
            .iter()
            .map(|(n, p)| (n.as_str(), p.iter().map(|d| d.name.as_str()).collect()))
            .collect();
        assert_eq!(booked, [("ready", vec!["moving"])]);
        let fresh = sim.nodes.iter().find(|n| n.name == "fresh").unwrap();
        assert!(!fresh.schedulable, "the replacement takes no moved pod");
    }
}
