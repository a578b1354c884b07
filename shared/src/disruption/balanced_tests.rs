//! Karpenter's `balanced_scoring_test.go`, case by case where one function shows it.

use super::*;
use crate::disruption::snapshot::PodKind;
use crate::disruption::testkit::{node, pod, pool};

#[test]
fn a_score_is_the_share_of_cost_saved_over_the_share_of_disruption() {
    // ScoreMove (SavingsRatio): pool cost 100, pool disruption 100, k = 2.
    let totals = PoolTotals {
        cost: 100.0,
        disruption: 100.0,
    };
    let table = [
        ("high savings low disruption", 20.0, 5.0, 4.0, true),
        ("equal fractions", 10.0, 10.0, 1.0, true),
        ("low savings high disruption", 5.0, 50.0, 0.10, false),
        ("zero disruption cost", 10.0, 0.0, f64::INFINITY, true),
        ("zero savings", 0.0, 10.0, 0.0, false),
        ("negative savings", -5.0, 10.0, 0.0, false),
    ];
    for (case, savings, disruption, want, approved) in table {
        let s = score(savings, disruption, &totals);
        assert!(
            (s.value() - want).abs() < 0.01 || s.value() == want,
            "{case}: {}",
            s.value()
        );
        assert_eq!(s.approved(), approved, "{case}");
    }
    let nothing = score(10.0, 1.0, &PoolTotals::default());
    assert!(!nothing.approved(), "a pool of no cost saves nothing");
}

/// A node of `pool` at $`price`/h with `pods` moving pods of eviction cost 1.
fn priced(name: &str, pool: &str, price: f64, pods: usize) -> NodeView {
    let mut n = node(name, pool);
    n.price_per_hour = Some(price);
    n.pods = (0..pods)
        .map(|i| pod(&format!("{name}-{i}"), PodKind::Workload))
        .collect();
    n
}

fn balanced(name: &str) -> PoolPolicy {
    let mut p = pool(name);
    p.consolidation = ConsolidationPolicy::Balanced;
    p
}

#[test]
fn totals_cover_every_node_of_each_balanced_pool_and_no_other_pool() {
    let nodes = [
        priced("a", "bal", 1.0, 0),
        priced("b", "bal", 2.0, 3),
        priced("c", "other", 5.0, 1),
    ];
    let totals = totals(&[balanced("bal"), pool("other")], &nodes);
    assert_eq!(totals.len(), 1);
    assert_eq!(
        totals["bal"],
        PoolTotals {
            cost: 3.0,
            disruption: 1.0 + 4.0
        }
    );
}

#[test]
fn a_move_is_judged_in_each_balanced_pool_it_touches() {
    // Ten like nodes of one pod each: deleting one saves 10% of the cost for 10% of the
    // disruption (score 1.0, approved).
    let ten: Vec<NodeView> = (0..10)
        .map(|i| priced(&format!("n{i}"), "bal", 4.84, 1))
        .collect();
    let pools = totals(&[balanced("bal")], &ten);
    assert_eq!(judge(&[&ten[0]], 4.84, &pools), Ok(()));

    // A heavy node (20 pods) beside a light one, at $1 each: deleting it saves half the
    // cost for 21/23 of the disruption (score 0.55, approved); a replacement saving only a
    // tenth of the pool's cost for it is refused.
    let heavy = [priced("h", "bal", 1.0, 20), priced("l", "bal", 1.0, 1)];
    let pools = totals(&[balanced("bal")], &heavy);
    assert_eq!(judge(&[&heavy[0]], 1.0, &pools), Ok(()));
    let refused = judge(&[&heavy[0]], 0.2, &pools).unwrap_err();
    assert!(refused.contains("NodePool bal is Balanced"), "{refused}");
    assert!(refused.contains("needs 0.50"), "{refused}");

    // Across pools the saving is shared by the pools' source cost; a pool of another
    // policy is not judged.
    let mixed = [
        priced("b0", "bal", 4.84, 1),
        priced("b1", "bal", 4.84, 1),
        priced("w0", "wide", 4.84, 30),
    ];
    let pools = totals(&[balanced("bal"), pool("wide")], &mixed);
    // bal: half of 9.68 saved is 4.84 of its 9.68 (0.5) for 2 of its 4 (0.5): score 1.0.
    assert_eq!(judge(&[&mixed[0], &mixed[2]], 9.68, &pools), Ok(()));
    // Only a tenth of that saved: bal's share 0.05 for 0.5, refused.
    assert!(judge(&[&mixed[0], &mixed[2]], 0.968, &pools).is_err());
    // The wide pool alone is never judged.
    assert_eq!(judge(&[&mixed[2]], 0.0, &pools), Ok(()));
}
