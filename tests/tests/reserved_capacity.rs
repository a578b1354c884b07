//! Capacity reservations end to end: the real provisioner handler reads the reservations
//! its EC2NodeClass selects (DescribeCapacityReservations, emulated by the world's AWS front
//! as moto has none: `tests/src/capacity_reservations.rs`), fills them before buying, labels
//! the nodes as Karpenter does, and falls back to on-demand when a reservation is full,
//! whether it counted the room down itself or EC2 refused the launch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nodewright::clock::SkippingClock;
use nodewright::removal::{Cause, Record};
use nodewright_sweeper::sweep;
use nodewright_world::aws_front::Handling;
use nodewright_world::capacity_reservations::Reservation;
use nodewright_world::kit::{manual_world, quick_batch, sweeper_state, with_world_names};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{ProvisionerState, invoke, quick};
use serde_json::Value;

const POOL_AND_CLASS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ml}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: ml}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: ml}
spec:
  role: NODE_ROLE
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
  capacityReservationSelectorTerms: [{tags: {team: ml}}]
"#;

/// A pod of 6 CPU: one to a node of 8 vCPU.
fn trainer(name: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  containers: [{{name: c, image: c, resources: {{requests: {{cpu: "6", memory: 8Gi}}}}}}]
"#
    )
}

fn ml_reservation(total: u32) -> Reservation {
    Reservation::open("cr-0ml", "m5.2xlarge", "us-east-1b", total)
        .targeted()
        .tagged("team", "ml")
}

async fn world_with(reservation: Reservation) -> World {
    let world = manual_world("e2e-reserved")
        .await
        .expect("the local world starts");
    world.front.reserve(reservation);
    // One the class does not select: never used.
    world.front.reserve(
        Reservation::open("cr-0other", "m5.2xlarge", "us-east-1b", 5).tagged("team", "web"),
    );
    world
        .apply_yaml(&with_world_names(&world, POOL_AND_CLASS))
        .unwrap();
    world
}

