//! Reading configuration and workloads from YAML/JSON documents into typed values.
//!
//! Every document is first turned into a `serde_json::Value` and then into its typed struct
//! through `serde_path_to_error`, so a mistake is reported with the field path it sits at.
//! One bad document never stops the others from loading: each failure becomes a [`Problem`].
//!
//! Past ~450 lines on purpose: every kind's loading goes through one dispatcher and its
//! error reporting; the diagnostics vocabulary lives apart, in `diagnostics.rs`.

use std::path::Path;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::diagnostics::{FieldError, Problem, Severity, Source, describe};
use super::legacy::{self, AWSNodeTemplate, V1Alpha5Provisioner};
use super::{EC2NodeClass, KubeletConfiguration, NodeOverlay, NodePool, defaults, workloads};

/// A kubelet configuration from a v1alpha5 Provisioner that references an AWSNodeTemplate not
/// loaded yet; it is moved onto the EC2NodeClass when that arrives (Karpenter v1 keeps kubelet
/// settings on the EC2NodeClass).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingKubelet {
    pub node_class: String,
    pub provisioner: Source,
    pub kubelet: KubeletConfiguration,
}

/// Everything read from the inputs, with legacy kinds converted to v1, defaults applied and
/// workloads expanded into pods.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub node_pools: Vec<NodePool>,
    /// Parallel to `node_pools`.
    pub node_pool_sources: Vec<Source>,
    pub node_classes: Vec<EC2NodeClass>,
    /// Parallel to `node_classes`.
    pub node_class_sources: Vec<Source>,
    /// Bare pods and the pods expanded from Deployments, ReplicaSets, StatefulSets and Jobs.
    pub pods: Vec<Pod>,
    pub daemon_sets: Vec<DaemonSet>,
    /// Valid NodeOverlays (`karpenter.sh/v1alpha1`); an invalid one is a problem, not used.
    pub node_overlays: Vec<NodeOverlay>,
    /// The Namespaces' labels, for pod (anti-)affinity terms with a `namespaceSelector`.
    pub namespace_labels: crate::scheduling::NamespaceLabels,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses, for where pods with
    /// claims may run.
    pub volume_objects: crate::scheduling::VolumeObjects,
    /// Non-empty documents read (a `List` counts once).
    pub documents: usize,
    /// Objects of a kind nodewright reads (each item of a `List` counts), valid or not.
    pub objects: usize,
    /// Kubelet settings from Provisioners whose AWSNodeTemplate has not been loaded yet.
    pub pending_kubelet: Vec<PendingKubelet>,
    /// NodePools and EC2NodeClasses read only in part (a field failed and was set aside; its
    /// error is among the problems). Never used: [`super::validate`] looks at the rest of
    /// them, so one bad field does not hide the next problem.
    pub partial_node_pools: Vec<(NodePool, Source)>,
    pub partial_node_classes: Vec<(EC2NodeClass, Source)>,
}

/// The kinds nodewright reads, for the message about any other kind.
pub const KNOWN_KINDS: &[&str] = &[
    "NodePool",
    "EC2NodeClass",
    "Provisioner",
    "AWSNodeTemplate",
    "NodeOverlay",
    "Pod",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "Job",
    "DaemonSet",
    "Namespace",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "List",
];

/// Where one object sits, for naming it in problems.
struct At<'a> {
    file: &'a str,
    index: usize,
    item: Option<usize>,
}

