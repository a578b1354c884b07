//! What a sweep decided, counted as Karpenter's disruption metrics count it
//! (`karpenter_voluntary_disruption_eligible_nodes{reason}`,
//! `..._decisions_total{decision, reason, consolidation_type}`): pure, from the plan. The
//! sweeper writes them as `counted` log lines (`crate::telemetry`), not metric series.

use std::collections::BTreeMap;

use super::Reason;
use super::plan::{Action, Command, Plan};

/// The nodes a disruption method found due, by reason: those it acts on and those it keeps
/// (a budget, a blocking pod, a wait), each once.
pub fn eligible(plan: &Plan) -> BTreeMap<Reason, usize> {
    let mut by_reason: BTreeMap<Reason, Vec<&str>> = BTreeMap::new();
    let acted = plan
        .commands
        .iter()
        .flat_map(|c| c.nodes.iter().map(move |n| (c.reason, n.as_str())));
    let kept = plan.kept.iter().map(|k| (k.reason, k.node.as_str()));
    for (reason, node) in acted.chain(kept) {
        let nodes = by_reason.entry(reason).or_default();
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    by_reason.into_iter().map(|(r, n)| (r, n.len())).collect()
}

/// Karpenter's `consolidation_type` of a command: `empty` (every node empty), `single` or
/// `multi` (nodes moved) for consolidation; `None` for the other methods.
pub fn consolidation_type(command: &Command) -> Option<&'static str> {
    match command.reason {
        Reason::Empty => Some("empty"),
        Reason::Underutilized if command.nodes.len() > 1 => Some("multi"),
        Reason::Underutilized => Some("single"),
        _ => None,
    }
}

/// Karpenter's `decision` of a command: `delete` or `replace`.
pub fn decision(command: &Command) -> &'static str {
    match command.action {
        Action::Delete => "delete",
        Action::Replace => "replace",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::{Kept, KeptWhy};

    fn command(reason: Reason, action: Action, nodes: &[&str]) -> Command {
        Command {
            action,
            reason,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            savings_per_hour: 0.0,
            replacement: vec![],
        }
    }

    fn kept(node: &str, reason: Reason) -> Kept {
        Kept {
            node: node.into(),
            reason,
            why: KeptWhy::RemovalUnderWay,
        }
    }

    #[test]
    fn eligible_nodes_are_those_acted_on_and_those_kept_once_each_by_reason() {
        let plan = Plan {
            commands: vec![
                command(Reason::Underutilized, Action::Replace, &["a", "b"]),
                command(Reason::Empty, Action::Delete, &["c"]),
            ],
            kept: vec![
                kept("d", Reason::Underutilized),
                kept("a", Reason::Underutilized),
                kept("e", Reason::Drifted),
            ],
            ..Default::default()
        };
        assert_eq!(
            eligible(&plan),
            BTreeMap::from([
                (Reason::Empty, 1),
                (Reason::Underutilized, 3),
                (Reason::Drifted, 1),
            ])
        );
        assert!(eligible(&Plan::default()).is_empty());
    }

    #[test]
    fn each_command_is_a_decision_of_karpenter_s_kind() {
        for (c, kind, decided) in [
            (
                command(Reason::Empty, Action::Delete, &["a"]),
                Some("empty"),
                "delete",
            ),
            (
                command(Reason::Underutilized, Action::Delete, &["a"]),
                Some("single"),
                "delete",
            ),
            (
                command(Reason::Underutilized, Action::Replace, &["a", "b"]),
                Some("multi"),
                "replace",
            ),
            (
                command(Reason::Drifted, Action::Replace, &["a"]),
                None,
                "replace",
            ),
            (
                command(Reason::Expired, Action::Delete, &["a"]),
                None,
                "delete",
            ),
        ] {
            assert_eq!(consolidation_type(&c), kind, "{c:?}");
            assert_eq!(decision(&c), decided, "{c:?}");
        }
    }
}
