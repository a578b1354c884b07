//! Launch idempotency against EC2's ClientToken rules, which the local world's AWS front
//! emulates in front of moto (`nodewright_world::ec2_idempotency`): a reused token is
//! answered with its first answer, even after that instance is gone.
//!
//! Emulated here: AWS is moto behind the front, Kubernetes the simulated cluster; the
//! provisioner handler, the AWS SDK and `kube::Client` are real.

use std::time::Duration;

use nodewright_world::aws_front::Handling;
use nodewright_world::kit::{getting_started, log_to_test_output, quick_batch};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick};

async fn two_pods_for_one_node(cluster: &str) -> World {
    log_to_test_output();
    getting_started(cluster, 2)
        .await
        .expect("the local world starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_instance_reclaimed_before_joining_is_launched_again_not_answered_with_the_dead_one()
{
    let world = two_pods_for_one_node("e2e-reclaimed").await;
    let state = world
        .provisioner(quick(Duration::from_secs(2)), quick_batch())
        .await
        .unwrap();
    let summary = invoke(&state).await.unwrap();
    let first = world.instances().await.unwrap();
    assert_eq!(first.len(), 1, "{summary}");
    drop(state);

    // EC2 reclaims the spot instance before its node joins (as the administrator: the
    // functions may terminate only what they own, and this is EC2's own doing).
    aws_sdk_ec2::Client::new(&world.sdk)
        .terminate_instances()
        .instance_ids(&first[0].id)
        .send()
        .await
        .expect("moto terminates the instance");
    assert!(world.instances().await.unwrap().is_empty());

    // The next invocation (a cold container) plans the same pods: the same node claim.
    let cold = world
        .provisioner(quick(Duration::from_secs(2)), quick_batch())
        .await
        .unwrap();
    let summary = invoke(&cold).await.unwrap();
    let again = world.instances().await.unwrap();
    assert_eq!(again.len(), 1, "one live instance again: {summary}");
    assert_ne!(again[0].id, first[0].id);
    assert_eq!(
        again[0].tags.get("nodewright.io/nodeclaim"),
        first[0].tags.get("nodewright.io/nodeclaim"),
        "the same decision"
    );
    let calls: Vec<Handling> = world
        .front
        .calls("CreateFleet")
        .iter()
        .map(|c| c.handling)
        .collect();
    assert_eq!(
        calls,
        [
            Handling::Forwarded(200),
            Handling::Replayed,
            Handling::Forwarded(200)
        ],
        "the first attempt's token is answered with the dead instance, the next one launches"
    );
}
