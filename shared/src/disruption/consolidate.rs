//! Consolidation (`consolidationPolicy: WhenEmptyOrUnderutilized`): a node goes when the
//! core's solver, run on the cluster without it, places all of its pods on the other nodes'
//! free room (delete), or on those plus ONE new node cheaper than what goes (replace).
//! As in Karpenter (`pkg/controllers/disruption/{multinode,singlenode}consolidation.go`):
//! first the longest prefix of the candidates (highest savings per unit of disruption first, at most
//! [`MAX_MULTI_NODE`], and within the pools' budgets) that can go together, by binary
//! search; failing that, the first single node that can, among every candidate whose pool's
//! budget allows one node (at most [`MAX_SINGLE_NODE`] of them): the budget bounds how many
//! nodes a command takes, not which nodes are looked at. Unlike Karpenter, a single node whose deletion saves as much as
//! the several-node replacement is preferred to it (no launch, fewer pods moved). One
//! command per sweep, so the next sweep decides on what this one changed.

use std::collections::HashSet;

use super::simulation::Simulation;
use super::snapshot::NodeView;
use crate::catalog::{CapacityType, Catalog};
use crate::scheduling::{
    Overlays, PlannedClaim, ProvisioningPlan, Snapshot as SolverSnapshot, solve,
};

/// The saving a replacement must bring, as a fraction of the replaced nodes' price: below
/// 10%, the churn (drained pods, cold caches, a new node's boot) is not worth it.
pub const MIN_SAVING: f64 = 0.10;
/// Spot is replaced by spot only when the replacement may be any of this many types
/// (Karpenter's `MinInstanceTypesForSpotToSpotConsolidation`): a narrow choice would walk
/// the fleet down to the type most likely to be interrupted.
pub const MIN_SPOT_TYPES: usize = 15;
/// The most nodes one command consolidates (Karpenter's multi-node limit).
pub const MAX_MULTI_NODE: usize = 100;
/// The most candidates simulated one by one in a sweep. Karpenter bounds its single-node
/// pass by time (three minutes); a count keeps a sweep's decision bounded and the same on
/// every machine. Each is a solve of one node's pods against the cluster.
pub const MAX_SINGLE_NODE: usize = 200;

/// What a simulation found for a set of nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Their pods fit on the other nodes.
    Delete { savings: f64 },
    /// Their pods fit on the other nodes plus this one cheaper claim (boxed: a claim is
    /// large beside the other variants).
    Replace {
        claim: Box<PlannedClaim>,
        savings: f64,
    },
    /// They stay, and why (in words for the node's Event).
    No(String),
}

impl Outcome {
    fn is_go(&self) -> bool {
        !matches!(self, Outcome::No(_))
    }
}

