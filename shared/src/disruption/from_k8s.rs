//! From what the API server and EC2 return to the sweeper's [`Snapshot`]. Pure: the caller
//! lists the objects (the function through its ports, `sweep-plan` from files). A node,
//! pod or NodePool that cannot be read is reported by name and field and never becomes a
//! candidate.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::budget::pool_budgets;
use super::capacity::pool_capacity;
use super::snapshot::{InstanceView, NodeView, PodKind, PodView, PoolPolicy, Snapshot};
use crate::api::labels::{CAPACITY_TYPE, DO_NOT_DISRUPT, INSTANCE_TYPE, NODECLAIM, NODEPOOL};
use crate::api::{NillableDuration, NodePool};
use crate::aws::{InstanceState, OwnedInstance};
use crate::kube::{Readiness, parse_provider_id, readiness, tainted_for_disruption};
use crate::resources::{Resources, parse_milli};
use crate::scheduling::overlay_labels;
use crate::scheduling::{Selector, effective_requests};

/// On a node: when the sweeper first saw it empty (RFC 3339). Emptiness is counted from it,
/// so `consolidateAfter` holds across invocations without any store of our own.
pub const EMPTY_SINCE_ANNOTATION: &str = "nodewright.io/empty-since";
/// The legacy (v1alpha5) label naming a node's Provisioner, read as its NodePool.
pub const PROVISIONER_NAME: &str = "karpenter.sh/provisioner-name";
/// The kubelet's marker of a static pod's mirror.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// `controller.kubernetes.io/pod-deletion-cost`, part of Karpenter's eviction cost.
const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// When a node without the empty-since annotation counts as empty from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstSight {
    /// From now on (the function: it writes the annotation and counts from the next sweep).
    Mark,
    /// From its creation (offline, where nothing is written; `sweep-plan` says so).
    SinceCreation,
}

pub struct Inputs<'a> {
    pub pools: &'a [NodePool],
    pub nodes: &'a [Node],
    /// Every pod; those bound to a node are grouped by it.
    pub pods: &'a [Pod],
    pub pdbs: &'a [PodDisruptionBudget],
    /// This cluster's live instances (`InstanceInventory::list_owned`); `None` offline.
    pub instances: Option<&'a [OwnedInstance]>,
    /// Price per hour of (instance type, capacity type), when known.
    pub price: &'a dyn Fn(&str, &str) -> Option<f64>,
    /// NodeOverlays: a node's price is what they make of `price` for its labels.
    pub overlays: &'a crate::scheduling::Overlays,
    pub first_sight: FirstSight,
    /// Whether node repair is on (`repair.rs`); off, no node is unhealthy.
    pub node_repair: bool,
    /// What a pod's `do-not-disrupt` duration counts to.
    pub now: Timestamp,
}

/// The snapshot, and one message per object that could not be read (naming it and the
/// field).
pub fn snapshot(inputs: &Inputs<'_>) -> (Snapshot, Vec<String>) {
    let mut problems = Vec::new();
    let pools = inputs.pools.iter().map(pool_policy).collect();
    let blocked = blocked_pods(inputs.pdbs, inputs.pods, &mut problems);
    let mut pods_by_node: HashMap<&str, Vec<PodView>> = HashMap::new();
    // Per node: when the newest pod that would move was created (consolidation's churn
    // guard: a node that just gained work waits `consolidateAfter`).
    let mut arrivals: HashMap<&str, Timestamp> = HashMap::new();
    // Per node: the requests of its pods that still run, and of those that would move.
    let mut requested: HashMap<&str, (Resources, Resources)> = HashMap::new();
    for pod in inputs.pods {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        let Some(node) = spec.node_name.as_deref() else {
            continue;
        };
        let view = pod_view(pod, &blocked, inputs.now);
        if view.kind != PodKind::Finished {
            // A pod whose requests cannot be read counts as requesting nothing: headroom
            // is then overstated, never a reason to remove a node by itself.
            let r = effective_requests(spec).unwrap_or_default();
            let (all, moving) = requested.entry(node).or_default();
            all.add(&r);
            if view.moves() {
                moving.add(&r);
            }
        }
        if let (true, Some(created)) = (view.moves(), &pod.metadata.creation_timestamp) {
            let newest = arrivals.entry(node).or_insert(created.0);
            *newest = (*newest).max(created.0);
        }
        pods_by_node.entry(node).or_default().push(view);
    }
    let mut nodes = Vec::new();
    for node in inputs.nodes {
        match node_view(node, inputs) {
            Ok(mut view) => {
                view.pods = pods_by_node.remove(view.name.as_str()).unwrap_or_default();
                view.last_pod_arrival = arrivals.get(view.name.as_str()).copied();
                let (all, moving) = requested.remove(view.name.as_str()).unwrap_or_default();
                view.free = allocatable(node).map(|mut free| {
                    free.sub(&all);
                    free
                });
                view.moving_requests = moving;
                nodes.push(view);
            }
            Err(e) => problems.push(e),
        }
    }
    let instances = inputs.instances.map(|list| {
        list.iter()
            .filter(|i| {
                !matches!(
                    i.state,
                    InstanceState::Terminated | InstanceState::ShuttingDown
                )
            })
            .map(|i| InstanceView {
                id: i.id.clone(),
                launched: i.launch_time,
            })
            .collect()
    });
    (
        Snapshot {
            pools,
            nodes,
            instances,
            simulation: None,
        },
        problems,
    )
}

