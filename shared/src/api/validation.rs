//! Validation of loaded NodePools and EC2NodeClasses: the rules Karpenter's CRDs (OpenAPI and
//! CEL) and webhooks enforce, plus the cross-document check that every nodeClassRef resolves.
//! Each problem names the file, the document and the field, and says what is allowed.

mod launchable;
pub mod nodeclass;
mod reservations;
mod syntax;
mod warnings;

use std::collections::{BTreeMap, BTreeSet};

pub use launchable::unlaunchable_family;
pub use nodeclass::node_class_errors;
pub use syntax::{cron_error, label_key_error, label_value_error, restricted_key};
pub use warnings::{node_class_warnings, node_pool_warnings};

use super::defaults::{NODE_CLASS_GROUP, NODE_CLASS_KIND};
use super::diagnostics::{FieldError, Problem, Severity, Source};
use super::load::Inputs;
use super::{Budget, NodePool, NodeSelectorRequirement, Operator, Taint};

/// Karpenter's CRD bound on `minValues`.
const MAX_MIN_VALUES: u32 = 50;
/// The field a NodePool names its EC2NodeClass by, where a class not defined is reported.
pub const NODE_CLASS_REF_NAME: &str = "spec.template.spec.nodeClassRef.name";
/// Budget reasons Karpenter v1 accepts.
const BUDGET_REASONS: &[&str] = &["Underutilized", "Empty", "Drifted"];

/// Checks every NodePool and EC2NodeClass, and that each nodeClassRef names a loaded class.
pub fn validate(inputs: &Inputs) -> Vec<Problem> {
    let mut problems = Vec::new();
    let source_of = |sources: &[Source], i: usize, kind: &str, name: &str| {
        sources.get(i).cloned().unwrap_or_else(|| Source {
            kind: kind.into(),
            name: name.into(),
            ..Source::default()
        })
    };
    let report = |problems: &mut Vec<Problem>,
                  source: &Source,
                  e: FieldError,
                  class: bool,
                  severity: Severity| {
        problems.push(Problem {
            file: source.file.clone(),
            document: source.describe(),
            field: legacy_field(&source.kind, class, &e.field),
            message: legacy_message(&source.kind, &e.field, e.message),
            severity,
        });
    };
    let push = |problems: &mut Vec<Problem>, source: &Source, e: FieldError, class: bool| {
        report(problems, source, e, class, Severity::Error)
    };

    // Objects read only in part are checked too, so one bad field hides nothing else; a pool
    // naming a class that was read in part is not told the class is missing (the class's
    // own errors say what is wrong with it).
    let classes: BTreeSet<&str> = inputs
        .node_classes
        .iter()
        .chain(inputs.partial_node_classes.iter().map(|(c, _)| c))
        .map(|c| c.metadata.name.as_str())
        .collect();
    let pools = inputs
        .node_pools
        .iter()
        .enumerate()
        .map(|(i, np)| {
            let source = source_of(&inputs.node_pool_sources, i, "NodePool", &np.metadata.name);
            (np, source)
        })
        .chain(
            inputs
                .partial_node_pools
                .iter()
                .map(|(np, s)| (np, s.clone())),
        );
    let mut seen_pools = BTreeMap::new();
    for (np, source) in pools {
        if let Some(first) = seen_pools.insert(
            np.metadata.name.clone(),
            format!("{} in {}", source.describe(), source.file),
        ) {
            let message = format!(
                "a NodePool named {:?} is already defined by {first}",
                np.metadata.name
            );
            push(
                &mut problems,
                &source,
                FieldError {
                    field: "metadata.name".into(),
                    message,
                },
                false,
            );
        }
        for e in node_pool_errors(np) {
            push(&mut problems, &source, e, false);
        }
        for w in node_pool_warnings(np) {
            report(&mut problems, &source, w, false, Severity::Warning);
        }
        let r = &np.spec.template.spec.node_class_ref;
        let ours = r.group == NODE_CLASS_GROUP && r.kind == NODE_CLASS_KIND;
        if ours && !r.name.is_empty() && !classes.contains(r.name.as_str()) {
            let known = if classes.is_empty() {
                "none".to_owned()
            } else {
                classes.iter().copied().collect::<Vec<_>>().join(", ")
            };
            let message = format!(
                "EC2NodeClass {:?} is not defined in the inputs; defined: {known}",
                r.name
            );
            push(
                &mut problems,
                &source,
                FieldError {
                    field: NODE_CLASS_REF_NAME.into(),
                    message,
                },
                false,
            );
        }
    }
    let node_classes = inputs
        .node_classes
        .iter()
        .enumerate()
        .map(|(i, nc)| {
            let source = source_of(
                &inputs.node_class_sources,
                i,
                "EC2NodeClass",
                &nc.metadata.name,
            );
            (nc, source)
        })
        .chain(
            inputs
                .partial_node_classes
                .iter()
                .map(|(nc, s)| (nc, s.clone())),
        );
    let mut seen_classes = BTreeMap::new();
    for (nc, source) in node_classes {
        if let Some(first) = seen_classes.insert(
            nc.metadata.name.clone(),
            format!("{} in {}", source.describe(), source.file),
        ) {
            let message = format!(
                "an EC2NodeClass named {:?} is already defined by {first}",
                nc.metadata.name
            );
            push(
                &mut problems,
                &source,
                FieldError {
                    field: "metadata.name".into(),
                    message,
                },
                true,
            );
        }
        let legacy = matches!(source.kind.as_str(), "Provisioner" | "AWSNodeTemplate");
        for e in node_class_errors(nc, legacy) {
            push(&mut problems, &source, e, true);
        }
        for w in node_class_warnings(nc) {
            report(&mut problems, &source, w, true, Severity::Warning);
        }
    }
    problems
}

