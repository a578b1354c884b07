//! [`plan_disruption`]: which of nodewright's nodes go now, in which order, and why the
//! other candidates stay. The rules, in order (Karpenter's disruption controller,
//! `pkg/controllers/disruption/`, is the model):
//! 1. only a Ready node of a NodePool nodewright serves, not already being disrupted, is a
//!    candidate;
//! 2. emptiness: nothing but DaemonSet, mirror or finished pods for `consolidateAfter`,
//!    counted from when the sweeper first saw it empty (its `nodewright.io/empty-since`
//!    annotation, set by the executor, so the first sight never removes a node);
//! 3. expiration: older than `expireAfter`; then drift (`drift.rs`, found by the sweeper:
//!    the node's instance no longer matches what its pool and class would launch now);
//! 4. `karpenter.sh/do-not-disrupt` on the node or on a pod that would move keeps it, and so
//!    does a PodDisruptionBudget that allows no disruption of such a pod;
//! 5. candidates are taken cheapest to disrupt first (Karpenter's eviction cost: pod
//!    priority and `pod-deletion-cost`, scaled by the node's remaining lifetime), each
//!    within its pool's budget for the reason;
//! 6. consolidation (`WhenEmptyOrUnderutilized`), only when nothing else is going: nodes
//!    with pods, launched and last given a pod at least `consolidateAfter` ago, are
//!    simulated away with the core's solver (`consolidate.rs`), and at most one delete or
//!    replace command is planned.

use std::collections::HashMap;
use std::fmt;

use jiff::Timestamp;
use serde::Serialize;

use super::Reason;
use super::budget::allowed;
use super::capacity::{CAPACITY_WINDOWS_ANNOTATION, floor};
use super::consolidate::{self, Decision, Outcome};
use super::headroom::Room;
use super::hygiene::{NeverJoined, OrphanNode, never_joined, orphan_nodes};
use super::snapshot::{NodeView, PoolPolicy, Snapshot};
use crate::api::ConsolidationPolicy;
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
    /// The node to launch instead, in the solver's claim shape (consolidation only; an
    /// expired node's replacement is planned by the provisioning core when asked). The
    /// executor asks the core for the command's pods again and launches nothing above
    /// `price_ceiling` of the nodes' price: prices may have moved since this plan.
    #[serde(skip)]
    pub replacement: Vec<PlannedClaim>,
}

/// Why a candidate stays.
#[derive(Debug, Clone, PartialEq)]
pub enum KeptWhy {
    DoNotDisruptNode,
    DoNotDisruptPod {
        pod: String,
    },
    PodDisruptionBudget {
        pod: String,
        pdb: String,
    },
    Budget {
        pool: String,
        reason: Reason,
    },
    /// Empty, but not yet for `consolidateAfter`.
    EmptyTooRecently {
        remaining: std::time::Duration,
    },
    PoolSettings {
        pool: String,
        error: String,
    },
    /// Launched or gained pods within `consolidateAfter`.
    TooRecent {
        remaining: std::time::Duration,
    },
    /// The consolidation simulation found no way for it to go (fits nowhere, not cheaper,
    /// spot choice too narrow...).
    NotConsolidatable {
        why: String,
    },
    /// Its pool is at the floor of its capacity windows.
    CapacityFloor {
        pool: String,
        nodes: usize,
    },
    /// Removing it would leave its pool less free room than its capacity windows' headroom.
    CapacityHeadroom {
        pool: String,
        headroom: String,
    },
}

