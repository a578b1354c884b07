//! docs/configure.md's support matrix is checked against what `nodewright validate` does, so
//! the page cannot drift from the code:
//! - each row's example is put into a valid document and validated: `supported` must pass
//!   with nothing said about the field, `ignored (warning)` must pass with a `warning:` that
//!   names it, `rejected` must fail with an `error:` that names it;
//! - every field nodewright's NodePool, EC2NodeClass, Provisioner, AWSNodeTemplate and
//!   NodeOverlay accept
//!   has a row: the fields are found by asking `validate` itself (an unknown field's error
//!   lists the fields allowed there), level by level;
//! - every `nodewright.io/` annotation validation knows has a row;
//! - each supported requirement in the requirements table really launches: `plan` places a
//!   pod on a NodePool that has it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::document::{concrete, merge, set};
use crate::common::markdown::{code, root, table_after};
use serde_json::{Value, json};

/// The kinds with a matrix, each with its marker in docs/configure.md and the documents a
/// row is validated in (the row's own kind first).
const KINDS: &[(&str, &str)] = &[
    ("NodePool", "<!-- support: NodePool -->"),
    ("EC2NodeClass", "<!-- support: EC2NodeClass -->"),
    ("Provisioner", "<!-- support: Provisioner -->"),
    ("AWSNodeTemplate", "<!-- support: AWSNodeTemplate -->"),
    ("NodeOverlay", "<!-- support: NodeOverlay -->"),
];
const ANNOTATIONS: &str = "<!-- support: annotations -->";
const REQUIREMENTS: &str = "<!-- support: requirements -->";

fn base(kind: &str) -> Value {
    match kind {
        "NodePool" => json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "matrix"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "matrix"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}
        }),
        "EC2NodeClass" => json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "matrix"},
            "spec": {
                "role": "KarpenterNodeRole-demo",
                "amiFamily": "AL2023",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}
        }),
        "Provisioner" => json!({
            "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "matrix"},
            "spec": {"providerRef": {"name": "matrix"}}
        }),
        "AWSNodeTemplate" => json!({
            "apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate", "metadata": {"name": "matrix"},
            "spec": {
                "subnetSelector": {"karpenter.sh/discovery": "demo"},
                "securityGroupSelector": {"karpenter.sh/discovery": "demo"}}
        }),
        "NodeOverlay" => json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "matrix"},
            "spec": {}
        }),
        other => panic!("no base document for {other}"),
    }
}

/// The documents a change to `kind` is validated with: the changed one and its partner.
fn documents(kind: &str, changed: Value) -> Vec<Value> {
    match kind {
        "NodePool" => vec![changed, base("EC2NodeClass")],
        "EC2NodeClass" => vec![base("NodePool"), changed],
        // An inline provider is the Provisioner's own class: no template beside it.
        "Provisioner" if changed["spec"].get("provider").is_some() => vec![changed],
        "Provisioner" => vec![changed, base("AWSNodeTemplate")],
        "NodeOverlay" => vec![base("NodePool"), base("EC2NodeClass"), changed],
        _ => vec![base("Provisioner"), changed],
    }
}

