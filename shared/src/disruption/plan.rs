//! [`plan_disruption`]: which of nodewright's nodes go now, in which order, and why the
//! other candidates stay. The rules, in order (Karpenter's disruption controller,
//! `pkg/controllers/disruption/`, is the model):
//! 0. a static NodePool's surplus (`static_pools.rs`) goes at once, outside the budgets;
//!    repair (`repair.rs`): a node with a condition past its toleration is replaced at
//!    once, outside the budgets, unless too much of its pool is unhealthy;
//! 1. only a Ready, healthy node of a NodePool nodewright serves, not already being
//!    disrupted, is a candidate;
//! 2. emptiness (not in a static pool, which keeps its count): nothing but DaemonSet,
//!    mirror or finished pods for `consolidateAfter`, counted from when the sweeper first
//!    saw it empty (its `nodewright.io/empty-since` annotation, set by the executor, so the
//!    first sight never removes a node);
//! 3. expiration: older than `expireAfter`; then drift (`drift.rs`, found by the sweeper:
//!    the node's instance no longer matches what its pool and class would launch now);
//! 4. `karpenter.sh/do-not-disrupt` on the node or on a pod that would move keeps it, and so
//!    does a PodDisruptionBudget that allows no disruption of such a pod;
//! 5. candidates are taken cheapest to disrupt first (Karpenter's eviction cost: pod
//!    priority and `pod-deletion-cost`, scaled by the node's remaining lifetime), each
//!    within its pool's budget for the reason; expired nodes also within the pool's
//!    expiration cap (`budget.rs`: a tenth of its nodes at once, at least one, whatever
//!    the budgets allow);
//! 6. consolidation (`WhenEmptyOrUnderutilized`, never of a static pool), only when
//!    nothing else is going: nodes with pods, launched and last given a pod at least
//!    `consolidateAfter` ago, are simulated away with the core's solver (`consolidate.rs`),
//!    onto no node still inside its own, and at most one delete or replace command is
//!    planned.
//!
//! Rules 1 to 5 collect the candidates (`candidates.rs`); this file builds the commands
//! from them within the budgets and capacity floors; why a node stays is `kept.rs`.

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use serde::Serialize;

use super::Reason;
use super::budget::{allowed, expiration_cap, expirations_allowed};
use super::candidates::{Candidate, Collected, collect, settled, sort};
use super::capacity::floor;
use super::consolidate::{self, Choices, Decision, Outcome};
use super::headroom::Room;
use super::hygiene::{NeverJoined, OrphanNode, never_joined, orphan_nodes};
use super::kept::{Kept, KeptWhy, kept};
use super::repair;
use super::snapshot::{NodeView, PoolPolicy, Snapshot};
use super::static_pools;
use crate::scheduling::PlannedClaim;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The node goes; its pods (if any) are rescheduled on capacity the provisioner finds.
    Delete,
    /// The nodes go and their pods need new capacity, launched and Ready before they drain
    /// (`replace_first.rs`): an expired or drifted node with workloads, or underutilized
    /// nodes whose pods fit on one cheaper node (`replacement`), asked for once for all of
    /// them.
    Replace,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Command {
    pub action: Action,
    pub reason: Reason,
    pub nodes: Vec<String>,
    /// What the fleet stops paying per hour (0 for a replacement, which is paid again).
    pub savings_per_hour: f64,
    /// The nodes to launch instead, in the solver's claim shape (consolidation only; an
    /// expired node's replacement is planned by the provisioning core when asked). The
    /// executor asks the core for the command's pods again and launches nothing above
    /// `price_ceiling` of the nodes' price in all: prices may have moved since this plan.
    #[serde(skip)]
    pub replacement: Vec<PlannedClaim>,
}

/// The empty-since marker to write on a node (`Some(now)`) or clear (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmptyMark {
    pub node: String,
    pub since: Option<Timestamp>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// In the order to carry them out.
    pub commands: Vec<Command>,
    pub kept: Vec<Kept>,
    pub empty_marks: Vec<EmptyMark>,
    pub never_joined: Vec<NeverJoined>,
    pub orphans: Vec<OrphanNode>,
    /// What nodewright's nodes cost per hour now, and once the commands are carried out.
    pub price_before: f64,
    pub price_after: f64,
}