fn pool_policy(np: &NodePool) -> PoolPolicy {
    let after = |d: Option<NillableDuration>| match d {
        Some(NillableDuration::After(d)) => Some(d.0),
        _ => None,
    };
    // A floor that cannot be read must not become no floor: like an unreadable budget,
    // it keeps the pool's nodes and says why.
    let capacity = pool_capacity(np);
    let budgets = match (pool_budgets(np), capacity.as_ref()) {
        (Ok(b), Ok(_)) => Ok(b),
        (Err(e), _) => Err(format!("NodePool {}: {e}", np.metadata.name)),
        (_, Err(e)) => Err(format!("NodePool {}: {e}", np.metadata.name)),
    };
    PoolPolicy {
        name: np.metadata.name.clone(),
        consolidation: np.spec.disruption.consolidation_policy,
        consolidate_after: after(Some(np.spec.disruption.consolidate_after)),
        expire_after: after(np.spec.template.spec.expire_after),
        budgets,
        termination_grace: np.spec.template.spec.termination_grace_period.map(|d| d.0),
        capacity: capacity.unwrap_or_default(),
        replicas: np.spec.static_replicas(),
    }
}

fn node_view(node: &Node, inputs: &Inputs<'_>) -> Result<NodeView, String> {
    let meta = &node.metadata;
    let name = meta.name.clone().unwrap_or_default();
    let field = |f: &str, m: &str| format!("Node {name}: {f}: {m}");
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    let created = meta
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .ok_or_else(|| {
            field(
                "metadata.creationTimestamp",
                "missing; the node's age is unknown",
            )
        })?;
    // The executor clears the marker by writing it empty (a merge patch cannot tell
    // "remove" from "unchanged" through the annotation port).
    let empty_since = match annotations
        .get(EMPTY_SINCE_ANNOTATION)
        .filter(|v| !v.is_empty())
    {
        Some(v) => Some(v.parse::<Timestamp>().map_err(|e| {
            field(
                &format!("metadata.annotations[{EMPTY_SINCE_ANNOTATION}]"),
                &format!("{v:?} is not an RFC 3339 time ({e})"),
            )
        })?),
        None if inputs.first_sight == FirstSight::SinceCreation => Some(created),
        None => None,
    };
    let spec = node.spec.as_ref();
    let tainted = tainted_for_disruption(node);
    let instance_id = spec
        .and_then(|s| s.provider_id.as_deref())
        .and_then(parse_provider_id)
        .map(|p| p.instance_id);
    let owned_instance = match (inputs.instances, &instance_id) {
        (None, _) => true,
        (Some(list), Some(id)) => list.iter().any(|i| &i.id == id),
        (Some(_), None) => false,
    };
    let instance_type = labels.get(INSTANCE_TYPE).cloned().unwrap_or_default();
    let capacity_type = labels.get(CAPACITY_TYPE).cloned().unwrap_or_default();
    Ok(NodeView {
        pool: labels
            .get(NODEPOOL)
            .or_else(|| labels.get(PROVISIONER_NAME))
            .cloned(),
        instance_id,
        launched_by_nodewright: labels.contains_key(NODECLAIM),
        owned_instance,
        created,
        ready: readiness(node) == Readiness::Ready,
        initialized: readiness(node) != Readiness::Starting,
        disrupting: tainted || meta.deletion_timestamp.is_some(),
        cordoned: node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true),
        removing: crate::removal::Record::read(&name, annotations)
            .ok()
            .flatten()
            .and_then(|r| r.cause.disruption()),
        unhealthy: inputs
            .node_repair
            .then(|| node_unhealthy(node, inputs.now))
            .flatten(),
        backoff: crate::removal::Backoff::read(annotations),
        do_not_disrupt: annotations.get(DO_NOT_DISRUPT).is_some_and(|v| v == "true"),
        empty_since,
        price_per_hour: (inputs.price)(&instance_type, &capacity_type)
            .map(|p| inputs.overlays.price(&overlay_labels(labels), p)),
        instance_type,
        capacity_type,
        pods: Vec::new(),
        last_pod_arrival: None,
        drifted: None,
        free: None,
        moving_requests: Resources::default(),
        name,
    })
}

