//! Candidate collection for [`super::plan_disruption`]: which of nodewright's nodes may be
//! disrupted and for which reason (rules 1 to 5 of `plan.rs`: emptiness, expiration, drift,
//! do-not-disrupt and PDBs, the cheapest to disrupt first), the nodes consolidation may
//! try, and the per-pool counts the budgets and floors are judged by.

use std::collections::HashMap;

use jiff::Timestamp;

use super::Reason;
use super::headroom::Room;
use super::kept::{Kept, KeptWhy, kept};
use super::plan::{EmptyMark, Plan};
use super::snapshot::{NodeView, PodKind, PoolPolicy, Snapshot};
use crate::api::ConsolidationPolicy;

#[derive(Clone, Copy)]
pub(super) struct Candidate<'a> {
    pub(super) node: &'a NodeView,
    pub(super) pool: &'a PoolPolicy,
    pub(super) reason: Reason,
    pub(super) cost: f64,
}

/// What one pass over the snapshot's nodes found.
pub(super) struct Collected<'a> {
    /// Empty, expired or drifted, not blocked, cheapest to disrupt first.
    pub(super) candidates: Vec<Candidate<'a>>,
    /// Settled nodes with pods of pools that consolidate when underutilized, not blocked.
    pub(super) underutilized: Vec<Candidate<'a>>,
    /// Per pool: (nodes, nodes already being disrupted), for the budgets.
    pub(super) counts: HashMap<&'a str, (usize, usize)>,
    /// Per pool: nodes the sweeper is already replacing for expiry, for the expiration cap.
    pub(super) expiring: HashMap<&'a str, usize>,
    /// The pools' free room, for their capacity windows' headroom.
    pub(super) room: Room<'a>,
}

