//! Consolidation (`consolidationPolicy: WhenEmptyOrUnderutilized`): a set of nodes goes when
//! the core's solver, run on the cluster without them, places all of their pods on the other
//! nodes' free room (delete), or on those plus new nodes costing at least [`MIN_SAVING`]
//! less in all (replace; each new node's DaemonSets are in the solver's sizing of it).
//! Karpenter's moves are a delete, or several nodes into ONE
//! (`pkg/controllers/disruption/{multinode,singlenode}consolidation.go`); here a set may be
//! replaced by as many nodes as the solver plans for its pods, so a fleet of half-used
//! nodes is repacked in a few commands rather than one node a sweep.
//! The set: the longest prefix (by binary search; at most [`MAX_MULTI_NODE`], within the
//! pools' budgets) that can go together, of the candidates in Karpenter's order (highest
//! savings per unit of disruption first), of the candidates that pay most for what they
//! hold ([`cost_per_use`]), and of the candidates that can each go alone (simulated one
//! by one among every candidate whose pool's budget allows one node, at most
//! [`MAX_SINGLE_NODE`] of them: the budget bounds how many nodes a command takes, not which
//! nodes are looked at); or the first single node that can go. The command that saves most
//! is taken; on a tie a delete (no launch), then fewer nodes (fewer pods moved). One
//! command per sweep, so the next sweep decides on what this one changed.

use std::collections::{HashMap, HashSet};

use super::balanced::BalancedPools;
use super::simulation::Simulation;
use super::snapshot::NodeView;
use crate::catalog::{CapacityType, Catalog};
use crate::scheduling::{
    MinValuesPolicy, Overlays, PlannedClaim, Prepared, ProvisioningPlan, Repacking,
    Snapshot as SolverSnapshot, solve_prepared,
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
    /// Their pods fit on the other nodes plus these claims, cheaper in all.
    Replace {
        claims: Vec<PlannedClaim>,
        savings: f64,
    },
    /// They stay, and why (in words for the node's Event).
    No(String),
}

impl Outcome {
    fn is_go(&self) -> bool {
        !matches!(self, Outcome::No(_))
    }

    fn savings(&self) -> f64 {
        match self {
            Outcome::Delete { savings } | Outcome::Replace { savings, .. } => *savings,
            Outcome::No(_) => 0.0,
        }
    }
}

/// The nodes of one command and what to do with them, or, when nothing can go, the
/// candidates tried with why each stays.
pub enum Decision<'a> {
    Go(Vec<&'a NodeView>, Outcome),
    Stay(Vec<(&'a NodeView, String)>),
}

/// What one consolidation chooses among.
pub struct Choices<'s, 'a> {
    /// The candidates in each order worth trying together (the order to disrupt them, then
    /// the worst value first), each already within the budgets.
    pub sets: &'s [&'s [&'a NodeView]],
    /// The candidates that may go on their own, in the order to disrupt them.
    pub singles: &'s [&'a NodeView],
    /// The most of the given nodes, in their order, that the budgets let go at once.
    pub together: &'s dyn Fn(&[&'a NodeView]) -> Vec<&'a NodeView>,
    /// The Balanced pools' totals: a move there must also pass their score.
    pub balanced: &'s BalancedPools,
}

