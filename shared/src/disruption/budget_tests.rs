//! Budgets: counts and percentages, reasons, schedules with durations, across midnight and
//! in a time zone.

use jiff::Timestamp;

use super::testkit::count_budget;
use super::*;
use crate::api::NodePool;

fn nodepool(yaml: &str) -> NodePool {
    let mut np: NodePool = serde_yaml::from_str(yaml).unwrap();
    crate::api::defaults::default_node_pool(&mut np);
    np
}

fn budgets(annotations: &str, budgets: &str) -> Result<Vec<BudgetRule>, String> {
    pool_budgets(&nodepool(&format!(
        "metadata: {{name: p, annotations: {annotations}}}\n\
         spec:\n  template: {{spec: {{nodeClassRef: {{name: d}}}}}}\n  disruption: {{budgets: {budgets}}}\n"
    )))
    .map_err(|e| e.to_string())
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn counts_and_percentages_of_the_pool_round_up_and_nodes_being_disrupted_count_against_them() {
    let cases = [
        (NodesLimit::Count(3), 10, 0, 3),
        (NodesLimit::Count(3), 10, 2, 1),
        (NodesLimit::Count(0), 10, 0, 0),
        (NodesLimit::Percent(10), 3, 0, 1),
        (NodesLimit::Percent(10), 25, 0, 3),
        (NodesLimit::Percent(50), 4, 1, 1),
        (NodesLimit::Percent(0), 4, 0, 0),
        (NodesLimit::Count(1), 4, 3, 0),
    ];
    for (limit, nodes, disrupting, want) in cases {
        let got = allowed(
            &[count_budget(limit)],
            Reason::Empty,
            nodes,
            disrupting,
            at("2026-03-02T10:00:00Z"),
        );
        assert_eq!(
            got, want,
            "{limit:?} of {nodes} with {disrupting} disrupting"
        );
    }
}

#[test]
fn the_most_restrictive_active_budget_for_the_reason_wins_and_no_budget_allows_anything() {
    let b = budgets(
        "{}",
        "[{nodes: '50%'}, {nodes: '0', reasons: [Empty, Drifted]}]",
    )
    .unwrap();
    let now = at("2026-03-02T10:00:00Z");
    assert_eq!(allowed(&b, Reason::Empty, 10, 0, now), 0);
    assert_eq!(allowed(&b, Reason::Expired, 10, 0, now), 5);
    assert_eq!(allowed(&[], Reason::Expired, 10, 0, now), usize::MAX);
}

#[test]
fn a_scheduled_budget_is_active_for_its_duration_after_each_firing_even_across_midnight() {
    // No disruption from 22:00 for 8 hours, every day (UTC).
    let b = budgets("{}", "[{nodes: '0', schedule: '0 22 * * *', duration: 8h}]").unwrap();
    let cases = [
        ("2026-03-02T21:59:00Z", usize::MAX),
        ("2026-03-02T22:00:00Z", 0),
        ("2026-03-02T23:59:00Z", 0),
        ("2026-03-03T00:00:00Z", 0),
        ("2026-03-03T05:59:59Z", 0),
        ("2026-03-03T06:00:00Z", usize::MAX),
    ];
    for (now, want) in cases {
        assert_eq!(allowed(&b, Reason::Empty, 10, 0, at(now)), want, "at {now}");
    }
}

#[test]
fn a_schedule_is_read_in_the_time_zone_the_nodepool_names() {
    // 09:00-17:00 on weekdays in Seoul (UTC+9, no DST): 00:00-08:00 UTC.
    let b = budgets(
        "{nodewright.io/budget-time-zone: Asia/Seoul}",
        "[{nodes: '0', schedule: '0 9 * * MON-FRI', duration: 8h}]",
    )
    .unwrap();
    let cases = [
        ("2026-03-02T00:30:00Z", 0),          // Monday 09:30 in Seoul
        ("2026-03-02T08:30:00Z", usize::MAX), // Monday 17:30 in Seoul
        ("2026-03-01T23:30:00Z", usize::MAX), // Monday 08:30 in Seoul
        ("2026-03-07T01:00:00Z", usize::MAX), // Saturday 10:00 in Seoul
    ];
    for (now, want) in cases {
        assert_eq!(
            allowed(&b, Reason::Expired, 10, 0, at(now)),
            want,
            "at {now}"
        );
    }
}

#[test]
fn a_schedule_follows_daylight_saving_time_in_its_zone() {
    // 02:00 New York local: 07:00 UTC in winter, 06:00 UTC in summer.
    let b = budgets(
        "{nodewright.io/budget-time-zone: America/New_York}",
        "[{nodes: '0', schedule: '0 2 * * *', duration: 1h}]",
    )
    .unwrap();
    assert_eq!(
        allowed(&b, Reason::Empty, 10, 0, at("2026-01-15T07:30:00Z")),
        0
    );
    assert_eq!(
        allowed(&b, Reason::Empty, 10, 0, at("2026-07-15T06:30:00Z")),
        0
    );
    assert_eq!(
        allowed(&b, Reason::Empty, 10, 0, at("2026-07-15T07:30:00Z")),
        usize::MAX
    );
}

#[test]
fn a_budget_that_cannot_be_read_is_an_error_naming_the_budget_and_field() {
    let cases = [
        (
            "{}",
            "[{nodes: '10%'}, {nodes: 'many'}]",
            "spec.disruption.budgets[1].nodes: \"many\"",
        ),
        (
            "{}",
            "[{nodes: '0', schedule: '0 25 * * *', duration: 1h}]",
            "budgets[0].schedule:",
        ),
        (
            "{}",
            "[{nodes: '0', schedule: '@daily'}]",
            "budgets[0].duration: required",
        ),
        (
            "{}",
            "[{nodes: '0', reasons: [Sometimes]}]",
            "budgets[0].reasons: unknown reason",
        ),
        (
            "{nodewright.io/budget-time-zone: Mars/Olympus}",
            "[{nodes: '0'}]",
            "metadata.annotations[nodewright.io/budget-time-zone]: \"Mars/Olympus\"",
        ),
    ];
    for (annotations, b, needle) in cases {
        let e = budgets(annotations, b).unwrap_err();
        assert!(e.contains(needle), "{b}: {e}");
    }
}

#[test]
fn a_nodepool_without_budgets_gets_karpenters_ten_percent() {
    let np = nodepool("metadata: {name: p}\nspec: {template: {spec: {nodeClassRef: {name: d}}}}\n");
    let b = pool_budgets(&np).unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].nodes, NodesLimit::Percent(10));
    assert!(b[0].active(at("2026-03-02T10:00:00Z")));
}