impl fmt::Display for KeptWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeptWhy::DoNotDisruptNode => f.write_str("the node has karpenter.sh/do-not-disrupt"),
            KeptWhy::DoNotDisruptPod { pod } => {
                write!(f, "a pod has karpenter.sh/do-not-disrupt ({pod})")
            }
            KeptWhy::PodDisruptionBudget { pod, pdb } => {
                write!(
                    f,
                    "PodDisruptionBudget {pdb} allows no disruption of pod {pod}"
                )
            }
            KeptWhy::Budget { pool, reason } => write!(
                f,
                "NodePool {pool}'s disruption budget allows no more {} nodes now",
                reason.as_str()
            ),
            KeptWhy::EmptyTooRecently { remaining } => write!(
                f,
                "empty, but not yet for consolidateAfter ({}s to go)",
                remaining.as_secs()
            ),
            KeptWhy::TooRecent { remaining } => write!(
                f,
                "launched or gained pods within consolidateAfter ({}s to go)",
                remaining.as_secs()
            ),
            KeptWhy::NotConsolidatable { why } => write!(f, "not consolidated: {why}"),
            KeptWhy::CapacityFloor { pool, nodes } => write!(
                f,
                "NodePool {pool} keeps at least {nodes} nodes now ({CAPACITY_WINDOWS_ANNOTATION})"
            ),
            KeptWhy::CapacityHeadroom { pool, headroom } => write!(
                f,
                "NodePool {pool} keeps {headroom} free now ({CAPACITY_WINDOWS_ANNOTATION})"
            ),
            KeptWhy::PoolSettings { pool, error } => {
                write!(
                    f,
                    "NodePool {pool}'s disruption settings cannot be read: {error}"
                )
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    pub node: String,
    pub reason: Reason,
    pub why: KeptWhy,
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

struct Candidate<'a> {
    node: &'a NodeView,
    pool: &'a PoolPolicy,
    reason: Reason,
    cost: f64,
}