/// A valid item to start a list's row from, by the list's path.
fn item_for(list: &str) -> Value {
    let list = list.rsplit('.').next().unwrap_or(list);
    match list {
        "requirements" => {
            json!({"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]})
        }
        "taints" | "startupTaints" => {
            json!({"key": "example.com/dedicated", "effect": "NoSchedule"})
        }
        "budgets" => json!({"nodes": "10%"}),
        "blockDeviceMappings" => json!({"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi"}}),
        "subnetSelectorTerms" | "securityGroupSelectorTerms" => json!({}),
        "amiSelectorTerms" => json!({}),
        _ => json!({}),
    }
}

/// What a field needs beside it in its list item to be valid alone.
fn beside(field: &str) -> Option<Value> {
    match field {
        // An owner narrows a name or tags; alone it selects nothing.
        "spec.amiSelectorTerms[].owner" => Some(json!({"name": "al2023-ami-*"})),
        "spec.capacityReservationSelectorTerms[].ownerID" => Some(json!({"tags": {"team": "ml"}})),
        // A schedule and a duration come together.
        "spec.disruption.budgets[].schedule" => Some(json!({"nodes": "0", "duration": "8h"})),
        "spec.disruption.budgets[].duration" => {
            Some(json!({"nodes": "0", "schedule": "0 9 * * *"}))
        }
        _ => None,
    }
}

/// What the base document must lose for a field to be valid: the field it excludes.
fn without(kind: &str, field: &str) -> Option<&'static str> {
    match (kind, field) {
        ("EC2NodeClass", "spec.instanceProfile") => Some("role"),
        ("Provisioner", f) if f.starts_with("spec.provider.") || f == "spec.provider" => {
            Some("providerRef")
        }
        _ => None,
    }
}

/// What `nodewright validate` said about some documents.
struct Verdict {
    code: i32,
    lines: Vec<String>,
}

impl Verdict {
    fn names(&self, prefix: &str, field: &str) -> bool {
        self.lines
            .iter()
            .any(|l| l.starts_with(prefix) && l.contains(&format!(": {field}")))
    }
}

fn validate(docs: &[Value]) -> Verdict {
    let yaml: String = docs
        .iter()
        .map(|d| serde_yaml::to_string(d).unwrap())
        .collect::<Vec<_>>()
        .join("---\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["validate", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Verdict {
        code: out.status.code().unwrap_or(-1),
        lines: String::from_utf8_lossy(&out.stderr)
            .lines()
            .map(str::to_string)
            .collect(),
    }
}

/// A row of a field table: the field, its example, what nodewright does.
#[derive(Debug)]
struct Row {
    field: String,
    example: Value,
    status: String,
}

fn rows(marker: &str) -> Vec<Row> {
    let text =
        std::fs::read_to_string(root().join("docs/configure.md")).expect("docs/configure.md");
    let rows: Vec<Row> = table_after(&text, marker)
        .into_iter()
        .map(|cells| {
            assert!(
                cells.len() >= 3,
                "{marker}: a row needs field, example and status: {cells:?}"
            );
            Row {
                field: code(&cells[0]),
                example: serde_yaml::from_str(&code(&cells[1]))
                    .unwrap_or_else(|e| panic!("{marker} {}: example {}: {e}", cells[0], cells[1])),
                status: cells[2].trim_matches('*').to_string(),
            }
        })
        .collect();
    assert!(
        !rows.is_empty(),
        "no table after {marker} in docs/configure.md"
    );
    rows
}

/// Checks one verdict against a row's status; the error, if any, says why.
fn judge(what: &str, field: &str, status: &str, v: &Verdict) -> Result<(), String> {
    let said = v.lines.join("\n");
    let ok = match status {
        "supported" => v.code == 0 && !v.lines.iter().any(|l| l.contains(&format!(": {field}"))),
        "ignored (warning)" => v.code == 0 && v.names("warning: ", field),
        "rejected" => v.code == 1 && v.names("error: ", field),
        other => return Err(format!("{what}: unknown status {other:?}")),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what}: documented {status}, validate exited {}:\n{said}",
            v.code
        ))
    }
}

#[test]
fn the_documents_rows_are_put_in_are_valid_as_they_are() {
    for (kind, _) in KINDS {
        let verdict = validate(&documents(kind, base(kind)));
        assert_eq!((verdict.code, verdict.lines.clone()), (0, vec![]), "{kind}");
    }
}