impl Inputs {
    /// Loads every document of a YAML (or JSON) text. Returns the problems found; the objects
    /// that loaded are added to `self` whatever happened to the others.
    pub fn load_str(&mut self, file: &str, text: &str) -> Vec<Problem> {
        let mut problems = Vec::new();
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            // JSON: one object, or an array of objects. YAML would mostly read it too, but
            // serde_json reports positions in JSON terms and accepts tab indentation.
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(items)) => {
                    for (i, item) in items.into_iter().enumerate() {
                        problems.extend(self.load_value(file, i + 1, item));
                    }
                }
                Ok(value) => problems.extend(self.load_value(file, 1, value)),
                Err(e) => problems.push(Problem {
                    file: file.into(),
                    document: String::new(),
                    field: String::new(),
                    message: format!("not valid JSON: {e}"),
                    severity: Severity::Error,
                }),
            }
            return problems;
        }
        for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let index = i + 1;
            match Value::deserialize(doc) {
                Ok(value) => problems.extend(self.load_value(file, index, value)),
                Err(e) => {
                    problems.push(Problem {
                        file: file.into(),
                        document: describe("", "", index, None),
                        field: String::new(),
                        message: format!("not valid YAML: {e}"),
                        severity: Severity::Error,
                    });
                    // After a syntax error the YAML parser cannot find the next document.
                    break;
                }
            }
        }
        problems
    }

    /// Loads one object (a document, or a custom resource read from a cluster).
    pub fn load_value(&mut self, file: &str, index: usize, value: Value) -> Vec<Problem> {
        let mut problems = Vec::new();
        if is_empty_document(&value) {
            return problems;
        }
        self.documents += 1;
        self.load_object(
            &At {
                file,
                index,
                item: None,
            },
            value,
            &mut problems,
        );
        problems
    }

    /// Loads every file; a file that cannot be read is a problem, not a failure.
    pub fn load_files(paths: &[impl AsRef<Path>]) -> (Inputs, Vec<Problem>) {
        let mut inputs = Inputs::default();
        let mut problems = Vec::new();
        for path in paths {
            let path = path.as_ref();
            let file = path.display().to_string();
            match std::fs::read_to_string(path) {
                Ok(text) => problems.extend(inputs.load_str(&file, &text)),
                Err(e) => problems.push(Problem {
                    file,
                    document: String::new(),
                    field: String::new(),
                    message: format!("cannot read the file: {e}"),
                    severity: Severity::Error,
                }),
            }
        }
        (inputs, problems)
    }

    fn load_object(&mut self, at: &At<'_>, value: Value, problems: &mut Vec<Problem>) {
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
        let kind = text(&value, "kind").unwrap_or_default();
        let api_version = text(&value, "apiVersion").unwrap_or_default();
        let name = value
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let document = describe(&kind, &name, at.index, at.item);
        let problem = |field: &str, message: String, severity| Problem {
            file: at.file.into(),
            document: document.clone(),
            field: field.into(),
            message,
            severity,
        };
        let source = Source {
            file: at.file.into(),
            index: at.index,
            kind: kind.clone(),
            name,
        };

        let expected = match kind.as_str() {
            "" => {
                problems.push(problem(
                    "kind",
                    "missing: every document needs a kind".into(),
                    Severity::Error,
                ));
                return;
            }
            "List" => {
                self.load_list(at, value, problems);
                return;
            }
            "NodePool" => &["karpenter.sh/v1", "karpenter.sh/v1beta1"][..],
            "EC2NodeClass" => &["karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1"][..],
            "Provisioner" => &["karpenter.sh/v1alpha5"][..],
            "AWSNodeTemplate" => &["karpenter.k8s.aws/v1alpha1"][..],
            "NodeOverlay" => &["karpenter.sh/v1alpha1"][..],
            "Pod" | "Namespace" | "PersistentVolumeClaim" | "PersistentVolume" => &["v1"][..],
            "StorageClass" => &["storage.k8s.io/v1"][..],
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" => &["apps/v1"][..],
            "Job" => &["batch/v1"][..],
            other => {
                problems.push(problem(
                    "kind",
                    format!(
                        "kind {other} is not used by nodewright; expected one of {}",
                        KNOWN_KINDS.join(", ")
                    ),
                    Severity::Warning,
                ));
                return;
            }
        };
        self.objects += 1;
        if !expected.contains(&api_version.as_str()) {
            problems.push(problem(
                "apiVersion",
                format!(
                    "{:?} is not a supported apiVersion for kind {kind}; allowed: {}",
                    api_version,
                    expected.join(", ")
                ),
                Severity::Error,
            ));
            return;
        }

        let mut notes = Vec::new();
        // Every field that fails to read, not just the first (see `every_error`).
        let mut field_errors = Vec::new();
        let loaded: Result<(), FieldError> = match kind.as_str() {
            "NodePool" => {
                let value = if api_version.ends_with("v1beta1") {
                    legacy::upgrade_v1beta1_node_pool(value, &mut notes)
                } else {
                    value
                };
                parse_reporting::<NodePool>(value, &mut field_errors, true).map(|mut np| {
                    defaults::default_node_pool(&mut np);
                    if field_errors.is_empty() {
                        self.add_node_pool(np, source.clone());
                    } else {
                        self.partial_node_pools.push((np, source.clone()));
                    }
                })
            }
            "EC2NodeClass" => {
                parse_reporting::<EC2NodeClass>(value, &mut field_errors, true).map(|mut nc| {
                    if field_errors.is_empty() {
                        self.add_node_class(nc, source.clone(), problems, &document);
                    } else {
                        defaults::default_node_class(&mut nc);
                        self.partial_node_classes.push((nc, source.clone()));
                    }
                })
            }
            "Provisioner" => parse_reporting::<V1Alpha5Provisioner>(value, &mut field_errors, true)
                .map(|p| {
                    let converted = legacy::convert_provisioner(&p);
                    let failed = !field_errors.is_empty() || legacy::has_errors(&converted.notes);
                    notes.extend(converted.notes);
                    let mut np = converted.node_pool;
                    defaults::default_node_pool(&mut np);
                    if failed {
                        // Converted as far as it goes, so validation finds every other problem.
                        if let Some(mut nc) = converted.node_class {
                            defaults::default_node_class(&mut nc);
                            self.partial_node_classes.push((nc, source.clone()));
                        }
                        self.partial_node_pools.push((np, source.clone()));
                        return;
                    }
                    if let Some(nc) = converted.node_class {
                        self.add_node_class(nc, source.clone(), problems, &document);
                    }
                    if let Some(kubelet) = converted.kubelet_for_ref {
                        let class = np.spec.template.spec.node_class_ref.name.clone();
                        self.attach_kubelet(class, source.clone(), kubelet, problems, &document);
                    }
                    self.add_node_pool(np, source.clone());
                }),
            "AWSNodeTemplate" => parse_reporting::<AWSNodeTemplate>(value, &mut field_errors, true)
                .map(|t| {
                    let converted = legacy::convert_node_template(&t);
                    let failed = !field_errors.is_empty() || legacy::has_errors(&converted.notes);
                    notes.extend(converted.notes);
                    let mut nc = converted.node_class;
                    if failed {
                        defaults::default_node_class(&mut nc);
                        self.partial_node_classes.push((nc, source.clone()));
                    } else {
                        self.add_node_class(nc, source.clone(), problems, &document);
                    }
                }),
            "NodeOverlay" => {
                parse_reporting::<NodeOverlay>(value, &mut field_errors, true).map(|o| {
                    let rules = super::node_overlay_errors(&o);
                    if field_errors.is_empty() && rules.is_empty() {
                        self.node_overlays.push(o);
                    }
                    field_errors.extend(rules);
                })
            }
            "Pod" => parse_reporting::<Pod>(value, &mut field_errors, false)
                .map(|pod| self.pods.push(workloads::bare_pod(pod))),
            "Deployment" => parse_reporting::<Deployment>(value, &mut field_errors, false)
                .map(|d| self.pods.extend(workloads::deployment_pods(&d))),
            "ReplicaSet" => parse_reporting::<ReplicaSet>(value, &mut field_errors, false)
                .map(|r| self.pods.extend(workloads::replica_set_pods(&r))),
            "StatefulSet" => parse_reporting::<StatefulSet>(value, &mut field_errors, false)
                .map(|s| self.pods.extend(workloads::stateful_set_pods(&s))),
            "Job" => parse_reporting::<Job>(value, &mut field_errors, false)
                .map(|j| self.pods.extend(workloads::job_pods(&j))),
            "DaemonSet" => parse_reporting::<DaemonSet>(value, &mut field_errors, false)
                .map(|d| self.daemon_sets.push(d)),
            "Namespace" => parse_reporting::<Namespace>(value, &mut field_errors, false).map(|n| {
                let name = n.metadata.name.unwrap_or_default();
                let labels = n.metadata.labels.unwrap_or_default();
                self.namespace_labels.insert(name, labels);
            }),
            "PersistentVolumeClaim" => {
                parse_reporting::<PersistentVolumeClaim>(value, &mut field_errors, false)
                    .map(|c| self.volume_objects.add_claim(c))
            }
            "PersistentVolume" => {
                parse_reporting::<PersistentVolume>(value, &mut field_errors, false)
                    .map(|v| self.volume_objects.add_volume(v))
            }
            "StorageClass" => parse_reporting::<StorageClass>(value, &mut field_errors, false)
                .map(|c| self.volume_objects.add_class(c)),
            _ => Ok(()),
        };
        for e in field_errors {
            problems.push(problem(&e.field, e.message, Severity::Error));
        }
        if let Err(e) = loaded {
            problems.push(problem(&e.field, e.message, Severity::Error));
        }
        for note in notes {
            problems.push(problem(&note.field, note.message, note.severity));
        }
    }

    fn load_list(&mut self, at: &At<'_>, value: Value, problems: &mut Vec<Problem>) {
        let items = match value {
            Value::Object(mut map) => map.remove("items"),
            _ => None,
        };
        match items {
            Some(Value::Array(items)) => {
                for (i, item) in items.into_iter().enumerate() {
                    if is_empty_document(&item) {
                        continue;
                    }
                    // Items of a nested List keep the outer item number: that is what a reader
                    // can count in the file.
                    let item_at = At {
                        file: at.file,
                        index: at.index,
                        item: Some(at.item.unwrap_or(i)),
                    };
                    self.load_object(&item_at, item, problems);
                }
            }
            None | Some(Value::Null) => {}
            Some(_) => problems.push(Problem {
                file: at.file.into(),
                document: describe("List", "", at.index, at.item),
                field: "items".into(),
                message: "expected a list of objects".into(),
                severity: Severity::Error,
            }),
        }
    }

    fn add_node_pool(&mut self, np: NodePool, source: Source) {
        self.node_pools.push(np);
        self.node_pool_sources.push(source);
    }

    fn add_node_class(
        &mut self,
        mut nc: EC2NodeClass,
        source: Source,
        problems: &mut Vec<Problem>,
        document: &str,
    ) {
        defaults::default_node_class(&mut nc);
        let name = nc.metadata.name.clone();
        let (waiting, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_kubelet)
            .into_iter()
            .partition(|p| p.node_class == name);
        self.pending_kubelet = rest;
        self.node_classes.push(nc);
        self.node_class_sources.push(source);
        for p in waiting {
            self.attach_kubelet(p.node_class, p.provisioner, p.kubelet, problems, document);
        }
    }

    /// Puts a Provisioner's kubelet settings on the class it references, now or when the class
    /// arrives. Two Provisioners sharing a template with different settings cannot both be
    /// honoured on one EC2NodeClass, which is a problem the user must resolve.
    fn attach_kubelet(
        &mut self,
        class: String,
        provisioner: Source,
        kubelet: KubeletConfiguration,
        problems: &mut Vec<Problem>,
        document: &str,
    ) {
        let Some(nc) = self
            .node_classes
            .iter_mut()
            .find(|c| c.metadata.name == class)
        else {
            self.pending_kubelet.push(PendingKubelet {
                node_class: class,
                provisioner,
                kubelet,
            });
            return;
        };
        match &nc.spec.kubelet {
            None => nc.spec.kubelet = Some(kubelet),
            Some(existing) if *existing == kubelet => {}
            Some(_) => problems.push(Problem {
                file: provisioner.file.clone(),
                document: if provisioner.kind.is_empty() {
                    document.into()
                } else {
                    provisioner.describe()
                },
                field: "spec.kubeletConfiguration".into(),
                message: format!(
                    "AWSNodeTemplate {class:?} already carries a different kubeletConfiguration \
                     from another Provisioner; Karpenter v1 keeps kubelet settings on the \
                     EC2NodeClass, so give each Provisioner its own AWSNodeTemplate"
                ),
                severity: Severity::Error,
            }),
        }
    }
}

