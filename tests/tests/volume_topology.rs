//! Pods with PersistentVolumeClaims get nodes where their volumes can follow: the real
//! provisioner handler reads the claims, volumes and classes from the simulated cluster
//! (its scheduler runs VolumeBinding and provisions a waiting claim's volume in the zone its
//! pod lands in, as the EBS CSI driver does; see `kube_sim/scheduler/volume_binding.rs`),
//! and launches into moto.

use std::sync::Arc;
use std::time::Duration;

use nodewright::clock::SkippingClock;
use nodewright_world::kit::{apply_getting_started, manual_world, quick_batch};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick};
use serde_json::Value;

const VOLUMES: &str = r#"
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0data}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1c]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec: {accessModes: [ReadWriteOnce], volumeName: pv-data, resources: {requests: {storage: 20Gi}}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3-b}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions:
      - {key: topology.kubernetes.io/zone, values: [us-east-1b]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: cache, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: gp3-b, resources: {requests: {storage: 5Gi}}}
"#;

fn pod_mounting(name: &str, claim: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: {name}}}}}
spec:
  containers: [{{name: c, image: c, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]
  volumes: [{{name: v, persistentVolumeClaim: {{claimName: {claim}}}}}]
"#
    )
}

/// The zone of the node pod `name` runs on, `None` while it is not running.
fn running_zone(world: &World, name: &str) -> Option<String> {
    let pods = world.sim.list_json("v1", "Pod");
    let pod = pods.iter().find(|p| p["metadata"]["name"] == name)?;
    if pod["status"]["phase"] != "Running" {
        return None;
    }
    let node = pod["spec"]["nodeName"].as_str()?;
    let nodes = world.sim.list_json("v1", "Node");
    let node = nodes.iter().find(|n| n["metadata"]["name"] == node)?;
    node["metadata"]["labels"]["topology.kubernetes.io/zone"]
        .as_str()
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_claims_get_nodes_in_their_volumes_zones_and_a_missing_claim_gets_none() {
    let world = manual_world("e2e-volumes")
        .await
        .expect("the local world starts");
    apply_getting_started(&world, 0).await.unwrap();
    world.apply_yaml(VOLUMES).unwrap();
    for (pod, claim) in [("db", "data"), ("cache", "cache"), ("orphan", "nope")] {
        world.apply_yaml(&pod_mounting(pod, claim)).unwrap();
    }
    world.sim.step().await;
    let state = world
        .provisioner(quick(Duration::from_secs(3)), quick_batch())
        .await
        .unwrap()
        .with_clock(Arc::new(SkippingClock::default()));
    let summary = invoke(&state).await.expect("the handler succeeds");

    let mut zones: Vec<String> = world
        .instances()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.zone)
        .collect();
    zones.sort();
    // One node for each volume's zone; none for the pod whose claim does not exist.
    assert_eq!(zones, ["us-east-1b", "us-east-1c"], "{summary}");

    world.catch_up_clock();
    for _ in 0..8 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
    }
    assert_eq!(running_zone(&world, "db").as_deref(), Some("us-east-1c"));
    assert_eq!(running_zone(&world, "cache").as_deref(), Some("us-east-1b"));
    // The waiting claim was provisioned where its pod landed.
    let claims = world.sim.list_json("v1", "PersistentVolumeClaim");
    let cache = claims
        .iter()
        .find(|c| c["metadata"]["name"] == "cache")
        .expect("the claim");
    assert!(cache["spec"]["volumeName"].is_string(), "{cache}");

    let orphan: Vec<Value> = world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| p["metadata"]["name"] == "orphan")
        .collect();
    let condition = &orphan[0]["status"]["conditions"][0];
    assert_eq!(condition["reason"], "Unschedulable", "{condition}");
    assert!(
        condition["message"]
            .as_str()
            .is_some_and(|m| m.contains("persistentvolumeclaim \"nope\" not found")),
        "{condition}"
    );
}