/// The command saving most among: the longest prefix of each set that can go; the first
/// single node that can go alone; and the longest prefix of the nodes that can each go
/// alone, together (within the budgets). A delete wins a tie, then fewer nodes.
pub fn decide<'a>(
    sim: &Simulation,
    settling: &HashSet<&str>,
    choices: &Choices<'_, 'a>,
) -> Decision<'a> {
    let sim = &Simulator::new(sim, settling, choices.balanced);
    let mut best: Option<(Vec<&'a NodeView>, Outcome)> = None;
    let mut tried: Vec<&[&NodeView]> = Vec::new();
    for &set in choices.sets {
        if !tried.iter().any(|t| same(t, set)) {
            keep_better(&mut best, longest(sim, set));
            tried.push(set);
        }
    }
    if let Some((nodes, Outcome::Delete { savings })) = best {
        return Decision::Go(nodes, Outcome::Delete { savings });
    }
    // Stop once as many can go alone as the largest set holds: the budgets take no more.
    let enough = choices
        .sets
        .iter()
        .map(|s| s.len())
        .max()
        .unwrap_or(0)
        .max(2);
    let singles = &choices.singles[..choices.singles.len().min(MAX_SINGLE_NODE)];
    // With as many nodes as the budgets take at once, only a single node whose deletion
    // could save more is worth simulating: a node saves at most its price.
    let full = best
        .as_ref()
        .filter(|(nodes, _)| nodes.len() >= enough)
        .map(|(_, outcome)| outcome.savings());
    let mut stay = Vec::new();
    let mut alone = Vec::new();
    for &node in singles {
        if full.is_some_and(|s| node.price_per_hour.unwrap_or(0.0) < s - TIE) {
            continue;
        }
        match sim.simulate(&[node]) {
            Outcome::No(why) => stay.push((node, why)),
            outcome => {
                if alone.is_empty() {
                    keep_better(&mut best, Some((vec![node], outcome)));
                }
                alone.push(node);
                if alone.len() == enough {
                    break;
                }
            }
        }
    }
    if alone.len() >= 2 {
        let together = (choices.together)(&alone);
        if !tried.iter().any(|t| same(t, &together)) {
            keep_better(&mut best, longest(sim, &together));
        }
    }
    match best {
        Some((nodes, outcome)) => Decision::Go(nodes, outcome),
        None => Decision::Stay(stay),
    }
}

/// Savings closer than this ($ an hour, a hundredth of a cent) are a tie.
const TIE: f64 = 1e-4;

/// Keeps in `best` whichever saves more; on a tie a delete (no launch), then fewer nodes
/// (fewer pods moved).
fn keep_better<'a>(
    best: &mut Option<(Vec<&'a NodeView>, Outcome)>,
    found: Option<(Vec<&'a NodeView>, Outcome)>,
) {
    let Some(found) = found else { return };
    let rank = |(nodes, outcome): &(Vec<&NodeView>, Outcome)| {
        (
            outcome.savings(),
            matches!(outcome, Outcome::Delete { .. }),
            std::cmp::Reverse(nodes.len()),
        )
    };
    let better = match best.as_ref() {
        None => true,
        Some(b) => {
            let ((s1, d1, n1), (s2, d2, n2)) = (rank(&found), rank(b));
            if (s1 - s2).abs() > TIE {
                s1 > s2
            } else {
                (d1, n1) > (d2, n2)
            }
        }
    };
    if better {
        *best = Some(found);
    }
}

/// The same nodes in the same order.
fn same(a: &[&NodeView], b: &[&NodeView]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| std::ptr::eq(*x, *y))
}

/// The longest prefix of `nodes`, two at least, that can go together: all of them when
/// they can (one simulation), else by binary search.
fn longest<'a>(
    sim: &Simulator<'_>,
    nodes: &[&'a NodeView],
) -> Option<(Vec<&'a NodeView>, Outcome)> {
    let most = nodes.len().min(MAX_MULTI_NODE);
    if most < 2 {
        return None;
    }
    let all = sim.simulate(&nodes[..most]);
    if all.is_go() {
        return Some((nodes[..most].to_vec(), all));
    }
    let (mut lo, mut hi) = (2, most - 1);
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let outcome = sim.simulate(&nodes[..mid]);
        if outcome.is_go() {
            best = Some((nodes[..mid].to_vec(), outcome));
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    best
}

/// What a node pays an hour per unit of what it holds: its price over the larger of its
/// CPU and memory shares requested (at least 1%). The highest are the worst value, the
/// nodes a repacking gains most from.
pub fn cost_per_use(sim: &Simulation) -> impl Fn(&NodeView) -> f64 + '_ {
    let used: HashMap<&str, f64> = sim
        .nodes
        .iter()
        .map(|n| {
            let share = |used: i64, of: i64| if of > 0 { used as f64 / of as f64 } else { 1.0 };
            let most = share(n.requested.cpu, n.allocatable.cpu)
                .max(share(n.requested.memory, n.allocatable.memory));
            (n.name.as_str(), most.max(0.01))
        })
        .collect();
    move |node| {
        let share = used.get(node.name.as_str()).copied().unwrap_or(1.0);
        node.price_per_hour.unwrap_or(0.0) / share
    }
}

