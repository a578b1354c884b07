//! `karpenter.sh/v1alpha1` NodeOverlay, field for field: a price (or a change to it) and
//! extended resources for the instance types, offerings and NodePools its requirements
//! select, as Karpenter's scheduling simulation sees them. What it does is
//! `scheduling::overlay`; here is what it says and Karpenter's CRD rules on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::diagnostics::FieldError;
use super::{Meta, Quantity};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlay {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: NodeOverlaySpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeOverlaySpec {
    #[serde(default)]
    pub requirements: Vec<OverlayRequirement>,
    /// A change to the price: `-0.5`, `+1.2` (dollars an hour) or `+10%`, `-15%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_adjustment: Option<String>,
    /// The price itself, dollars an hour: `0.05`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<String>,
    /// Extended resources added to the node's (never cpu, memory, ephemeral-storage, pods).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// 1..=10000; the heaviest matching overlay sets the price, and each resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// Karpenter's `NodeSelectorRequirement` of an overlay: the node selector operators and
/// `Gte` / `Lte`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverlayRequirement {
    pub key: String,
    pub operator: OverlayOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OverlayOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

/// Resources an overlay may not add: the instance type's own.
const RESTRICTED: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pods"];

/// What an overlay does to a price, read once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceChange {
    Set(f64),
    Add(f64),
    Percent(f64),
}

impl PriceChange {
    /// The new price, never below zero (Karpenter's `AdjustedPrice`).
    pub fn apply(self, price: f64) -> f64 {
        let changed = match self {
            PriceChange::Set(p) => p,
            PriceChange::Add(d) => price + d,
            PriceChange::Percent(p) => price * (1.0 + p / 100.0),
        };
        changed.max(0.0)
    }
}

impl NodeOverlay {
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }

    /// Its price change, if it has a valid one.
    pub fn price_change(&self) -> Option<PriceChange> {
        match (&self.spec.price, &self.spec.price_adjustment) {
            (Some(p), None) => parse_price(p).ok(),
            (None, Some(a)) => parse_adjustment(a).ok(),
            _ => None,
        }
    }
}

fn err(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// `^\d+(\.\d+)?$`, as Karpenter's CRD.
fn parse_price(text: &str) -> Result<PriceChange, String> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let well_formed = match text.split_once('.') {
        Some((whole, frac)) => digits(whole) && digits(frac),
        None => digits(text),
    };
    match (well_formed, text.parse::<f64>()) {
        (true, Ok(p)) => Ok(PriceChange::Set(p)),
        _ => Err(format!(
            "{text:?} is not a price; write dollars an hour, such as 0.05"
        )),
    }
}

/// A signed amount (`+0.5`, `-1.2`) or percentage (`+10%`, `-15%`, at most `-100%`).
fn parse_adjustment(text: &str) -> Result<PriceChange, String> {
    let bad = || {
        format!(
            "{text:?} is not a price adjustment; write +0.5, -0.5, +10% or -15% (at most -100%)"
        )
    };
    let sign = match text.as_bytes().first() {
        Some(b'+') => 1.0,
        Some(b'-') => -1.0,
        _ => return Err(bad()),
    };
    let body = &text[1..];
    let (number, percent) = match body.strip_suffix('%') {
        Some(n) => (n, true),
        None => (body, false),
    };
    let ok_number = !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.bytes().filter(|b| *b == b'.').count() <= 1
        && !number.ends_with('.');
    let value: f64 = match (ok_number, number.parse::<f64>()) {
        (true, Ok(v)) => sign * v,
        _ => return Err(bad()),
    };
    // Karpenter's pattern: a decrease of one or two digits (and decimals), or `-100%`.
    let whole = number.split('.').next().unwrap_or_default();
    if percent && sign < 0.0 && !(whole.len() <= 2 || text == "-100%") {
        return Err(bad());
    }
    Ok(if percent {
        PriceChange::Percent(value)
    } else {
        PriceChange::Add(value)
    })
}

