//! The columns the API server prints for each kind (`kubectl get` shows these), and the cells
//! of one object's row.
//!
//! Column names, types, priorities and the rules behind each cell follow the upstream table
//! printers (kubernetes pkg/printers/internalversion/printers.go) for the built-in kinds and
//! the `additionalPrinterColumns` of Karpenter's CRDs for theirs. Priority 1 columns are the
//! ones kubectl shows only with `-o wide`; the server always sends them. Descriptions are
//! our own short words.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::age::since;
use super::jsonpath;
use super::resources::ResourceType;

/// One `meta.k8s.io/v1 TableColumnDefinition`.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub ty: &'static str,
    pub priority: u8,
    pub description: &'static str,
    /// For CRD columns: the JSONPath the cell comes from.
    pub path: &'static str,
}

const fn col(name: &'static str, ty: &'static str, priority: u8, d: &'static str) -> Column {
    Column {
        name,
        ty,
        priority,
        description: d,
        path: "",
    }
}

const fn crd(name: &'static str, ty: &'static str, priority: u8, path: &'static str) -> Column {
    Column {
        name,
        ty,
        priority,
        description: "Custom resource definition column (in JSONPath format)",
        path,
    }
}

const NAME: Column = col(
    "Name",
    "string",
    0,
    "Name of the object, unique in its namespace",
);
const AGE: Column = col("Age", "string", 0, "Time since the object was created");
const CONTAINERS: Column = col(
    "Containers",
    "string",
    1,
    "Names of the template's containers",
);
const IMAGES: Column = col("Images", "string", 1, "Images of the template's containers");
const SELECTOR: Column = col("Selector", "string", 1, "The label selector of the pods");

const PODS: &[Column] = &[
    NAME,
    col(
        "Ready",
        "string",
        0,
        "Ready containers out of all containers",
    ),
    col("Status", "string", 0, "The aggregate status of the pod"),
    col("Restarts", "string", 0, "Restarts of the pod's containers"),
    AGE,
    col("IP", "string", 1, "The pod's IP address"),
    col("Node", "string", 1, "The node the pod is bound to"),
    col(
        "Nominated Node",
        "string",
        1,
        "The node the scheduler nominated",
    ),
    col(
        "Readiness Gates",
        "string",
        1,
        "Readiness gates met out of all",
    ),
];

const NODES: &[Column] = &[
    NAME,
    col("Status", "string", 0, "The status of the node"),
    col("Roles", "string", 0, "The roles of the node"),
    AGE,
    col("Version", "string", 0, "The kubelet's version"),
    col("Internal-IP", "string", 1, "The node's internal address"),
    col("External-IP", "string", 1, "The node's external address"),
    col("OS-Image", "string", 1, "The node's operating system image"),
    col("Kernel-Version", "string", 1, "The node's kernel version"),
    col(
        "Container-Runtime",
        "string",
        1,
        "The node's container runtime",
    ),
];

const EVENTS: &[Column] = &[
    col("Last Seen", "string", 0, "When the event was last seen"),
    col("Type", "string", 0, "Normal or Warning"),
    col("Reason", "string", 0, "Why the event happened"),
    col("Object", "string", 0, "The object the event is about"),
    col("Subobject", "string", 1, "The part of the object"),
    col("Source", "string", 1, "Who reported the event"),
    col("Message", "string", 0, "What happened"),
    col("First Seen", "string", 1, "When the event was first seen"),
    col("Count", "string", 1, "How often the event happened"),
    Column {
        priority: 1,
        ..NAME
    },
];