/// Collects the candidates of `snapshot`, writing into `plan` what the pass decides on its
/// own: the fleet's price, empty marks and the nodes kept with their reasons.
pub(super) fn collect<'a>(
    snapshot: &'a Snapshot,
    now: Timestamp,
    plan: &mut Plan,
) -> Collected<'a> {
    let pools: HashMap<&str, &PoolPolicy> = snapshot
        .pools
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let mut room = Room::default();
    let mut candidates = Vec::new();
    let mut underutilized = Vec::new();
    // Per pool: (nodes, nodes already being disrupted), for the budgets.
    let mut counts: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut expiring: HashMap<&str, usize> = HashMap::new();
    for node in &snapshot.nodes {
        let Some(pool) = node.pool.as_deref().and_then(|p| pools.get(p)) else {
            continue;
        };
        if !node.owned_instance {
            continue;
        }
        plan.price_before += node.price_per_hour.unwrap_or(0.0);
        // Karpenter's budget base: a node still starting is not in it (a replacement on its
        // way would otherwise let a percentage take one more node that serves); one being
        // disrupted, or no longer Ready, uses the budget up.
        let count = counts.entry(pool.name.as_str()).or_default();
        if node.initialized || node.disrupting {
            count.0 += 1;
        }
        if node.removing == Some(Reason::Expired) {
            *expiring.entry(pool.name.as_str()).or_default() += 1;
        }
        if node.disrupting {
            count.1 += 1;
            continue;
        }
        if node.initialized && !node.ready {
            count.1 += 1;
        }
        room.count(pool.name.as_str(), node);
        // An unhealthy node is repair's (`repair.rs`), whatever else holds for it.
        if !node.ready || node.unhealthy.is_some() {
            continue;
        }
        // A removal of it was given up lately: its empty-since mark is kept up to date, and
        // it is not a candidate again before its back-off ends.
        let backed_off = node.backoff.as_ref().filter(|b| b.holds(now)).map(|b| {
            let reason = b.cause.disruption().unwrap_or(Reason::Underutilized);
            let why = KeptWhy::BackedOff {
                until: b.until,
                why: b.why.clone(),
            };
            kept(node, reason, why)
        });
        let empty = !node.pods.iter().any(|p| p.moves());
        if !empty && node.empty_since.is_some() {
            plan.empty_marks.push(EmptyMark {
                node: node.name.clone(),
                since: None,
            });
        }
        // A static pool keeps its count: its nodes are never empty or underutilized.
        let consolidate_after = pool.consolidate_after.filter(|_| pool.replicas.is_none());
        let reason = match (empty, consolidate_after) {
            (true, Some(after)) => match node.empty_since {
                None => {
                    plan.empty_marks.push(EmptyMark {
                        node: node.name.clone(),
                        since: Some(now),
                    });
                    None
                }
                Some(since) => {
                    let empty_for = now.duration_since(since).unsigned_abs();
                    if empty_for >= after {
                        Some(Reason::Empty)
                    } else {
                        plan.kept.push(Kept {
                            node: node.name.clone(),
                            reason: Reason::Empty,
                            why: KeptWhy::EmptyTooRecently {
                                remaining: after - empty_for,
                            },
                        });
                        None
                    }
                }
            },
            _ => None,
        };
        let reason = reason
            .or_else(|| expired(node, pool, now).then_some(Reason::Expired))
            .or_else(|| node.drifted.is_some().then_some(Reason::Drifted));
        if let Some(k) = backed_off {
            if reason.is_some() || !empty {
                plan.kept.push(k);
            }
            continue;
        }
        let Some(reason) = reason else {
            if !empty && pool.replicas.is_none() {
                // What keeps any candidate is said first, as Karpenter checks it when it
                // makes the candidate, before asking the pool whether it consolidates.
                if let Some(why) = consolidation_disabled(pool) {
                    let why = blocker(node, pool).unwrap_or(why);
                    plan.kept.push(kept(node, Reason::Underutilized, why));
                    continue;
                }
                match settled(node, pool, now) {
                    Ok(()) => match blocker(node, pool) {
                        None => underutilized.push(Candidate {
                            node,
                            pool,
                            reason: Reason::Underutilized,
                            cost: disruption_cost(node, pool, now),
                        }),
                        Some(why) => plan.kept.push(kept(node, Reason::Underutilized, why)),
                    },
                    Err(Some(why)) => plan.kept.push(kept(node, Reason::Underutilized, why)),
                    Err(None) => {}
                }
            }
            continue;
        };
        if let Some(why) = blocker(node, pool).or_else(|| nominated(snapshot, node, reason)) {
            plan.kept.push(Kept {
                node: node.name.clone(),
                reason,
                why,
            });
            continue;
        }
        candidates.push(Candidate {
            node,
            pool,
            reason,
            cost: disruption_cost(node, pool, now),
        });
    }
    sort(&mut candidates);
    Collected {
        candidates,
        underutilized,
        counts,
        expiring,
        room,
    }
}

/// Pending pods the simulation places on `node` keep it from going empty or drifted, as
/// Karpenter leaves a nominated node out of disruption. Expiry is forceful; consolidation
/// moves such pods with the node (`consolidate.rs`).
fn nominated(snapshot: &Snapshot, node: &NodeView, reason: Reason) -> Option<KeptWhy> {
    if !matches!(reason, Reason::Empty | Reason::Drifted) {
        return None;
    }
    let pods = snapshot
        .simulation
        .as_ref()?
        .pending_on
        .get(&node.name)?
        .len();
    (pods > 0).then_some(KeptWhy::Nominated { pods })
}