#[test]
fn expired_nodes_go_a_tenth_of_the_pool_at_a_time_at_least_one_and_never_past_the_budget() {
    let now = at("2026-03-02T10:00:00Z");
    // (budgets, pool nodes, disrupting, expiring already, how many more may begin expiring)
    let cases = [
        // The budgets allow all at once: the cap holds them to a tenth, at least one.
        ("[{nodes: '100%'}]", 10, 0, 0, 1),
        ("[{nodes: '100%'}]", 30, 0, 0, 3),
        ("[{nodes: '100%'}]", 31, 0, 0, 4),
        ("[{nodes: '100%'}]", 3, 0, 0, 1),
        ("[{nodes: '100%'}]", 30, 2, 2, 1),
        ("[{nodes: '100%'}]", 30, 3, 3, 0),
        // Budgets only for other reasons leave expiration unlimited by budget: the cap holds.
        (
            "[{nodes: '0', reasons: [Empty, Underutilized, Drifted]}]",
            5,
            0,
            0,
            1,
        ),
        ("[{nodes: '0', reasons: [Drifted]}]", 50, 0, 0, 5),
        ("[{nodes: '0', reasons: [Drifted]}]", 50, 4, 4, 1),
        // No budget at all (an empty list): unlimited by budget, held by the cap.
        ("[]", 20, 0, 0, 2),
        // Other removals under way count against the budget, not against the cap.
        ("[{nodes: '100%'}]", 10, 5, 0, 1),
        // The budget allows fewer than the cap: the budget holds.
        ("[{nodes: '2'}]", 50, 0, 0, 2),
        ("[{nodes: '2'}]", 50, 1, 1, 1),
        ("[{nodes: '0'}]", 50, 0, 0, 0),
        ("[{nodes: '10%'}]", 50, 4, 0, 1),
    ];
    for (b, nodes, disrupting, expiring, want) in cases {
        let rules = budgets("{}", b).unwrap();
        let got = expirations_allowed(&rules, nodes, disrupting, expiring, now);
        assert_eq!(
            got, want,
            "{b} for {nodes} nodes, {disrupting} disrupting, {expiring} expiring"
        );
    }
}
