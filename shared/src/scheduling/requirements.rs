//! The requirements algebra: sets of allowed label values per key, as Karpenter models
//! them (`pkg/scheduling/requirement.go`), so that NodePool requirements, pod node
//! selectors and affinity terms, and instance-type labels can be intersected.
//!
//! A requirement is a (possibly complemented) value set with optional integer bounds, plus
//! whether the label may be absent altogether. Absence is explicit because it is what makes
//! `NotIn` and `DoesNotExist` compatible with a node that never carries the label, while
//! `In`, `Exists`, `Gt` and `Lt` need the label to be there.
//!
//! Past ~450 lines on purpose: the algebra (intersect, compatible, display) and its
//! conversions from API operators and node labels are one vocabulary, read together.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::{NodeSelectorRequirement, Operator};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// When true, `values` are the excluded values and any other value is allowed.
    complement: bool,
    values: BTreeSet<String>,
    /// Exclusive integer bounds (`Gt`, `Lt`); a value must parse as an integer to pass.
    gt: Option<i64>,
    lt: Option<i64>,
    /// Whether a node without this label at all satisfies the requirement.
    allows_absent: bool,
    pub min_values: Option<u32>,
}

impl Requirement {
    /// Any value, or none: what an unconstrained key means.
    pub fn any() -> Self {
        Requirement {
            complement: true,
            values: BTreeSet::new(),
            gt: None,
            lt: None,
            allows_absent: true,
            min_values: None,
        }
    }

    pub fn in_values<I: IntoIterator<Item = S>, S: Into<String>>(values: I) -> Self {
        Requirement {
            complement: false,
            values: values.into_iter().map(Into::into).collect(),
            gt: None,
            lt: None,
            allows_absent: false,
            min_values: None,
        }
    }

    /// The label must not be present (what a node that never sets a key offers).
    pub fn absent() -> Self {
        Requirement {
            complement: false,
            values: BTreeSet::new(),
            gt: None,
            lt: None,
            allows_absent: true,
            min_values: None,
        }
    }

    /// Builds a requirement from its API form. Gt/Lt values that are not integers make a
    /// requirement nothing can satisfy; validation reports them to the user before this.
    pub fn from_api(op: Operator, values: &[String], min_values: Option<u32>) -> Self {
        let bound = || values.first().and_then(|v| v.trim().parse::<i64>().ok());
        let mut r = match op {
            Operator::In => Requirement::in_values(values.iter().cloned()),
            Operator::NotIn => Requirement {
                complement: true,
                values: values.iter().cloned().collect(),
                gt: None,
                lt: None,
                allows_absent: true,
                min_values: None,
            },
            Operator::Exists => Requirement {
                allows_absent: false,
                ..Requirement::any()
            },
            Operator::DoesNotExist => Requirement::absent(),
            Operator::Gt => match bound() {
                Some(n) => Requirement {
                    gt: Some(n),
                    allows_absent: false,
                    ..Requirement::any()
                },
                None => Requirement::in_values(Vec::<String>::new()),
            },
            Operator::Lt => match bound() {
                Some(n) => Requirement {
                    lt: Some(n),
                    allows_absent: false,
                    ..Requirement::any()
                },
                None => Requirement::in_values(Vec::<String>::new()),
            },
        };
        r.min_values = min_values;
        r
    }

    fn within_bounds(&self, value: &str) -> bool {
        if self.gt.is_none() && self.lt.is_none() {
            return true;
        }
        match value.parse::<i64>() {
            Ok(n) => self.gt.is_none_or(|g| n > g) && self.lt.is_none_or(|l| n < l),
            Err(_) => false,
        }
    }

    /// Whether a node whose label has `value` (or lacks it, `None`) satisfies this.
    pub fn allows(&self, value: Option<&str>) -> bool {
        match value {
            None => self.allows_absent,
            Some(v) => self.within_bounds(v) && (self.values.contains(v) != self.complement),
        }
    }

