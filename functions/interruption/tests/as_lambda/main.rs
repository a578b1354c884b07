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
//!
//! One test binary for the crate (each links the whole AWS SDK): the metrics are modules of it.

mod emf_metrics;

use std::path::PathBuf;
use std::time::Duration;

use nodewright_world::interruption::{ACCOUNT, REGION};
use nodewright_world::kit::{app_pods, inflate_running, timed_world, wait_until};
use nodewright_world::lambda::{Lambda, Outcome, RecursiveLoop, lineage, max_concurrency};
use nodewright_world::sqs::model::{DeadLetterWhy, Fate};
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

/// A rebalance recommendation: a voluntary removal, replacement first; with every pod held
/// by a PodDisruptionBudget its drain looks again and again until it is given up, a chain
/// of follow-ups longer than Lambda's sixteen hops.
fn rebalance(instance_id: &str, time: jiff::Timestamp) -> String {
    json!({
        "version": "0", "id": format!("rebalance-{instance_id}"),
        "detail-type": "EC2 Instance Rebalance Recommendation", "source": "aws.ec2",
        "account": ACCOUNT, "time": time.to_string(), "region": REGION, "resources": [],
        "detail": {"instance-id": instance_id},
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
    // Signed in as its role, with only the RBAC `nodewright rbac` grants its group.
    assert_eq!(world.sim.rbac_refusals(), Vec::<String>::new());
    lambda.stop();
}

/// The getting-started pool on spot with its ten `inflate` pods running, launched by the
/// provisioner in-process; a PodDisruptionBudget then forbids every eviction of them.
async fn blocked_workload(world: &World) {
    // 4-vCPU nodes hold three of the ten 1-CPU pods each: several nodes.
    let four_cpus = concat!(
        "values: [\"2\"]\n",
        "        - key: karpenter.k8s.aws/instance-cpu\n",
        "          operator: In\n",
        "          values: [\"4\"]"
    );
    let pool = world
        .example_edited(
            "getting-started.yaml",
            &[
                (r#"values: ["on-demand"]"#, r#"values: ["spot"]"#),
                (r#"values: ["2"]"#, four_cpus),
            ],
        )
        .unwrap();
    world.apply_yaml(&pool).unwrap();
    inflate_running(world).await.unwrap();
    world
        .apply_yaml(
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate, namespace: default}\nspec:\n  maxUnavailable: 0\n  selector: {matchLabels: {app: inflate}}\n",
        )
        .unwrap();
}

/// The nodes running `inflate` pods, with their instance ids.
fn busy_nodes(world: &World) -> Vec<(String, String)> {
    let pods = app_pods(world, "inflate");
    world
        .sim
        .list_json("v1", "Node")
        .into_iter()
        .filter(|n| {
            pods.iter()
                .any(|p| p["spec"]["nodeName"] == n["metadata"]["name"])
        })
        .map(|n| {
            let name = n["metadata"]["name"].as_str().unwrap().to_string();
            let id = n["spec"]["providerID"]
                .as_str()
                .and_then(|p| p.rsplit('/').next())
                .unwrap()
                .to_string();
            (name, id)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lambda_stops_a_follow_up_chain_at_sixteen_hops_unless_the_function_allows_recursion() {
    let world = timed_world("lambda-recursion", 20.0, Duration::from_secs(5))
        .await
        .unwrap();
    blocked_workload(&world).await;

    // With Lambda's default (Terminate): a drain the budget holds sends a follow-up at
    // each look, and the seventeenth invocation of the chain is not made.
    let mut lambda = Lambda::deploy(&world, &[(FUNCTION, binary())], &dir("recursion"), |s| {
        s.recursive_loop = RecursiveLoop::Terminate
    })
    .unwrap();
    lambda.start_triggers(&world);
    let nodes = busy_nodes(&world);
    assert!(nodes.len() >= 2, "the test needs two nodes: {nodes:?}");
    let (_, first) = nodes[0].clone();
    let (second_node, second) = nodes[1].clone();
    world
        .send_raw(&rebalance(&first, world.clock().now()))
        .await
        .unwrap();
    let mapping = lambda.mappings.get(FUNCTION).unwrap().clone();
    wait_until(
        "the chain stopped by recursion detection",
        Duration::from_secs(180),
        Duration::from_millis(100),
        || !mapping.stopped_by_recursion().is_empty(),
    )
    .await
    .unwrap_or_else(|e| {
        let records = lambda.function(FUNCTION).unwrap().records();
        panic!("{e}: {records:#?}\n{:#?}", mapping.deliveries())
    });
    let longest = |lambda: &Lambda| {
        lambda
            .function(FUNCTION)
            .unwrap()
            .records()
            .iter()
            .map(|r| r.lineage)
            .max()
            .unwrap_or(0)
    };
    assert_eq!(longest(&lambda), lineage::MAX_CHAIN);
    let stopped = mapping.stopped_by_recursion();
    let fate = world
        .queue
        .with(|q, _| q.fate(stopped.iter().next().unwrap()).cloned());
    assert!(
        matches!(
            fate,
            Some(Fate::DeadLettered {
                why: DeadLetterWhy::Recursion,
                ..
            })
        ),
        "{fate:?}"
    );
    lambda.stop();

    // As the template deploys the function: the chain of another node's removal goes on
    // past sixteen hops.
    let allowed =
        Lambda::deploy(&world, &[(FUNCTION, binary())], &dir("recursion"), |_| {}).unwrap();
    assert_eq!(
        allowed.function(FUNCTION).unwrap().settings.recursive_loop,
        RecursiveLoop::Allow,
        "template.yaml's InterruptionFunction allows its follow-up chains"
    );
    let mut lambda = allowed;
    lambda.start_triggers(&world);
    world
        .send_raw(&rebalance(&second, world.clock().now()))
        .await
        .unwrap();
    wait_until(
        "the second node's chain past sixteen hops",
        Duration::from_secs(180),
        Duration::from_millis(200),
        || longest(&lambda) > lineage::MAX_CHAIN,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: node {second_node}"));
    assert!(
        longest(&lambda) > lineage::MAX_CHAIN,
        "the chain was {} hops long",
        longest(&lambda)
    );
    lambda.stop();
}
