use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Taint};

use super::*;
use crate::api::labels::{DISRUPTED_TAINT, NODEPOOL};
use crate::disruption::testkit::{count_budget, pool as policy};
use crate::disruption::{BudgetRule, NodesLimit};

fn node(name: &str, pool: &str, disrupting: bool) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.metadata.labels = Some([(NODEPOOL.to_string(), pool.to_string())].into());
    if disrupting {
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            taints: Some(vec![Taint {
                key: DISRUPTED_TAINT.into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }]),
            ..Default::default()
        });
    }
    n
}

fn pool(budgets: Result<Vec<BudgetRule>, String>) -> PoolPolicy {
    PoolPolicy {
        budgets,
        ..policy("spot")
    }
}

#[test]
fn a_command_goes_only_while_the_pool_s_budget_still_holds_it_on_the_nodes_as_they_are_now() {
    let two = || Ok(vec![count_budget(NodesLimit::Count(2))]);
    let taking = ["a".to_string(), "b".to_string()];
    let now = Timestamp::UNIX_EPOCH;
    // (the other node disrupting, one of the command's own already disrupting, reason, held)
    let cases = [
        (false, false, Reason::Underutilized, false),
        (true, false, Reason::Underutilized, true),
        // one of its own nodes taken meanwhile by another removal: it holds budget too
        (false, true, Reason::Underutilized, false),
        (true, true, Reason::Underutilized, true),
        (true, false, Reason::Empty, true),
        (true, false, Reason::Unhealthy, false),
        (true, false, Reason::ScaleDown, false),
    ];
    for (other, own, reason, held) in cases {
        let nodes = [
            node("a", "spot", own),
            node("b", "spot", false),
            node("c", "spot", other),
            node("d", "od", true),
        ];
        let got = budget_recheck(&pool(two()), reason, &nodes, &taking, now);
        assert_eq!(
            got.is_some(),
            held,
            "other {other}, own {own}, {reason:?}: {got:?}"
        );
    }
    let nodes = [
        node("a", "spot", false),
        node("b", "spot", false),
        node("c", "spot", true),
    ];
    let why = budget_recheck(&pool(two()), Reason::Underutilized, &nodes, &taking, now).unwrap();
    assert_eq!(
        why,
        "NodePool spot: its disruption budget allows 1 more now, 2 asked (1 of 3 nodes disrupted since the sweep began)"
    );
    let unreadable = pool(Err("budgets[0].nodes: bad".into()));
    assert!(budget_recheck(&unreadable, Reason::Empty, &nodes, &taking, now).is_some());
}