/// The solver's plan for `group`'s pods on the cluster without `group`: where
/// [`Simulator::simulate`] finds they would go (nominations onto the other nodes, claims for new
/// ones). `None`: a pod on one of them cannot be read. The sweep bench replays commands
/// with it.
pub fn placement(
    sim: &Simulation,
    settling: &HashSet<&str>,
    group: &[&NodeView],
) -> Option<ProvisioningPlan> {
    Simulator::new(sim, settling, &BalancedPools::new()).placement(group)
}

/// One sweep's consolidation simulations, with the NodePools prepared for packing once:
/// they are the same for every set of nodes tried. `settling`: nodes still inside their
/// pool's `consolidateAfter`, which take none of the pods (Karpenter's destination rule:
/// pods are not moved onto a node that only just launched or changed).
pub(crate) struct Simulator<'s> {
    sim: &'s Simulation,
    settling: &'s HashSet<&'s str>,
    balanced: &'s BalancedPools,
    prepared: Prepared,
}

impl<'s> Simulator<'s> {
    pub(crate) fn new(
        sim: &'s Simulation,
        settling: &'s HashSet<&'s str>,
        balanced: &'s BalancedPools,
    ) -> Self {
        let prepared = Prepared::new(
            &sim.pools,
            &sim.classes,
            &sim.catalog,
            &sim.daemon_sets,
            &sim.overlays,
        );
        Simulator {
            sim,
            settling,
            balanced,
            prepared,
        }
    }

    /// Runs the solver on the cluster without `group`, for `group`'s pods; a move that
    /// would go is then judged by the Balanced pools it touches.
    pub(crate) fn simulate(&self, group: &[&NodeView]) -> Outcome {
        let outcome = self.simulate_move(group);
        if !outcome.is_go() {
            return outcome;
        }
        match super::balanced::judge(group, outcome.savings(), self.balanced) {
            Ok(()) => outcome,
            Err(why) => Outcome::No(why),
        }
    }

    fn simulate_move(&self, group: &[&NodeView]) -> Outcome {
        let Some(plan) = self.placement(group) else {
            return Outcome::No("a pod on it cannot be read".into());
        };
        if let Some(u) = plan.unschedulable.first() {
            return Outcome::No(format!(
                "pod {} would fit nowhere else: {}",
                u.pod, u.reason
            ));
        }
        let prices: Option<f64> = group.iter().map(|n| n.price_per_hour).sum();
        if plan.node_claims.is_empty() {
            return Outcome::Delete {
                savings: prices.unwrap_or(0.0),
            };
        }
        replace(
            group,
            prices,
            &plan.node_claims,
            &self.sim.catalog,
            &plan.overlays,
        )
    }

    /// See [`placement`].
    fn placement(&self, group: &[&NodeView]) -> Option<ProvisioningPlan> {
        let sim = self.sim;
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
                    // Its pods are the ones being placed: they leave with it, so neither
                    // their labels (zone spread, others' anti-affinity) nor their own
                    // anti-affinity terms count where they were.
                    n.schedulable = false;
                    n.pods.clear();
                    n.anti_affinity.clear();
                } else if self.settling.contains(n.name.as_str()) {
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
            preferences: sim.preferences,
            // Never relaxed to make a move: Karpenter's "should not consolidate a node by
            // relaxing min values when policy is set to BestEffort".
            min_values: MinValuesPolicy::Strict,
        };
        Some(solve_prepared(&snapshot, &self.prepared, Repacking::Quick))
    }
}

/// The most a replacement of nodes costing `current` per hour in all may cost: less by
/// [`MIN_SAVING`]. The plan judges its claim by it, and the executor asks the provisioning
/// core to launch nothing above it (prices may have moved since the plan).
pub fn price_ceiling(current: f64) -> f64 {
    current * (1.0 - MIN_SAVING)
}