    /// True when no present value can satisfy it (it may still allow absence).
    pub fn no_values(&self) -> bool {
        if self.complement {
            matches!((self.gt, self.lt), (Some(g), Some(l)) if l.saturating_sub(g) <= 1)
        } else {
            self.values.is_empty()
        }
    }

    /// Nothing satisfies it: no value and absence not allowed.
    pub fn is_empty(&self) -> bool {
        self.no_values() && !self.allows_absent
    }

    pub fn intersect(&self, other: &Requirement) -> Requirement {
        let gt = match (self.gt, other.gt) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let lt = match (self.lt, other.lt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let min_values = match (self.min_values, other.min_values) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let allows_absent = self.allows_absent && other.allows_absent;
        let (complement, values) = match (self.complement, other.complement) {
            (true, true) => (true, self.values.union(&other.values).cloned().collect()),
            (true, false) => (
                false,
                other.values.difference(&self.values).cloned().collect(),
            ),
            (false, true) => (
                false,
                self.values.difference(&other.values).cloned().collect(),
            ),
            (false, false) => (
                false,
                self.values.intersection(&other.values).cloned().collect(),
            ),
        };
        let mut r = Requirement {
            complement,
            values,
            gt,
            lt,
            allows_absent,
            min_values,
        };
        if !r.complement && (r.gt.is_some() || r.lt.is_some()) {
            // A finite set with bounds: keep only the values inside them.
            let kept: BTreeSet<String> = r
                .values
                .iter()
                .filter(|v| r.within_bounds(v))
                .cloned()
                .collect();
            r.values = kept;
            r.gt = None;
            r.lt = None;
        }
        r
    }

    /// The finite set of allowed values, when there is one (`In`).
    pub fn finite_values(&self) -> Option<&BTreeSet<String>> {
        (!self.complement).then_some(&self.values)
    }

    /// One value a node can be labelled with to satisfy this, if the set names one.
    pub fn any_value(&self) -> Option<&str> {
        if self.complement {
            None
        } else {
            self.values.iter().next().map(String::as_str)
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &BTreeSet<String>| v.iter().cloned().collect::<Vec<_>>().join(",");
        if !self.complement {
            if self.values.is_empty() {
                return f.write_str(if self.allows_absent {
                    "DoesNotExist"
                } else {
                    "In []"
                });
            }
            return write!(f, "In [{}]", list(&self.values));
        }
        let mut parts = vec![];
        if !self.values.is_empty() {
            parts.push(format!("NotIn [{}]", list(&self.values)));
        }
        if let Some(g) = self.gt {
            parts.push(format!("Gt {g}"));
        }
        if let Some(l) = self.lt {
            parts.push(format!("Lt {l}"));
        }
        if parts.is_empty() {
            parts.push(if self.allows_absent {
                "Any".into()
            } else {
                "Exists".into()
            });
        }
        f.write_str(&parts.join(" and "))
    }
}

/// Requirements keyed by label. A key that is not listed is unconstrained.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Requirements(BTreeMap<String, Requirement>);

/// Label names that selectors still use, read as the names nodes carry today (Karpenter
/// normalises the same six: `NormalizedLabels`, pkg/apis/v1/labels.go, and the EBS CSI
/// driver's zone key the AWS provider adds), so a `beta.kubernetes.io/instance-type`
/// selector narrows the instance type instead of asking for a label no instance type
/// defines, and an EBS volume's zone is the node's zone.
const DEPRECATED: [(&str, &str); 6] = [
    (
        "topology.ebs.csi.aws.com/zone",
        "topology.kubernetes.io/zone",
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    ),
    ("beta.kubernetes.io/arch", "kubernetes.io/arch"),
    ("beta.kubernetes.io/os", "kubernetes.io/os"),
    (
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
    ),
];

pub fn normalized(key: &str) -> &str {
    DEPRECATED
        .iter()
        .find(|(old, _)| *old == key)
        .map_or(key, |(_, new)| new)
}

/// Why two requirement sets cannot both hold: the key and both sides, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub key: String,
    pub ours: String,
    pub theirs: String,
}

impl Requirements {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_api(reqs: &[NodeSelectorRequirement]) -> Self {
        let mut out = Requirements::new();
        for r in reqs {
            out.add(
                &r.key,
                Requirement::from_api(r.operator, &r.values, r.min_values),
            );
        }
        out
    }

