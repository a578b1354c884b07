//! Service tests for instance profiles of EC2NodeClass roles and for launch template
//! collection, over the fakes of `service/tests.rs`.

use super::*;
use crate::provision::template_gc::{TEMPLATE_GC_INTERVAL, TEMPLATE_GRACE};

const T0: Duration = Duration::from_secs(1_000_000);

fn poll_ok(report: Result<PollReport, ProvisionError>) -> PollReport {
    match report {
        Ok(r) => r,
        Err(e) => panic!("poll: {e}"),
    }
}

fn events(p: &Provisioner<FakeCluster, FakeAws>) -> Vec<(String, String, String)> {
    p.kube()
        .events
        .lock()
        .map(|e| e.clone())
        .unwrap_or_default()
}

fn seed_template(aws: &FakeAws, name: &str, created: SystemTime) {
    if let Ok(mut t) = aws.templates.lock() {
        t.push(OwnedLaunchTemplate {
            name: name.into(),
            id: format!("lt-{name}"),
            created: Some(created),
        });
    }
}

#[tokio::test]
async fn a_class_naming_the_stack_role_uses_the_stack_profile_without_iam() {
    let aws = FakeAws::new(&["m5.large"], vec![]);
    let mut p = provisioner_with_role(vec![pod("web-1", "500m")], aws, "demo-node");
    let report = poll_ok(p.poll(&Turn::OUTSIDE, SystemTime::UNIX_EPOCH + T0).await);

    assert_eq!(report.launched_instances.len(), 1);
    let profiles: Vec<String> = p
        .aws()
        .specs()
        .iter()
        .map(|s| s.instance_profile.clone())
        .collect();
    assert_eq!(profiles, ["demo-node-profile"]);
    assert!(
        !p.aws()
            .calls()
            .iter()
            .any(|c| c.starts_with("EnsureInstanceProfile")),
        "{:?}",
        p.aws().calls()
    );
}

#[tokio::test]
async fn a_class_naming_another_role_gets_its_profile_ensured_once_per_container() {
    let aws = FakeAws::new(&["m5.large"], vec![]);
    let mut p = provisioner_with_role(vec![pod("web-1", "500m")], aws, "gpu-nodes");
    // The fake cluster never binds the pod and the fake EC2 never lists what it launched,
    // so each poll past the last launch's visibility window launches for it again.
    let apart = crate::provision::unseen_launches::VISIBILITY_WINDOW + Duration::from_secs(5);
    for i in 0..3 {
        poll_ok(
            p.poll(&Turn::OUTSIDE, SystemTime::UNIX_EPOCH + T0 + apart * i)
                .await,
        );
    }

    let ensured: Vec<String> = p
        .aws()
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("EnsureInstanceProfile"))
        .collect();
    assert_eq!(ensured, ["EnsureInstanceProfile gpu-nodes"]);
    let specs = p.aws().specs();
    assert_eq!(specs.len(), 3);
    assert!(
        specs
            .iter()
            .all(|s| s.instance_profile == "profile-for-gpu-nodes"),
        "{specs:#?}"
    );
}