/// The provisioner handler's state on the world, its waits skipped.
async fn provisioner(world: &World) -> ProvisionerState {
    world
        .provisioner(quick(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(Arc::new(SkippingClock::default()))
}

async fn apply_trainers(world: &World, names: &[&str]) {
    for name in names {
        world.apply_yaml(&trainer(name)).unwrap();
    }
    world.sim.step().await;
}

/// Eighty seconds of the simulated cluster: launched instances join and their pods run.
async fn let_nodes_join(world: &World) {
    world.catch_up_clock();
    for _ in 0..8 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
    }
}

/// `minutes` from now.
fn ends(minutes: i64) -> jiff::Timestamp {
    jiff::Timestamp::now() + jiff::SignedDuration::from_secs(minutes * 60)
}

/// The reservation each of the cluster's instances runs in, by instance type.
async fn reservations_of_instances(world: &World) -> Vec<(String, Option<String>)> {
    // Through the front: it writes the reservation into EC2's answer (moto has none).
    let ec2 = aws_sdk_ec2::Client::new(&world.front.sdk_config(&world.sdk));
    let mut out = Vec::new();
    for i in world.instances().await.unwrap() {
        let described = ec2
            .describe_instances()
            .instance_ids(&i.id)
            .send()
            .await
            .unwrap();
        let instance = &described.reservations()[0].instances()[0];
        out.push((
            i.instance_type.clone(),
            instance.capacity_reservation_id().map(str::to_string),
        ));
    }
    out.sort();
    out
}

fn node_labels(world: &World) -> Vec<Value> {
    world
        .sim
        .list_json("v1", "Node")
        .into_iter()
        .map(|n| n["metadata"]["labels"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_is_filled_first_labelled_as_karpenter_does_and_the_rest_bought() {
    let world = world_with(ml_reservation(1)).await;
    apply_trainers(&world, &["train-a", "train-b"]).await;
    let state = provisioner(&world).await;
    let summary = invoke(&state).await.expect("the handler succeeds");

    let instances = reservations_of_instances(&world).await;
    assert_eq!(instances.len(), 2, "{summary}: {instances:?}");
    assert!(
        instances.contains(&("m5.2xlarge".to_string(), Some("cr-0ml".to_string()))),
        "{instances:?}"
    );
    assert_eq!(
        instances.iter().filter(|(_, r)| r.is_some()).count(),
        1,
        "{instances:?}"
    );
    assert_eq!(world.front.reservation_available("cr-0ml"), Some(0));
    assert_eq!(world.front.reservation_available("cr-0other"), Some(5));
    // The reservation had room for one: a poll plans within it, and a later poll's kept
    // lookup is counted down by the launch, so EC2 was asked for no launch it would refuse.
    let fleets = world.front.calls("CreateFleet");
    assert_eq!(fleets.len(), 2, "{fleets:?}");
    assert!(
        fleets
            .iter()
            .all(|c| matches!(c.handling, Handling::Forwarded(200))),
        "{fleets:?}"
    );
    // The reserved launch's template targets the reservation; the class's other launches
    // opt out of open reservations.
    let preferences: Vec<(Option<String>, Option<String>)> = world
        .front
        .calls("CreateLaunchTemplate")
        .iter()
        .map(|c| {
            let p = |k: &str| {
                c.params
                    .get(&format!(
                        "LaunchTemplateData.CapacityReservationSpecification.{k}"
                    ))
                    .cloned()
            };
            (
                p("CapacityReservationPreference"),
                p("CapacityReservationTarget.CapacityReservationId"),
            )
        })
        .collect();
    assert!(
        preferences.contains(&(
            Some("capacity-reservations-only".into()),
            Some("cr-0ml".into())
        )),
        "{preferences:?}"
    );
    assert!(
        preferences.contains(&(Some("none".into()), None)),
        "{preferences:?}"
    );

    let_nodes_join(&world).await;
    let mut labels: Vec<(String, String, String)> = node_labels(&world)
        .iter()
        .map(|l| {
            let get = |k: &str| l[k].as_str().unwrap_or("-").to_string();
            (
                get("karpenter.sh/capacity-type"),
                get("karpenter.k8s.aws/capacity-reservation-id"),
                get("karpenter.k8s.aws/capacity-reservation-type"),
            )
        })
        .collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            ("on-demand".to_string(), "-".to_string(), "-".to_string()),
            (
                "reserved".to_string(),
                "cr-0ml".to_string(),
                "default".to_string()
            ),
        ]
    );

    // The reservation is cancelled; its instance runs on as on-demand, and the sweeper
    // relabels its node so (Karpenter's `capacityreservation.capacitytype`).
    world.front.cancel_reservation("cr-0ml");
    let sweeper = sweeper_state(&world).await.unwrap();
    sweep(&sweeper).await.expect("a sweep");
    let capacity: Vec<String> = node_labels(&world)
        .iter()
        .map(|l| {
            assert!(
                l.get("karpenter.k8s.aws/capacity-reservation-id").is_none(),
                "{l}"
            );
            l["karpenter.sh/capacity-type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(capacity, ["on-demand", "on-demand"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_ec2_finds_full_is_left_out_and_the_pod_bought_in_the_same_poll() {
    let world = world_with(ml_reservation(2)).await;
    apply_trainers(&world, &["train-a"]).await;
    let state = provisioner(&world).await;
    invoke(&state).await.expect("the first invocation succeeds");
    assert_eq!(world.front.reservation_available("cr-0ml"), Some(1));

    // Another workload of the account takes the last slot; the provisioner's lookup,
    // a few seconds old, still says one is left.
    world.front.reserve(Reservation {
        available: 0,
        ..ml_reservation(2)
    });
    apply_trainers(&world, &["train-b"]).await;
    let summary = invoke(&state)
        .await
        .expect("the second invocation succeeds");

    let refused: Vec<_> = world
        .front
        .calls_where(|c| c.action == "CreateFleet" && c.handling == Handling::FleetErrors);
    assert_eq!(refused.len(), 1, "{summary}");
    let instances = reservations_of_instances(&world).await;
    assert_eq!(instances.len(), 2, "{summary}: {instances:?}");
    assert_eq!(
        instances.iter().filter(|(_, r)| r.is_some()).count(),
        1,
        "the second pod's node is bought, not reserved: {instances:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_block_is_launched_in_its_market_and_one_about_to_end_is_passed_over() {
    let world = world_with(
        Reservation::capacity_block("cr-0blk", "m5.2xlarge", "us-east-1b", 1, ends(120))
            .tagged("team", "ml"),
    )
    .await;
    world.front.reserve(
        Reservation::capacity_block("cr-0end", "m5.2xlarge", "us-east-1a", 4, ends(30))
            .tagged("team", "ml"),
    );
    apply_trainers(&world, &["train-a", "train-b"]).await;
    let state = provisioner(&world).await;
    let summary = invoke(&state).await.expect("the handler succeeds");

    let instances = reservations_of_instances(&world).await;
    let reserved: Vec<&Option<String>> = instances
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.is_some())
        .collect();
    assert_eq!(
        reserved,
        [&Some("cr-0blk".to_string())],
        "{summary}: {instances:?}"
    );
    assert_eq!(instances.len(), 2, "{instances:?}");
    assert_eq!(world.front.reservation_available("cr-0end"), Some(4));
    let markets: Vec<Option<String>> = world
        .front
        .calls("CreateFleet")
        .iter()
        .map(|c| {
            c.params
                .get("TargetCapacitySpecification.DefaultTargetCapacityType")
                .cloned()
        })
        .collect();
    assert!(
        markets.contains(&Some("capacity-block".to_string())),
        "{markets:?}"
    );

    let_nodes_join(&world).await;
    let types: Vec<String> = node_labels(&world)
        .iter()
        .filter_map(|l| l["karpenter.k8s.aws/capacity-reservation-type"].as_str())
        .map(str::to_string)
        .collect();
    assert_eq!(types, ["capacity-block"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_capacity_block_ends_within_forty_minutes_is_taken_before_ec2_reclaims_it() {
    let block = Reservation::capacity_block("cr-0blk", "m5.2xlarge", "us-east-1b", 1, ends(90))
        .tagged("team", "ml");
    let world = world_with(block.clone()).await;
    apply_trainers(&world, &["train-a"]).await;
    let state = provisioner(&world).await;
    invoke(&state).await.expect("the provisioner launches");
    let_nodes_join(&world).await;
    let sweeper = sweeper_state(&world).await.unwrap();
    let report = sweep(&sweeper).await.expect("a sweep");
    assert!(
        report.started.is_empty(),
        "90 minutes before the end: {report:?}"
    );

    // The same block, as it is 55 minutes later: it ends in 35.
    let end = ends(35);
    world.front.reserve(Reservation {
        available: 0,
        end: Some(end),
        ..block
    });
    let report = sweep(&sweeper).await.expect("a sweep");
    let nodes = world.sim.list_json("v1", "Node");
    assert_eq!(nodes.len(), 1);
    let name = nodes[0]["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(report.started, std::slice::from_ref(&name), "{report:?}");
    let annotations: BTreeMap<String, String> =
        serde_json::from_value(nodes[0]["metadata"]["annotations"].clone()).unwrap();
    let record = Record::read(&name, &annotations)
        .unwrap()
        .expect("a removal record");
    assert_eq!(record.cause, Cause::CapacityBlockExpiring);
    // EC2 starts taking the block's instances 30 minutes before its end.
    let want = end - jiff::SignedDuration::from_secs(30 * 60);
    let deadline = record.deadline.expect("a deadline");
    assert!(
        deadline.duration_since(want).abs() < jiff::SignedDuration::from_secs(1),
        "{deadline} vs {want}"
    );
    // A second sweep carries the same removal on rather than beginning another.
    let again = sweep(&sweeper).await.expect("a sweep");
    assert!(again.started.is_empty(), "{again:?}");
}
