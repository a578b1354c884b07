//! The CreateFleet ClientToken across polls: a retry of an attempt EC2 may have acted on
//! sends the same token (EC2 answers it with that launch, if there was one), a new attempt
//! after an answer EC2 would repeat sends a new one.

use super::*;

fn tokens(p: &Provisioner<FakeCluster, FakeAws>) -> Vec<String> {
    p.aws()
        .requests()
        .into_iter()
        .map(|r| r.client_token)
        .collect()
}

#[tokio::test]
async fn a_retry_after_a_failed_call_sends_the_same_token_and_a_new_attempt_a_new_one() {
    // Throttled past the SDK's retries (did EC2 act? unknown); then, retried, no capacity
    // on any offering (EC2 says nothing launched); then the next round launches.
    let aws = FakeAws::new(
        &["m5.large", "c5.large"],
        vec![Answer::Throttle, Answer::NoCapacityAnywhere, Answer::Launch],
    );
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let first = p.poll(&Turn::OUTSIDE, t0).await.map_err(|e| e.to_string());
    assert!(first.is_ok_and(|r| r.throttled));
    let second = p
        .poll(&Turn::OUTSIDE, t0 + Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string());
    assert!(second.is_ok_and(|r| r.launched_instances.len() == 1));

    let sent = tokens(&p);
    assert_eq!(sent.len(), 3, "{sent:?}");
    let claim = sent[0]
        .strip_suffix("-0")
        .unwrap_or_else(|| panic!("{sent:?}"));
    assert_eq!(
        sent,
        [
            format!("{claim}-0"),
            // The retry of the throttled call: the same attempt.
            format!("{claim}-0"),
            // After nothing launched: the next attempt of the same node claim.
            format!("{claim}-1"),
        ]
    );
}

#[tokio::test]
async fn every_claim_of_a_poll_sends_its_own_token() {
    // 1.5 vCPU each on 2-vCPU types: a claim per pod.
    let aws = FakeAws::new(&["m5.large"], vec![Answer::Launch; 3]);
    let pending = vec![pod("a", "1500m"), pod("b", "1500m"), pod("c", "1500m")];
    let mut p = provisioner(pending, aws);
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let report = p.poll(&Turn::OUTSIDE, t0).await.map_err(|e| e.to_string());
    assert!(report.is_ok_and(|r| r.launched_instances.len() == 3));
    let sent: HashSet<String> = tokens(&p).into_iter().collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
}
