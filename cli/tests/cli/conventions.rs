//! The conventions every command shares, run as a user runs them: the same exit status for
//! the same situation, `-f -` and `-o yaml` everywhere, money that is never shown wrong.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn nodewright_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

const POOL: &str = "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
";

fn pod(name: &str, cpu: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\n\
         spec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]}}\n"
    )
}

#[test]
fn a_bad_flag_or_an_unreadable_input_exits_two_in_every_command() {
    for command in [
        "validate",
        "plan",
        "sweep-plan",
        "explain-event",
        "status",
        "rbac",
        "version",
        "eks-token",
    ] {
        let out = nodewright(&[command, "--no-such-flag"]);
        assert_eq!(out.status.code(), Some(2), "{command} --no-such-flag");
    }
    for command in ["validate", "plan", "sweep-plan", "explain-event"] {
        let out = nodewright(&[command, "-f", "no/such/input.yaml"]);
        assert_eq!(out.status.code(), Some(2), "{command} -f a missing file");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error: no/such/input.yaml: cannot be read"),
            "{command}: {err}"
        );
    }
}

#[test]
fn an_invalid_document_exits_one_in_every_command_and_names_the_document() {
    // Unclosed flow mapping: YAML no parser can go on past; then a document with no kind.
    for (text, says) in [
        ("kind: NodePool\nmetadata: {name: a\n", "document 1"),
        ("---\njust a scalar\n", "document 1"),
    ] {
        for command in ["validate", "plan", "sweep-plan"] {
            let out = nodewright_with_stdin(&[command, "-f", "-"], text);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{command} on {text:?}: {err}");
            assert!(err.contains(says), "{command} on {text:?}: {err}");
        }
    }
    let dir = std::env::temp_dir().join(format!("nodewright-objects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let objects = dir.join("objects.yaml");
    std::fs::write(&objects, "kind: Node\nmetadata: {name: a\n").unwrap();
    let objects = objects.to_str().unwrap();
    let event = r#"{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}}"#;
    let out = nodewright_with_stdin(&["explain-event", "-f", "-", "--objects", objects], event);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("document 1: not YAML or JSON"), "{err}");
}

#[test]
fn plan_fails_on_unschedulable_pods_only_when_asked_and_names_them() {
    let input = format!("{POOL}{}{}", pod("small", "1"), pod("enormous", "1000"));
    let out = nodewright_with_stdin(&["plan", "-f", "-"], &input);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 unschedulable"), "{text}");
    assert!(text.contains("default/enormous: "), "{text}");

    let out = nodewright_with_stdin(&["plan", "-f", "-", "--fail-on-unschedulable"], &input);
    assert_eq!(out.status.code(), Some(1));
    let fits = format!("{POOL}{}", pod("small", "1"));
    let out = nodewright_with_stdin(&["plan", "-f", "-", "--fail-on-unschedulable"], &fits);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn nothing_planned_costs_zero_dollars_not_a_negative_zero() {
    let out = nodewright_with_stdin(&["plan", "-f", "-"], POOL);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0 node claims for 0 pods, 0 unschedulable, $0.0000/hour"),
        "{text}"
    );
    assert!(!text.contains("-0.0"), "{text}");
    let out = nodewright_with_stdin(&["plan", "-f", "-", "-o", "json"], POOL);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let total = plan["total_price_per_hour"].as_f64().unwrap();
    assert!(total == 0.0 && total.is_sign_positive(), "{plan}");
}

#[test]
fn a_spot_price_is_marked_as_an_estimate_and_says_where_it_comes_from() {
    let input = format!("{POOL}{}", pod("small", "1"));
    let out = nodewright_with_stdin(&["plan", "-f", "-"], &input);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().nth(1).expect("a claim row");
    assert!(row.contains(" spot ") && row.contains(" ~0."), "{text}");
    assert!(
        text.contains("/hour\n") && text.contains(", ~$0."),
        "{text}"
    );
    assert!(
        text.contains("~ marks an estimate: spot taken as on-demand less 60%"),
        "{text}"
    );
    let out = nodewright_with_stdin(&["plan", "-f", "-", "-o", "json"], &input);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["nodeclaims"][0]["price_estimated"], true, "{plan}");
    assert_eq!(plan["total_price_estimated"], true, "{plan}");
}