#[tokio::test]
async fn a_profile_ec2_cannot_see_yet_is_retried_next_poll_on_the_same_offerings() {
    let aws = FakeAws::new(
        &["m5.large", "c5.large"],
        vec![Answer::ProfileNotVisible, Answer::Launch],
    );
    let mut p = provisioner_with_role(vec![pod("web-1", "500m")], aws, "gpu-nodes");
    let first = poll_ok(p.poll(&Turn::OUTSIDE, SystemTime::UNIX_EPOCH + T0).await);
    let second = poll_ok(
        p.poll(
            &Turn::OUTSIDE,
            SystemTime::UNIX_EPOCH + T0 + Duration::from_secs(5),
        )
        .await,
    );

    // One CreateFleet in the first poll: a profile that is not visible yet is no reason to
    // try other offerings, and none is marked unavailable, so the retry offers the same.
    let requests = p.aws().requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(offered(&requests[0]), offered(&requests[1]));
    assert!(first.launched_instances.is_empty());
    assert_eq!((first.claims, first.failed_claims), (1, 1));
    assert_eq!(second.launched_instances.len(), 1);
    // EC2's refusal made the container forget the cached profile and ensure it again.
    let ensured = p
        .aws()
        .calls()
        .iter()
        .filter(|c| c.starts_with("EnsureInstanceProfile"))
        .count();
    assert_eq!(ensured, 2);
    let warnings: Vec<_> = events(&p)
        .into_iter()
        .filter(|(pod, reason, _)| pod == "web-1" && reason == "FailedScheduling")
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].2.contains("Invalid IAM Instance Profile") && warnings[0].2.contains("retry"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn old_templates_are_collected_after_launching_and_fresh_or_used_ones_are_kept() {
    let now = SystemTime::UNIX_EPOCH + T0;
    let aws = FakeAws::new(&["m5.large"], vec![]);
    aws.set_clock(now);
    let stale = now - TEMPLATE_GRACE - Duration::from_secs(1);
    let fresh = now - TEMPLATE_GRACE + Duration::from_secs(60);
    seed_template(&aws, "nodewright/demo/stale1", stale);
    seed_template(
        &aws,
        "nodewright/demo/stale2",
        stale - Duration::from_secs(3_600),
    );
    seed_template(&aws, "nodewright/demo/fresh", fresh);
    seed_template(&aws, "nodewright/demo-2/stale", stale);
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);

    let report = poll_ok(p.poll(&Turn::OUTSIDE, now).await);

    let launched = p
        .aws()
        .specs()
        .first()
        .map(|s| s.name("demo"))
        .unwrap_or_default();
    assert_eq!(report.launched_instances.len(), 1);
    assert_eq!(
        report.launch_templates_deleted,
        ["nodewright/demo/stale2", "nodewright/demo/stale1"]
    );
    let calls = p.aws().calls();
    let fleet = calls.iter().position(|c| c == "CreateFleet");
    let listed = calls.iter().position(|c| c == "ListLaunchTemplates");
    assert!(
        matches!((fleet, listed), (Some(f), Some(l)) if f < l),
        "launching comes before collecting: {calls:?}"
    );
    let mut kept = vec![
        "nodewright/demo-2/stale".to_string(),
        "nodewright/demo/fresh".to_string(),
        launched.clone(),
    ];
    kept.sort();
    assert_eq!(p.aws().template_names(), kept);

    // Within the interval no collection runs, however many polls.
    poll_ok(p.poll(&Turn::OUTSIDE, now + Duration::from_secs(60)).await);
    let lists = |p: &Provisioner<FakeCluster, FakeAws>| {
        p.aws()
            .calls()
            .iter()
            .filter(|c| *c == "ListLaunchTemplates")
            .count()
    };
    assert_eq!(lists(&p), 1);

    // At the next due run the once-fresh template has aged past the grace and goes; the
    // one the still-pending pod keeps launching from is in use, though as old.
    let later = now + TEMPLATE_GC_INTERVAL + TEMPLATE_GRACE;
    p.aws().set_clock(later);
    let report = poll_ok(p.poll(&Turn::OUTSIDE, later).await);
    assert_eq!(lists(&p), 2);
    assert_eq!(report.launch_templates_deleted, ["nodewright/demo/fresh"]);
    assert_eq!(
        p.aws().template_names(),
        ["nodewright/demo-2/stale".to_string(), launched]
    );
}

#[tokio::test]
async fn a_failing_collection_is_logged_and_never_fails_the_poll() {
    let mut aws = FakeAws::new(&["m5.large"], vec![]);
    aws.listing_fails = true;
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);
    let report = poll_ok(p.poll(&Turn::OUTSIDE, SystemTime::UNIX_EPOCH + T0).await);
    assert_eq!(report.launched_instances.len(), 1);
    assert!(report.launch_templates_deleted.is_empty());
    assert!(p.aws().calls().contains(&"ListLaunchTemplates".to_string()));
}

#[tokio::test]
async fn no_collection_while_the_batching_window_is_open() {
    let aws = FakeAws::new(&["m5.large"], vec![]);
    let settings_batch = BatchWindow::fixed(Duration::from_secs(1), Duration::from_secs(10));
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);
    p.settings.batch = settings_batch;
    let report = poll_ok(p.poll(&Turn::OUTSIDE, SystemTime::UNIX_EPOCH + T0).await);
    assert!(report.waiting.is_some());
    assert!(p.aws().calls().is_empty(), "{:?}", p.aws().calls());
}
