//! `plan` and `sweep-plan` with pods that mount PersistentVolumeClaims: the claims,
//! volumes and classes given decide where the pods can run; none given is said.

use serde_json::Value;

use super::{claims, example, nodewright};

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default}
spec:
  containers: [{name: c, image: c, resources: {requests: {cpu: "1"}}}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: data}}]
"#;

/// A claim bound to an EBS volume in us-east-1c, with the driver's own zone key.
const VOLUME: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec: {volumeName: pv-data}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-east-1c]}]
"#;

fn write(name: &str, text: &str) -> String {
    super::input_file("volumes", name, text)
}

#[test]
fn plan_puts_a_pod_where_its_volume_is_and_says_what_is_missing_without_its_claim() {
    let pool = example("getting-started.yaml");
    let pod = write("pod.yaml", POD);
    let volume = write("volume.yaml", VOLUME);
    let out = nodewright(&["plan", "-f", &pool, "-f", &pod, "-f", &volume, "-o", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let db = claims(&plan)
        .iter()
        .find(|c| {
            c["pods"]
                .as_array()
                .unwrap()
                .contains(&Value::from("default/db"))
        })
        .expect("a claim for the db pod");
    assert_eq!(db["zones"], serde_json::json!(["us-east-1c"]), "{db}");

    let out = nodewright(&["plan", "-f", &pool, "-f", &pod]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("kubectl get pvc,pv,storageclass"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "pod default/db: spec.volumes[0]: PersistentVolumeClaim default/data not found"
        ),
        "{stderr}"
    );
}
