//! `plan --capacity-reservations`: the reservations a class selects are planned first, a
//! full one is passed over, and a class selecting reservations without the file is noted.

use serde_json::Value;

use super::{claims, nodewright};

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
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: ml}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  capacityReservationSelectorTerms: [{tags: {team: ml}}]
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: default}
spec:
  containers: [{name: c, image: c, resources: {requests: {cpu: "6"}}}]
"#;

/// As `aws ec2 describe-capacity-reservations` prints it: one with room for `available`
/// m5.2xlarge in us-east-1b, tagged for the class, and one the class does not select.
fn described(available: u32) -> String {
    format!(
        r#"{{"CapacityReservations": [
  {{"CapacityReservationId": "cr-0aa", "InstanceType": "m5.2xlarge", "AvailabilityZone": "us-east-1b",
    "OwnerId": "111122223333", "AvailableInstanceCount": {available}, "TotalInstanceCount": 2,
    "State": "active", "InstanceMatchCriteria": "targeted", "ReservationType": "default",
    "Tags": [{{"Key": "team", "Value": "ml"}}]}},
  {{"CapacityReservationId": "cr-0bb", "InstanceType": "m5.2xlarge", "AvailabilityZone": "us-east-1a",
    "OwnerId": "111122223333", "AvailableInstanceCount": 5, "TotalInstanceCount": 5,
    "State": "active", "InstanceMatchCriteria": "open", "Tags": []}}
]}}"#
    )
}

fn plan(files: &[&str]) -> (Vec<Value>, String) {
    let mut args = vec!["plan"];
    for f in files {
        args.extend(["-f", f]);
    }
    let out = nodewright(&[args.as_slice(), &["-o", "json"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    (claims(&plan).to_vec(), stderr)
}

fn placed(claims: &[Value]) -> Vec<(String, String, String)> {
    claims
        .iter()
        .map(|c| {
            (
                c["instance_type"].as_str().unwrap().to_string(),
                c["zone"].as_str().unwrap().to_string(),
                c["capacity_type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn plan_fills_the_reservation_the_class_selects_and_buys_once_it_is_full() {
    let docs = super::input_file("reservations", "ml.yaml", POOL_AND_CLASS);
    let with_room = super::input_file("reservations", "room.json", &described(1));
    let full = super::input_file("reservations", "full.json", &described(0));

    let reserved = nodewright(&[
        "plan",
        "-f",
        &docs,
        "--capacity-reservations",
        &with_room,
        "-o",
        "json",
    ]);
    let stderr = String::from_utf8_lossy(&reserved.stderr);
    assert!(reserved.status.success(), "{stderr}");
    let plan_json: Value = serde_json::from_slice(&reserved.stdout).unwrap();
    assert_eq!(
        placed(claims(&plan_json)),
        [(
            "m5.2xlarge".to_string(),
            "us-east-1b".to_string(),
            "reserved".to_string()
        )]
    );

    let out = nodewright(&[
        "plan",
        "-f",
        &docs,
        "--capacity-reservations",
        &full,
        "-o",
        "json",
    ]);
    assert!(out.status.success());
    let bought: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bought = placed(claims(&bought));
    assert_eq!(bought.len(), 1);
    assert_eq!(bought[0].2, "on-demand", "{bought:?}");

    let (without, stderr) = plan(&[&docs]);
    assert_eq!(placed(&without)[0].2, "on-demand");
    assert!(
        stderr.contains(
            "EC2NodeClass ml selects capacity reservations; give --capacity-reservations"
        ),
        "{stderr}"
    );
}

#[test]
fn a_file_that_is_not_the_aws_clis_output_is_named() {
    let docs = super::input_file("reservations", "ml2.yaml", POOL_AND_CLASS);
    let wrong = super::input_file("reservations", "wrong.json", r#"{"Reservations": []}"#);
    let out = nodewright(&["plan", "-f", &docs, "--capacity-reservations", &wrong]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "wrong.json: not the JSON output of `aws ec2 describe-capacity-reservations`"
        ),
        "{stderr}"
    );
}
