//! `nodewright explain-event`, run as a user runs it, on the documented sample events.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/src/interruption/testdata")
        .join(name)
}

fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .output()
        .expect("the nodewright binary runs")
}

fn explain_json(path: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["explain-event", "-f", path, "--output", "json"];
    args.extend_from_slice(extra);
    let out = nodewright(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "JSON output ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nodewright-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writing a temp file");
    path
}

#[test]
fn a_spot_warning_is_explained_in_the_documented_json_shape() {
    let path = sample("spot-interruption-warning.json");
    let (code, v) = explain_json(path.to_str().unwrap(), &[]);
    assert_eq!(code, 0);
    let e = &v["events"][0];
    assert_eq!(e["kind"], "spot-interruption");
    assert_eq!(e["instance_ids"], json!(["i-0b662ef9931388ba0"]));
    assert_eq!(e["action"], "remove");
    assert_eq!(e["reason"], "spot-interrupted removal");
    assert_eq!(e["wrapper"], "none");
    assert_eq!(e["deadline"], "2026-11-21T09:17:00Z");
    assert_eq!(v["events"].as_array().unwrap().len(), 1);
}

#[test]
fn every_sample_gets_its_kind_and_action() {
    let cases = [
        (
            "rebalance-recommendation.json",
            "rebalance-recommendation",
            "remove",
            "none",
        ),
        (
            "instance-state-change-stopping.json",
            "state-change",
            "remove",
            "none",
        ),
        (
            "capacity-reservation-interruption-warning.json",
            "capacity-reservation-interruption",
            "remove",
            "none",
        ),
        (
            "health-scheduled-change.json",
            "scheduled-change",
            "remove",
            "none",
        ),
        (
            "sqs-batch-spot-interruption.json",
            "spot-interruption",
            "remove",
            "sqs-event",
        ),
    ];
    for (file, kind, action, wrapper) in cases {
        let path = sample(file);
        let (code, v) = explain_json(path.to_str().unwrap(), &[]);
        assert_eq!(code, 0, "{file}");
        assert_eq!(v["events"][0]["kind"], kind, "{file}");
        assert_eq!(v["events"][0]["action"], action, "{file}");
        assert_eq!(v["events"][0]["wrapper"], wrapper, "{file}");
    }
}

#[test]
fn an_sqs_batch_with_a_bad_record_exits_one_and_explains_every_record() {
    let spot = std::fs::read_to_string(sample("spot-interruption-warning.json")).unwrap();
    let batch = json!({"Records": [
        {"messageId": "good", "body": spot},
        {"messageId": "broken", "body": "{\"version\": \"0\", \"detail-type\": "},
        {"messageId": "other", "body": json!({"version": "0", "id": "x", "source": "aws.s3", "detail-type": "Object Created", "detail": {}}).to_string()},
    ]});
    let path = temp_file("batch.json", &batch.to_string());
    let (code, v) = explain_json(path.to_str().unwrap(), &[]);
    assert_eq!(code, 1);
    let events = v["events"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["message_id"].as_str().unwrap(),
                e["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("good", "spot-interruption"),
            ("broken", "invalid"),
            ("other", "ignored")
        ]
    );
    assert!(
        events[1]["reason"]
            .as_str()
            .unwrap()
            .contains("not an EventBridge event")
    );
    assert_eq!(events[1]["action"], "none");
}

#[test]
fn a_missing_field_is_invalid_with_a_reason_naming_it_and_never_a_panic() {
    let path = temp_file(
        "no-instance.json",
        &json!({"version": "0", "id": "1", "source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
                "time": "2026-11-21T09:15:00Z", "detail": {"instance-action": "terminate"}}).to_string(),
    );
    let (code, v) = explain_json(path.to_str().unwrap(), &[]);
    assert_eq!(code, 1);
    assert_eq!(v["events"][0]["kind"], "invalid");
    assert!(
        v["events"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("detail.instance-id")
    );
    for text in ["", "null", "[]", "{\"Records\": [{}]}", "\u{0}\u{1}"] {
        let path = temp_file("odd.json", text);
        let out = nodewright(&["explain-event", "-f", path.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{text:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn with_an_account_a_foreign_event_is_ignored_as_suspicious() {
    let path = sample("spot-interruption-warning.json");
    let (code, v) = explain_json(
        path.to_str().unwrap(),
        &["--account", "999999999999", "--region", "us-east-1"],
    );
    assert_eq!(code, 0);
    assert_eq!(v["events"][0]["kind"], "ignored");
    assert_eq!(v["events"][0]["suspicious"], true);
}

#[test]
fn the_table_names_kind_instances_action_and_deadline_and_a_missing_file_exits_two() {
    let path = sample("spot-interruption-warning.json");
    let out = nodewright(&["explain-event", "-f", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("KIND") && lines[0].contains("DEADLINE"),
        "{text}"
    );
    for want in [
        "spot-interruption",
        "i-0b662ef9931388ba0",
        "remove",
        "2026-11-21T09:17:00Z",
    ] {
        assert!(lines[1].contains(want), "{want} in {text}");
    }
    let out = nodewright(&["explain-event", "-f", "/nonexistent/event.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/event.json"));
}

fn objects_for(instance: &str) -> PathBuf {
    let text = format!(
        "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {{name: ip-10-0-1-5.ec2.internal, labels: {{karpenter.sh/nodepool: default}}}}
  spec: {{providerID: aws:///us-east-1a/{instance}}}
- apiVersion: v1
  kind: Pod
  metadata: {{name: web-1, namespace: default}}
  spec:
    nodeName: ip-10-0-1-5.ec2.internal
    terminationGracePeriodSeconds: 30
    containers: [{{name: c, image: nginx}}]
"
    );
    temp_file(&format!("objects-{instance}.yaml"), &text)
}

#[test]
fn with_the_cluster_objects_the_next_step_of_the_named_nodes_removal_is_shown() {
    let spot = sample("spot-interruption-warning.json");
    let objects = objects_for("i-0b662ef9931388ba0");
    let (code, v) = explain_json(
        spot.to_str().unwrap(),
        &["--objects", objects.to_str().unwrap()],
    );
    assert_eq!(code, 0);
    let next = &v["events"][0]["next"];
    assert_eq!(next["node"], "ip-10-0-1-5.ec2.internal");
    assert_eq!(next["state"], "draining", "{next}");
    let acts = next["acts"].as_str().unwrap();
    assert!(
        acts.contains("evict 1"),
        "a spot warning drains at once: {acts}"
    );

    let rebalance = sample("rebalance-recommendation.json");
    let objects = objects_for("i-0f2e6c3b1a9d84c77");
    let (_, v) = explain_json(
        rebalance.to_str().unwrap(),
        &["--objects", objects.to_str().unwrap()],
    );
    let next = &v["events"][0]["next"];
    assert_eq!(
        next["state"], "asking for a replacement",
        "a rebalance recommendation replaces first: {next}"
    );
    assert!(!next["acts"].as_str().unwrap().contains("evict"), "{next}");

    let (_, v) = explain_json(
        rebalance.to_str().unwrap(),
        &[
            "--objects",
            objects_for("i-0000000000000000f").to_str().unwrap(),
        ],
    );
    assert_eq!(
        v["events"][0]["next"],
        Value::Null,
        "no node runs the instance"
    );

    let out = nodewright(&[
        "explain-event",
        "-f",
        spot.to_str().unwrap(),
        "--objects",
        "/nonexistent/objects.yaml",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/objects.yaml"));
}
