//! The `sweeper` binary as Lambda runs it on its schedule, with every setting from the
//! deployed template: the rate, the timeout, one environment at a time, and the
//! `SweeperFunction` role's permissions (moto judges IAM).
//!
//! Emulated, and named as such: Lambda and EventBridge Scheduler (`nodewright_world::lambda`),
//! AWS (moto) and Kubernetes (the simulated cluster). The binary, its handler and its
//! adapters are real. The world runs on an accelerated clock (the binary follows it through
//! `NODEWRIGHT_CLOCK`); the AWS SDK's and the API server's latencies are wall-clock.

use std::path::PathBuf;
use std::time::Duration;

use nodewright_world::kit::{inflate_running, node_names, timed_world};
use nodewright_world::lambda::{Lambda, Outcome, max_concurrency};
use nodewright_world::world::World;

const FUNCTION: &str = "SweeperFunction";

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sweeper"))
}

/// `inflate` at one replica, running on a node the provisioner launched.
async fn one_busy_node(world: &World) -> String {
    let example = world
        .example_edited("getting-started.yaml", &[("replicas: 10", "replicas: 1")])
        .unwrap();
    world.apply_yaml(&example).unwrap();
    inflate_running(world).await.unwrap();
    let nodes = node_names(world);
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    nodes[0].clone()
}

/// The getting-started pool consolidates empty nodes after a minute: once `inflate` is
/// scaled to zero, the sweeper's schedule removes its node and terminates the instance,
/// each invocation ending well inside the template's timeout, never two at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_its_schedule_the_binary_removes_a_node_left_empty_and_terminates_its_instance() {
    let world = timed_world("lambda-sweeper", 20.0, Duration::from_secs(5))
        .await
        .unwrap();
    let node = one_busy_node(&world).await;
    let dir = std::env::temp_dir().join(format!("nodewright-sweeper-{}", std::process::id()));
    let mut lambda = Lambda::deploy(&world, &[(FUNCTION, binary())], &dir, |_| {}).unwrap();
    let function = lambda.function(FUNCTION).unwrap().clone();
    assert_eq!(
        function.settings.schedule,
        Some(Duration::from_secs(60)),
        "template.yaml schedules the sweeper every minute"
    );
    lambda.start_triggers(&world);

    let example = world
        .example_edited("getting-started.yaml", &[("replicas: 10", "replicas: 0")])
        .unwrap();
    world.apply_yaml(&example).unwrap();
    let terminated = || async {
        world
            .instances()
            .await
            .map(|all| all.is_empty())
            .unwrap_or(false)
    };
    let until = std::time::Instant::now() + Duration::from_secs(180);
    while !(node_names(&world).is_empty() && terminated().await) {
        assert!(
            std::time::Instant::now() < until,
            "node {node} still there: nodes {:?}; invocations {:#?}\n{}",
            node_names(&world),
            function.records(),
            function.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    lambda.stop();

    // A schedule event that finds the one environment busy is throttled and retried by
    // Lambda's asynchronous invocation; every invocation that ran answered.
    let records: Vec<_> = function
        .records()
        .into_iter()
        .filter(|r| r.outcome != Outcome::Throttled)
        .collect();
    assert!(!records.is_empty());
    assert!(
        records.iter().all(|r| r.outcome.succeeded()),
        "{records:#?}\n{}",
        function.logs()
    );
    assert!(
        records.len() >= 2,
        "marked empty, then removed a sweep later: {records:#?}"
    );
    assert_eq!(
        max_concurrency(&records),
        1,
        "ReservedConcurrentExecutions is 1 in template.yaml"
    );
    for r in &records {
        let took = r.ended.duration_since(r.started).unsigned_abs();
        assert!(took < function.settings.timeout, "{r:?}");
    }
    // Signed in as its role, with only the RBAC `nodewright rbac` grants its group.
    assert_eq!(world.sim.rbac_refusals(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}
