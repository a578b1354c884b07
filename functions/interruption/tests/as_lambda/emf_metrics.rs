//! The `interruption` binary's telemetry, read from its stdout as CloudWatch Logs reads
//! it: decision latency from its Embedded Metric Format documents; messages by kind, nodes
//! terminated by reason and the cold start from its `counted` log lines.
//!
//! Emulated: the Runtime API (`nodewright_world::lambda_api`), AWS (moto behind the
//! world's front; the SQS batch is built as Lambda's event source mapping builds it, and
//! EC2's events are written as EC2 sends them) and Kubernetes (the simulated cluster). The
//! binary, its recorder and its handler are the real ones.

use std::path::Path;
use std::time::Duration;

use nodewright::provision::BatchWindow;
use nodewright::telemetry::{NAMESPACE, counted, dims, names};
use nodewright_world::emf;
use nodewright_world::interruption::{ACCOUNT, REGION};
use nodewright_world::kit::{LambdaFunction, getting_started};
use nodewright_world::lambda_api::Outcome;
use nodewright_world::moto::sdk_env;
use nodewright_world::world::provisioner::{invoke, quick};
use serde_json::{Value, json};

const INVOCATION_TIMEOUT: Duration = Duration::from_secs(60);

fn envelope(account: &str, detail_type: &str, detail: Value) -> String {
    json!({
        "version": "0",
        "id": format!("{account}-{detail_type}"),
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": account,
        "time": jiff::Timestamp::now().to_string(),
        "region": REGION,
        "resources": [],
        "detail": detail,
    })
    .to_string()
}

fn record(id: &str, body: &str) -> Value {
    json!({
        "messageId": id,
        "receiptHandle": format!("handle-{id}"),
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": format!("arn:aws:sqs:{REGION}:{ACCOUNT}:interruption"),
        "awsRegion": REGION,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_counted_by_message_kind_and_the_stopped_node_by_termination_reason() {
    let cluster = "emf-interruption";
    let world = getting_started(cluster, 2)
        .await
        .expect("the local world starts");
    let provisioner = world
        .provisioner(
            quick(Duration::from_secs(2)),
            BatchWindow::fixed(Duration::from_millis(200), Duration::from_secs(2)),
        )
        .await
        .unwrap();
    invoke(&provisioner).await.unwrap();
    for _ in 0..8 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
    }
    let node = world
        .sim
        .list_json("v1", "Node")
        .into_iter()
        .next()
        .expect("the provisioner's node joined");
    let instance_id = node["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .expect("a provider id")
        .to_string();

    // Signed as the interruption function's own template role, which may terminate.
    let mut env = sdk_env(
        world.front.url(),
        &world.function_credentials["InterruptionFunction"],
    );
    env.push(("QUEUE_URL", world.stack.queue_url.clone()));
    let mut function = LambdaFunction::start(
        &world,
        Path::new(env!("CARGO_BIN_EXE_interruption")),
        "emf-int",
        "interruption",
        env,
    )
    .await
    .unwrap();

    let event = json!({"Records": [
        record("stopping", &envelope(
            ACCOUNT,
            "EC2 Instance State-change Notification",
            json!({"instance-id": instance_id, "state": "stopping"}),
        )),
        record("garbage", "{\"not\": \"an event\""),
        record("foreign", &envelope(
            "999999999999",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": instance_id, "instance-action": "terminate"}),
        )),
    ]});
    let answer = function.invoke(event, INVOCATION_TIMEOUT).await.unwrap();
    let Outcome::Response(response) = answer else {
        panic!("the invocation failed: {answer:?}\n{}", function.log_text());
    };
    assert_eq!(
        response["batchItemFailures"],
        json!([]),
        "{response}\n{}",
        function.log_text()
    );
    assert!(
        world
            .instances()
            .await
            .unwrap()
            .iter()
            .all(|i| i.id != instance_id),
        "the stopping instance was not terminated\n{}",
        function.log_text()
    );

    let data = emf::read(&function.log_text()).unwrap();
    for d in &data {
        assert_eq!(d.namespace, NAMESPACE, "{d:?}");
    }
    let c = (dims::CLUSTER, cluster);
    let log = function.log_text();
    let counted = |name: &str| emf::counted(&log, name);
    let cold = counted(counted::COLD_START);
    assert_eq!(cold.len(), 1, "{cold:?}");
    assert_eq!(cold[0]["function"], "interruption");
    let messages = counted(counted::INTERRUPTION_MESSAGE);
    for kind in ["state-change", "unreadable", "suspicious"] {
        assert_eq!(
            messages.iter().filter(|m| m["kind"] == kind).count(),
            1,
            "{kind}: {messages:?}"
        );
    }
    let terminated = counted(counted::NODE_TERMINATED);
    assert_eq!(terminated.len(), 1, "{terminated:?}");
    assert_eq!(terminated[0]["reason"], "InstanceStopping");
    // Only the latency is a metric here: every count above is a log line.
    assert!(
        data.iter().all(|d| d.name == names::DECISION_LATENCY),
        "{data:#?}"
    );
    // One decision: the one message that was acted on.
    let latencies: Vec<f64> = emf::find(
        &data,
        names::DECISION_LATENCY,
        &[c, (dims::DECISION, "interruption")],
    )
    .iter()
    .flat_map(|d| d.values.clone())
    .collect();
    assert_eq!(latencies.len(), 1, "{data:#?}");
    assert!(latencies[0] > 0.0);
    assert!(
        function.process.exited().is_none(),
        "the function exited:\n{}",
        function.log_text()
    );
    let _ = std::fs::remove_dir_all(function.dir());
}
