//! A static NodePool's scale-down (Karpenter's static capacity): a pool holding more nodes
//! than its `replicas` loses the surplus, the cheapest to lose first. The user asked for
//! fewer nodes, so this is forceful as expiry is: outside the disruption budgets, nothing
//! replaces the node, `do-not-disrupt` pods go at the end of `terminationGracePeriod`.
//!
//! The count is of the pool's nodes not already being removed, as Karpenter counts running
//! NodeClaims only: a node replaced for drift or expiry is not surplus while its
//! replacement starts. Launches still on their way are not nodes yet, so the surplus is
//! never overcounted; the shortfall is the floor's (`floor.rs` in the sweeper).

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
            .filter(|n| n.owned_instance && !n.disrupting)
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