/// Every rule of Karpenter's CRD about one NodeOverlay.
pub fn node_overlay_errors(o: &NodeOverlay) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &o.spec;
    match (&spec.price, &spec.price_adjustment) {
        (Some(_), Some(_)) => {
            errors.push(err("spec", "cannot set both 'price' and 'priceAdjustment'"))
        }
        (Some(p), None) => errors.extend(parse_price(p).err().map(|m| err("spec.price", m))),
        (None, Some(a)) => errors.extend(
            parse_adjustment(a)
                .err()
                .map(|m| err("spec.priceAdjustment", m)),
        ),
        (None, None) => {}
    }
    if let Some(w) = spec.weight
        && !(1..=10_000).contains(&w)
    {
        errors.push(err(
            "spec.weight",
            format!("{w} is out of range; allowed: 1 to 10000"),
        ));
    }
    for (name, q) in &spec.capacity {
        let field = format!("spec.capacity.{name}");
        if RESTRICTED.contains(&name.as_str()) {
            errors.push(err(
                field,
                "invalid resource restricted: an overlay adds extended resources only",
            ));
        } else if let Err(e) = q.milli() {
            errors.push(err(field, format!("{e}; write a quantity like 1 or 500m")));
        }
    }
    if spec.requirements.len() > 100 {
        errors.push(err("spec.requirements", "at most 100 requirements"));
    }
    for (i, r) in spec.requirements.iter().enumerate() {
        let field = format!("spec.requirements[{i}].values");
        use OverlayOperator::*;
        let problem = match r.operator {
            In | NotIn if r.values.is_empty() => Some("at least one value for In and NotIn"),
            Exists | DoesNotExist if !r.values.is_empty() => {
                Some("no values for Exists and DoesNotExist")
            }
            Gt | Lt | Gte | Lte if r.values.len() != 1 || r.values[0].parse::<u64>().is_err() => {
                Some("exactly one non-negative integer for Gt, Lt, Gte and Lte")
            }
            _ => None,
        };
        errors.extend(problem.map(|m| err(field, m)));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_and_adjustments_read_as_karpenter_s_crd_allows_and_change_as_it_computes() {
        // (text, adjustment?, read, applied to 0.10)
        let cases: [(&str, bool, Option<f64>); 14] = [
            ("0.05", false, Some(0.05)),
            ("3", false, Some(3.0)),
            ("-0.05", false, None),
            (".5", false, None),
            ("+0.02", true, Some(0.12)),
            ("-0.5", true, Some(0.0)),
            ("+10%", true, Some(0.11)),
            ("-15%", true, Some(0.085)),
            ("-100%", true, Some(0.0)),
            ("-101%", true, None),
            ("-100.0%", true, None),
            ("-99.5%", true, Some(0.0005)),
            ("10%", true, None),
            ("+1.2.3", true, None),
        ];
        for (text, adjustment, want) in cases {
            let read = if adjustment {
                parse_adjustment(text)
            } else {
                parse_price(text)
            };
            let got = read.ok().map(|c| c.apply(0.10));
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{text}: {g} != {w}"),
                (g, w) => assert_eq!(g, w, "{text}"),
            }
        }
    }

    #[test]
    fn the_crd_rules_name_the_field() {
        let overlay = |spec: &str| NodeOverlay {
            metadata: Meta::default(),
            spec: serde_yaml::from_str(spec).unwrap(),
        };
        let cases = [
            ("{price: '1', priceAdjustment: '+1'}", "spec"),
            ("{price: cheap}", "spec.price"),
            ("{priceAdjustment: '10%'}", "spec.priceAdjustment"),
            ("{weight: 0}", "spec.weight"),
            ("{weight: 10001}", "spec.weight"),
            ("{capacity: {cpu: '1'}}", "spec.capacity.cpu"),
            (
                "{requirements: [{key: a, operator: In}]}",
                "spec.requirements[0].values",
            ),
            (
                "{requirements: [{key: a, operator: Gte, values: ['-1']}]}",
                "spec.requirements[0].values",
            ),
        ];
        for (spec, field) in cases {
            let errors = node_overlay_errors(&overlay(spec));
            assert_eq!(
                errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
                [field],
                "{spec}"
            );
        }
        let fine = "{weight: 10, priceAdjustment: '-20%', capacity: {example.com/gpu: '1'}, \
                    requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]}";
        assert_eq!(node_overlay_errors(&overlay(fine)), []);
    }
}
