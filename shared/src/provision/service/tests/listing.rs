//! Service tests for the holder's kept listing of instances (`owned_listing`): which
//! polls plan with it, and which list EC2 on the pending pod's path.

use super::*;

const T0: Duration = Duration::from_secs(1_000_000);

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + T0 + Duration::from_secs(s)
}

fn launched(report: Result<PollReport, ProvisionError>) -> usize {
    match report {
        Ok(r) => r.launched_instances.len(),
        Err(e) => panic!("poll: {e}"),
    }
}

fn listings(p: &Provisioner<FakeCluster, FakeAws>) -> Vec<String> {
    p.aws()
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("DescribeInstances"))
        .collect()
}

/// The turn of a holder whose listing holds every earlier launch from `since` on.
fn turn(since: Option<SystemTime>) -> Turn<'static> {
    Turn {
        since,
        ..Turn::OUTSIDE
    }
}

async fn refreshed(p: &mut Provisioner<FakeCluster, FakeAws>, now: SystemTime) {
    if let Err(e) = p.refresh_owned_listing(now).await {
        panic!("refresh: {e}");
    }
}

#[tokio::test]
async fn a_holders_poll_plans_with_the_listing_kept_between_polls_and_lists_nothing() {
    let aws = FakeAws::new(&["m5.large"], vec![]);
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);
    let turn = turn(Some(at(0)));
    assert!(p.owned_listing_due(&turn, false, at(0)));
    refreshed(&mut p, at(1)).await;
    assert!(!p.owned_listing_due(&turn, false, at(2)));
    assert_eq!(listings(&p), ["DescribeInstances"]);

    assert_eq!(launched(p.poll(&turn, at(5)).await), 1);
    assert_eq!(listings(&p), ["DescribeInstances"], "{:?}", p.aws().calls());
}

#[tokio::test]
async fn a_poll_lists_for_itself_outside_a_lease_turn_past_max_age_or_with_an_earlier_turns_listing()
 {
    // (turn began, listing asked, poll at, the turn restarted at): whether the poll lists.
    let cases = [
        (None, None, 5, None, true),
        (Some(0), Some(1), 5, None, false),
        (Some(0), Some(1), 22, None, true),
        (Some(0), Some(1), 5, Some(3), true),
    ];
    for (since, asked, poll_at, restarted, lists) in cases {
        let aws = FakeAws::new(&["m5.large"], vec![]);
        let mut p = provisioner(vec![pod("web-1", "500m")], aws);
        let mut this_turn = turn(since.map(at));
        if let Some(asked) = asked {
            refreshed(&mut p, at(asked)).await;
        }
        if let Some(restart) = restarted {
            this_turn = turn(Some(at(restart)));
        }
        let before = listings(&p).len();
        assert_eq!(launched(p.poll(&this_turn, at(poll_at)).await), 1);
        let listed = listings(&p).len() > before;
        assert_eq!(
            listed,
            lists,
            "since {since:?}, asked {asked:?}, poll at {poll_at}, restarted {restarted:?}: {:?}",
            p.aws().calls()
        );
    }
}

#[tokio::test]
async fn a_replacement_recorded_on_a_node_and_missing_from_the_listing_is_described_by_id() {
    let aws = FakeAws::new(&["m5.large"], vec![]);
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);
    let mut node = Node::default();
    node.metadata.name = Some("ip-10-0-1-5.ec2.internal".into());
    node.metadata.annotations = Some(
        [(
            labels::REPLACEMENT_ANNOTATION.to_string(),
            "i-0replacement,i-0other".to_string(),
        )]
        .into(),
    );
    p.kube.nodes = vec![node];
    let turn = turn(Some(at(0)));
    refreshed(&mut p, at(1)).await;

    p.poll(&turn, at(5))
        .await
        .map(|_| ())
        .unwrap_or_else(|e| panic!("poll: {e}"));
    assert_eq!(
        listings(&p),
        [
            "DescribeInstances",
            "DescribeInstances i-0other,i-0replacement"
        ]
    );
}

#[tokio::test]
async fn the_fleets_cost_from_a_kept_listing_counts_the_launches_made_since_it_was_asked_for() {
    let aws = FakeAws::new(&["m5.large"], vec![]);
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);
    let turn = turn(Some(at(0)));
    refreshed(&mut p, at(1)).await;
    assert_eq!(launched(p.poll(&turn, at(5)).await), 1);

    let cost = p
        .fleet_cost(at(6))
        .await
        .unwrap_or_else(|e| panic!("fleet cost: {e}"));
    assert_eq!(cost.instances, 1, "{cost:?}");
    assert_eq!(listings(&p), ["DescribeInstances"], "{:?}", p.aws().calls());
}

#[tokio::test]
async fn a_new_holders_first_poll_plans_with_its_standby_listing_and_describes_the_launches_named_since()
 {
    // The listing was asked for at 10, standing by. (the Lease's bound on the earlier
    // holders' launches, the launches it names, the calls the first poll makes, whether it
    // launches: a named launch is capacity on its way for the pod)
    let named = [crate::ids::InstanceId::new("i-0earlier")];
    let cases: [(u64, &[crate::ids::InstanceId], &[&str], usize); 3] = [
        (8, &[], &[], 1),
        (8, &named, &["DescribeInstances i-0earlier"], 0),
        (11, &[], &["DescribeInstances"], 1),
    ];
    for (bound, named, calls, launches) in cases {
        let aws = FakeAws::new(&["m5.large"], vec![]);
        let mut p = provisioner(vec![pod("web-1", "500m")], aws);
        refreshed(&mut p, at(10)).await;
        let before = listings(&p).len();
        let first_poll = Turn {
            since: Some(at(bound)),
            named,
            ..Turn::OUTSIDE
        };
        let report = p.poll(&first_poll, at(12)).await;
        assert_eq!(
            listings(&p)[before..],
            *calls,
            "bound {bound}, named {named:?}"
        );
        assert_eq!(launched(report), launches, "bound {bound}, named {named:?}");
    }
}
