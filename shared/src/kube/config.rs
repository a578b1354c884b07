//! Where the NodePools come from (cluster CRDs, a ConfigMap, or the stack's defaults), and
//! which of the loaded documents are usable: an invalid NodePool is skipped, it does not
//! block the valid ones.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::api::{EC2NodeClass, NodePool};
use crate::api::{Inputs, Problem, Source};

use super::ports::ObjectKind;
use crate::api::NODE_CLASS_REF_NAME;
use crate::disruption::ClassReadiness;

/// Where the configuration of one load came from, in DESIGN's priority order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// Karpenter's CRD objects in the cluster.
    Crds,
    /// YAML documents in a ConfigMap.
    ConfigMap { namespace: String, name: String },
    /// The one NodePool built from the stack's parameters.
    Default,
}

/// One configuration load: what was read, what is wrong with it, and where it came from.
#[derive(Debug, Clone)]
pub struct ConfigLoad {
    pub inputs: Inputs,
    pub problems: Vec<Problem>,
    pub source: ConfigOrigin,
}

/// The ConfigMap read when no Karpenter CRD holds a NodePool.
pub const DEFAULT_CONFIG_MAP_NAMESPACE: &str = "kube-system";
pub const DEFAULT_CONFIG_MAP_NAME: &str = "nodewright";

/// The file label of one ConfigMap key in problems: `configmap/<ns>/<name>/<key>`.
pub fn config_map_file(namespace: &str, name: &str, key: &str) -> String {
    format!("configmap/{namespace}/{name}/{key}")
}

/// The file label of one object read from the cluster: `cluster/<plural>.<group>/<name>`.
pub fn cluster_file(plural: &str, group: &str, name: &str) -> String {
    format!("cluster/{plural}.{group}/{name}")
}

/// True when a load found a NodePool (or a legacy Provisioner), valid or not: then that
/// source is the configuration, and a broken NodePool is reported rather than silently
/// replaced by a lower-priority source.
pub fn holds_node_pool(inputs: &Inputs, problems: &[Problem]) -> bool {
    !inputs.node_pools.is_empty()
        || problems
            .iter()
            .any(|p| p.document.starts_with("NodePool") || p.document.starts_with("Provisioner"))
}

/// The stack parameters the default NodePool is built from (SAM template parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefaultPoolParams {
    pub cluster_name: String,
    /// IAM role name of the nodes (EC2NodeClass `spec.role`).
    pub node_role: String,
    /// `spot`, `on-demand`; empty leaves Karpenter's default (on-demand).
    pub capacity_types: Vec<String>,
    /// `amd64`, `arm64`; empty allows both.
    pub architectures: Vec<String>,
    /// Instance categories such as `c`, `m`, `r`; empty allows all.
    pub instance_categories: Vec<String>,
    /// The pool's CPU limit as a quantity (`"100"`, `"1000"`); `None` is unlimited.
    pub cpu_limit: Option<String>,
    /// `al2023@latest`, `bottlerocket@latest`, ...
    pub ami_alias: String,
}

/// The values of a stack parameter of type `CommaDelimitedList`, as CloudFormation joins
/// them into an environment variable or DescribeStacks shows them; empty values dropped.
pub fn comma_separated(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// The file label problems with the default pool carry.
pub const DEFAULT_POOL_FILE: &str = "stack parameters (default NodePool)";

/// The default NodePool `default` and EC2NodeClass `default`, as the documents a user would
/// write, so they go through the same loader, defaults and validation as any other source.
/// Subnets and security groups are found by the `karpenter.sh/discovery: <cluster>` tag,
/// the convention of Karpenter's getting-started guide.
pub fn default_pool_documents(params: &DefaultPoolParams) -> [Value; 2] {
    let mut requirements =
        vec![json!({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]})];
    for (key, values) in [
        ("karpenter.sh/capacity-type", &params.capacity_types),
        ("kubernetes.io/arch", &params.architectures),
        (
            "karpenter.k8s.aws/instance-category",
            &params.instance_categories,
        ),
    ] {
        if !values.is_empty() {
            requirements.push(json!({"key": key, "operator": "In", "values": values}));
        }
    }
    let mut node_pool = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": requirements,
        }}},
    });
    if let Some(cpu) = &params.cpu_limit {
        node_pool["spec"]["limits"] = json!({"cpu": cpu});
    }
    let discovery = json!([{"tags": {"karpenter.sh/discovery": params.cluster_name}}]);
    let node_class = json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": params.node_role,
            "amiSelectorTerms": [{"alias": params.ami_alias}],
            "subnetSelectorTerms": discovery,
            "securityGroupSelectorTerms": discovery,
        },
    });
    [node_pool, node_class]
}

/// Loads the default pool documents into fresh `Inputs`.
pub fn default_pool_inputs(params: &DefaultPoolParams) -> (Inputs, Vec<Problem>) {
    let mut inputs = Inputs::default();
    let mut problems = Vec::new();
    for (i, doc) in default_pool_documents(params).into_iter().enumerate() {
        problems.extend(inputs.load_value(DEFAULT_POOL_FILE, i + 1, doc));
    }
    (inputs, problems)
}

