//! A spot warning's reclaimed offering is kept out of every function's plans, not only the
//! interruption function's: the exclusion goes through the cluster's `nodewright-state`
//! ConfigMap, and a provisioner in another process (a cold container) reads it before it
//! plans.
//!
//! Emulated here: AWS is moto behind the AWS front, Kubernetes the simulated cluster, and
//! the SQS event source mapping `World::deliver`. Each "process" is its own `Provisioner`
//! (its own memory of unavailable offerings); the handlers, the AWS SDK and `kube::Client`
//! are real.

use std::time::Duration;

use jiff::SignedDuration;
use k8s_openapi::api::core::v1::ConfigMap;
use nodewright_world::kit::{manual_world, quick_batch};
use nodewright_world::world::provisioner::{ProvisionerState, invoke, quick};
use nodewright_world::world::{Instance, World};
use serde_json::{Value, json};

async fn start(cluster: &str) -> World {
    manual_world(cluster).await.expect("the local world starts")
}

async fn cold_provisioner(world: &World) -> ProvisionerState {
    let batch = quick_batch();
    world
        .provisioner(quick(Duration::from_secs(2)), batch)
        .await
        .unwrap()
}

async fn owned(world: &World) -> Vec<Instance> {
    world.instances().await.expect("DescribeInstances")
}

/// A NodePool that can launch only `instance_type` in `zone` on spot, and one pod that
/// only its nodes can hold.
fn probe(instance_type: &str, zone: &str) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: probe
spec:
  template:
    metadata:
      labels:
        probe: "yes"
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["{instance_type}"]
        - key: topology.kubernetes.io/zone
          operator: In
          values: ["{zone}"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
---
apiVersion: v1
kind: Pod
metadata:
  name: probe
  namespace: default
spec:
  nodeSelector:
    probe: "yes"
  containers:
    - name: pause
      image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
      resources:
        requests:
          cpu: 100m
"#
    )
}

fn state_data(world: &World) -> serde_json::Map<String, Value> {
    world
        .sim
        .get_json("v1", "ConfigMap", "kube-system", "nodewright-state")
        .and_then(|cm| cm["data"].as_object().cloned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_spot_warning_a_provisioner_in_another_process_does_not_launch_the_reclaimed_offering()
 {
    let world = start("e2e-shared-exclusion").await;
    let pool = world
        .example_edited(
            "getting-started.yaml",
            &[
                ("replicas: 10", "replicas: 2"),
                (r#"values: ["on-demand"]"#, r#"values: ["spot"]"#),
            ],
        )
        .unwrap();
    world.apply_yaml(&pool).unwrap();
    world.sim.step().await;
    let first = cold_provisioner(&world).await;
    invoke(&first).await.unwrap();
    world.catch_up_clock();
    for _ in 0..8 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
    }
    let victim = owned(&world).await.into_iter().next().expect("a node");

    // The interruption function runs on a provisioning core of its own (another process).
    let core = cold_provisioner(&world).await;
    let interruption = world.interruption(&core).await.unwrap();
    world
        .put_event(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": victim.id, "instance-action": "terminate"}),
            world.clock().now() - SignedDuration::from_secs(30),
        )
        .await
        .unwrap();
    let d = world
        .deliver(&interruption, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!((d.received, d.failed.len()), (1, 0), "{d:?}");
    let key = format!(
        "unavailable.offering.spot.{}.{}",
        victim.zone, victim.instance_type
    );
    assert!(
        state_data(&world).contains_key(&key),
        "{key} is shared: {:?}",
        state_data(&world)
    );

    // A pod only the reclaimed offering could hold: a cold provisioner leaves it pending.
    world
        .apply_yaml(&probe(&victim.instance_type, &victim.zone))
        .unwrap();
    world.sim.step().await;
    let reclaimed = |i: &Instance| {
        i.instance_type == victim.instance_type && i.zone == victim.zone && i.lifecycle == "spot"
    };
    let before: Vec<String> = owned(&world).await.into_iter().map(|i| i.id).collect();
    let cold = cold_provisioner(&world).await;
    let summary = invoke(&cold).await.unwrap();
    let launched: Vec<Instance> = owned(&world)
        .await
        .into_iter()
        .filter(|i| !before.contains(&i.id))
        .collect();
    assert!(
        !launched.iter().any(reclaimed),
        "the reclaimed offering was launched by another process: {launched:?} ({summary})"
    );

    // The control: once the shared entry is gone, a cold provisioner launches that very
    // offering for the probe, so the exclusion above was the ConfigMap's doing.
    let client = world.sim.client().await.unwrap();
    let maps: kube::Api<ConfigMap> = kube::Api::namespaced(client, "kube-system");
    maps.delete("nodewright-state", &Default::default())
        .await
        .expect("the admin deletes the state ConfigMap");
    let before: Vec<String> = owned(&world).await.into_iter().map(|i| i.id).collect();
    let colder = cold_provisioner(&world).await;
    let summary = invoke(&colder).await.unwrap();
    let launched: Vec<Instance> = owned(&world)
        .await
        .into_iter()
        .filter(|i| !before.contains(&i.id))
        .collect();
    assert!(
        launched.iter().any(reclaimed),
        "without the shared entry the probe gets the offering: {launched:?} ({summary})"
    );
}