fn is_empty_document(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// Deserializes `value` as `T`, turning a failure into the field path and a plain sentence.
pub fn parse<T: DeserializeOwned>(value: Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        explain_serde(&path, &e.into_inner().to_string())
    })
}

/// [`parse`], going on past the first bad field (see [`super::every_error`]). With
/// `partial`, the object read with what failed set aside is returned and every error pushed
/// onto `errors`; otherwise such an object is dropped. When no object comes back, every
/// error but the last is pushed and the last returned, so the errors keep their order.
fn parse_reporting<T: DeserializeOwned>(
    value: Value,
    errors: &mut Vec<FieldError>,
    partial: bool,
) -> Result<T, FieldError> {
    let (parsed, mut found) = super::every_error::parse_every::<T>(value);
    match parsed.filter(|_| partial || found.is_empty()) {
        Some(object) => {
            errors.extend(found);
            Ok(object)
        }
        None => {
            let last = found.pop().unwrap_or_else(|| FieldError {
                field: String::new(),
                message: "cannot be read".into(),
            });
            errors.extend(found);
            Err(last)
        }
    }
}

/// The names between backticks in a serde message (`unknown variant `X`, expected ...`).
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Rewrites serde's terse messages into sentences that say what is allowed, and moves the
/// name of a missing or unknown field into the path.
pub fn explain_serde(path: &str, raw: &str) -> FieldError {
    let join = |path: &str, key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    let at = |field: String, message: String| FieldError { field, message };
    let names = backticked(raw);
    if raw.starts_with("unknown variant") {
        let (got, allowed) = names
            .split_first()
            .map(|(g, a)| (*g, a.join(", ")))
            .unwrap_or_default();
        let what = if path.ends_with("operator") {
            "operator"
        } else if path.ends_with("effect") {
            "taint effect"
        } else {
            "value"
        };
        return at(
            path.into(),
            format!("unknown {what} {got:?}; allowed: {allowed}"),
        );
    }
    if raw.starts_with("unknown field") {
        let (got, allowed) = names
            .split_first()
            .map(|(g, a)| (*g, a.join(", ")))
            .unwrap_or_default();
        // serde_path_to_error already records the unknown key as the last path segment.
        let field = if path.ends_with(got) {
            path.to_owned()
        } else {
            join(path, got)
        };
        let allowed = if allowed.is_empty() {
            "none".to_owned()
        } else {
            allowed
        };
        return at(
            field,
            format!("unknown field {got:?}; allowed fields here: {allowed}"),
        );
    }
    if raw.starts_with("missing field") {
        let got = names.first().copied().unwrap_or_default();
        return at(
            join(path, got),
            format!("required field {got:?} is missing"),
        );
    }
    if raw.contains("did not match any variant of untagged enum") {
        return at(
            path.into(),
            "expected a quantity: a number or a string like 500m, 4Gi, 1000".into(),
        );
    }
    if let Some(rest) = raw.strip_prefix("invalid type: ") {
        return at(path.into(), format!("wrong type: got {rest}"));
    }
    if let Some(rest) = raw.strip_prefix("invalid value: ") {
        return at(path.into(), format!("invalid value: got {rest}"));
    }
    at(path.into(), raw.into())
}

#[cfg(test)]
mod tests;