/// Maps a v1 field path back to where the user wrote it in a v1alpha5 Provisioner or a
/// v1alpha1 AWSNodeTemplate, so the message points at their own document.
fn legacy_field(kind: &str, class: bool, field: &str) -> String {
    let table: &[(&str, &str)] = match (kind, class) {
        ("Provisioner", false) => &[
            ("spec.template.metadata.labels", "spec.labels"),
            ("spec.template.metadata.annotations", "spec.annotations"),
            ("spec.template.spec.nodeClassRef", "spec.providerRef"),
            ("spec.template.spec.", "spec."),
            ("spec.limits", "spec.limits.resources"),
        ],
        ("Provisioner", true) => &[
            // A converted class's alias always comes from the provider's amiFamily.
            ("spec.amiSelectorTerms[0].alias", "spec.provider.amiFamily"),
            ("spec.kubelet", "spec.kubeletConfiguration"),
            ("spec.subnetSelectorTerms", "spec.provider.subnetSelector"),
            (
                "spec.securityGroupSelectorTerms",
                "spec.provider.securityGroupSelector",
            ),
            ("spec.amiSelectorTerms", "spec.provider.amiFamily"),
            ("spec.", "spec.provider."),
        ],
        ("AWSNodeTemplate", _) => &[
            ("spec.amiSelectorTerms[0].alias", "spec.amiFamily"),
            ("spec.subnetSelectorTerms", "spec.subnetSelector"),
            (
                "spec.securityGroupSelectorTerms",
                "spec.securityGroupSelector",
            ),
            ("spec.amiSelectorTerms", "spec.amiSelector"),
        ],
        _ => &[],
    };
    for (v1, old) in table {
        if let Some(rest) = field.strip_prefix(v1) {
            // A selector map became a list of terms; the term index means nothing in the map.
            let rest = if v1.ends_with("SelectorTerms") && rest.starts_with('[') {
                rest.split_once(']').map_or("", |(_, r)| r)
            } else {
                rest
            };
            return format!("{old}{rest}");
        }
    }
    field.to_owned()
}

/// A v1alpha5 Provisioner names an AWSNodeTemplate where a NodePool names an EC2NodeClass.
fn legacy_message(kind: &str, field: &str, message: String) -> String {
    if kind == "Provisioner" && field.starts_with("spec.template.spec.nodeClassRef") {
        message.replacen("EC2NodeClass", "AWSNodeTemplate", 1)
    } else {
        message
    }
}

