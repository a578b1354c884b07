//! The `nodewright` binary on the example files: exit codes, messages, and plans checked
//! against the bundled catalog independently of the solver.
//!
//! One test binary for the crate (each links the CLI and its dependencies again): the
//! other files are modules of it, `cargo test --workspace --test cli doc_examples::` runs one.

mod cli_reference;
mod common;
mod conventions;
mod doc_examples;
mod doctor;
mod explain_event;
mod reservations;
mod status_terminal;
mod support_matrix;
mod sweep_plan;
mod volumes;

use std::path::PathBuf;
use std::process::{Command, Output};

use nodewright::catalog::{Catalog, DEFAULT_SPOT_DISCOUNT};
use nodewright::resources::parse_milli;
use serde_json::Value;

fn example(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join(name);
    root.to_string_lossy().into_owned()
}

/// `text` written as `name` in the test target's directory `dir`; its path.
fn input_file(dir: &str, name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn plan_json(file: &str) -> Value {
    let out = nodewright(&["plan", "-f", &example(file), "--output", "json"]);
    assert!(
        out.status.success(),
        "plan {file} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("plan prints JSON")
}

fn claims(plan: &Value) -> &Vec<Value> {
    plan["nodeclaims"].as_array().expect("nodeclaims is a list")
}

/// Every listed instance type must hold the claim's pods plus DaemonSet overhead; checked
/// here from the bundled catalog's allocatable, not from anything the solver reports.
fn assert_every_type_holds_its_pods(plan: &Value) {
    let zones: Vec<String> = plan["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z.as_str().unwrap().to_string())
        .collect();
    let catalog = Catalog::offline(&zones, DEFAULT_SPOT_DISCOUNT).unwrap();
    for claim in claims(plan) {
        for name in claim["instance_types"].as_array().unwrap() {
            let it = &catalog
                .get(name.as_str().unwrap())
                .expect("a bundled type")
                .instance_type;
            let alloc = it.allocatable(None);
            for (resource, amount) in claim["requests"].as_object().unwrap() {
                let mut need = parse_milli(amount.as_str().unwrap()).unwrap();
                if let Some(ds) = claim["daemonset_overhead"]
                    .get(resource)
                    .and_then(Value::as_str)
                {
                    need += parse_milli(ds).unwrap();
                }
                assert!(
                    need <= alloc.get(resource),
                    "{name} has {} {resource}, the claim needs {need}",
                    alloc.get(resource)
                );
            }
        }
    }
}

#[test]
fn every_valid_example_validates_and_counts_its_documents() {
    for (file, docs) in [
        ("seed-test-network.yaml", 3),
        ("seed-provisioner1-spot.yaml", 2),
        ("seed-provisioner2-cpu.yaml", 2),
        ("getting-started.yaml", 3),
    ] {
        let out = nodewright(&["validate", "-f", &example(file)]);
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("ok: {docs} objects in {docs} documents"),
            "{file}"
        );
    }
}

#[test]
fn invalid_input_exits_one_with_a_line_per_problem_naming_file_document_and_field() {
    let out = nodewright(&["validate", "-f", &example("invalid.yaml")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().count() >= 3, "{err}");
    for line in err.lines() {
        assert!(
            line.starts_with("error: ") || line.starts_with("warning: "),
            "a problem line without its severity: {line}"
        );
        assert!(
            line.contains("invalid.yaml: "),
            "a problem line without its file: {line}"
        );
    }
    assert!(err.contains("operator"), "{err}");
    assert!(err.contains("weight"), "{err}");
}

#[test]
fn plan_on_invalid_input_exits_one_and_a_missing_file_exits_two_naming_it() {
    let out = nodewright(&["plan", "-f", &example("invalid.yaml")]);
    assert_eq!(out.status.code(), Some(1));
    let missing = nodewright(&["plan", "-f", "no/such/file.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no/such/file.yaml"));
}

#[test]
fn test_network_gets_one_c5n_4xlarge_on_demand_in_one_of_its_two_zones() {
    let plan = plan_json("seed-test-network.yaml");
    let claims = claims(&plan);
    assert_eq!(claims.len(), 1, "{plan:#}");
    let c = &claims[0];
    assert_eq!(c["instance_types"], serde_json::json!(["c5n.4xlarge"]));
    assert_eq!(c["capacity_type"], "on-demand");
    assert!(["ap-northeast-2a", "ap-northeast-2c"].contains(&c["zone"].as_str().unwrap()));
    assert_eq!(c["labels"]["nodeType"], "network-node");
    assert_eq!(plan["unschedulable"], serde_json::json!([]));
    assert_every_type_holds_its_pods(&plan);
}

#[test]
fn provisioner2_with_five_one_cpu_pods_gets_exactly_two_c5_xlarge_in_ap_northeast_1a() {
    let plan = plan_json("seed-provisioner2-cpu.yaml");
    let claims = claims(&plan);
    assert_eq!(claims.len(), 2, "{plan:#}");
    for c in claims {
        assert_eq!(c["instance_types"], serde_json::json!(["c5.xlarge"]));
        assert_eq!(c["capacity_type"], "on-demand");
        assert_eq!(c["zone"], "ap-northeast-1a");
    }
    let pods: usize = claims
        .iter()
        .map(|c| c["pods"].as_array().unwrap().len())
        .sum();
    assert_eq!(pods, 5);
    assert_every_type_holds_its_pods(&plan);
}

#[test]
fn provisioner1_launches_spot() {
    let plan = plan_json("seed-provisioner1-spot.yaml");
    assert!(!claims(&plan).is_empty());
    assert!(claims(&plan).iter().all(|c| c["capacity_type"] == "spot"));
    assert_eq!(plan["unschedulable"], serde_json::json!([]));
    assert_eq!(plan["spot_prices_estimated"], true);
    assert_every_type_holds_its_pods(&plan);
}

#[test]
fn the_getting_started_pool_places_every_pod_and_the_total_is_the_sum_of_claims() {
    let plan = plan_json("getting-started.yaml");
    assert_eq!(plan["unschedulable"], serde_json::json!([]));
    let sum: f64 = claims(&plan)
        .iter()
        .map(|c| c["price_per_hour"].as_f64().unwrap())
        .sum();
    assert!((sum - plan["total_price_per_hour"].as_f64().unwrap()).abs() < 1e-3);
    for c in claims(&plan) {
        assert!(c["instance_types"].as_array().unwrap().len() <= 60);
        for t in c["instance_types"].as_array().unwrap() {
            let family = t.as_str().unwrap().split('.').next().unwrap();
            assert!(
                family.starts_with(['c', 'm', 'r']),
                "{t} is outside the pool's c/m/r categories"
            );
        }
    }
    assert_every_type_holds_its_pods(&plan);
}

#[test]
fn the_table_names_the_pool_type_and_price_and_lists_unschedulable_pods() {
    let out = nodewright(&["plan", "-f", &example("seed-provisioner2-cpu.yaml")]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("NODEPOOL"), "{text}");
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("provisioner2") && l.contains("c5.xlarge"))
            .count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("2 node claims for 5 pods, 0 unschedulable"),
        "{text}"
    );
}

#[test]
fn rbac_prints_the_manifests_with_the_groups_the_stack_names_or_the_prefix_asked_for() {
    let file =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/rbac.yaml"))
            .expect("cli/src/rbac.yaml");
    let out = nodewright(&["rbac"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(printed, file.replace("GROUP-", "nodewright-"));
    let out = nodewright(&["rbac", "--group-prefix", "platform:nodes"]);
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    for function in ["provisioner", "interruption", "sweeper"] {
        assert_eq!(
            printed
                .matches(&format!("name: platform:nodes-{function}}}"))
                .count(),
            2,
            "{printed}"
        );
    }
    let out = nodewright(&["rbac", "--group-prefix", "system:masters"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"system:masters\""),
        "the error names the group"
    );
}