pub fn plan_disruption(snapshot: &Snapshot, now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    // A surplus node goes for the scale-down, unreplaced, even when it is also due a repair.
    let scale_down = static_pools::scale_down(snapshot);
    let surplus: HashSet<&str> = scale_down
        .iter()
        .flat_map(|c| c.nodes.iter().map(String::as_str))
        .collect();
    plan.commands.extend(scale_down.iter().cloned());
    let repairs = repair::repairs(snapshot, now);
    plan.commands.extend(
        repairs
            .commands
            .into_iter()
            .filter(|c| !c.nodes.iter().any(|n| surplus.contains(n.as_str()))),
    );
    plan.kept.extend(repairs.kept);
    let Collected {
        candidates,
        mut underutilized,
        counts,
        expiring,
        mut room,
    } = collect(snapshot, now, &mut plan);

    let mut used: HashMap<&str, usize> = HashMap::new();
    let mut expired_used: HashMap<&str, usize> = HashMap::new();
    let mut lowered: HashMap<&str, usize> = HashMap::new();
    // Pools with a removal under way or planned now.
    let mut busy: HashSet<&str> = counts
        .iter()
        .filter(|(_, (_, disrupting))| *disrupting > 0)
        .map(|(pool, _)| *pool)
        .chain(repairs.pools)
        .collect();
    for c in candidates {
        if surplus.contains(c.node.name.as_str()) {
            continue;
        }
        let (nodes, disrupting) = counts[c.pool.name.as_str()];
        if let Some(why) = at_floor(&c, nodes - disrupting, &lowered, &room, now) {
            plan.kept.push(kept(c.node, c.reason, why));
            continue;
        }
        let used = used.entry(c.pool.name.as_str()).or_default();
        // `blocker` has already kept the nodes of a pool whose budgets cannot be read.
        let budgets = c.pool.budgets.as_deref().unwrap_or_default();
        if allowed(budgets, c.reason, nodes, disrupting, now) <= *used {
            plan.kept
                .push(kept(c.node, c.reason, budget(c.pool, c.reason, None)));
            continue;
        }
        if c.reason == Reason::Expired {
            let pool = c.pool.name.as_str();
            let under_way = expiring.get(pool).copied().unwrap_or(0);
            let planned = expired_used.entry(pool).or_default();
            if expirations_allowed(budgets, nodes, disrupting, under_way, now) <= *planned {
                plan.kept.push(kept(
                    c.node,
                    c.reason,
                    KeptWhy::ExpirationCap {
                        pool: c.pool.name.clone(),
                        cap: expiration_cap(nodes),
                    },
                ));
                continue;
            }
            *planned += 1;
        }
        *used += 1;
        busy.insert(c.pool.name.as_str());
        if lowers(c.reason) {
            *lowered.entry(c.pool.name.as_str()).or_default() += 1;
            room.take(c.pool.name.as_str(), c.node);
        }
        let replaced = matches!(c.reason, Reason::Expired | Reason::Drifted);
        let (action, savings) = action_for(c.node, replaced);
        plan.commands.push(Command {
            action,
            reason: c.reason,
            nodes: vec![c.node.name.clone()],
            savings_per_hour: savings,
            replacement: Vec::new(),
        });
    }
    // One method at a time in a pool, as Karpenter: its consolidation waits while anything
    // else of the pool is going, so the simulation never counts room that drained pods are
    // about to take; a removal under way in one pool (even one stuck) holds no other pool.
    let (waiting, free): (Vec<_>, Vec<_>) = underutilized
        .drain(..)
        .partition(|c| busy.contains(c.pool.name.as_str()));
    plan.kept.extend(
        waiting
            .into_iter()
            .map(|c| kept(c.node, c.reason, KeptWhy::RemovalUnderWay)),
    );
    underutilized = free;
    if let (false, Some(sim)) = (underutilized.is_empty(), &snapshot.simulation) {
        sort(&mut underutilized);
        let limits = Limits {
            counts: &counts,
            now,
        };
        // The same budgets over the candidates in another order: the nodes that pay most
        // for what they hold, which a repacking gains most from.
        let mut by_value = underutilized.clone();
        let cost = consolidate::cost_per_use(sim);
        by_value.sort_by(|a, b| {
            cost(b.node)
                .total_cmp(&cost(a.node))
                .then_with(|| a.node.name.cmp(&b.node.name))
        });
        let worst = limits.budgeted(&by_value, lowered.clone(), room.clone());
        let Budgeted {
            within,
            beyond,
            kept: held,
        } = limits.budgeted(&underutilized, lowered.clone(), room.clone());
        let together = |nodes: &[&'_ NodeView]| {
            let order: Vec<Candidate<'_>> = nodes
                .iter()
                .filter_map(|n| underutilized.iter().find(|c| std::ptr::eq(c.node, *n)))
                .copied()
                .collect();
            limits
                .budgeted(&order, lowered.clone(), room.clone())
                .within
        };
        plan.kept.extend(held);
        let singles: Vec<&NodeView> = within
            .iter()
            .copied()
            .chain(beyond.iter().map(|(n, _, _)| *n))
            .collect();
        let settling = settling(snapshot, now);
        let sets = [within.as_slice(), worst.within.as_slice()];
        let balanced = super::balanced::totals(&snapshot.pools, &snapshot.nodes);
        let choices = Choices {
            sets: &sets,
            singles: &singles,
            together: &together,
            balanced: &balanced,
        };
        match consolidate::decide(sim, &settling, &choices) {
            Decision::Go(nodes, outcome) => {
                // The nodes past the budget that this command does not take stay for it.
                let going = |b: &NodeView| nodes.iter().any(|n| std::ptr::eq(*n, b));
                plan.kept
                    .extend(beyond.iter().filter(|(b, _, _)| !going(b)).map(
                        |(b, pool, reason)| {
                            kept(b, Reason::Underutilized, budget(pool, *reason, None))
                        },
                    ));
                plan.commands.extend(consolidation(&nodes, outcome));
            }
            Decision::Stay(stay) => plan.kept.extend(stay.into_iter().map(|(n, why)| {
                // A node past the budget that cannot go alone would have gone with the
                // others only if the budget allowed more at once: the budget keeps it,
                // and its Event says why it could not go alone either.
                let why = match beyond.iter().find(|(b, _, _)| std::ptr::eq(*b, n)) {
                    Some((_, pool, reason)) => budget(pool, *reason, Some(why)),
                    None => KeptWhy::NotConsolidatable { why },
                };
                kept(n, Reason::Underutilized, why)
            })),
        }
    }
    plan.price_after = plan.price_before
        - plan
            .commands
            .iter()
            .map(|c| c.savings_per_hour)
            .sum::<f64>();
    if let Some(instances) = &snapshot.instances {
        plan.never_joined = never_joined(&snapshot.nodes, instances, now);
        plan.orphans = orphan_nodes(&snapshot.nodes, instances, now);
    }
    plan
}