/// A NodePool or an EC2NodeClass by kind and name: what [`usable`] says it dropped, and
/// what an event about it is attached to. Shown as `Kind/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    pub name: String,
}

impl ObjectRef {
    pub fn node_pool(name: &str) -> ObjectRef {
        ObjectRef {
            kind: ObjectKind::NodePool,
            name: name.to_string(),
        }
    }

    pub fn node_class(name: &str) -> ObjectRef {
        ObjectRef {
            kind: ObjectKind::EC2NodeClass,
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind.kind(), self.name)
    }
}

/// The NodePools and EC2NodeClasses that can be used, and why each other one was dropped,
/// as `(object, message)`. A document with an Error-level problem is dropped; so is a
/// NodePool whose nodeClassRef names a class that was dropped or never loaded.
///
/// Problems are matched to documents by the `document` string the loader writes, which is
/// what `Source::describe` returns for the document an object came from.
pub fn usable(
    inputs: &Inputs,
    problems: &[Problem],
) -> (Vec<NodePool>, Vec<EC2NodeClass>, Vec<(ObjectRef, String)>) {
    let errors_of = |source: Option<&Source>| document_errors(problems, source);
    let mut dropped = Vec::new();

    let mut classes = Vec::new();
    for (i, nc) in inputs.node_classes.iter().enumerate() {
        match errors_of(inputs.node_class_sources.get(i)) {
            Some(why) => dropped.push((ObjectRef::node_class(&nc.metadata.name), why)),
            None => classes.push(nc.clone()),
        }
    }
    let class_names: BTreeSet<&str> = classes.iter().map(|c| c.metadata.name.as_str()).collect();

    let mut pools = Vec::new();
    for (i, np) in inputs.node_pools.iter().enumerate() {
        let key = ObjectRef::node_pool(&np.metadata.name);
        if let Some(why) = errors_of(inputs.node_pool_sources.get(i)) {
            dropped.push((key, why));
            continue;
        }
        let class = &np.spec.template.spec.node_class_ref.name;
        if !class_names.contains(class.as_str()) {
            let state = if inputs
                .node_classes
                .iter()
                .any(|c| &c.metadata.name == class)
            {
                "is invalid"
            } else {
                "is not defined"
            };
            dropped.push((
                key,
                format!("spec.template.spec.nodeClassRef.name: EC2NodeClass {class:?} {state}"),
            ));
            continue;
        }
        pools.push(np.clone());
    }
    (pools, classes, dropped)
}

/// The Error-level problems of the document `source` came from, joined; `None` when it has
/// none.
fn document_errors(problems: &[Problem], source: Option<&Source>) -> Option<String> {
    document_errors_but(problems, source, None)
}

/// [`document_errors`] less those on the field `but`.
fn document_errors_but(
    problems: &[Problem],
    source: Option<&Source>,
    but: Option<&str>,
) -> Option<String> {
    let s = source?;
    let document = s.describe();
    let messages: Vec<String> = problems
        .iter()
        .filter(|p| p.is_error() && !p.document.is_empty())
        .filter(|p| Some(p.field.as_str()) != but)
        .filter(|p| p.file == s.file && same_document(&p.document, &document))
        .map(|p| {
            if p.field.is_empty() {
                p.message.clone()
            } else {
                format!("{}: {}", p.field, p.message)
            }
        })
        .collect();
    (!messages.is_empty()).then(|| messages.join("; "))
}

/// Each NodePool's readiness as its status conditions say it: (name, why the NodePool
/// itself is invalid, what its EC2NodeClass is), from the same checks as [`usable`].
pub fn pool_readiness(
    inputs: &Inputs,
    problems: &[Problem],
) -> Vec<(String, Option<String>, ClassReadiness)> {
    let class_errors = |name: &str| {
        let i = inputs
            .node_classes
            .iter()
            .position(|c| c.metadata.name == name)?;
        Some(document_errors(problems, inputs.node_class_sources.get(i)))
    };
    inputs
        .node_pools
        .iter()
        .enumerate()
        .map(|(i, np)| {
            let class = match class_errors(&np.spec.template.spec.node_class_ref.name) {
                None => ClassReadiness::NotFound,
                Some(None) => ClassReadiness::Ready,
                Some(Some(why)) => ClassReadiness::NotReady(why),
            };
            // A class not found is said by NodeClassReady, as Karpenter says it, not as
            // the NodePool failing validation.
            let but = (class == ClassReadiness::NotFound).then_some(NODE_CLASS_REF_NAME);
            let own = document_errors_but(problems, inputs.node_pool_sources.get(i), but);
            (np.metadata.name.clone(), own, class)
        })
        .collect()
}

/// True when a problem's `document` names the document `describe` names. An item of a `List`
/// is described as `NodePool/a (document 1, item 2)` while its `Source` (which has no item
/// number) describes as `NodePool/a (document 1)`, so the item suffix is allowed.
fn same_document(problem_document: &str, described: &str) -> bool {
    if problem_document == described {
        return true;
    }
    described
        .strip_suffix(')')
        .and_then(|stem| problem_document.strip_prefix(stem))
        .is_some_and(|rest| rest.starts_with(", item "))
}

#[cfg(test)]
mod tests;
