//! `nodewright status --stack` against the deployed stack: each function's last success,
//! errors and throttles, the interruption queue, the dead letters and the alarms in ALARM
//! beside the fleet, the fleet priced at the region's Price List.
//!
//! Real: the CLI binary, the provisioner and sweeper binaries run by the world's Lambda on
//! the stack's schedules, the AWS SDK against moto (CloudFormation's resource list,
//! CloudWatch's metrics and alarms), the world's SQS redrive. Emulated, each named where it
//! happens: Lambda's AWS/Lambda metrics (published from the world's invocation records),
//! CloudWatch's alarm evaluation (moto runs none), the Price List API (moto has none).

use std::time::Duration;

use aws_sdk_cloudwatch::types::StateValue;
use nodewright_world::kit;
use nodewright_world::kube_sim::Fault;
use nodewright_world::kubectl::Kubectl;
use nodewright_world::lambda::{Lambda, Outcome};
use nodewright_world::world::World;
use serde_json::Value;

const CLUSTER: &str = "status-health";
/// How much dearer than the bundled us-east-1 table the world's Price List is.
const LISTED: f64 = 1.5;

async fn status(world: &World, kubeconfig: &std::path::Path, output: &str) -> String {
    let out = kit::nodewright_cli(world, kubeconfig)
        .expect("the CLI is built")
        .args(["status", "--stack", world.stack.name(), "-o", output])
        .output()
        .await
        .expect("the CLI runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "nodewright status:\n{stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("warning:"),
        "every part of the health read:\n{stderr}"
    );
    stdout
}

/// A message no consumer can handle, received and let go until the redrive policy
/// (maxReceiveCount 5) moves it to the dead-letter queue. The consumer here is the test
/// itself, receiving with a visibility timeout of 0 and never deleting.
async fn dead_letter_one(world: &World) {
    world.send_raw("{\"poison\": true}").await.unwrap();
    let sqs = aws_sdk_sqs::Client::new(&world.front.sdk_config(&world.sdk));
    for _ in 0..6 {
        sqs.receive_message()
            .queue_url(&world.stack.queue_url)
            .visibility_timeout(0)
            .send()
            .await
            .unwrap();
    }
    assert_eq!(world.dead_letters().await.unwrap().len(), 1);
}

/// What Lambda counts in `Errors`: a function error, a timeout, a crash; not a throttle.
fn failed(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Error(_) | Outcome::TimedOut | Outcome::Died
    )
}

