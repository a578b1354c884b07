//! Capacity in flight goes to the pods it was launched for: a pod that turns pending while
//! an equal pod's instance is on its way gets an instance of its own, not a replay of the
//! other pod's launch (found by the provisioner bench, where the new pod then waited until
//! the other's node registered).
//!
//! Emulated: AWS is moto behind the world's front (which honours ClientTokens as EC2
//! does); Kubernetes is the simulated cluster on a manual clock, so no launched node joins
//! during the test. The provisioner handler, the AWS SDK and `kube::Client` are real.

use std::collections::HashSet;
use std::time::Duration;

use nodewright_world::kit::{manual_cluster, quick_batch, with_world_names};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick};
use serde_json::json;

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: one-per-pod}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.2xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NODE_ROLE
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
"#;

/// A pod of 7 CPU: one per c6a.2xlarge.
async fn pending(world: &World, name: &str) {
    world
        .sim
        .apply_json(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": [{"name": "c", "image": "pause",
                     "resources": {"requests": {"cpu": "7", "memory": "1Gi"}}}]}
        }))
        .unwrap();
    world.sim.step().await;
}

fn tokens(world: &World) -> HashSet<String> {
    world
        .front
        .calls("CreateFleet")
        .iter()
        .filter_map(|c| c.params.get("ClientToken").cloned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_arriving_while_an_equal_pods_instance_is_in_flight_gets_its_own_launch() {
    let world = World::start("in-flight-order", manual_cluster())
        .await
        .expect("the local world starts");
    world.apply_yaml(&with_world_names(&world, POOL)).unwrap();
    let state = world
        .provisioner(quick(Duration::from_secs(2)), quick_batch())
        .await
        .unwrap();
    // Named so that the API server lists the newer pod first ("w-10" < "w-9").
    pending(&world, "w-9").await;
    let first = invoke(&state).await.unwrap();
    assert_eq!(world.instances().await.unwrap().len(), 1, "{first}");
    assert_eq!(tokens(&world).len(), 1);

    pending(&world, "w-10").await;
    let second = invoke(&state).await.unwrap();
    let instances = world.instances().await.unwrap();
    assert_eq!(
        instances.len(),
        2,
        "w-10 needs an instance of its own while w-9's is on its way: {second}"
    );
    assert_eq!(tokens(&world).len(), 2, "{second}");
}