const DEPLOYMENTS: &[Column] = &[
    NAME,
    col("Ready", "string", 0, "Ready replicas out of desired"),
    col(
        "Up-to-date",
        "integer",
        0,
        "Replicas of the latest template",
    ),
    col("Available", "integer", 0, "Available replicas"),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const REPLICASETS: &[Column] = &[
    NAME,
    col("Desired", "integer", 0, "Desired replicas"),
    col("Current", "integer", 0, "Current replicas"),
    col("Ready", "integer", 0, "Ready replicas"),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const DAEMONSETS: &[Column] = &[
    NAME,
    col("Desired", "integer", 0, "Nodes that should run the pod"),
    col("Current", "integer", 0, "Nodes that run the pod"),
    col("Ready", "integer", 0, "Nodes whose pod is ready"),
    col(
        "Up-to-date",
        "integer",
        0,
        "Nodes running the latest template",
    ),
    col("Available", "integer", 0, "Nodes whose pod is available"),
    col(
        "Node Selector",
        "string",
        0,
        "The pod template's node selector",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const PDBS: &[Column] = &[
    NAME,
    col(
        "Min Available",
        "string",
        0,
        "Pods that must stay available",
    ),
    col(
        "Max Unavailable",
        "string",
        0,
        "Pods that may be unavailable",
    ),
    col(
        "Allowed Disruptions",
        "integer",
        0,
        "Pods that may be disrupted now",
    ),
    AGE,
];

const NAMESPACES: &[Column] = &[
    NAME,
    col("Status", "string", 0, "The namespace's phase"),
    AGE,
];
const CONFIGMAPS: &[Column] = &[NAME, col("Data", "integer", 0, "Number of keys"), AGE];
const LEASES: &[Column] = &[NAME, col("Holder", "string", 0, "Who holds the lease"), AGE];

// The Karpenter CRDs' additionalPrinterColumns (kubernetes-sigs/karpenter
// pkg/apis/crds/karpenter.sh_nodepools.yaml, aws/karpenter-provider-aws
// pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml; the v1alpha5 / v1alpha1 ones from
// the v0.31 release).
const READY_CONDITION: &str = r#".status.conditions[?(@.type=="Ready")].status"#;
const CRD_AGE: Column = crd("Age", "date", 0, ".metadata.creationTimestamp");
const NODEPOOLS: &[Column] = &[
    NAME,
    crd(
        "NodeClass",
        "string",
        0,
        ".spec.template.spec.nodeClassRef.name",
    ),
    crd("Nodes", "string", 0, ".status.resources.nodes"),
    crd("Ready", "string", 0, READY_CONDITION),
    CRD_AGE,
    crd("Weight", "integer", 1, ".spec.weight"),
    crd("CPU", "string", 1, ".status.resources.cpu"),
    crd("Memory", "string", 1, ".status.resources.memory"),
];
const EC2NODECLASSES: &[Column] = &[
    NAME,
    crd("Ready", "string", 0, READY_CONDITION),
    CRD_AGE,
    crd("Role", "string", 1, ".spec.role"),
];
const PROVISIONERS: &[Column] = &[
    NAME,
    crd("Template", "string", 0, ".spec.providerRef.name"),
    crd("Weight", "string", 1, ".spec.weight"),
    CRD_AGE,
];
const DEFAULT: &[Column] = &[NAME, AGE];

/// The columns of a resource's Table.
pub fn columns(rt: &ResourceType) -> &'static [Column] {
    match (rt.group, rt.plural) {
        ("", "pods") => PODS,
        ("", "nodes") => NODES,
        ("", "events") | ("events.k8s.io", "events") => EVENTS,
        ("", "namespaces") => NAMESPACES,
        ("", "configmaps") => CONFIGMAPS,
        ("apps", "deployments") => DEPLOYMENTS,
        ("apps", "replicasets") => REPLICASETS,
        ("apps", "daemonsets") => DAEMONSETS,
        ("policy", "poddisruptionbudgets") => PDBS,
        ("coordination.k8s.io", "leases") => LEASES,
        ("karpenter.sh", "nodepools") => NODEPOOLS,
        ("karpenter.sh", "provisioners") => PROVISIONERS,
        ("karpenter.k8s.aws", "ec2nodeclasses") => EC2NODECLASSES,
        _ => DEFAULT,
    }
}

fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn i(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn or(v: &str, default: &str) -> String {
    if v.is_empty() {
        default.to_string()
    } else {
        v.to_string()
    }
}

fn arr<'a>(obj: &'a Value, ptr: &str) -> &'a [Value] {
    obj.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The cells of one object's row, one per column of [`columns`].
pub fn cells(rt: &ResourceType, obj: &Value, now: Timestamp) -> Vec<Value> {
    let name = json!(s(obj, "/metadata/name"));
    let age = json!(since(
        obj.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
        now
    ));
    match (rt.group, rt.plural) {
        ("", "pods") => pod_cells(obj, name, age),
        ("", "nodes") => node_cells(obj, name, age),
        ("", "events") => event_cells(obj, now),
        ("events.k8s.io", "events") => event_cells(&super::event_view::to_core(obj), now),
        ("", "namespaces") => vec![name, json!(s(obj, "/status/phase")), age],
        ("", "configmaps") => {
            let n = |p: &str| {
                obj.pointer(p)
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len())
            };
            vec![name, json!(n("/data") + n("/binaryData")), age]
        }
        ("apps", "deployments") => {
            let mut c = vec![
                name,
                json!(format!(
                    "{}/{}",
                    i(obj, "/status/readyReplicas"),
                    i(obj, "/spec/replicas")
                )),
                json!(i(obj, "/status/updatedReplicas")),
                json!(i(obj, "/status/availableReplicas")),
                age,
            ];
            c.extend(template_cells(obj));
            c
        }
        ("apps", "replicasets") => {
            let mut c = vec![
                name,
                json!(i(obj, "/spec/replicas")),
                json!(i(obj, "/status/replicas")),
                json!(i(obj, "/status/readyReplicas")),
                age,
            ];
            c.extend(template_cells(obj));
            c
        }
        ("apps", "daemonsets") => {
            let node_selector = obj
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let mut c = vec![
                name,
                json!(i(obj, "/status/desiredNumberScheduled")),
                json!(i(obj, "/status/currentNumberScheduled")),
                json!(i(obj, "/status/numberReady")),
                json!(i(obj, "/status/updatedNumberScheduled")),
                json!(i(obj, "/status/numberAvailable")),
                json!(or(&node_selector, "<none>")),
                age,
            ];
            c.extend(template_cells(obj));
            c
        }
        ("policy", "poddisruptionbudgets") => {
            let int_or_string = |p: &str| match obj.pointer(p) {
                Some(Value::String(v)) => v.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => "N/A".to_string(),
            };
            vec![
                name,
                json!(int_or_string("/spec/minAvailable")),
                json!(int_or_string("/spec/maxUnavailable")),
                json!(i(obj, "/status/disruptionsAllowed")),
                age,
            ]
        }
        ("coordination.k8s.io", "leases") => {
            vec![name, json!(s(obj, "/spec/holderIdentity")), age]
        }
        _ => columns(rt)
            .iter()
            .map(|c| match c.name {
                "Name" => name.clone(),
                _ if c.path.is_empty() => age.clone(),
                _ => crd_cell(c, obj, now),
            })
            .collect(),
    }
}

/// A CRD column's cell: the JSONPath's first value, converted to the column's type; a
/// missing value is `null`, which kubectl prints as `<none>`.
fn crd_cell(c: &Column, obj: &Value, now: Timestamp) -> Value {
    let Some(v) = jsonpath::first(obj, c.path) else {
        return Value::Null;
    };
    match (c.ty, &v) {
        ("date", Value::String(t)) => json!(since(Some(t.as_str()), now)),
        ("string", Value::String(_)) => v.clone(),
        ("string", other) => json!(other.to_string()),
        _ => v.clone(),
    }
}

/// Containers, Images and Selector of a workload's pod template.
fn template_cells(obj: &Value) -> [Value; 3] {
    let containers = arr(obj, "/spec/template/spec/containers");
    let join = |field: &str| {
        containers
            .iter()
            .map(|c| c[field].as_str().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(",")
    };
    let selector = obj
        .pointer("/spec/selector")
        .map(format_label_selector)
        .unwrap_or_default();
    [
        json!(join("name")),
        json!(join("image")),
        json!(or(&selector, "<none>")),
    ]
}

/// metav1.FormatLabelSelector: `a=b,c in (d,e),!f`.
fn format_label_selector(sel: &Value) -> String {
    let mut parts: Vec<String> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or("");
        let values = e["values"]
            .as_array()
            .map(|vs| {
                vs.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        parts.push(match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op} ({values})"),
        });
    }
    parts.join(",")
}

/// READY, STATUS and RESTARTS follow printPod: the phase (or status reason), overridden by
/// a container's waiting or terminated reason, `Terminating` once deletion started.
fn pod_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let total = arr(obj, "/spec/containers").len();
    let mut reason = or(s(obj, "/status/reason"), s(obj, "/status/phase"));
    let mut ready = 0;
    let mut restarts = 0;
    let mut running = false;
    for c in arr(obj, "/status/containerStatuses").iter().rev() {
        restarts += c["restartCount"].as_i64().unwrap_or(0);
        let waiting = s(c, "/state/waiting/reason");
        let terminated = s(c, "/state/terminated/reason");
        if !waiting.is_empty() {
            reason = waiting.to_string();
        } else if !terminated.is_empty() {
            reason = terminated.to_string();
        } else if c.pointer("/state/terminated").is_some() {
            reason = format!("ExitCode:{}", i(c, "/state/terminated/exitCode"));
        } else if c["ready"] == true && c.pointer("/state/running").is_some() {
            running = true;
            ready += 1;
        }
    }
    if reason == "Completed" && running {
        reason = "Running".to_string();
    }
    let gated = arr(obj, "/status/conditions")
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated");
    if gated {
        reason = "SchedulingGated".to_string();
    }
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        reason = if s(obj, "/status/reason") == "NodeLost" {
            "Unknown".to_string()
        } else {
            "Terminating".to_string()
        };
    }
    let gates = arr(obj, "/spec/readinessGates");
    let gates_cell = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let met = gates
            .iter()
            .filter(|g| {
                arr(obj, "/status/conditions")
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        age,
        json!(or(s(obj, "/status/podIP"), "<none>")),
        json!(or(s(obj, "/spec/nodeName"), "<none>")),
        json!(or(s(obj, "/status/nominatedNodeName"), "<none>")),
        json!(gates_cell),
    ]
}

/// STATUS is `Ready` / `NotReady` (anything but a True Ready condition) or `Unknown`
/// without one, plus `SchedulingDisabled` when cordoned; ROLES come from the
/// `node-role.kubernetes.io/<role>` and `kubernetes.io/role` labels.
fn node_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let mut status = match arr(obj, "/status/conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
    {
        Some(c) if c["status"] == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles = BTreeSet::new();
    for (k, v) in obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
            if !role.is_empty() {
                roles.insert(role.to_string());
            }
        } else if k == "kubernetes.io/role" {
            roles.insert(v.as_str().unwrap_or("").to_string());
        }
    }
    roles.remove("");
    let roles = roles.into_iter().collect::<Vec<_>>().join(",");
    let address = |ty: &str| {
        arr(obj, "/status/addresses")
            .iter()
            .find(|a| a["type"] == ty)
            .and_then(|a| a["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    let info = |f: &str| or(s(obj, &format!("/status/nodeInfo/{f}")), "<unknown>");
    vec![
        name,
        json!(status),
        json!(or(&roles, "<none>")),
        age,
        json!(s(obj, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

/// A core/v1 Event's row (printEvent): LAST SEEN falls back to the first timestamp, then to
/// `eventTime`; a series carries its own last time and count.
fn event_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let ts = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
    };
    let first = since(ts("/firstTimestamp").or(ts("/eventTime")), now);
    let mut last = match ts("/lastTimestamp") {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = i(obj, "/count");
    if obj.get("series").is_some_and(Value::is_object) {
        last = since(ts("/series/lastObservedTime"), now);
        count = i(obj, "/series/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = s(obj, "/involvedObject/kind").to_lowercase();
    let target = match s(obj, "/involvedObject/name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = or(s(obj, "/source/component"), s(obj, "/reportingComponent"));
    let host = or(s(obj, "/source/host"), s(obj, "/reportingInstance"));
    let source = match (component.as_str(), host.as_str()) {
        ("", _) => String::new(),
        (c, "") => c.to_string(),
        (c, h) => format!("{c}, {h}"),
    };
    vec![
        json!(last),
        json!(s(obj, "/type")),
        json!(s(obj, "/reason")),
        json!(target),
        json!(s(obj, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(obj, "/message").trim()),
        json!(first),
        json!(count),
        json!(s(obj, "/metadata/name")),
    ]
}