#[test]
fn yaml_output_is_the_same_data_as_json() {
    for args in [
        vec!["plan", "-f", &example("getting-started.yaml")],
        vec!["validate", "-f", &example("invalid.yaml")],
        vec!["version"],
    ] {
        let mut json_args = args.clone();
        json_args.extend(["-o", "json"]);
        let mut yaml_args = args.clone();
        yaml_args.extend(["-o", "yaml"]);
        let json: Value = serde_json::from_slice(&nodewright(&json_args).stdout).unwrap();
        let yaml: Value = serde_yaml::from_slice(&nodewright(&yaml_args).stdout).unwrap();
        assert_eq!(json, yaml, "{args:?}");
    }
}

#[test]
fn validate_reports_every_problem_of_a_legacy_provisioner_with_its_severity() {
    let input = "\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: old}
spec:
  ttlSecondsAfterEmpty: -30
  annotations: {example.com/owner: ml}
  providerRef: {name: gone}
";
    let out = nodewright_with_stdin(&["validate", "-f", "-"], input);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            "error: stdin: Provisioner/old (document 1): spec.ttlSecondsAfterEmpty: must be 0 or more seconds, got -30",
            "warning: stdin: Provisioner/old (document 1): spec.annotations: ignored: nodes get the template's labels and taints through kubelet flags, which cannot carry annotations (a change still counts as drift)",
            "error: stdin: Provisioner/old (document 1): spec.providerRef.name: AWSNodeTemplate \"gone\" is not defined in the inputs; defined: none",
        ],
        "{err}"
    );
}

#[test]
fn the_version_is_the_workspaces_in_every_form() {
    let version = env!("CARGO_PKG_VERSION");
    let out = nodewright(&["--version"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("nodewright {version}")
    );
    let out = nodewright(&["version"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("nodewright {version}")
    );
}

#[test]
fn plan_prices_through_node_overlays_says_so_and_warns_of_a_conflict() {
    let overlay = |name: &str, change: &str| {
        format!(
            "---\napiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {{name: {name}}}\n\
             spec: {{priceAdjustment: \"{change}\"}}\n"
        )
    };
    let total = |out: &Output| -> f64 {
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        plan["total_price_per_hour"].as_f64().unwrap()
    };
    let base = format!("{POOL}{}", pod("small", "1"));
    let list = nodewright_with_stdin(&["plan", "-f", "-", "-o", "json"], &base);
    let discounted = format!("{base}{}", overlay("half", "-50%"));
    let out = nodewright_with_stdin(&["plan", "-f", "-", "-o", "json"], &discounted);
    assert!(
        (total(&out) - total(&list) / 2.0).abs() < 1e-4,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let table = nodewright_with_stdin(&["plan", "-f", "-"], &discounted);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("changed by 1 NodeOverlay(s)"), "{text}");
    // Two of one weight over the same offerings: the later in Karpenter's order is left out.
    let clash = format!("{discounted}{}", overlay("aa", "+50%"));
    let out = nodewright_with_stdin(&["plan", "-f", "-", "-o", "json"], &clash);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: NodeOverlay aa: in conflict"),
        "{err}"
    );
    assert!((total(&out) - total(&list) / 2.0).abs() < 1e-4);
}

#[test]
fn status_takes_the_cluster_and_the_stack_together_and_a_region_only_with_one_of_them() {
    // Both accepted: the run gets as far as its own check of --spot-discount.
    let both = nodewright(&[
        "status",
        "--cluster",
        "c",
        "--stack",
        "nodewright-c",
        "--region",
        "eu-west-1",
        "--spot-discount",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert_eq!(both.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--spot-discount 2"), "{stderr}");
    let alone = nodewright(&["status", "--region", "eu-west-1"]);
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert_eq!(alone.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--cluster") || stderr.contains("--stack"),
        "{stderr}"
    );
}