    /// `key In [value]` for each label (node labels, a pod's nodeSelector).
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut out = Requirements::new();
        for (k, v) in labels {
            out.add(k, Requirement::in_values([v.clone()]));
        }
        out
    }

    /// ANDs a requirement into the set, under the key's current name.
    pub fn add(&mut self, key: &str, req: Requirement) {
        let key = normalized(key);
        match self.0.get_mut(key) {
            Some(existing) => *existing = existing.intersect(&req),
            None => {
                self.0.insert(key.to_string(), req);
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.0.get(key)
    }

    /// Lowers `key`'s `minValues` to `to` (Karpenter's `BestEffort` relaxation); false when
    /// the key has no `minValues` above `to`.
    pub fn lower_min_values(&mut self, key: &str, to: u32) -> bool {
        match self.0.get_mut(key) {
            Some(r) if r.min_values.is_some_and(|m| m > to) => {
                r.min_values = Some(to);
                true
            }
            _ => false,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Requirement)> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// ANDs every requirement of `other` into `self`.
    pub fn merge(&mut self, other: &Requirements) {
        for (k, r) in &other.0 {
            self.add(k, r.clone());
        }
    }

    /// Checks that `other` can hold together with `self`, where `self` describes a node:
    /// a key `self` does not name is a label the node will not carry, unless `defined_by`
    /// says the key is filled in later (instance-type labels, zone, capacity type).
    pub fn compatible(
        &self,
        other: &Requirements,
        defined_later: impl Fn(&str) -> bool,
    ) -> Result<(), Conflict> {
        for (key, theirs) in &other.0 {
            let ours = match self.0.get(key) {
                Some(r) => r.clone(),
                None if defined_later(key) => continue,
                None => Requirement::absent(),
            };
            if ours.intersect(theirs).is_empty() {
                return Err(Conflict {
                    key: key.clone(),
                    ours: ours.to_string(),
                    theirs: theirs.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Whether a concrete label set satisfies every requirement.
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0
            .iter()
            .all(|(k, r)| r.allows(labels.get(k).map(String::as_str)))
    }

    /// The first requirement a label set fails, for messages.
    pub fn first_mismatch(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Option<(&str, &Requirement)> {
        self.0
            .iter()
            .find(|(k, r)| !r.allows(labels.get(*k).map(String::as_str)))
            .map(|(k, r)| (k.as_str(), r))
    }

    /// Labels a node built from these requirements carries: every key whose allowed set
    /// names a value (the first, as Karpenter picks one when several remain).
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .filter_map(|(k, r)| r.any_value().map(|v| (k.clone(), v.to_string())))
            .collect()
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, r)| format!("{k} {r}")).collect();
        f.write_str(&parts.join(", "))
    }
}

/// A `minValues` requirement a set of instance types falls short of: its key, its
/// `minValues`, and the distinct values the types have for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinValuesShort {
    pub key: String,
    pub min: u32,
    pub distinct: BTreeSet<String>,
}

/// The first requirement of `reqs` with `minValues` that `types` (each its name and
/// labels) do not give that many distinct values.
pub fn min_values_short<'a, I>(reqs: &Requirements, types: I) -> Option<MinValuesShort>
where
    I: IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)> + Clone,
{
    reqs.iter().find_map(|(key, r)| {
        let min = r.min_values?;
        let distinct: BTreeSet<String> = types
            .clone()
            .into_iter()
            .filter_map(|(name, labels)| min_values_value(name, labels, key))
            .collect();
        ((distinct.len() as u32) < min).then(|| MinValuesShort {
            key: key.clone(),
            min,
            distinct,
        })
    })
}

/// A type's value for a `minValues` key: its name for the instance-type key (a type's own
/// labels may leave it out), else its label.
pub fn min_values_value(
    name: &str,
    labels: &BTreeMap<String, String>,
    key: &str,
) -> Option<String> {
    if key == crate::api::labels::INSTANCE_TYPE {
        Some(name.to_string())
    } else {
        labels.get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Operator::*;

    fn req(op: Operator, values: &[&str]) -> Requirement {
        Requirement::from_api(
            op,
            &values.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            None,
        )
    }

    #[test]
    fn each_operator_allows_exactly_its_values() {
        // (operator, values, label value or absent, allowed)
        let cases: &[(Operator, &[&str], Option<&str>, bool)] = &[
            (In, &["a", "b"], Some("a"), true),
            (In, &["a", "b"], Some("c"), false),
            (In, &["a"], None, false),
            (NotIn, &["a"], Some("a"), false),
            (NotIn, &["a"], Some("b"), true),
            (NotIn, &["a"], None, true),
            (Exists, &[], Some("x"), true),
            (Exists, &[], None, false),
            (DoesNotExist, &[], None, true),
            (DoesNotExist, &[], Some("x"), false),
            (Gt, &["4"], Some("5"), true),
            (Gt, &["4"], Some("4"), false),
            (Gt, &["4"], Some("five"), false),
            (Gt, &["4"], None, false),
            (Lt, &["4"], Some("3"), true),
            (Lt, &["4"], Some("4"), false),
            (Gt, &["x"], Some("9"), false), // a non-integer bound matches nothing
        ];
        for (op, values, label, want) in cases {
            assert_eq!(
                req(*op, values).allows(*label),
                *want,
                "{op:?} {values:?} vs {label:?}"
            );
        }
    }

    #[test]
    fn intersections_keep_only_what_both_allow() {
        // (left, right, probe values that must be allowed, probe values that must not)
        type Side<'a> = (Operator, &'a [&'a str]);
        type Probes<'a> = &'a [Option<&'a str>];
        let cases: &[(Side, Side, Probes, Probes)] = &[
            (
                (In, &["a", "b"]),
                (In, &["b", "c"]),
                &[Some("b")],
                &[Some("a"), Some("c"), None],
            ),
            (
                (In, &["a", "b"]),
                (NotIn, &["a"]),
                &[Some("b")],
                &[Some("a"), None],
            ),
            (
                (NotIn, &["a"]),
                (NotIn, &["b"]),
                &[Some("c"), None],
                &[Some("a"), Some("b")],
            ),
            (
                (Exists, &[]),
                (NotIn, &["a"]),
                &[Some("b")],
                &[Some("a"), None],
            ),
            ((DoesNotExist, &[]), (NotIn, &["a"]), &[None], &[Some("b")]),
            (
                (Gt, &["2"]),
                (Lt, &["6"]),
                &[Some("3"), Some("5")],
                &[Some("2"), Some("6"), None],
            ),
            (
                (Gt, &["2"]),
                (In, &["1", "3", "x"]),
                &[Some("3")],
                &[Some("1"), Some("x")],
            ),
            (
                (In, &["c", "m"]),
                (Exists, &[]),
                &[Some("c"), Some("m")],
                &[Some("r"), None],
            ),
        ];
        for ((lo, lv), (ro, rv), yes, no) in cases {
            let both = req(*lo, lv).intersect(&req(*ro, rv));
            let flipped = req(*ro, rv).intersect(&req(*lo, lv));
            for probe in *yes {
                assert!(
                    both.allows(*probe),
                    "{lo:?}{lv:?} & {ro:?}{rv:?} should allow {probe:?}"
                );
                assert!(flipped.allows(*probe), "flipped should allow {probe:?}");
            }
            for probe in *no {
                assert!(
                    !both.allows(*probe),
                    "{lo:?}{lv:?} & {ro:?}{rv:?} should reject {probe:?}"
                );
                assert!(!flipped.allows(*probe), "flipped should reject {probe:?}");
            }
        }
    }

    #[test]
    fn emptiness_is_detected_for_disjoint_sets_and_bounds() {
        assert!(req(In, &["a"]).intersect(&req(In, &["b"])).is_empty());
        assert!(req(Gt, &["5"]).intersect(&req(Lt, &["6"])).is_empty());
        assert!(!req(Gt, &["5"]).intersect(&req(Lt, &["7"])).is_empty());
        assert!(
            req(Exists, &[])
                .intersect(&req(DoesNotExist, &[]))
                .is_empty()
        );
        assert!(
            !req(NotIn, &["a"])
                .intersect(&req(DoesNotExist, &[]))
                .is_empty()
        );
    }

    #[test]
    fn a_node_without_a_label_is_compatible_only_with_requirements_that_allow_absence() {
        let mut node = Requirements::new();
        node.add("nodeType", req(In, &["network-node"]));
        let never_later = |_: &str| false;

        let mut selector = Requirements::new();
        selector.add("nodeType", req(In, &["network-node"]));
        assert!(node.compatible(&selector, never_later).is_ok());

        let mut gpu = Requirements::new();
        gpu.add("nodeType", req(In, &["gpu"]));
        let c = node.compatible(&gpu, never_later).unwrap_err();
        assert_eq!(c.key, "nodeType");

        let mut team = Requirements::new();
        team.add("team", req(In, &["a"]));
        assert!(
            node.compatible(&team, never_later).is_err(),
            "the node never carries `team`"
        );
        assert!(
            node.compatible(&team, |k| k == "team").is_ok(),
            "unless the key is filled in later"
        );

        let mut not_team = Requirements::new();
        not_team.add("team", req(NotIn, &["a"]));
        assert!(node.compatible(&not_team, never_later).is_ok());
    }

    #[test]
    fn labels_of_single_valued_requirements_are_what_the_node_carries() {
        let mut r = Requirements::new();
        r.add("nodeType", req(In, &["cpu-node"]));
        r.add(
            "karpenter.sh/capacity-type",
            req(In, &["spot", "on-demand"]),
        );
        r.add("team", req(Exists, &[]));
        let labels = r.labels();
        assert_eq!(labels.get("nodeType").map(String::as_str), Some("cpu-node"));
        assert_eq!(
            labels.get("karpenter.sh/capacity-type").map(String::as_str),
            Some("on-demand")
        );
        assert!(!labels.contains_key("team"));
    }

    #[test]
    fn deprecated_beta_keys_are_read_as_their_current_names() {
        let mut r = Requirements::new();
        r.add(
            "beta.kubernetes.io/instance-type",
            req(In, &["m5.large", "c5.large"]),
        );
        r.add("node.kubernetes.io/instance-type", req(In, &["c5.large"]));
        r.add(
            "failure-domain.beta.kubernetes.io/zone",
            req(In, &["us-east-1a"]),
        );
        assert_eq!(r.get("beta.kubernetes.io/instance-type"), None);
        assert_eq!(
            r.get("node.kubernetes.io/instance-type"),
            Some(&req(In, &["c5.large"]))
        );
        assert_eq!(
            r.get("topology.kubernetes.io/zone"),
            Some(&req(In, &["us-east-1a"]))
        );
        assert_eq!(normalized("example.com/team"), "example.com/team");
    }

    #[test]
    fn min_values_survive_intersection_as_the_stricter_one() {
        let a = Requirement::from_api(In, &["c".into(), "m".into(), "r".into()], Some(2));
        let b = Requirement::from_api(Exists, &[], Some(3));
        assert_eq!(a.intersect(&b).min_values, Some(3));
    }
}
