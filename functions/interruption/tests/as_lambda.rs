//! The `interruption` binary as Lambda runs it from its queue, with every setting from the
//! deployed template: the event source mapping's batches and concurrency, the queue's real
//! visibility timeout, the function killed at its timeout, and Lambda's recursive loop
//! detection counting follow-up hops.
//!
//! Emulated, and named as such: Lambda and its SQS poller (`nodewright_world::lambda`), the
//! queue (`nodewright_world::sqs`, on the world's clock; moto judges IAM), AWS (moto) and
//! Kubernetes (the simulated cluster). The binary, its handler and its adapters are real.
//! The world runs on an accelerated clock (the binary follows it through
//! `NODEWRIGHT_CLOCK`); the AWS SDK's and the API server's latencies are wall-clock.

use std::path::PathBuf;
use std::time::Duration;

use nodewright_world::interruption::{ACCOUNT, REGION};
use nodewright_world::kit::{timed_world, wait_until};
use nodewright_world::lambda::{Lambda, Outcome, max_concurrency};
use nodewright_world::sqs::model::Fate;
use nodewright_world::world::World;
use serde_json::json;

const FUNCTION: &str = "InterruptionFunction";

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_interruption"))
}

fn dir(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nodewright-{test}-{}", std::process::id()))
}

fn spot_warning(instance_id: &str, time: jiff::Timestamp) -> String {
    json!({
        "version": "0", "id": format!("warning-{instance_id}"),
        "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
        "account": ACCOUNT, "time": time.to_string(), "region": REGION, "resources": [],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    })
    .to_string()
}

/// Messages the queue has seen end, and how.
fn fates(world: &World) -> Vec<Fate> {
    world
        .queue
        .with(|q, _| q.fates().values().cloned().collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mapping_runs_five_batches_at_most_and_a_batch_killed_at_the_timeout_comes_back_after_the_visibility_timeout()
 {
    // While nothing works, 60 world seconds pass each wall-clock second.
    let world = timed_world("lambda-esm", 60.0, Duration::from_secs(5))
        .await
        .unwrap();
    let mut lambda = Lambda::deploy(&world, &[(FUNCTION, binary())], &dir("esm"), |_| {}).unwrap();
    lambda.start_triggers(&world);
    let function = lambda.function(FUNCTION).unwrap().clone();
    let template_visibility = world.queue.with(|q, _| q.settings().visibility_timeout);

    // Sixty warnings about instances this cluster does not have: each is read, its node
    // looked for (the API server takes 20 s to list nodes) and acknowledged.
    world.sim.slow("/api/v1/nodes", Duration::from_secs(20));
    let now = world.clock().now();
    for i in 0..60 {
        world
            .send_raw(&spot_warning(&format!("i-{i:017x}"), now))
            .await
            .unwrap();
    }
    wait_until(
        "all sixty warnings handled",
        Duration::from_secs(90),
        Duration::from_millis(200),
        || {
            fates(&world)
                .iter()
                .filter(|f| matches!(f, Fate::Deleted { .. }))
                .count()
                == 60
        },
    )
    .await
    .unwrap();
    let records = function.records();
    let most = max_concurrency(&records);
    assert_eq!(
        most,
        5,
        "ScalingConfig.MaximumConcurrency is 5 in template.yaml: {} invocations",
        records.len()
    );
    assert!(records.iter().all(|r| r.outcome.succeeded()), "{records:?}");

    // Now listing nodes outlasts the function's timeout: the environment is killed mid-call
    // and the message stays hidden for the queue's visibility timeout before coming back.
    world.sim.clear_faults();
    world.sim.slow("/api/v1/nodes", Duration::from_secs(90));
    world
        .send_raw(&spot_warning("i-00000000000000bad", world.clock().now()))
        .await
        .unwrap();
    let mapping = lambda.mappings.get(FUNCTION).unwrap().clone();
    wait_until(
        "the slow batch delivered twice",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || {
            mapping
                .deliveries()
                .iter()
                .filter(|d| d.message_ids.len() == 1 && d.outcome == Outcome::TimedOut)
                .count()
                >= 2
        },
    )
    .await
    .unwrap();
    world.sim.clear_faults();
    let timed_out: Vec<_> = mapping
        .deliveries()
        .into_iter()
        .filter(|d| d.outcome == Outcome::TimedOut)
        .collect();
    let gap = timed_out[1].at.duration_since(timed_out[0].at);
    let gap = Duration::try_from(gap).unwrap();
    assert!(
        gap >= template_visibility,
        "delivered again after {gap:?}, before the visibility timeout {template_visibility:?}"
    );
    assert!(
        gap < template_visibility + Duration::from_secs(30),
        "delivered again only after {gap:?}"
    );
    let killed = function
        .records()
        .iter()
        .filter(|r| r.outcome == Outcome::TimedOut)
        .count();
    assert!(
        killed >= 2,
        "the environments were not killed at the timeout"
    );
    // An environment killed at the timeout is never used again.
    let records = function.records();
    for (i, r) in records.iter().enumerate() {
        if r.outcome == Outcome::TimedOut {
            let reused = records[i + 1..]
                .iter()
                .any(|later| later.container == r.container && later.started >= r.ended);
            assert!(
                !reused,
                "environment {:?} was reused after its timeout",
                r.container
            );
        }
    }
    lambda.stop();
}
