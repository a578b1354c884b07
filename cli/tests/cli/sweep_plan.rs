//! `nodewright sweep-plan` on a small cluster export: the JSON shape, the decisions, and
//! invalid input named by file and field with exit code 1.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const CLUSTER: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 24h
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    budgets: [{nodes: "100%"}]
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-1-5.ec2.internal
    creationTimestamp: "2026-03-02T08:00:00Z"
    labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: on-demand}
  status: {conditions: [{type: Ready, status: "True"}]}
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-2-9.ec2.internal
    creationTimestamp: "2026-03-01T00:00:00Z"
    labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.xlarge, karpenter.sh/capacity-type: on-demand}
  status: {conditions: [{type: Ready, status: "True"}]}
- apiVersion: v1
  kind: Node
  metadata:
    name: someone-elses
    creationTimestamp: "2026-01-01T00:00:00Z"
    labels: {node.kubernetes.io/instance-type: m5.large}
  status: {conditions: [{type: Ready, status: "True"}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: aws-node-x
    namespace: kube-system
    ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: aws-node, uid: "1"}]
  spec: {nodeName: ip-10-0-1-5.ec2.internal, containers: [{name: c, image: i}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata:
    name: batch
    namespace: default
    annotations: {karpenter.sh/do-not-disrupt: "true"}
  spec: {nodeName: ip-10-0-2-9.ec2.internal, containers: [{name: c, image: i}]}
  status: {phase: Running}
"#;

fn write(name: &str, text: &str) -> String {
    super::input_file("sweep-plan", name, text)
}

fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn an_empty_node_is_deleted_and_an_expired_node_with_a_do_not_disrupt_pod_is_kept_with_the_reason()
{
    let file = write("cluster.yaml", CLUSTER);
    let plan = plan_json(&file, "2026-03-02T10:00:00Z");
    let commands = plan["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{plan}");
    assert_eq!(commands[0]["action"], "delete");
    assert_eq!(commands[0]["reason"], "empty");
    assert_eq!(
        commands[0]["nodes"],
        serde_json::json!(["ip-10-0-1-5.ec2.internal"])
    );
    assert_eq!(commands[0]["replacement"], serde_json::json!([]));
    let saving = commands[0]["savings_per_hour"].as_f64().unwrap();
    assert!(saving > 0.0);
    let kept = plan["kept"].as_array().unwrap();
    assert_eq!(kept.len(), 1, "{plan}");
    assert_eq!(kept[0]["node"], "ip-10-0-2-9.ec2.internal");
    assert!(
        kept[0]["reason"]
            .as_str()
            .unwrap()
            .contains("a pod has karpenter.sh/do-not-disrupt")
    );
    // The foreign node is neither a candidate nor in the fleet's price.
    assert!(!plan.to_string().contains("someone-elses"));
    let before = plan["price_per_hour"]["before"].as_f64().unwrap();
    let after = plan["price_per_hour"]["after"].as_f64().unwrap();
    assert!((before - after - saving).abs() < 1e-3, "{plan}");

    let table = nodewright(&["sweep-plan", "-f", &file, "--now", "2026-03-02T10:00:00Z"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("delete") && text.contains("ip-10-0-1-5.ec2.internal"),
        "{text}"
    );
    assert!(
        text.contains("kept") && text.contains("do-not-disrupt"),
        "{text}"
    );
}

#[test]
fn a_node_that_cannot_be_read_exits_one_naming_the_file_and_field() {
    let bad = CLUSTER.replace(
        "creationTimestamp: \"2026-03-01T00:00:00Z\"",
        "creationTimestamp: yesterday",
    );
    let file = write("bad.yaml", &bad);
    let out = nodewright(&["sweep-plan", "-f", &file, "--now", "2026-03-02T10:00:00Z"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml") && err.contains("metadata.creationTimestamp"),
        "{err}"
    );
    assert!(err.contains("ip-10-0-2-9.ec2.internal"), "{err}");

    // A time that is not one is a usage error, as any bad flag is.
    let out = nodewright(&["sweep-plan", "-f", &file, "--now", "noon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--now"));
}

/// Lambda's `provided.al2023` runtime has shipped without `/usr/share/zoneinfo`: the binary
/// carries its own time zone database, so a budget in `Asia/Seoul` still means Seoul.
/// `TZDIR` points at an empty directory here, as if the system had none.
#[test]
fn a_budget_time_zone_is_known_without_a_system_time_zone_database() {
    let seoul = CLUSTER
        .replace(
            "metadata: {name: default}",
            "metadata: {name: default, annotations: {nodewright.io/budget-time-zone: Asia/Seoul}}",
        )
        .replace(
            r#"budgets: [{nodes: "100%"}]"#,
            // No disruption from 09:00 to 19:00 in Seoul (00:00 to 10:00 UTC).
            r#"budgets: [{nodes: "0", schedule: "0 9 * * *", duration: 10h}, {nodes: "100%"}]"#,
        );
    let file = write("seoul.yaml", &seoul);
    let no_zoneinfo = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-zoneinfo");
    std::fs::create_dir_all(&no_zoneinfo).unwrap();
    let plan_at = |now: &str| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
            .args(["sweep-plan", "-f", &file, "--now", now, "--output", "json"])
            .env("TZDIR", &no_zoneinfo)
            .output()
            .expect("the binary runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // 14:00 in Seoul, 05:00 UTC: inside the window, so the empty node stays, for the budget.
    let inside = plan_at("2026-03-02T05:00:00Z");
    assert_eq!(inside["commands"], serde_json::json!([]), "{inside}");
    let kept = inside["kept"].to_string();
    assert!(
        kept.contains("ip-10-0-1-5.ec2.internal") && kept.contains("budget"),
        "{inside}"
    );
    // 21:00 in Seoul, 12:00 UTC: outside it, so the empty node goes.
    let outside = plan_at("2026-03-02T12:00:00Z");
    assert_eq!(outside["commands"][0]["reason"], "empty", "{outside}");
}

fn plan_json(file: &str, now: &str) -> Value {
    let out = nodewright(&["sweep-plan", "-f", file, "--now", now, "--output", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn an_unknown_budget_time_zone_exits_one_naming_the_file_the_nodepool_and_the_annotation() {
    let bad = CLUSTER.replace(
        "metadata: {name: default}",
        "metadata: {name: default, annotations: {nodewright.io/budget-time-zone: Mars/Olympus}}",
    );
    let file = write("bad-time-zone.yaml", &bad);
    let out = nodewright(&["sweep-plan", "-f", &file, "--now", "2026-03-02T10:00:00Z"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no plan is printed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{file}: NodePool/default (document 1): metadata.annotations[nodewright.io/budget-time-zone]: \"Mars/Olympus\" is not a known time zone"
        )),
        "{err}"
    );
}

#[test]
fn capacity_windows_that_cannot_be_read_exit_one_naming_the_file_the_nodepool_and_the_entry() {
    let cases = [
        (
            // A window without a node count or headroom.
            "nodewright.io/capacity-windows: '[{schedule: \"0 9 * * *\", duration: 9h}]'",
            "metadata.annotations[nodewright.io/capacity-windows][0].nodes: required unless headroom is set",
        ),
        (
            "nodewright.io/capacity-windows: 'nodes: 3'",
            "metadata.annotations[nodewright.io/capacity-windows]: not a list of windows",
        ),
    ];
    for (i, (annotation, want)) in cases.into_iter().enumerate() {
        let bad = CLUSTER.replace(
            "metadata: {name: default}",
            &format!("metadata: {{name: default, annotations: {{{annotation}}}}}"),
        );
        let file = write(&format!("bad-windows-{i}.yaml"), &bad);
        let out = nodewright(&["sweep-plan", "-f", &file, "--now", "2026-03-02T10:00:00Z"]);
        assert_eq!(out.status.code(), Some(1), "{annotation}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{file}: NodePool/default (document 1): {want}")),
            "{annotation}: {err}"
        );
    }
}

/// Two m5.2xlarge nodes of a pool that consolidates when underutilized, one 1-CPU pod on
/// each, every object older than `consolidateAfter`: both pods fit on one node a fraction
/// of the price.
const HALF_EMPTY: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets: [{nodes: "100%"}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-1-5.ec2.internal
    creationTimestamp: "2026-03-02T08:00:00Z"
    labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.2xlarge, karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: us-east-1a, kubernetes.io/arch: amd64, kubernetes.io/os: linux}
  status:
    allocatable: {cpu: 7910m, memory: 30Gi, pods: "58"}
    conditions: [{type: Ready, status: "True"}]
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-2-9.ec2.internal
    creationTimestamp: "2026-03-02T08:00:00Z"
    labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.2xlarge, karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: us-east-1a, kubernetes.io/arch: amd64, kubernetes.io/os: linux}
  status:
    allocatable: {cpu: 7910m, memory: 30Gi, pods: "58"}
    conditions: [{type: Ready, status: "True"}]
- apiVersion: v1
  kind: Pod
  metadata: {name: web-0, namespace: default, creationTimestamp: "2026-03-02T08:05:00Z"}
  spec:
    nodeName: ip-10-0-1-5.ec2.internal
    containers: [{name: c, image: i, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-1, namespace: default, creationTimestamp: "2026-03-02T08:05:00Z"}
  spec:
    nodeName: ip-10-0-2-9.ec2.internal
    containers: [{name: c, image: i, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  status: {phase: Running}
"#;

#[test]
fn two_half_empty_nodes_are_replaced_by_one_cheaper_node_whose_claim_is_in_the_json() {
    let file = write("half-empty.yaml", HALF_EMPTY);
    let plan = plan_json(&file, "2026-03-02T10:00:00Z");
    let commands = plan["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{plan}");
    assert_eq!(commands[0]["action"], "replace", "{plan}");
    assert_eq!(commands[0]["reason"], "underutilized", "{plan}");
    let mut nodes: Vec<&str> = commands[0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    nodes.sort();
    assert_eq!(
        nodes,
        ["ip-10-0-1-5.ec2.internal", "ip-10-0-2-9.ec2.internal"]
    );
    let replacement = commands[0]["replacement"].as_array().unwrap();
    assert_eq!(replacement.len(), 1, "ONE node for both: {plan}");
    let claim = &replacement[0];
    assert_eq!(claim["nodepool"], "default", "{claim}");
    assert_eq!(claim["capacity_type"], "on-demand", "{claim}");
    assert_eq!(claim["zone"], "us-east-1a", "{claim}");
    let mut pods: Vec<&str> = claim["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    pods.sort();
    assert_eq!(pods, ["default/web-0", "default/web-1"], "{claim}");
    let instance_type = claim["instance_type"].as_str().unwrap();
    assert!(instance_type.starts_with("m"), "{claim}");
    // At least 10% cheaper than the two nodes it replaces, and the saving says so.
    let two_nodes = plan["price_per_hour"]["before"].as_f64().unwrap();
    let price = claim["price_per_hour"].as_f64().unwrap();
    assert!(price > 0.0 && price <= two_nodes * 0.9, "{plan}");
    let saving = commands[0]["savings_per_hour"].as_f64().unwrap();
    assert!((two_nodes - price - saving).abs() < 1e-3, "{plan}");
}

#[test]
fn a_legacy_provisioners_empty_node_goes_after_ttl_seconds_after_empty_by_its_provisioner_name() {
    let legacy = r#"
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: legacy}
spec:
  requirements:
  - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  provider:
    subnetSelector: {karpenter.sh/discovery: demo}
    securityGroupSelector: {karpenter.sh/discovery: demo}
  ttlSecondsAfterEmpty: 30
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-3-3.ec2.internal
    creationTimestamp: "2026-03-02T09:59:50Z"
    labels: {karpenter.sh/provisioner-name: legacy, node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: on-demand}
  status: {conditions: [{type: Ready, status: "True"}]}
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-4-4.ec2.internal
    creationTimestamp: "2026-03-02T08:00:00Z"
    labels: {karpenter.sh/provisioner-name: legacy, node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: on-demand}
  status: {conditions: [{type: Ready, status: "True"}]}
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-5-5.ec2.internal
    creationTimestamp: "2026-03-02T08:00:00Z"
    labels: {karpenter.sh/provisioner-name: someone-else, node.kubernetes.io/instance-type: m5.large}
  status: {conditions: [{type: Ready, status: "True"}]}
"#;
    let file = write("legacy.yaml", legacy);
    let plan = plan_json(&file, "2026-03-02T10:00:00Z");
    // Empty since its creation offline: two hours for one node, 10 s for the other.
    let commands = plan["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{plan}");
    assert_eq!(commands[0]["action"], "delete");
    assert_eq!(commands[0]["reason"], "empty");
    assert_eq!(
        commands[0]["nodes"],
        serde_json::json!(["ip-10-0-4-4.ec2.internal"])
    );
    let kept = plan["kept"].as_array().unwrap();
    assert_eq!(kept.len(), 1, "{plan}");
    assert_eq!(kept[0]["node"], "ip-10-0-3-3.ec2.internal");
    assert!(
        kept[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not yet for consolidateAfter (20s to go)"),
        "{plan}"
    );
    // A node of a Provisioner not in the input is not nodewright's to judge.
    assert!(!plan.to_string().contains("ip-10-0-5-5"), "{plan}");
}

#[test]
fn the_next_step_of_the_removal_path_is_shown_for_planned_nodes_and_removals_under_way() {
    let under_way = r#"
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-3-7.ec2.internal
    creationTimestamp: "2026-03-02T09:00:00Z"
    labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: spot}
    annotations:
      nodewright.io/removal: '{"cause":"spot-interrupted","started":"2026-03-02T09:59:30Z","deadline":"2026-03-02T10:01:30Z","progress":"2026-03-02T09:59:30Z"}'
  spec:
    providerID: aws:///us-east-1a/i-0123456789abcdef0
    taints: [{key: nodewright.io/disrupted, effect: NoSchedule}]
  status: {conditions: [{type: Ready, status: "True"}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: default}
  spec: {nodeName: ip-10-0-3-7.ec2.internal, containers: [{name: c, image: i}]}
  status: {phase: Running}
"#;
    let file = write(
        "under-way.yaml",
        &format!("{}{under_way}", CLUSTER.trim_end()),
    );
    let plan = plan_json(&file, "2026-03-02T10:00:00Z");
    let next = plan["next"].as_array().unwrap();
    let of = |node: &str| next.iter().find(|s| s["node"] == node).cloned();
    let empty = of("ip-10-0-1-5.ec2.internal").expect("the planned node's next step");
    assert_eq!(empty["acts"], "take, terminate", "{plan}");
    let spot = of("ip-10-0-3-7.ec2.internal").expect("the removal under way");
    assert_eq!(spot["state"], "draining", "{plan}");
    assert!(
        spot["acts"].as_str().unwrap().contains("drain (evict 1"),
        "{plan}"
    );
    assert!(
        of("ip-10-0-2-9.ec2.internal").is_none(),
        "a kept node has no next step"
    );

    let table = nodewright(&["sweep-plan", "-f", &file, "--now", "2026-03-02T10:00:00Z"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("NODE") && text.contains("NEXT") && text.contains("take, terminate"),
        "{text}"
    );
}

#[test]
fn a_static_nodepool_over_its_count_loses_its_emptiest_node_and_is_never_emptied() {
    let scaled = |replicas: u32| {
        let text = CLUSTER.replacen(
            "spec:\n  template:",
            &format!("spec:\n  replicas: {replicas}\n  template:"),
            1,
        );
        let file = write(&format!("static-{replicas}.yaml"), &text);
        let plan = plan_json(&file, "2026-03-02T10:00:00Z");
        let commands: Vec<(String, String, String)> = plan["commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let field = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (
                    field("action"),
                    field("reason"),
                    c["nodes"][0].as_str().unwrap().to_string(),
                )
            })
            .collect();
        commands
    };
    let scale_down = |node: &str| {
        (
            "delete".to_string(),
            "scale-down".to_string(),
            node.to_string(),
        )
    };
    // At its count: the empty node stays (a dynamic pool's would go, as above).
    assert_eq!(scaled(2), vec![]);
    // One over: the empty node goes first, for the scale-down; none to two nodes fewer:
    // the node held by a do-not-disrupt pod goes last, as a scale-down is forceful.
    assert_eq!(scaled(1), vec![scale_down("ip-10-0-1-5.ec2.internal")]);
    assert_eq!(
        scaled(0),
        vec![
            scale_down("ip-10-0-1-5.ec2.internal"),
            scale_down("ip-10-0-2-9.ec2.internal")
        ]
    );
}

#[test]
fn a_node_overlay_prices_the_nodes_a_sweep_saves() {
    let saving = |extra: &str| {
        let file = write("overlay.yaml", &format!("{CLUSTER}---\n{extra}"));
        let plan = plan_json(&file, "2026-03-02T10:00:00Z");
        plan["commands"][0]["savings_per_hour"].as_f64().unwrap()
    };
    let list_price = saving("");
    let overlay = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: plan}\n\
                   spec: {price: \"0.01\", requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]}\n";
    assert!((list_price - 0.01).abs() > 0.01, "{list_price}");
    assert!((saving(overlay) - 0.01).abs() < 1e-9);
}

#[test]
fn an_overlay_in_conflict_prices_no_node_as_it_prices_no_launch() {
    // Zoned, so the simulation (and the overlays' resolution) runs.
    let zoned = CLUSTER.replace(
        "karpenter.sh/capacity-type: on-demand}",
        "karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: us-east-1a}",
    );
    let saving = |extra: &str| {
        let file = write("conflict.yaml", &format!("{zoned}---\n{extra}"));
        let plan = plan_json(&file, "2026-03-02T10:00:00Z");
        plan["commands"][0]["savings_per_hour"].as_f64().unwrap()
    };
    let list_price = saving("");
    // `zz` (first in Karpenter's order) prices m5.xlarge; `aa`, of the same weight, would
    // price every type: in conflict over m5.xlarge, it applies nowhere, the empty m5.large
    // included.
    let overlays = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: zz}\n\
                    spec: {price: \"0.5\", requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}]}\n\
                    ---\napiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: aa}\n\
                    spec: {priceAdjustment: \"-90%\"}\n";
    assert!((saving(overlays) - list_price).abs() < 1e-9);
    // Without the conflict, `aa` prices it.
    let alone = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: aa}\n\
                 spec: {priceAdjustment: \"-90%\"}\n";
    assert!((saving(alone) - list_price * 0.1).abs() < 1e-9);
}
