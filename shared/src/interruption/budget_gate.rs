//! Whether a rebalance drain may begin now under its NodePool's disruption budgets. A
//! rebalance recommendation is advice nodewright chose to follow, so it is a voluntary
//! disruption like the sweeper's and counts against the same budgets, evaluated by the
//! sweeper's own [`allowed`]. A budget's `reasons` cannot name a rebalance (Karpenter v1
//! lists Empty, Underutilized and Drifted only), so, as for expiration, only budgets
//! without `reasons` limit it: `allowed` for [`DisruptionReason::Expired`] is exactly that
//! evaluation.
//!
//! Interrupted, stopping and retiring instances go whatever the budget says; only the
//! rebalance drain is gated.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;

use crate::api::labels::NODEPOOL;
use crate::disruption::{BudgetRule, Reason as DisruptionReason, allowed};
use crate::kube::tainted_for_disruption;

/// A pool's nodes as the gate needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolNodes {
    /// Nodes of the pool, the one to drain included.
    pub total: usize,
    /// Other nodes of the pool being disrupted (tainted `nodewright.io/disrupted` or
    /// being deleted).
    pub disrupting: usize,
    /// The node to drain is itself already being disrupted: its drain began earlier and
    /// is already counted, so it goes on.
    pub this_disrupting: bool,
}

/// `pool`'s nodes among `nodes` (by the `karpenter.sh/nodepool` label), `this` being the
/// one to drain. Disrupted as the sweeper counts it: tainted or being deleted.
pub fn pool_nodes(nodes: &[Node], pool: &str, this: &str) -> PoolNodes {
    let mut out = PoolNodes {
        total: 0,
        disrupting: 0,
        this_disrupting: false,
    };
    for n in nodes {
        let in_pool = n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODEPOOL))
            .is_some_and(|p| p == pool);
        if !in_pool {
            continue;
        }
        out.total += 1;
        let disrupting = tainted_for_disruption(n) || n.metadata.deletion_timestamp.is_some();
        if n.metadata.name.as_deref() == Some(this) {
            out.this_disrupting = disrupting;
        } else if disrupting {
            out.disrupting += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Go,
    /// Held; why, naming the pool.
    Hold(String),
}

