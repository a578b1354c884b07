//! `consolidationPolicy: Balanced` (Karpenter v1.14, `pkg/controllers/disruption/balanced.go`):
//! a consolidation move in a Balanced NodePool goes only when the share of the pool's cost
//! it saves is at least half the share of the pool's disruption it causes,
//! `(savings / pool cost) / (disruption / pool disruption) >= 1 / k` with `k = 2`. A node's
//! disruption is 1 (cordon, drain, a new node's boot) plus its moving pods' eviction costs;
//! the pool's is that summed over all its nodes, candidates or not. A move across pools is
//! judged in each Balanced pool with the saving shared by the pools' source cost, and goes
//! only when every one approves. Pools of the other policies are not judged.

use std::collections::{BTreeMap, HashMap};

use super::snapshot::{NodeView, PoolPolicy};
use crate::api::ConsolidationPolicy;

/// Karpenter's `BalancedK`: a move passes when its score is at least `1 / K`.
pub const K: f64 = 2.0;

/// A Balanced pool's cost ($/h) and disruption over all its nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PoolTotals {
    pub cost: f64,
    pub disruption: f64,
}

/// The totals of each Balanced pool, by name.
pub type BalancedPools = HashMap<String, PoolTotals>;

/// What removing `node` disrupts: 1 plus the eviction costs of its pods that would move.
pub fn disruption_cost(node: &NodeView) -> f64 {
    1.0 + node
        .pods
        .iter()
        .filter(|p| p.moves())
        .map(|p| p.eviction_cost.max(0.0))
        .sum::<f64>()
}

/// The totals of the pools whose policy is Balanced, over every node of theirs.
pub fn totals(pools: &[PoolPolicy], nodes: &[NodeView]) -> BalancedPools {
    let mut out: BalancedPools = pools
        .iter()
        .filter(|p| p.consolidation == ConsolidationPolicy::Balanced)
        .map(|p| (p.name.clone(), PoolTotals::default()))
        .collect();
    for node in nodes {
        if let Some(t) = node.pool.as_ref().and_then(|p| out.get_mut(p)) {
            t.cost += node.price_per_hour.unwrap_or(0.0);
            t.disruption += disruption_cost(node);
        }
    }
    out
}

/// A move's score in one pool: the share of its cost saved over the share of its
/// disruption caused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    pub savings: f64,
    pub disruption: f64,
}

impl Score {
    pub fn value(&self) -> f64 {
        if self.savings <= 0.0 {
            0.0
        } else if self.disruption == 0.0 {
            f64::INFINITY
        } else {
            self.savings / self.disruption
        }
    }

    pub fn approved(&self) -> bool {
        self.value() >= 1.0 / K
    }
}

/// Whether moving `group` for `savings` ($/h) passes in every Balanced pool it touches;
/// the first pool that refuses, with its score, when not.
pub fn judge(group: &[&NodeView], savings: f64, pools: &BalancedPools) -> Result<(), String> {
    let mut by_pool: BTreeMap<&str, Vec<&NodeView>> = BTreeMap::new();
    for node in group {
        if let Some(pool) = node.pool.as_deref() {
            by_pool.entry(pool).or_default().push(node);
        }
    }
    let source: f64 = group.iter().map(|n| n.price_per_hour.unwrap_or(0.0)).sum();
    for (pool, nodes) in &by_pool {
        let Some(totals) = pools.get(*pool) else {
            continue;
        };
        let own: f64 = nodes.iter().map(|n| n.price_per_hour.unwrap_or(0.0)).sum();
        let share = if by_pool.len() > 1 && source > 0.0 {
            savings * own / source
        } else {
            savings
        };
        let disruption: f64 = nodes.iter().map(|n| disruption_cost(n)).sum();
        let score = score(share, disruption, totals);
        if !score.approved() {
            return Err(format!(
                "NodePool {pool} is Balanced: the move saves {:.1}% of its cost for {:.1}% of \
                 its disruption (score {:.2}, needs {:.2})",
                score.savings * 100.0,
                score.disruption * 100.0,
                score.value(),
                1.0 / K
            ));
        }
    }
    Ok(())
}

/// With nothing to weigh against (a pool of no cost or no disruption) nothing is saved.
fn score(savings: f64, disruption: f64, totals: &PoolTotals) -> Score {
    if totals.cost <= 0.0 || totals.disruption <= 0.0 {
        return Score {
            savings: 0.0,
            disruption: 0.0,
        };
    }
    Score {
        savings: savings / totals.cost,
        disruption: disruption / totals.disruption,
    }
}

#[cfg(test)]
#[path = "balanced_tests.rs"]
mod tests;
