//! The `provisioner` binary's metrics, read from its stdout as CloudWatch Logs reads
//! Embedded Metric Format documents (namespace, dimension sets, units and values), and its
//! `counted` log lines, which carry every breakdown instead of a billed metric series.
//!
//! Emulated: the Runtime API (`nodewright_world::lambda_api`), AWS (moto behind the
//! world's front, which throttles CreateFleet on request) and Kubernetes (the simulated
//! cluster). The binary, its recorder and its handler are the real ones.

use std::path::Path;
use std::time::Duration;

use nodewright::telemetry::{NAMESPACE, counted, dims, names};
use nodewright_world::emf::{self, Datum};
use nodewright_world::kit::{LambdaFunction, getting_started};
use nodewright_world::lambda_api::Outcome;
use nodewright_world::world::provisioner::scheduled_event;

const INVOCATION_TIMEOUT: Duration = Duration::from_secs(90);

fn one<'a>(data: &'a [Datum], name: &str, dimensions: &[(&str, &str)]) -> &'a Datum {
    let found = emf::find(data, name, dimensions);
    assert_eq!(
        found.len(),
        1,
        "one {name} with {dimensions:?}; all data: {data:#?}"
    );
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_then_successful_launch_is_counted_in_one_series_each_and_broken_down_in_the_log()
 {
    let cluster = "emf-provisioner";
    let world = getting_started(cluster, 2)
        .await
        .expect("the local world starts");
    // Three throttles exhaust the SDK's standard retries: the first launch fails as
    // throttled, a later poll of the same invocation launches.
    world.front.throttle("CreateFleet", 3);

    let mut function = LambdaFunction::start(
        &world,
        Path::new(env!("CARGO_BIN_EXE_provisioner")),
        "emf-prov",
        "provisioner",
        [
            ("POLL_INTERVAL", "0.2".to_string()),
            ("INVOCATION_BUDGET", "20".to_string()),
        ],
    )
    .await
    .unwrap();
    let answer = function
        .invoke(scheduled_event(), INVOCATION_TIMEOUT)
        .await
        .unwrap();
    let Outcome::Response(summary) = answer else {
        panic!("the invocation failed: {answer:?}\n{}", function.log_text());
    };
    let instances = world.instances().await.unwrap();
    assert_eq!(instances.len(), 1, "{summary}");
    let launched = &instances[0];

    let data = emf::read(&function.log_text()).unwrap();
    assert!(
        !data.is_empty(),
        "no EMF document in:\n{}",
        function.log_text()
    );
    // One series per metric (per decision for the latency): a breakdown would be a
    // metric series billed each month.
    for d in &data {
        assert_eq!(d.namespace, NAMESPACE, "{d:?}");
        assert!(names::ALL.contains(&d.name.as_str()), "{d:?}");
        assert_eq!(
            d.dimensions.get(dims::CLUSTER).map(String::as_str),
            Some(cluster),
            "{d:?}"
        );
        let breakdown: Vec<&str> = d
            .dimension_names()
            .into_iter()
            .filter(|k| *k != dims::CLUSTER)
            .collect();
        let allowed: &[&str] = if d.name == names::DECISION_LATENCY {
            &[dims::DECISION]
        } else {
            &[]
        };
        assert_eq!(breakdown, allowed, "{d:?}");
    }
    let c = (dims::CLUSTER, cluster);
    let log = function.log_text();

    let cold = emf::counted(&log, counted::COLD_START);
    assert_eq!(cold.len(), 1, "{cold:?}");
    assert_eq!(cold[0]["function"], "provisioner");

    // Launches: the metric counts the instance; its counted line names zone and capacity type.
    let total: f64 = emf::find(&data, names::LAUNCHES, &[c])
        .iter()
        .map(|d| d.sum())
        .sum();
    assert_eq!(total, 1.0, "{data:#?}");
    let launches = emf::counted(&log, counted::LAUNCH);
    assert_eq!(launches.len(), 1, "{launches:?}");
    assert_eq!(launches[0]["zone"], launched.zone.as_str());
    assert_eq!(launches[0]["capacity_type"], launched.lifecycle.as_str());
    assert!(
        log.lines()
            .any(|l| l.contains("\"launching\"") && l.contains(&launched.instance_type)),
        "the launch's log line names its instance type"
    );

    let failures: f64 = emf::find(&data, names::LAUNCH_FAILURES, &[c])
        .iter()
        .map(|d| d.sum())
        .sum();
    assert!(failures >= 1.0, "{data:#?}");
    let failed = emf::counted(&log, counted::LAUNCH_FAILURE);
    assert_eq!(
        failed.len() as f64,
        failures,
        "one line per failure: {failed:?}"
    );
    assert!(
        failed.iter().all(|f| f["reason"] == "throttled"),
        "{failed:?}"
    );
    assert!(summary["throttledPolls"].as_u64() >= Some(1), "{summary}");

    // Pending pods: the first poll saw both pods pending.
    let pending: Vec<f64> = emf::find(&data, names::PENDING_PODS, &[c])
        .iter()
        .flat_map(|d| d.values.clone())
        .collect();
    assert_eq!(pending.first(), Some(&2.0), "{pending:?}");
    // And how long the longest-waiting of them had waited: in seconds, written with every
    // pending-pods value.
    let oldest = emf::find(&data, names::OLDEST_PENDING_POD_AGE, &[c]);
    assert!(!oldest.is_empty(), "{data:#?}");
    assert!(
        oldest.iter().all(|d| d.unit.as_deref() == Some("Seconds")),
        "{oldest:?}"
    );
    let ages: Vec<f64> = oldest.iter().flat_map(|d| d.values.clone()).collect();
    assert_eq!(ages.len(), pending.len(), "{ages:?} {pending:?}");
    assert!(ages.iter().all(|a| *a >= 0.0), "{ages:?}");

    // Decision latency: one value per poll that planned, in milliseconds.
    let latencies: Vec<f64> = emf::find(
        &data,
        names::DECISION_LATENCY,
        &[c, (dims::DECISION, "provision")],
    )
    .iter()
    .flat_map(|d| d.values.clone())
    .collect();
    assert!(
        !latencies.is_empty() && latencies.iter().all(|ms| *ms > 0.0),
        "{latencies:?}"
    );
    assert!(
        emf::find(
            &data,
            names::DECISION_LATENCY,
            &[c, (dims::DECISION, "provision")]
        )
        .iter()
        .all(|d| d.unit.as_deref() == Some("Milliseconds"))
    );

    // The fleet: the one instance at the price its launch line logged.
    let cost = one(&data, names::FLEET_COST, &[c]).values[0];
    assert!(cost > 0.0);
    assert_eq!(
        summary["fleetCostPerHour"].as_f64(),
        Some(cost),
        "{summary}"
    );
    let fleet = emf::counted(&log, counted::FLEET);
    assert_eq!(fleet.len(), 1, "{fleet:?}");
    assert_eq!(fleet[0]["instances"], 1);
    assert_eq!(fleet[0]["per_hour"].as_f64(), Some(cost));
    let launch_line: serde_json::Value = function
        .log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["fields"]["message"] == "launching")
        .expect("a launching line");
    assert_eq!(
        launch_line["fields"]["price_per_hour"].as_f64(),
        Some(cost),
        "{launch_line}"
    );
    assert_eq!(launch_line["fields"]["instance_id"], launched.id.as_str());

    assert!(
        function.process.exited().is_none(),
        "the function exited:\n{}",
        function.log_text()
    );
    let _ = std::fs::remove_dir_all(function.dir());
}
