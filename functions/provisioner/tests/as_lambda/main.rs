//! The `provisioner` binary itself, started as Lambda starts it: its environment, the
//! Lambda Runtime API it polls for invocations, and warm invocations in one process.
//!
//! Emulated: the Runtime API (`nodewright_world::lambda_api`), AWS (moto behind the
//! world's front) and Kubernetes (the simulated cluster). The binary is the real one.
//!
//! One test binary for the crate (each links the whole AWS SDK): the metrics and the
//! overlapping invocations are modules of it.

mod emf_metrics;
mod min_values;
mod overlap;

use std::path::Path;
use std::time::Duration;

use nodewright_world::kit::{LambdaFunction, getting_started};
use nodewright_world::kube_sim::Fault;
use nodewright_world::lambda_api::Outcome;
use nodewright_world::world::World;
use nodewright_world::world::provisioner::scheduled_event;

const INVOCATION_TIMEOUT: Duration = Duration::from_secs(90);
/// Room for a first catalog that moto builds slowly on a loaded machine, then the prices.
const SLOW_PRICES_TIMEOUT: Duration = Duration::from_secs(120);

/// One short invocation's environment: polls every 200 ms for `budget` seconds.
fn short_invocation(budget: &str) -> [(&'static str, String); 3] {
    [
        ("POLL_INTERVAL", "0.2".to_string()),
        ("INVOCATION_BUDGET", budget.to_string()),
        // The SDK's timeouts follow the margin (20 s per operation): moto on a loaded test
        // machine answers the catalog's DescribeInstanceTypes far more slowly than EC2.
        ("DEADLINE_MARGIN", "30".to_string()),
    ]
}

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
        short_invocation("2"),
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
    // Signed in as its role, with only the RBAC `nodewright rbac` grants its group.
    assert_eq!(world.sim.rbac_refusals(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(function.dir());
}

/// The holder asks the Price List API for on-demand prices between polls (a cold
/// container's are due at once). Here that API is slow: the front holds its answer for a
/// minute, past `PRICE_FETCH_TIMEOUT`. A pod turning pending meanwhile must not wait for
/// it: the fetch is dropped, the pod's poll launches, and the fetch is tried again at the
/// next idle moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_turning_pending_while_prices_are_fetched_is_launched_for_without_waiting_for_them() {
    let world = getting_started("slow-prices", 0)
        .await
        .expect("the local world starts");
    world.front.delay("GetProducts", Duration::from_secs(60));
    let mut function = LambdaFunction::start(
        &world,
        Path::new(env!("CARGO_BIN_EXE_provisioner")),
        "slow-prices",
        "provisioner",
        [
            ("POLL_INTERVAL", "0.2".to_string()),
            ("INVOCATION_BUDGET", "45".to_string()),
            // SDK operations get 40 s: the first catalog must not time out against moto on
            // a loaded machine before the holder gets to the prices.
            ("DEADLINE_MARGIN", "60".to_string()),
        ],
    )
    .await
    .unwrap();

    let pod_turns_pending = async {
        let asked = loop {
            if let Some(call) = world.front.calls("GetProducts").first() {
                break call.at;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let one = world
            .example_edited("getting-started.yaml", &[("replicas: 10", "replicas: 1")])
            .unwrap();
        world.apply_yaml(&one).unwrap();
        world.sim.step().await;
        asked
    };
    let invocation = function.invoke(scheduled_event(), SLOW_PRICES_TIMEOUT);
    let (outcome, asked) = tokio::select! {
        (outcome, asked) = async { tokio::join!(invocation, pod_turns_pending) } => (outcome, asked),
        () = tokio::time::sleep(SLOW_PRICES_TIMEOUT) => panic!("the holder never asked for prices"),
    };
    let Outcome::Response(summary) = outcome.unwrap() else {
        panic!("the invocation failed:\n{}", function.log_text());
    };
    assert_eq!(
        summary["launchedInstances"].as_array().map(Vec::len),
        Some(1),
        "{summary}\n{}",
        function.log_text()
    );
    let fleet = world.front.calls("CreateFleet");
    let launched_at = fleet.first().expect("a CreateFleet call").at;
    // Waiting for the answer would have put the launch at least PRICE_FETCH_TIMEOUT after
    // the ask (the front answers only after a minute); the pod did not wait for it.
    assert!(
        launched_at.duration_since(asked) < nodewright::aws::pricing::PRICE_FETCH_TIMEOUT,
        "CreateFleet {:?} after the price ask\n{}",
        launched_at.duration_since(asked),
        function.log_text()
    );
    let _ = std::fs::remove_dir_all(function.dir());
}

/// An API server that refuses every Lease request (RBAC that lost the Lease rule): the
/// invocation cannot tell whether it may act, launches nothing for the pending pods, and
/// says so as an error (Lambda's `Errors` metric, which the provisioner's alarm watches),
/// not as a quiet success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_that_can_never_check_the_lease_fails_rather_than_answering_quietly() {
    let world = getting_started("lease-refused", 2)
        .await
        .expect("the local world starts");
    world
        .sim
        .inject(Fault::resource("leases", 403).times(u32::MAX));
    let mut function = LambdaFunction::start(
        &world,
        Path::new(env!("CARGO_BIN_EXE_provisioner")),
        "lease-refused",
        "provisioner",
        short_invocation("3"),
    )
    .await
    .unwrap();
    let answer = function
        .invoke(scheduled_event(), INVOCATION_TIMEOUT)
        .await
        .unwrap();
    let Outcome::Error(error) = answer else {
        panic!(
            "the invocation answered: {answer:?}\n{}",
            function.log_text()
        );
    };
    assert!(error.to_string().contains("Lease checks failed"), "{error}");
    assert_eq!(launched(&world).await, 0);
    let _ = std::fs::remove_dir_all(function.dir());
}