fn alarm_named(world: &World, logical_id: &str) -> String {
    world
        .stack
        .deployed
        .resources
        .iter()
        .find(|r| r.logical_id.as_deref() == Some(logical_id))
        .and_then(|r| r.physical_id.clone())
        .unwrap_or_else(|| panic!("the stack has {logical_id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_each_functions_last_success_and_errors_the_dead_letters_and_the_alarms_firing_at_the_regions_prices()
 {
    let world = kit::timed_world(CLUSTER, 40.0, Duration::from_secs(2))
        .await
        .expect("the local world starts");
    let region = nodewright_world::moto::REGION;
    let bundled = nodewright::catalog::bundled_instance_types().unwrap();
    world.front.list_prices(
        region,
        bundled.iter().map(|(t, p)| (t.name.clone(), p * LISTED)),
    );
    kit::apply_getting_started(&world, 3).await.unwrap();

    // The provisioner and the sweeper on the stack's schedules; every sweep fails, as one
    // whose Lease the API server will not serve.
    world.sim.inject(
        Fault::path(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewright-sweeper",
            500,
        )
        .times(100_000),
    );
    let dir = std::env::temp_dir().join(format!("nodewright-{CLUSTER}-{}", std::process::id()));
    let binaries = [
        (
            "ProvisionerFunction",
            kit::debug_binary("provisioner").unwrap(),
        ),
        ("SweeperFunction", kit::debug_binary("sweeper").unwrap()),
    ];
    let mut lambda = Lambda::deploy(&world, &binaries, &dir, |_| {}).unwrap();
    lambda.start_triggers(&world);
    let sweeper = lambda.function("SweeperFunction").unwrap().clone();
    let provisioner = lambda.function("ProvisionerFunction").unwrap().clone();
    let clock = world.clock();
    let until = clock.now() + Duration::from_secs(600);
    loop {
        let pods = kit::app_pods(&world, "inflate");
        let running = !pods.is_empty() && pods.iter().all(kit::running_on_a_node);
        let polled = provisioner.records().iter().any(|r| r.outcome.succeeded());
        if running && polled && sweeper.records().iter().any(|r| failed(&r.outcome)) {
            break;
        }
        assert!(
            clock.now() < until,
            "pods running, a poll done and a sweep failed within 600 s"
        );
        clock.sleep(Duration::from_secs(5)).await;
    }
    lambda.stop();
    lambda.publish_metrics(&world).await.unwrap();
    dead_letter_one(&world).await;
    // CloudWatch, evaluating DeadLetterAlarm (a visible message in the dead-letter queue),
    // would put it in ALARM now; moto evaluates no alarm, so the world says it.
    let dead_letter_alarm = alarm_named(&world, "DeadLetterAlarm");
    aws_sdk_cloudwatch::Client::new(&world.sdk)
        .set_alarm_state()
        .alarm_name(&dead_letter_alarm)
        .state_value(StateValue::Alarm)
        .state_reason("Threshold Crossed: 1 datapoint [1.0] was >= the threshold (1.0).")
        .send()
        .await
        .unwrap();

    let k = Kubectl::for_cluster(&world.sim).expect("kubectl is installed in .venv");
    let data: Value = serde_json::from_str(&status(&world, &k.kubeconfig(), "json").await).unwrap();
    let health = &data["health"];
    assert_eq!(health["stack"], world.stack.name());
    let function = |shown: &str| {
        health["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] == shown)
            .unwrap_or_else(|| panic!("{shown} in {health:#}"))
            .clone()
    };
    let polls = provisioner.records();
    let provisioner = function("provisioner");
    let last = polls
        .iter()
        .filter(|r| r.outcome.succeeded())
        .map(|r| r.started)
        .max();
    let minute = |t: jiff::Timestamp| {
        jiff::Timestamp::from_second(t.as_second().div_euclid(60) * 60)
            .unwrap()
            .to_string()
    };
    assert_eq!(
        provisioner["last_success"],
        last.map(minute).unwrap(),
        "{health:#}"
    );
    assert_eq!(
        provisioner["errors_last_hour"],
        polls.iter().filter(|r| failed(&r.outcome)).count(),
        "{health:#}"
    );
    let sweeps = sweeper.records();
    let sweeper = function("sweeper");
    assert_eq!(sweeper["last_success"], Value::Null, "{health:#}");
    assert!(sweeper["last_invoked"].is_string(), "{health:#}");
    assert_eq!(
        sweeper["errors_last_hour"],
        sweeps.iter().filter(|r| failed(&r.outcome)).count(),
        "{health:#}"
    );
    assert_eq!(
        function("interruption")["last_invoked"],
        Value::Null,
        "never invoked here"
    );
    assert_eq!(health["dead_letters"], 1, "{health:#}");
    assert_eq!(health["queue"]["waiting"], 0, "{health:#}");
    let alarms = world
        .stack
        .deployed
        .resources
        .iter()
        .filter(|r| r.resource_type.as_deref() == Some("AWS::CloudWatch::Alarm"))
        .count();
    assert_eq!(health["alarms"], alarms, "{health:#}");
    let firing: Vec<&str> = health["alarms_firing"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(firing, [dead_letter_alarm.as_str()], "{health:#}");

    // The nodes at the Price List's prices, not the bundled table's.
    let nodes = data["nodes"].as_array().unwrap();
    assert!(!nodes.is_empty());
    for node in nodes {
        let listed = bundled
            .iter()
            .find(|(t, _)| t.name == node["instance_type"])
            .map(|(_, p)| p * LISTED)
            .unwrap();
        let price = node["price_per_hour"].as_f64().unwrap();
        assert!((price - listed).abs() < 1e-4, "{node:#}: want {listed}");
        assert_eq!(node["price_estimated"], false, "{node:#}");
    }
    assert_eq!(
        data["prices"],
        format!("Prices: {region} on-demand from the Price List API")
    );

    // The same as a table.
    let text = status(&world, &k.kubeconfig(), "table").await;
    let sweeper_row = text
        .lines()
        .find(|l| l.starts_with("sweeper "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(sweeper_row.contains("none in 24h"), "{text}");
    assert!(text.contains("dead letters: 1"), "{text}");
    assert!(
        text.contains(&format!("  {dead_letter_alarm} (for ")),
        "{text}"
    );
}