/// Why `pool`'s budget keeps a node for `reason`; `alone`: why it could not go on its own
/// either.
fn budget(pool: &PoolPolicy, reason: Reason, alone: Option<String>) -> KeptWhy {
    KeptWhy::Budget {
        pool: pool.name.clone(),
        reason,
        alone,
    }
}

/// What bounds a consolidation's nodes: each pool's budget over its node counts.
struct Limits<'s, 'a> {
    counts: &'s HashMap<&'a str, (usize, usize)>,
    now: Timestamp,
}

/// Underutilized candidates sorted out by their pools' budgets, in the order given.
struct Budgeted<'a> {
    /// As many of each pool as its budget allows at once, past its floor and headroom.
    within: Vec<&'a NodeView>,
    /// Past the budget's first nodes: each may still go on its own (a command of one node
    /// fits any budget that allows one).
    beyond: Vec<(&'a NodeView, &'a PoolPolicy, Reason)>,
    /// The nodes no budget, floor or headroom lets go now, with why.
    kept: Vec<Kept>,
}

impl<'a> Limits<'_, 'a> {
    /// `order` sorted out within the budgets; `lowered` and `room`: the pools' removals
    /// planned so far, for their floors and headroom.
    fn budgeted(
        &self,
        order: &[Candidate<'a>],
        mut lowered: HashMap<&'a str, usize>,
        mut room: Room<'a>,
    ) -> Budgeted<'a> {
        let mut out = Budgeted {
            within: Vec::new(),
            beyond: Vec::new(),
            kept: Vec::new(),
        };
        let mut used: HashMap<&str, usize> = HashMap::new();
        for c in order {
            let (nodes, disrupting) = self.counts[c.pool.name.as_str()];
            if let Some(why) = at_floor(c, nodes - disrupting, &lowered, &room, self.now) {
                out.kept.push(kept(c.node, c.reason, why));
                continue;
            }
            let used = used.entry(c.pool.name.as_str()).or_default();
            let budgets = c.pool.budgets.as_deref().unwrap_or_default();
            let allowed = allowed(budgets, c.reason, nodes, disrupting, self.now);
            if allowed == 0 {
                out.kept
                    .push(kept(c.node, c.reason, budget(c.pool, c.reason, None)));
                continue;
            }
            if allowed <= *used {
                out.beyond.push((c.node, c.pool, c.reason));
                continue;
            }
            *used += 1;
            *lowered.entry(c.pool.name.as_str()).or_default() += 1;
            room.take(c.pool.name.as_str(), c.node);
            out.within.push(c.node);
        }
        out
    }
}

