//! The `provisioner` binary itself, started as Lambda starts it: its environment, the
//! Lambda Runtime API it polls for invocations, and warm invocations in one process.
//!
//! Emulated: the Runtime API (`nodewright_world::lambda_api`), AWS (moto behind the
//! world's front) and Kubernetes (the simulated cluster). The binary is the real one.

use std::path::Path;
use std::time::Duration;

use nodewright_world::kit::{LambdaFunction, getting_started};
use nodewright_world::lambda_api::Outcome;
use nodewright_world::world::World;
use nodewright_world::world::provisioner::scheduled_event;

const INVOCATION_TIMEOUT: Duration = Duration::from_secs(90);

async fn launched(world: &World) -> usize {
    world.instances().await.expect("DescribeInstances").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_answers_scheduled_invocations_through_the_runtime_api_and_launches_once() {
    let world = getting_started("bin-provisioner", 2)
        .await
        .expect("the local world starts");

    let mut function = LambdaFunction::start(
        &world,
        Path::new(env!("CARGO_BIN_EXE_provisioner")),
        "as-lambda",
        "provisioner",
        [
            ("POLL_INTERVAL", "0.2".to_string()),
            ("INVOCATION_BUDGET", "2".to_string()),
            // The SDK's timeouts follow the margin (20 s per operation): moto on a loaded test
            // machine answers the catalog's DescribeInstanceTypes far more slowly than EC2.
            ("DEADLINE_MARGIN", "30".to_string()),
        ],
    )
    .await
    .unwrap();

    let first = function
        .invoke(scheduled_event(), INVOCATION_TIMEOUT)
        .await
        .unwrap();
    let Outcome::Response(summary) = first else {
        panic!("the invocation failed: {first:?}\n{}", function.log_text());
    };
    assert_eq!(
        summary["launchedInstances"].as_array().map(Vec::len),
        Some(1),
        "{summary}"
    );
    assert_eq!(launched(&world).await, 1);

    // The same (warm) process serves the next invocation and launches nothing more.
    let second = function
        .api
        .invoke(scheduled_event(), INVOCATION_TIMEOUT)
        .await
        .unwrap();
    let Outcome::Response(summary) = second else {
        panic!(
            "the second invocation failed: {second:?}\n{}",
            function.log_text()
        );
    };
    assert_eq!(
        summary["launchedInstances"],
        serde_json::json!([]),
        "{summary}"
    );
    assert_eq!(launched(&world).await, 1);
    assert!(
        function.process.exited().is_none(),
        "the function exited:\n{}",
        function.log_text()
    );
    assert!(
        function
            .log_text()
            .lines()
            .any(|l| l.starts_with('{') && l.contains("\"level\"")),
        "the function logs JSON lines:\n{}",
        function.log_text()
    );
    let _ = std::fs::remove_dir_all(function.dir());
}