/// By reason; within one, cheapest to disrupt first, but underutilized nodes by savings per
/// unit of disruption, highest first (Karpenter's `sortCandidates`: consolidation's
/// batches then hold the moves worth most), and empty nodes dearest first. The name keeps
/// plans deterministic.
pub(super) fn sort(candidates: &mut [Candidate<'_>]) {
    let key = |c: &Candidate<'_>| match c.reason {
        Reason::Underutilized => -savings_ratio(c.node),
        // Every empty node costs nothing to disrupt: the dearest goes first.
        Reason::Empty => -c.node.price_per_hour.unwrap_or(0.0),
        _ => c.cost,
    };
    candidates.sort_by(|a, b| {
        (a.reason, key(a))
            .partial_cmp(&(b.reason, key(b)))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
}

/// Karpenter's `SavingsRatio`: the node's price per unit of the disruption its removal
/// costs, a base of 1 (cordon, drain, replacement) plus its moving pods' eviction costs.
fn savings_ratio(node: &NodeView) -> f64 {
    node.price_per_hour.unwrap_or(0.0) / super::balanced::disruption_cost(node)
}

/// Why a pool consolidates no node with pods, if it does not: Karpenter says so on each
/// such node (its `Unconsolidatable` Event), and so does the kept node's Event here.
fn consolidation_disabled(pool: &PoolPolicy) -> Option<KeptWhy> {
    let non_empty = match (pool.consolidate_after, pool.consolidation) {
        (None, _) => false,
        (Some(_), ConsolidationPolicy::WhenEmpty) => true,
        (
            Some(_),
            ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced,
        ) => {
            return None;
        }
    };
    Some(KeptWhy::ConsolidationDisabled {
        pool: pool.name.clone(),
        non_empty,
    })
}

/// Consolidation's churn guard: the node launched and last gained pods at least
/// `consolidateAfter` ago. `Err(None)`: the pool never consolidates (`Never`).
pub(super) fn settled(
    node: &NodeView,
    pool: &PoolPolicy,
    now: Timestamp,
) -> Result<(), Option<KeptWhy>> {
    let after = pool.consolidate_after.ok_or(None::<KeptWhy>)?;
    let last = node
        .last_pod_arrival
        .map_or(node.created, |t| t.max(node.created));
    let since = now.duration_since(last);
    let since = if since.is_negative() {
        std::time::Duration::ZERO
    } else {
        since.unsigned_abs()
    };
    match after.checked_sub(since) {
        Some(remaining) if !remaining.is_zero() => Err(Some(KeptWhy::TooRecent { remaining })),
        _ => Ok(()),
    }
}

fn expired(node: &NodeView, pool: &PoolPolicy, now: Timestamp) -> bool {
    pool.expire_after.is_some_and(|after| {
        now.duration_since(node.created).unsigned_abs() >= after && now >= node.created
    })
}

/// What keeps a candidate whatever its reason, checked in the order a user would look.
fn blocker(node: &NodeView, pool: &PoolPolicy) -> Option<KeptWhy> {
    if let Err(error) = &pool.budgets {
        return Some(KeptWhy::PoolSettings {
            pool: pool.name.clone(),
            error: error.clone(),
        });
    }
    if node.do_not_disrupt {
        return Some(KeptWhy::DoNotDisruptNode);
    }
    if let Some(p) = node.pods.iter().find(|p| p.holds_node()) {
        return Some(KeptWhy::DoNotDisruptPod {
            pod: format!("{}/{}", p.namespace, p.name),
        });
    }
    // A DaemonSet's pod is evicted too, and its budget holds the node as in Karpenter; a
    // mirror pod is not evicted, so its budget holds nothing.
    let mut evicted = node
        .pods
        .iter()
        .filter(|p| matches!(p.kind, PodKind::Workload | PodKind::DaemonSet));
    evicted.find_map(|p| {
        p.blocked_by_pdb
            .as_ref()
            .map(|pdb| KeptWhy::PodDisruptionBudget {
                pod: format!("{}/{}", p.namespace, p.name),
                pdb: pdb
                    .split(" and ")
                    .map(|name| format!("{}/{name}", p.namespace))
                    .collect::<Vec<_>>()
                    .join(" and "),
            })
    })
}

/// Karpenter's `disruptionCost`: the pods' eviction costs times the fraction of the node's
/// lifetime left, so nodes near expiry and nodes with few, cheap pods go first.
fn disruption_cost(node: &NodeView, pool: &PoolPolicy, now: Timestamp) -> f64 {
    let pods: f64 = node
        .pods
        .iter()
        .filter(|p| p.moves())
        .map(|p| p.eviction_cost)
        .sum();
    let remaining = match pool.expire_after {
        Some(life) if !life.is_zero() => {
            let age = now.duration_since(node.created).as_secs_f64().max(0.0);
            (1.0 - age / life.as_secs_f64()).clamp(0.0, 1.0)
        }
        _ => 1.0,
    };
    pods * remaining
}