/// The nodes of one command and what to do with them, or, when nothing can go, the
/// candidates tried with why each stays.
pub enum Decision<'a> {
    Go(Vec<&'a NodeView>, Outcome),
    Stay(Vec<(&'a NodeView, String)>),
}

/// `candidates` are in the order to disrupt them and already within their budgets.
/// `singles` are the candidates that may go on their own, in the same order (`candidates`
/// first).
pub fn decide<'a>(
    sim: &Simulation,
    settling: &HashSet<&str>,
    candidates: &[&'a NodeView],
    singles: &[&'a NodeView],
) -> Decision<'a> {
    let most = candidates.len().min(MAX_MULTI_NODE);
    let (mut lo, mut hi) = (2, most);
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let outcome = simulate(sim, settling, &candidates[..mid]);
        if outcome.is_go() {
            best = Some((mid, outcome));
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    if let Some((n, Outcome::Delete { savings })) = best {
        return Decision::Go(candidates[..n].to_vec(), Outcome::Delete { savings });
    }
    let mut stay = Vec::new();
    for &node in singles.iter().take(MAX_SINGLE_NODE) {
        match (simulate(sim, settling, &[node]), &best) {
            (Outcome::No(why), None) => stay.push((node, why)),
            (Outcome::No(_), Some(_)) => {}
            // A delete that saves as much as the several-node replacement beats it: no
            // launch, fewer pods moved.
            (Outcome::Delete { savings }, Some((_, Outcome::Replace { savings: s, .. })))
                if savings >= *s - 1e-9 =>
            {
                return Decision::Go(vec![node], Outcome::Delete { savings });
            }
            (_, Some(_)) => {}
            (outcome, None) => return Decision::Go(vec![node], outcome),
        }
    }
    match best {
        Some((n, outcome)) => Decision::Go(candidates[..n].to_vec(), outcome),
        None => Decision::Stay(stay),
    }
}

/// Runs the solver on the cluster without `group`, for `group`'s pods. `settling`: nodes
/// still inside their pool's `consolidateAfter`, which take none of them (Karpenter's
/// destination rule: pods are not moved onto a node that only just launched or changed).
pub fn simulate(sim: &Simulation, settling: &HashSet<&str>, group: &[&NodeView]) -> Outcome {
    let Some(plan) = placement(sim, settling, group) else {
        return Outcome::No("a pod on it cannot be read".into());
    };
    if let Some(u) = plan.unschedulable.first() {
        return Outcome::No(format!(
            "pod {} would fit nowhere else: {}",
            u.pod, u.reason
        ));
    }
    let prices: Option<f64> = group.iter().map(|n| n.price_per_hour).sum();
    let mut claims = plan.node_claims;
    match claims.len() {
        0 => Outcome::Delete {
            savings: prices.unwrap_or(0.0),
        },
        1 => {
            let claim = claims.remove(0);
            replace(group, prices, claim, &sim.catalog, &plan.overlays)
        }
        n => Outcome::No(format!("its pods would need {n} new nodes")),
    }
}

/// The most a replacement of nodes costing `current` per hour in all may cost: less by
/// [`MIN_SAVING`]. The plan judges its claim by it, and the executor asks the provisioning
/// core to launch nothing above it (prices may have moved since the plan).
pub fn price_ceiling(current: f64) -> f64 {
    current * (1.0 - MIN_SAVING)
}

/// The solver's plan for `group`'s pods on the cluster without `group`: where
/// [`simulate`] finds they would go (nominations onto the other nodes, claims for new
/// ones). `None`: a pod on one of them cannot be read. The sweep bench replays commands
/// with it.
pub fn placement(
    sim: &Simulation,
    settling: &HashSet<&str>,
    group: &[&NodeView],
) -> Option<ProvisioningPlan> {
    let names: HashSet<&str> = group.iter().map(|n| n.name.as_str()).collect();
    let mut pods = Vec::new();
    for node in group {
        pods.extend(sim.pods.get(&node.name)?.iter().cloned());
        // Pending pods this node's room was holding need room elsewhere now.
        pods.extend(
            sim.pending_on
                .get(&node.name)
                .into_iter()
                .flatten()
                .cloned(),
        );
    }
    let nodes = sim
        .nodes
        .iter()
        .map(|n| {
            let mut n = n.clone();
            if names.contains(n.name.as_str()) {
                // Its pods are the ones being placed: they leave with it, so neither their
                // labels (zone spread, others' anti-affinity) nor their own anti-affinity
                // terms count where they were.
                n.schedulable = false;
                n.pods.clear();
                n.anti_affinity.clear();
            } else if settling.contains(n.name.as_str()) {
                n.schedulable = false;
            }
            n
        })
        .collect();
    let snapshot = SolverSnapshot {
        pods,
        daemon_sets: sim.daemon_sets.clone(),
        nodes,
        namespace_labels: sim.namespace_labels.clone(),
        overlays: sim.overlays.clone(),
    };
    Some(solve(&snapshot, &sim.catalog, &sim.pools, &sim.classes))
}

fn replace(
    group: &[&NodeView],
    prices: Option<f64>,
    claim: PlannedClaim,
    catalog: &Catalog,
    overlays: &Overlays,
) -> Outcome {
    let Some(current) = prices else {
        return Outcome::No("its price is unknown, so no saving can be shown".into());
    };
    let replaced: Vec<&str> = group.iter().map(|n| n.instance_type.as_str()).collect();
    let Some(cheaper) = claim.cheaper_than(catalog, overlays, price_ceiling(current), &replaced)
    else {
        if claim.price_per_hour <= price_ceiling(current) {
            return Outcome::No(format!(
                "only its own type ({}) would save {:.0}% of ${current:.4}/h",
                claim.instance_type,
                MIN_SAVING * 100.0,
            ));
        }
        return Outcome::No(format!(
            "a replacement ({} at ${:.4}/h) would not save {:.0}% of ${:.4}/h",
            claim.instance_type,
            claim.price_per_hour,
            MIN_SAVING * 100.0,
            current
        ));
    };
    let claim = cheaper;
    if let Some(why) = claim.min_values_unmet(catalog) {
        return Outcome::No(why);
    }
    let all_spot = group.iter().all(|n| n.capacity_type == "spot");
    if let Some(why) = too_few_spot_types(all_spot, &claim) {
        return Outcome::No(why);
    }
    Outcome::Replace {
        savings: current - claim.price_per_hour,
        claim: Box::new(claim),
    }
}

/// Spot is replaced by spot only with at least [`MIN_SPOT_TYPES`] cheaper types to choose
/// from (Karpenter's spot-to-spot rule: a narrow choice walks down to the types spot takes
/// back first). `all_spot`: every node replaced is spot. `Some(why)` when `claim` is too
/// narrow; the plan judges by it, and the launch again at its own prices.
pub fn too_few_spot_types(all_spot: bool, claim: &PlannedClaim) -> Option<String> {
    let narrow = all_spot
        && claim.capacity_type == CapacityType::Spot
        && claim.instance_types.len() < MIN_SPOT_TYPES;
    narrow.then(|| {
        format!(
            "a spot replacement could be only {} types cheaper than it (spot-to-spot needs {MIN_SPOT_TYPES})",
            claim.instance_types.len()
        )
    })
}