/// The gate for draining one node of `pool` now. `budgets` is the pool's budgets, or why
/// they cannot be read (held then, as the sweeper holds such a pool's nodes).
pub fn rebalance_gate(
    pool: &str,
    budgets: Result<&[BudgetRule], &str>,
    nodes: PoolNodes,
    now: Timestamp,
) -> Gate {
    if nodes.this_disrupting {
        return Gate::Go;
    }
    let budgets = match budgets {
        Ok(b) => b,
        Err(why) => {
            return Gate::Hold(format!(
                "NodePool {pool}: its disruption budgets cannot be read ({why})"
            ));
        }
    };
    let left = allowed(
        budgets,
        DisruptionReason::Expired,
        nodes.total,
        nodes.disrupting,
        now,
    );
    if left >= 1 {
        Gate::Go
    } else {
        Gate::Hold(format!(
            "NodePool {pool}: its disruption budget allows no more disruptions now ({} of {} nodes already disrupted)",
            nodes.disrupting, nodes.total
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::labels::DISRUPTED_TAINT;
    use crate::disruption::{Cron, NodesLimit, Window};

    fn rule(nodes: NodesLimit, reasons: &[DisruptionReason]) -> BudgetRule {
        BudgetRule {
            nodes,
            reasons: reasons.to_vec(),
            window: None,
        }
    }

    fn now() -> Timestamp {
        "2026-11-24T12:00:00Z".parse().unwrap()
    }

    fn pool(total: usize, disrupting: usize, this_disrupting: bool) -> PoolNodes {
        PoolNodes {
            total,
            disrupting,
            this_disrupting,
        }
    }

    #[test]
    fn a_rebalance_drain_waits_for_its_pools_budget() {
        let business_hours = BudgetRule {
            nodes: NodesLimit::Count(0),
            reasons: vec![],
            window: Some(Window {
                schedule: Cron::parse("0 9 * * *").unwrap(),
                duration: Duration::from_secs(8 * 3600),
                time_zone: jiff::tz::TimeZone::UTC,
            }),
        };
        let night = BudgetRule {
            window: Some(Window {
                schedule: Cron::parse("0 22 * * *").unwrap(),
                duration: Duration::from_secs(3600),
                time_zone: jiff::tz::TimeZone::UTC,
            }),
            ..business_hours.clone()
        };
        let cases: Vec<(&str, Vec<BudgetRule>, PoolNodes, bool)> = vec![
            (
                "no budget at all lets it go",
                vec![],
                pool(3, 2, false),
                true,
            ),
            (
                "one at a time: goes when no other node is disrupted",
                vec![rule(NodesLimit::Count(1), &[])],
                pool(3, 0, false),
                true,
            ),
            (
                "one at a time: waits while another node is disrupted",
                vec![rule(NodesLimit::Count(1), &[])],
                pool(3, 1, false),
                false,
            ),
            (
                "a zero budget holds every drain",
                vec![rule(NodesLimit::Count(0), &[])],
                pool(3, 0, false),
                false,
            ),
            (
                "a drain already begun goes on whatever the budget",
                vec![rule(NodesLimit::Count(0), &[])],
                pool(3, 2, true),
                true,
            ),
            (
                "10% of 10 nodes rounds up to one",
                vec![rule(NodesLimit::Percent(10), &[])],
                pool(10, 0, false),
                true,
            ),
            (
                "10% of 10 nodes with one disrupted leaves none",
                vec![rule(NodesLimit::Percent(10), &[])],
                pool(10, 1, false),
                false,
            ),
            (
                "a budget for named reasons only does not limit a rebalance",
                vec![rule(
                    NodesLimit::Count(0),
                    &[DisruptionReason::Underutilized, DisruptionReason::Drifted],
                )],
                pool(3, 0, false),
                true,
            ),
            (
                "the most restrictive active budget wins",
                vec![
                    rule(NodesLimit::Count(5), &[]),
                    rule(NodesLimit::Percent(50), &[]),
                ],
                pool(2, 1, false),
                false,
            ),
            (
                "a scheduled zero budget holds inside its window (12:00 within 09:00+8h)",
                vec![business_hours.clone()],
                pool(3, 0, false),
                false,
            ),
            (
                "a scheduled zero budget outside its window does not",
                vec![night],
                pool(3, 0, false),
                true,
            ),
        ];
        for (name, budgets, nodes, go) in cases {
            let gate = rebalance_gate("default", Ok(budgets.as_slice()), nodes, now());
            assert_eq!(gate == Gate::Go, go, "{name}: {gate:?}");
            if let Gate::Hold(why) = gate {
                assert!(why.contains("NodePool default"), "{name}: {why}");
            }
        }
    }

    fn k8s_node(name: &str, pool: &str, tainted: bool, deleting: bool) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": {NODEPOOL: pool},
                "deletionTimestamp": if deleting { Some("2026-11-24T11:00:00Z") } else { None },
            },
            "spec": {"taints": if tainted {
                vec![serde_json::json!({"key": DISRUPTED_TAINT, "effect": "NoSchedule"})]
            } else { vec![] }},
        }))
        .unwrap()
    }

    #[test]
    fn a_pools_nodes_are_counted_by_label_and_disruption_as_the_sweeper_counts_them() {
        let nodes = [
            k8s_node("a", "default", false, false),
            k8s_node("b", "default", true, false),
            k8s_node("c", "default", false, true),
            k8s_node("d", "other", true, false),
            k8s_node("e", "default", true, false),
        ];
        assert_eq!(pool_nodes(&nodes, "default", "a"), pool(4, 3, false));
        assert_eq!(pool_nodes(&nodes, "default", "e"), pool(4, 2, true));
        assert_eq!(pool_nodes(&nodes, "other", "a"), pool(1, 1, false));
    }

    #[test]
    fn unreadable_budgets_hold_the_drain_and_say_why() {
        let gate = rebalance_gate(
            "web",
            Err("spec.disruption.budgets[0].nodes: \"x\" is neither"),
            pool(3, 0, false),
            now(),
        );
        let Gate::Hold(why) = gate else {
            panic!("held")
        };
        assert!(
            why.contains("NodePool web") && why.contains("budgets[0].nodes"),
            "{why}"
        );
    }
}