#[test]
fn every_field_row_does_what_the_matrix_says() {
    let mut failures = Vec::new();
    for (kind, marker) in KINDS {
        for row in rows(marker) {
            let mut doc = base(kind);
            let field = row.field.trim_end_matches(".*");
            if let Some(excluded) = without(kind, &row.field) {
                doc["spec"].as_object_mut().unwrap().remove(excluded);
            }
            match beside(&row.field) {
                Some(mut item) => {
                    let (item_path, leaf) = field.rsplit_once('.').unwrap();
                    merge(&mut item, json!({ leaf: row.example.clone() }));
                    set(&mut doc, item_path, item, &item_for);
                }
                None => set(&mut doc, field, row.example.clone(), &item_for),
            }
            let verdict = validate(&documents(kind, doc));
            let what = format!("{kind} {} = {}", row.field, row.example);
            if let Err(e) = judge(&what, &concrete(field), &row.status, &verdict) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The fields allowed at `path` of `kind` (an object, or `x[]` for a list's items), as
/// validation lists them for an unknown field there; `None` when `path` holds no object
/// with named fields (a scalar, a map, a list of scalars).
fn allowed_fields(kind: &str, path: &str) -> Option<Vec<String>> {
    const PROBE: &str = "zzz-not-a-field";
    let mut doc = base(kind);
    // Items start from a valid one, so only the probe is unknown.
    set(&mut doc, &format!("{path}.{PROBE}"), json!(1), &item_for);
    let verdict = validate(&documents(kind, doc));
    let at = format!("{}.{PROBE}: unknown field", concrete(path));
    let line = verdict.lines.iter().find(|l| l.contains(&at))?;
    let list = line.split("allowed fields here: ").nth(1)?;
    Some(
        list.split(", ")
            .map(|f| f.trim().to_string())
            .filter(|f| f != "none")
            .collect(),
    )
}

/// Every field path of `kind` under `spec`, leaves and objects, as the matrix writes them.
fn schema(kind: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut queue = vec!["spec".to_string()];
    while let Some(path) = queue.pop() {
        for field in allowed_fields(kind, &path).unwrap_or_default() {
            let child = format!("{path}.{field}");
            found.insert(child.clone());
            if allowed_fields(kind, &child).is_some() {
                queue.push(child);
            } else if allowed_fields(kind, &format!("{child}[]")).is_some() {
                found.insert(format!("{child}[]"));
                queue.push(format!("{child}[]"));
            }
        }
    }
    found
}

#[test]
fn every_field_nodewright_accepts_has_a_row_and_every_row_names_a_field_or_is_rejected() {
    let mut failures = Vec::new();
    for (kind, marker) in KINDS {
        let schema = schema(kind);
        assert!(schema.len() >= 5, "{kind}: the probe found only {schema:?}");
        let rows = rows(marker);
        let documented: BTreeSet<String> = rows.iter().map(|r| r.field.clone()).collect();
        let covered = |field: &str| {
            documented.contains(field)
                || documented.iter().any(|d| {
                    d.strip_suffix(".*").is_some_and(|parent| {
                        field.starts_with(&format!("{parent}."))
                            || field.starts_with(&format!("{parent}["))
                    })
                })
        };
        // Leaves must be documented; an object is documented through its fields.
        for field in &schema {
            let is_parent = schema.iter().any(|f| {
                f.starts_with(&format!("{field}.")) || f.starts_with(&format!("{field}["))
            });
            if !is_parent && !covered(field) {
                failures.push(format!("{kind}: {field} is accepted but has no row"));
            }
        }
        for row in &rows {
            let field = row.field.trim_end_matches(".*");
            if !schema.contains(field) && row.status != "rejected" {
                failures.push(format!(
                    "{kind}: {} is documented {} but validate does not know the field",
                    row.field, row.status
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_nodewright_annotation_has_rows_that_do_what_they_say() {
    let rows = rows(ANNOTATIONS);
    let mut failures = Vec::new();
    for row in &rows {
        let mut pool = base("NodePool");
        let value = match &row.example {
            Value::String(s) => s.clone(),
            other => serde_yaml::to_string(other).unwrap(),
        };
        pool["metadata"]["annotations"] = json!({ row.field.clone(): value });
        let verdict = validate(&documents("NodePool", pool));
        let field = format!("metadata.annotations[{}]", row.field);
        let what = format!("annotation {} = {:?}", row.field, value);
        if let Err(e) = judge(&what, &field, &row.status, &verdict) {
            failures.push(e);
        }
    }
    // The annotations validation knows, from its own message about one it does not.
    let mut pool = base("NodePool");
    pool["metadata"]["annotations"] = json!({"nodewright.io/zzz-unknown": "x"});
    let verdict = validate(&documents("NodePool", pool));
    let line = verdict
        .lines
        .iter()
        .find(|l| l.contains("nodewright.io/zzz-unknown"))
        .expect("an unknown nodewright.io annotation is reported");
    let known: Vec<&str> = line
        .split("it reads ")
        .nth(1)
        .expect("the message lists what nodewright reads")
        .split(", ")
        .collect();
    let documented: BTreeMap<&str, Vec<&str>> = rows.iter().fold(BTreeMap::new(), |mut m, r| {
        m.entry(r.field.as_str())
            .or_default()
            .push(r.status.as_str());
        m
    });
    for annotation in known {
        match documented.get(annotation) {
            Some(statuses) if statuses.contains(&"supported") && statuses.contains(&"rejected") => {
            }
            other => failures.push(format!(
                "{annotation}: needs a supported and a rejected example, has {other:?}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_requirement_row_is_judged_as_documented_and_a_supported_one_launches() {
    let mut failures = Vec::new();
    for row in rows(REQUIREMENTS) {
        let mut pool = base("NodePool");
        pool["spec"]["template"]["spec"]["requirements"]
            .as_array_mut()
            .unwrap()
            .push(row.example.clone());
        let docs = documents("NodePool", pool);
        let verdict = validate(&docs);
        let what = format!(
            "requirement {}",
            serde_json::to_string(&row.example).unwrap()
        );
        let field = "spec.template.spec.requirements[1]";
        if let Err(e) = judge(&what, field, &row.status, &verdict) {
            failures.push(e);
            continue;
        }
        if row.status != "rejected"
            && let Err(e) = launches(&docs)
        {
            failures.push(format!("{what}: documented {}, but {e}", row.status));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `plan` places one pod of 1 CPU on the NodePool of `docs`.
fn launches(docs: &[Value]) -> Result<(), String> {
    let mut all = docs.to_vec();
    all.push(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}
    }));
    let yaml: String = all
        .iter()
        .map(|d| serde_yaml::to_string(d).unwrap())
        .collect::<Vec<_>>()
        .join("---\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["plan", "-f", "-", "-o", "json", "--fail-on-unschedulable"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "plan exited {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ))
    }
}

/// The `nodewright.io/` names written in the product's source (annotations, labels, taints,
/// tags), tests left out.
fn names_in_source() -> BTreeSet<String> {
    fn walk(dir: &std::path::Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" && name != "testdata" {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") && !name.ends_with("tests.rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                // Up to a test module, the rest of a file is product code.
                let code = text.split("#[cfg(test)]").next().unwrap_or(&text);
                for part in code.split("\"nodewright.io/").skip(1) {
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect();
                    if !name.is_empty() && part[name.len()..].starts_with('"') {
                        out.insert(format!("nodewright.io/{name}"));
                    }
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    for dir in ["shared/src", "functions", "cli/src"] {
        walk(&root().join(dir), &mut out);
    }
    out
}

#[test]
fn every_nodewright_io_name_the_code_writes_or_reads_is_documented() {
    let page = std::fs::read_to_string(root().join("docs/configure.md")).unwrap();
    let names = names_in_source();
    assert!(names.len() >= 10, "the scan found only {names:?}");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !page.contains(&format!("`{n}")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configure.md does not mention {missing:?}"
    );
}