fn err(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Karpenter's rules for a static NodePool: `replicas` not negative, no `weight`, no limit
/// but `limits.nodes`.
fn static_pool_errors(spec: &crate::api::NodePoolSpec) -> Vec<FieldError> {
    let Some(replicas) = spec.replicas else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    if replicas < 0 {
        errors.push(err(
            "spec.replicas",
            format!("{replicas} is negative; allowed: 0 or more nodes"),
        ));
    }
    if spec.weight.is_some() {
        errors.push(err(
            "spec.weight",
            "not allowed on a static NodePool (replicas set): it launches only for its own count",
        ));
    }
    for name in spec.limits.keys().filter(|k| *k != "nodes") {
        errors.push(err(
            format!("spec.limits.{name}"),
            "not allowed on a static NodePool (replicas set); only limits.nodes is",
        ));
    }
    errors
}

/// Every rule about one NodePool on its own.
pub fn node_pool_errors(np: &NodePool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &np.spec;
    if let Some(w) = spec.weight
        && !(1..=100).contains(&w)
    {
        errors.push(err(
            "spec.weight",
            format!("{w} is out of range; allowed: 1 to 100"),
        ));
    }
    errors.extend(static_pool_errors(spec));
    if spec.template.spec.node_class_ref.name.is_empty() {
        errors.push(err(
            "spec.template.spec.nodeClassRef.name",
            "required: the name of an EC2NodeClass",
        ));
    }
    for (key, value) in &spec.template.metadata.labels {
        let field = format!("spec.template.metadata.labels[{key}]");
        let reason = label_key_error(key)
            .or_else(|| restricted_key(key))
            .or_else(|| label_value_error(value));
        errors.extend(reason.map(|m| err(field, m)));
    }
    for (i, r) in spec.template.spec.requirements.iter().enumerate() {
        errors.extend(
            requirement_errors(r)
                .into_iter()
                .map(|m| err(format!("spec.template.spec.requirements[{i}]{}", m.0), m.1)),
        );
    }
    let mut taints_seen = BTreeSet::new();
    for (list, name) in [
        (&spec.template.spec.taints, "taints"),
        (&spec.template.spec.startup_taints, "startupTaints"),
    ] {
        for (i, t) in list.iter().enumerate() {
            errors.extend(
                taint_errors(t, &mut taints_seen)
                    .map(|(f, m)| err(format!("spec.template.spec.{name}[{i}]{f}"), m)),
            );
        }
    }
    for (name, q) in &spec.limits {
        if let Err(e) = q.milli() {
            errors.push(err(
                format!("spec.limits.{name}"),
                format!("{e}; write a quantity like 1000, 500m, 64Gi"),
            ));
        }
    }
    for (i, b) in spec.disruption.budgets.iter().enumerate() {
        errors.extend(
            budget_errors(b)
                .into_iter()
                .map(|m| err(format!("spec.disruption.budgets[{i}]{}", m.0), m.1)),
        );
    }
    errors
}

/// `(field suffix, message)` for one requirement.
fn requirement_errors(r: &NodeSelectorRequirement) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut add = |suffix: &str, m: String| out.push((suffix.to_owned(), m));
    if let Some(m) = label_key_error(&r.key).or_else(|| restricted_key(&r.key)) {
        add(".key", m);
    }
    let op = format!("{:?}", r.operator);
    match r.operator {
        Operator::In if r.values.is_empty() => {
            add(".values", "operator In needs at least one value".into())
        }
        Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => add(
            ".values",
            format!("operator {op} takes no values, got {}", r.values.len()),
        ),
        Operator::Gt | Operator::Lt => {
            let one_integer = matches!(r.values.as_slice(), [v] if v.parse::<u64>().is_ok());
            if !one_integer {
                add(
                    ".values",
                    format!(
                        "operator {op} needs exactly one non-negative integer value, got {:?}",
                        r.values
                    ),
                );
            }
        }
        _ => {}
    }
    if matches!(r.operator, Operator::In | Operator::NotIn) {
        for (i, v) in r.values.iter().enumerate() {
            if let Some(m) = label_value_error(v) {
                add(&format!(".values[{i}]"), m);
            }
        }
    }
    for (suffix, m) in launchable::requirement_findings(r).errors {
        add(&suffix, m);
    }
    if let Some(min) = r.min_values {
        if !(1..=MAX_MIN_VALUES).contains(&min) {
            add(
                ".minValues",
                format!("{min} is out of range; allowed: 1 to {MAX_MIN_VALUES}"),
            );
        } else if r.operator == Operator::In && (min as usize) > r.values.len() {
            add(
                ".minValues",
                format!(
                    "{min} is more than the {} values listed; list at least {min}",
                    r.values.len()
                ),
            );
        }
    }
    out
}

fn taint_errors(
    t: &Taint,
    seen: &mut BTreeSet<(String, String)>,
) -> impl Iterator<Item = (&'static str, String)> {
    let mut out = Vec::new();
    if let Some(m) = label_key_error(&t.key) {
        out.push((".key", m));
    }
    if let Some(m) = t.value.as_deref().and_then(label_value_error) {
        out.push((".value", m));
    }
    let effect = format!("{:?}", t.effect);
    if !seen.insert((t.key.clone(), effect.clone())) {
        out.push(("", format!("duplicate taint {}:{effect}; each key and effect may appear once across taints and startupTaints", t.key)));
    }
    out.into_iter()
}

fn budget_errors(b: &Budget) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let nodes_ok = match b.nodes.strip_suffix('%') {
        Some(p) => p.parse::<u32>().is_ok_and(|p| p <= 100),
        None => b.nodes.parse::<u64>().is_ok(),
    };
    if !nodes_ok {
        out.push((
            ".nodes".into(),
            format!(
                "{:?} is neither a node count nor a percentage; write e.g. \"5\" or \"10%\"",
                b.nodes
            ),
        ));
    }
    match (&b.schedule, &b.duration) {
        (Some(_), None) => out.push((
            ".duration".into(),
            "required when schedule is set: how long the budget is active".into(),
        )),
        (None, Some(_)) => out.push((
            ".schedule".into(),
            "required when duration is set: when the budget becomes active".into(),
        )),
        _ => {}
    }
    if let Some(m) = b.schedule.as_deref().and_then(cron_error) {
        out.push((".schedule".into(), m));
    }
    for (i, reason) in b.reasons.iter().enumerate() {
        if !BUDGET_REASONS.contains(&reason.as_str()) {
            out.push((
                format!(".reasons[{i}]"),
                format!(
                    "unknown reason {reason:?}; allowed: {}",
                    BUDGET_REASONS.join(", ")
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
