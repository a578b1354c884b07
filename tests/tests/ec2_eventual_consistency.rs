//! The provisioner under EC2's eventual consistency: an instance it just launched is missing
//! from DescribeInstances for a while, and it must not plan the same pods again meanwhile.
//!
//! Emulated here: AWS is moto behind the AWS front, which hides instances younger than a
//! lag from DescribeInstances (`nodewright_world::ec2_consistency`; moto lists them at
//! once); Kubernetes is the simulated cluster. The provisioner handler, the AWS SDK and
//! `kube::Client` are real.

use std::time::Duration;

use nodewright_world::aws_front::Handling;
use nodewright_world::kit::{
    apply_getting_started, getting_started, log_to_test_output, quick_batch,
};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick};

/// Longer than the test: nothing the provisioner launches becomes visible to it.
const LAG: Duration = Duration::from_secs(600);

/// The local world with the getting-started example at `replicas` replicas, pods pending.
async fn pods(cluster: &str, replicas: u32) -> World {
    log_to_test_output();
    getting_started(cluster, replicas)
        .await
        .expect("the local world starts")
}

/// What the provisioner's own role sees through the front.
async fn visible_to_the_provisioner(world: &World) -> usize {
    let sdk = world.function_sdk("ProvisionerFunction").unwrap();
    aws_sdk_ec2::Client::new(&sdk)
        .describe_instances()
        .send()
        .await
        .expect("DescribeInstances through the front")
        .reservations()
        .iter()
        .map(|r| r.instances().len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_that_cannot_see_the_new_instance_yet_do_not_send_create_fleet_for_its_pods_again() {
    let world = pods("e2e-consistency", 2).await;
    world.front.hide_instances_younger_than(Some(LAG));
    let state = world
        .provisioner(quick(Duration::from_secs(2)), quick_batch())
        .await
        .unwrap();
    // About twenty polls in one invocation, and a second invocation of the same warm
    // container: none of them lists the instance the first poll launched.
    let first = invoke(&state).await.unwrap();
    let second = invoke(&state).await.unwrap();

    let launched = world.instances().await.unwrap();
    assert_eq!(launched.len(), 1, "{first}\n{second}");
    assert_eq!(
        visible_to_the_provisioner(&world).await,
        0,
        "the front hides it from the provisioner all along"
    );
    let calls: Vec<Handling> = world
        .front
        .calls("CreateFleet")
        .iter()
        .map(|c| c.handling)
        .collect();
    // Not even a replay: idempotency is EC2's guard against a retry, not a substitute for
    // counting the launch in flight (a changed pod set would get another token).
    assert_eq!(calls, [Handling::Forwarded(200)], "{first}\n{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_added_while_the_new_instance_is_unseen_gets_capacity_for_itself_alone() {
    let world = pods("e2e-consistency-grow", 2).await;
    world.front.hide_instances_younger_than(Some(LAG));
    let state = world
        .provisioner(quick(Duration::from_secs(2)), quick_batch())
        .await
        .unwrap();
    let first = invoke(&state).await.unwrap();
    let after_two = world.instances().await.unwrap();
    assert_eq!(after_two.len(), 1, "{first}");

    // Without the first instance counted, the three pods would be one new claim: a second
    // node sized for all three, the first two pods planned twice.
    apply_getting_started(&world, 3).await.unwrap();
    let second = invoke(&state).await.unwrap();

    let now = world.instances().await.unwrap();
    let vcpus = |type_name: &str| -> u32 {
        // The smallest size of each family nodewright may pick here, by vCPUs.
        let size = type_name.split('.').nth(1).unwrap_or_default();
        match size {
            "large" => 2,
            "xlarge" => 4,
            "2xlarge" => 8,
            other => panic!("unexpected size {other} of {type_name}"),
        }
    };
    let new: Vec<_> = now.iter().filter(|i| i.id != after_two[0].id).collect();
    assert!(new.len() <= 1, "{new:?}\n{second}");
    for i in new {
        assert_eq!(
            vcpus(&i.instance_type),
            2,
            "the second node is for the one new pod of 1 CPU: {i:?}\n{second}"
        );
    }
}