/// Whether removing `c` (empty or underutilized: replaced by nothing, or by fewer nodes)
/// would take its pool below its capacity floor, given the pool's `staying` nodes and
/// those `lowered` already planned away, or below its headroom of free room.
fn at_floor(
    c: &Candidate<'_>,
    staying: usize,
    lowered: &HashMap<&str, usize>,
    room: &Room<'_>,
    now: Timestamp,
) -> Option<KeptWhy> {
    if !lowers(c.reason) {
        return None;
    }
    let nodes = floor(&c.pool.capacity, now);
    let gone = lowered.get(c.pool.name.as_str()).copied().unwrap_or(0);
    if staying.saturating_sub(gone) <= nodes {
        return Some(KeptWhy::CapacityFloor {
            pool: c.pool.name.clone(),
            nodes,
        });
    }
    room.short(c.pool, c.node, now)
        .map(|headroom| KeptWhy::CapacityHeadroom {
            pool: c.pool.name.clone(),
            headroom,
        })
}

/// How a node that goes alone goes: replaced, for a reason that replaces, when pods would
/// move (the fleet pays again for what it launches); else deleted, saving its price.
pub(super) fn action_for(node: &NodeView, replaced: bool) -> (Action, f64) {
    if replaced && node.pods.iter().any(|p| p.moves()) {
        (Action::Replace, 0.0)
    } else {
        (Action::Delete, node.price_per_hour.unwrap_or(0.0))
    }
}

/// nodewright's nodes still inside their pool's `consolidateAfter` (launched or given pods
/// lately): no consolidation moves pods onto them. `Never` keeps none out.
fn settling(snapshot: &Snapshot, now: Timestamp) -> HashSet<&str> {
    snapshot
        .nodes
        .iter()
        .filter(|n| {
            let pool = snapshot
                .pools
                .iter()
                .find(|p| n.pool.as_deref() == Some(p.name.as_str()));
            pool.is_some_and(|p| matches!(settled(n, p, now), Err(Some(_))))
        })
        .map(|n| n.name.as_str())
        .collect()
}

/// The reasons whose removals lower a pool's node count (the others are replaced).
fn lowers(reason: Reason) -> bool {
    matches!(reason, Reason::Empty | Reason::Underutilized)
}

/// The command for an outcome that lets the nodes go; none for one that does not (which
/// `decide` never answers with Go, but a node must never go on a guess).
fn consolidation(nodes: &[&NodeView], outcome: Outcome) -> Option<Command> {
    let (action, savings, replacement) = match outcome {
        Outcome::Delete { savings } => (Action::Delete, savings, Vec::new()),
        Outcome::Replace { claims, savings } => (Action::Replace, savings, claims),
        Outcome::No(_) => return None,
    };
    Some(Command {
        action,
        reason: Reason::Underutilized,
        nodes: nodes.iter().map(|n| n.name.clone()).collect(),
        savings_per_hour: savings,
        replacement,
    })
}
