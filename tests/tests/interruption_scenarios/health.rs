//! An AWS Health scheduled change (instance retirement) end to end: the event, shaped as
//! the reference sample (`/work/shared/reference/events/health-scheduled-change.json`),
//! goes through moto's EventBridge to the interruption queue; the node is replaced and
//! drained, and the instance terminated and its Node deleted, all before the change's
//! `startTime`.
//!
//! Emulated here: AWS is moto behind the AWS front, Kubernetes the simulated cluster, the
//! SQS event source mapping `World::deliver`. AWS Health never sends events in moto: the
//! test sends what Health would. The handlers, the AWS SDK and `kube::Client` are real.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use nodewright_world::kit::{app_pods, apply_getting_started, manual_world, quick_batch};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick};
use serde_json::{Value, json};

async fn step(world: &World, seconds: u64) {
    world.clock().advance(Duration::from_secs(seconds));
    world.sim.step().await;
}

fn inflate_pods(world: &World) -> Vec<Value> {
    app_pods(world, "inflate")
}

/// Health's `startTime` spelling: `Mon, 30 Nov 2026 14:00:00 GMT`.
fn rfc1123(t: Timestamp) -> String {
    t.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_retirement_replaces_and_drains_the_node_before_its_start() {
    let world = manual_world("e2e-health")
        .await
        .expect("the local world starts");
    apply_getting_started(&world, 4).await.unwrap();
    let batch = quick_batch();
    let provisioner = world
        .provisioner(quick(Duration::from_secs(2)), batch)
        .await
        .unwrap();
    invoke(&provisioner).await.unwrap();
    world.catch_up_clock();
    for _ in 0..8 {
        step(&world, 10).await;
    }
    let state = world.interruption(&provisioner).await.unwrap();
    let node = world
        .sim
        .list_json("v1", "Node")
        .into_iter()
        .next()
        .expect("a node");
    let victim = node["metadata"]["name"].as_str().unwrap().to_string();
    let instance_id = node["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string();
    let before: Vec<String> = world
        .instances()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();

    // Retirement in three minutes (Health gives whole seconds).
    let start = Timestamp::from_second(world.clock().now().as_second() + 180).unwrap();
    world
        .put_event(
            "aws.health",
            "AWS Health Event",
            json!({
                "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_e2e",
                "service": "EC2",
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "eventTypeCategory": "scheduledChange",
                "startTime": rfc1123(start),
                "endTime": rfc1123(start + SignedDuration::from_hours(2)),
                "eventDescription": [{"language": "en_US", "latestDescription": "retirement"}],
                "affectedEntities": [{"entityValue": instance_id}],
            }),
            world.clock().now(),
        )
        .await
        .unwrap();
    let d = world.deliver(&state, Duration::from_secs(5)).await.unwrap();
    assert_eq!((d.received, d.failed.len()), (1, 0), "{d:?}");
    assert_eq!(d.bodies[0]["detail-type"], "AWS Health Event");
    let replacements: Vec<String> = world
        .instances()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .filter(|id| !before.contains(id))
        .collect();
    assert!(!replacements.is_empty(), "no replacement launched");

    let mut done_at = None;
    for _ in 0..40 {
        step(&world, 10).await;
        world.deliver(&state, Duration::from_secs(2)).await.unwrap();
        let pods = inflate_pods(&world);
        let moved = !pods.is_empty()
            && pods.iter().all(|p| {
                p["status"]["phase"] == "Running"
                    && p["spec"]["nodeName"].is_string()
                    && p["spec"]["nodeName"] != victim.as_str()
            });
        let node_gone = world.sim.get_json("v1", "Node", "", &victim).is_none();
        if moved && node_gone {
            done_at = Some(world.clock().now());
            break;
        }
    }
    let done_at = done_at.expect("the retiring node was not replaced and removed");
    assert!(done_at < start, "done at {done_at}, retirement at {start}");
    assert!(
        !world
            .instances()
            .await
            .unwrap()
            .iter()
            .any(|i| i.id == instance_id),
        "the retiring instance was not terminated"
    );
}
