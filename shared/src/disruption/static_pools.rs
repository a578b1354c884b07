//! A static NodePool's scale-down (Karpenter's static capacity): a pool holding more nodes
//! than its `replicas` loses the surplus, the cheapest to lose first. The user asked for
//! fewer nodes, so this is forceful as expiry is: outside the disruption budgets, nothing
//! replaces the node, `do-not-disrupt` pods go at the end of `terminationGracePeriod`.
//!
//! The count is of the nodes the floor counts (`floor.rs` in the sweeper: its placeholders
//! land on them), so the two never disagree and churn: the pool's nodes not being removed,
//! not cordoned and not lost (Ready Unknown). A node replaced for drift or expiry is not
//! surplus while its replacement starts; a cordoned one is neither counted nor taken, so a
//! `kubectl drain` for maintenance gets a node in its place and keeps its own until it is
//! uncordoned. Launches still on their way are not nodes yet, so the surplus is never
//! overcounted.

use super::Reason;
use super::plan::{Action, Command};
use super::snapshot::{NodeView, Snapshot};

/// The scale-down commands due now, one node each, in the order to carry them out.
pub(super) fn scale_down(snapshot: &Snapshot) -> Vec<Command> {
    let mut commands = Vec::new();
    for pool in &snapshot.pools {
        let Some(replicas) = pool.replicas else {
            continue;
        };
        let mut nodes: Vec<&NodeView> = snapshot
            .nodes
            .iter()
            .filter(|n| n.owned_instance && counted(n))
            .filter(|n| n.pool.as_deref() == Some(pool.name.as_str()))
            .collect();
        let surplus = nodes.len().saturating_sub(replicas);
        if surplus == 0 {
            continue;
        }
        nodes.sort_by(|a, b| {
            rank(a)
                .partial_cmp(&rank(b))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| b.created.cmp(&a.created))
                .then_with(|| a.name.cmp(&b.name))
        });
        commands.extend(nodes.into_iter().take(surplus).map(|n| Command {
            action: Action::Delete,
            reason: Reason::ScaleDown,
            nodes: vec![n.name.clone()],
            savings_per_hour: n.price_per_hour.unwrap_or(0.0),
            replacement: Vec::new(),
        }));
    }
    commands
}

/// Whether the floor's placeholders could land on it (the solver's schedulable node).
fn counted(n: &NodeView) -> bool {
    let lost = n.initialized && !n.ready;
    !n.disrupting && !n.cordoned && !lost
}

/// Which node a scale-down takes first, lowest first: one that serves nothing (unhealthy,
/// still starting, not Ready), then an empty one, then the one whose pods cost least to
/// move; a node or pod marked `do-not-disrupt` last (Karpenter's static deprovisioning:
/// unlaunched claims, empty nodes, lowest disruption cost).
fn rank(node: &NodeView) -> (u8, f64) {
    if node.do_not_disrupt || node.pods.iter().any(|p| p.holds_node()) {
        (3, 0.0)
    } else if node.unhealthy.is_some() || !node.initialized || !node.ready {
        (0, 0.0)
    } else if !node.pods.iter().any(|p| p.moves()) {
        (1, 0.0)
    } else {
        let cost = node
            .pods
            .iter()
            .filter(|p| p.moves())
            .map(|p| p.eviction_cost);
        (2, cost.sum())
    }
}