fn replace(
    group: &[&NodeView],
    prices: Option<f64>,
    claims: &[PlannedClaim],
    catalog: &Catalog,
    overlays: &Overlays,
) -> Outcome {
    let Some(current) = prices else {
        return Outcome::No("its price is unknown, so no saving can be shown".into());
    };
    let wanted = Replacing {
        ceiling: price_ceiling(current),
        replaced: group.iter().map(|n| n.instance_type.clone()).collect(),
        all_spot: group.iter().all(|n| n.capacity_type == "spot"),
    };
    match wanted.narrow(claims, catalog, overlays) {
        Ok(claims) => Outcome::Replace {
            savings: current - claims.iter().map(|c| c.price_per_hour).sum::<f64>(),
            claims,
        },
        Err(NotSaving::OverCeiling(price)) => Outcome::No(format!(
            "a replacement ({} at ${price:.4}/h) would not save {:.0}% of ${current:.4}/h",
            describe(claims),
            MIN_SAVING * 100.0,
        )),
        Err(NotSaving::TooNarrow(why)) => Outcome::No(why),
    }
}

/// A replacement's claims in a few words: the type of one, the count of several.
fn describe(claims: &[PlannedClaim]) -> String {
    match claims {
        [one] => one.instance_type.clone(),
        many => format!("{} nodes", many.len()),
    }
}

/// What a replacement must keep to: the decision judges its plan by it, and the launch
/// judges its own plan again at the prices of the moment.
pub struct Replacing {
    /// The most the claims may cost an hour in all ([`price_ceiling`]).
    pub ceiling: f64,
    /// The instance types of the nodes replaced.
    pub replaced: Vec<String>,
    /// Every node replaced is spot.
    pub all_spot: bool,
}

/// Why a replacement is not made.
#[derive(Debug, Clone, PartialEq)]
pub enum NotSaving {
    /// The claims planned cost this much an hour in all, above the ceiling.
    OverCeiling(f64),
    /// Under the ceiling, what is left to offer EC2 would not do (in words for the node).
    TooNarrow(String),
}

impl Replacing {
    /// `claims` narrowed to the types that keep the whole under the ceiling even if every
    /// launch gets its claim's dearest type and zone: each claim may cost its own price
    /// plus an equal share of what the plan leaves under the ceiling. One claim never lists
    /// the replaced nodes' own types (a node replaced by its own type saves nothing);
    /// several save by their number, so they may. Each narrowed claim must still meet its
    /// pool's `minValues` and the spot-to-spot rule.
    pub fn narrow(
        &self,
        claims: &[PlannedClaim],
        catalog: &Catalog,
        overlays: &Overlays,
    ) -> Result<Vec<PlannedClaim>, NotSaving> {
        let total: f64 = claims.iter().map(|c| c.price_per_hour).sum();
        if total > self.ceiling {
            return Err(NotSaving::OverCeiling(total));
        }
        let share = (self.ceiling - total) / claims.len().max(1) as f64;
        let replaced: Vec<&str> = match claims.len() {
            1 => self.replaced.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        };
        claims
            .iter()
            .map(|claim| {
                let narrowed = claim
                    .cheaper_than(catalog, overlays, claim.price_per_hour + share, &replaced)
                    .ok_or_else(|| too_narrow(claim, claims.len(), self.ceiling))?;
                if let Some(why) = narrowed.min_values_unmet(catalog) {
                    return Err(NotSaving::TooNarrow(why));
                }
                match too_few_spot_types(self.all_spot, &narrowed) {
                    Some(why) => Err(NotSaving::TooNarrow(why)),
                    None => Ok(narrowed),
                }
            })
            .collect()
    }
}

fn too_narrow(claim: &PlannedClaim, claims: usize, ceiling: f64) -> NotSaving {
    NotSaving::TooNarrow(if claims == 1 {
        format!(
            "only its own type ({}) would keep a replacement under ${ceiling:.4}/h in every zone it could launch in",
            claim.instance_type
        )
    } else {
        format!(
            "no type for the {} of its {claims} replacement nodes keeps them under ${ceiling:.4}/h in every zone they could launch in",
            claim.instance_type
        )
    })
}

/// Spot is replaced by spot only with at least [`MIN_SPOT_TYPES`] cheaper types to choose
/// from (Karpenter's spot-to-spot rule: a narrow choice walks down to the types spot takes
/// back first). `all_spot`: every node replaced is spot. `Some(why)` when `claim` is too
/// narrow; the plan judges by it, and the launch again at its own prices.
fn too_few_spot_types(all_spot: bool, claim: &PlannedClaim) -> Option<String> {
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