fn node_unhealthy(node: &Node, now: Timestamp) -> Option<super::Unhealthy> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    super::unhealthy(
        conditions.iter().map(|c| {
            let since = c.last_transition_time.as_ref().map(|t| t.0);
            (c.type_.as_str(), c.status.as_str(), since)
        }),
        now,
    )
}

/// The Node's `status.allocatable` (None when it reports none, as before its kubelet
/// registers); a quantity that cannot be read counts as zero.
fn allocatable(node: &Node) -> Option<Resources> {
    let map = node.status.as_ref()?.allocatable.as_ref()?;
    let mut out = Resources::default();
    for (name, q) in map {
        if let Ok(milli) = parse_milli(&q.0) {
            out.set(name, milli);
        }
    }
    Some(out)
}

fn pod_view(pod: &Pod, blocked: &HashMap<(String, String), String>, now: Timestamp) -> PodView {
    let meta = &pod.metadata;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
    let name = meta.name.clone().unwrap_or_default();
    let annotations = meta.annotations.clone().unwrap_or_default();
    let kind = pod_kind(pod);
    // Karpenter's `EvictionCost` (pkg/utils/disruption): 1, plus deletion cost / 2^27,
    // plus priority / 2^25, clamped to [-10, 10].
    let deletion_cost = annotations
        .get(DELETION_COST)
        .and_then(|c| c.parse::<f64>().ok())
        .unwrap_or(0.0);
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    let eviction_cost = (1.0 + deletion_cost / 2f64.powi(27) + f64::from(priority) / 2f64.powi(25))
        .clamp(-10.0, 10.0);
    PodView {
        blocked_by_pdb: meta
            .deletion_timestamp
            .is_none()
            .then(|| blocked.get(&(namespace.clone(), name.clone())).cloned())
            .flatten(),
        // A pod already being deleted is leaving anyway: its annotation holds nothing.
        do_not_disrupt: meta.deletion_timestamp.is_none() && crate::drain::do_not_disrupt(pod, now),
        namespace,
        name,
        kind,
        eviction_cost,
    }
}

/// Whether the pod would have to move if its node went.
pub(super) fn pod_kind(pod: &Pod) -> PodKind {
    let meta = &pod.metadata;
    if crate::drain::finished(pod) {
        PodKind::Finished
    } else if meta.deletion_timestamp.is_some() && !owned_by(pod, "StatefulSet") {
        // A StatefulSet's pod comes back under the same name once it is gone, so it needs
        // room as a running one does (Karpenter's `IsReschedulable`).
        PodKind::Terminating
    } else if owned_by(pod, "DaemonSet") {
        PodKind::DaemonSet
    } else if meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
    {
        PodKind::Mirror
    } else {
        PodKind::Workload
    }
}

fn owned_by(pod: &Pod, kind: &str) -> bool {
    pod.metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|o| o.kind == kind))
}

/// The pod's Ready condition is False (the Eviction API's "unhealthy").
fn not_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "False")
}

/// (namespace, pod) -> the PodDisruptionBudget that allows no disruption of it now, or the
/// budgets (`a and b`) of a pod under more than one: the Eviction API refuses such a pod
/// whatever they allow, so it holds its node as Karpenter's candidate filter has it.
pub(super) fn blocked_pods(
    pdbs: &[PodDisruptionBudget],
    pods: &[Pod],
    problems: &mut Vec<String>,
) -> HashMap<(String, String), String> {
    // Per pod: the budgets over it, in order, and whether one allows no disruption now.
    let mut over: HashMap<(String, String), (Vec<String>, Option<String>)> = HashMap::new();
    for pdb in pdbs {
        let ns = pdb
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pdb.metadata.name.clone().unwrap_or_default();
        // policy/v1: a null selector selects no pod.
        let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
            continue;
        };
        let selector = match Selector::from_k8s(selector) {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!(
                    "PodDisruptionBudget {ns}/{name}: spec.selector: {e}"
                ));
                continue;
            }
        };
        let exhausted = pdb.status.as_ref().map(|s| s.disruptions_allowed) == Some(0);
        // `unhealthyPodEvictionPolicy: AlwaysAllow`: a pod that is not Ready may be evicted
        // whatever the budget allows.
        let always_allow_unready = pdb
            .spec
            .as_ref()
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
            == Some("AlwaysAllow");
        for pod in pods {
            let pod_ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            if pod_ns == ns && selector.matches(&labels) {
                let key = (ns.clone(), pod.metadata.name.clone().unwrap_or_default());
                let (names, first_exhausted) = over.entry(key).or_default();
                names.push(name.clone());
                let holds = exhausted && !(always_allow_unready && not_ready(pod));
                if holds && first_exhausted.is_none() {
                    *first_exhausted = Some(name.clone());
                }
            }
        }
    }
    over.into_iter()
        .filter_map(|(pod, (names, exhausted))| {
            let held = exhausted.or_else(|| (names.len() > 1).then(|| names.join(" and ")));
            held.map(|by| (pod, by))
        })
        .collect()
}