pub fn plan_disruption(snapshot: &Snapshot, now: Timestamp) -> Plan {
    let pools: HashMap<&str, &PoolPolicy> = snapshot
        .pools
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let mut plan = Plan::default();
    let mut room = Room::default();
    let mut candidates = Vec::new();
    let mut underutilized = Vec::new();
    // Per pool: (nodes, nodes already being disrupted), for the budgets.
    let mut counts: HashMap<&str, (usize, usize)> = HashMap::new();
    for node in &snapshot.nodes {
        let Some(pool) = node.pool.as_deref().and_then(|p| pools.get(p)) else {
            continue;
        };
        if !node.owned_instance {
            continue;
        }
        plan.price_before += node.price_per_hour.unwrap_or(0.0);
        let count = counts.entry(pool.name.as_str()).or_default();
        count.0 += 1;
        if node.disrupting {
            count.1 += 1;
            continue;
        }
        room.count(pool.name.as_str(), node);
        if !node.ready {
            continue;
        }
        let empty = !node.pods.iter().any(|p| p.moves());
        if !empty && node.empty_since.is_some() {
            plan.empty_marks.push(EmptyMark {
                node: node.name.clone(),
                since: None,
            });
        }
        let reason = match (empty, pool.consolidate_after) {
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
        let Some(reason) = reason else {
            if !empty && pool.consolidation == ConsolidationPolicy::WhenEmptyOrUnderutilized {
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
        if let Some(why) = blocker(node, pool) {
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
    let mut used: HashMap<&str, usize> = HashMap::new();
    let mut lowered: HashMap<&str, usize> = HashMap::new();
    for c in candidates {
        let (nodes, disrupting) = counts[c.pool.name.as_str()];
        if let Some(why) = at_floor(&c, nodes - disrupting, &lowered, &room, now) {
            plan.kept.push(kept(c.node, c.reason, why));
            continue;
        }
        let used = used.entry(c.pool.name.as_str()).or_default();
        // `blocker` has already kept the nodes of a pool whose budgets cannot be read.
        let budgets = c.pool.budgets.as_deref().unwrap_or_default();
        if allowed(budgets, c.reason, nodes, disrupting, now) <= *used {
            plan.kept.push(Kept {
                node: c.node.name.clone(),
                reason: c.reason,
                why: KeptWhy::Budget {
                    pool: c.pool.name.clone(),
                    reason: c.reason,
                },
            });
            continue;
        }
        *used += 1;
        if lowers(c.reason) {
            *lowered.entry(c.pool.name.as_str()).or_default() += 1;
            room.take(c.pool.name.as_str(), c.node);
        }
        let moves = c.node.pods.iter().any(|p| p.moves());
        let (action, savings) = if matches!(c.reason, Reason::Expired | Reason::Drifted) && moves {
            (Action::Replace, 0.0)
        } else {
            (Action::Delete, c.node.price_per_hour.unwrap_or(0.0))
        };
        plan.commands.push(Command {
            action,
            reason: c.reason,
            nodes: vec![c.node.name.clone()],
            savings_per_hour: savings,
            replacement: Vec::new(),
        });
    }
    // One method at a time, as Karpenter: consolidation waits while anything else is
    // going, so its simulation never counts room that drained pods are about to take.
    let quiet = plan.commands.is_empty() && counts.values().all(|(_, d)| *d == 0);
    if let (true, Some(sim)) = (quiet, &snapshot.simulation) {
        sort(&mut underutilized);
        let mut used: HashMap<&str, usize> = HashMap::new();
        let mut within = Vec::new();
        for c in underutilized {
            let (nodes, disrupting) = counts[c.pool.name.as_str()];
            if let Some(why) = at_floor(&c, nodes - disrupting, &lowered, &room, now) {
                plan.kept.push(kept(c.node, c.reason, why));
                continue;
            }
            let used = used.entry(c.pool.name.as_str()).or_default();
            let budgets = c.pool.budgets.as_deref().unwrap_or_default();
            if allowed(budgets, c.reason, nodes, disrupting, now) <= *used {
                let why = KeptWhy::Budget {
                    pool: c.pool.name.clone(),
                    reason: c.reason,
                };
                plan.kept.push(kept(c.node, c.reason, why));
                continue;
            }
            *used += 1;
            *lowered.entry(c.pool.name.as_str()).or_default() += 1;
            room.take(c.pool.name.as_str(), c.node);
            within.push(c.node);
        }
        match consolidate::decide(sim, &within) {
            Decision::Go(nodes, outcome) => plan.commands.extend(consolidation(&nodes, outcome)),
            Decision::Stay(stay) => plan.kept.extend(stay.into_iter().map(|(n, why)| {
                kept(n, Reason::Underutilized, KeptWhy::NotConsolidatable { why })
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

/// The reasons whose removals lower a pool's node count (the others are replaced).
fn lowers(reason: Reason) -> bool {
    matches!(reason, Reason::Empty | Reason::Underutilized)
}

/// Cheapest to disrupt first; the name keeps plans deterministic.
fn sort(candidates: &mut [Candidate<'_>]) {
    candidates.sort_by(|a, b| {
        (a.reason, a.cost)
            .partial_cmp(&(b.reason, b.cost))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
}

fn kept(node: &NodeView, reason: Reason, why: KeptWhy) -> Kept {
    Kept {
        node: node.name.clone(),
        reason,
        why,
    }
}

/// Consolidation's churn guard: the node launched and last gained pods at least
/// `consolidateAfter` ago. `Err(None)`: the pool never consolidates (`Never`).
fn settled(node: &NodeView, pool: &PoolPolicy, now: Timestamp) -> Result<(), Option<KeptWhy>> {
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

/// The command for an outcome that lets the nodes go; none for one that does not (which
/// `decide` never answers with Go, but a node must never go on a guess).
fn consolidation(nodes: &[&NodeView], outcome: Outcome) -> Option<Command> {
    let (action, savings, replacement) = match outcome {
        Outcome::Delete { savings } => (Action::Delete, savings, Vec::new()),
        Outcome::Replace { claim, savings } => (Action::Replace, savings, vec![*claim]),
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
    let moving = || node.pods.iter().filter(|p| p.moves());
    if let Some(p) = moving().find(|p| p.do_not_disrupt) {
        return Some(KeptWhy::DoNotDisruptPod {
            pod: format!("{}/{}", p.namespace, p.name),
        });
    }
    moving().find_map(|p| {
        p.blocked_by_pdb
            .as_ref()
            .map(|pdb| KeptWhy::PodDisruptionBudget {
                pod: format!("{}/{}", p.namespace, p.name),
                pdb: format!("{}/{}", p.namespace, pdb),
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
