//! What nodewright can launch, beyond what Karpenter's CRDs allow: Linux nodes from the AL2023,
//! AL2, Bottlerocket or a custom AMI, on instance types labelled as its catalog labels them.
//! A NodePool or EC2NodeClass asking for anything else is refused here with the reason, rather
//! than accepted and its pods then left pending by every launch.

use crate::api::{NodeSelectorRequirement, Operator, labels};

/// The AMI families nodewright writes user data for (`userdata::AmiFamily`).
const LAUNCHABLE_FAMILIES: &str = "AL2023, AL2, Bottlerocket or Custom";

/// Why an AMI family (an `amiFamily` value or an alias's family) cannot be launched, if not.
/// Karpenter accepts `Windows2019` and `Windows2022`; nodewright's nodes are Linux only.
pub fn unlaunchable_family(family: &str) -> Option<String> {
    family.to_ascii_lowercase().starts_with("windows").then(|| {
        format!(
            "{family} is a Windows AMI family: nodewright launches Linux nodes only \
             ({LAUNCHABLE_FAMILIES}); keep Windows nodes on Karpenter or a managed node group"
        )
    })
}

/// Keys whose values nodewright launches only some of, with those values.
const LAUNCHABLE_VALUES: &[(&str, &[&str])] = &[
    (labels::OS, &["linux"]),
    ("beta.kubernetes.io/os", &["linux"]),
    (labels::ARCH, &["amd64", "arm64"]),
    ("beta.kubernetes.io/arch", &["amd64", "arm64"]),
    (
        labels::CAPACITY_TYPE,
        &[labels::SPOT, labels::ON_DEMAND, labels::RESERVED],
    ),
];

/// Well-known keys Karpenter labels nodes with and nodewright's instance catalog does not, so
/// no instance type it launches carries them.
const UNLABELLED_KEYS: &[&str] = &[
    labels::REGION,
    "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/windows-build",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-capability-flex",
    // nodewright does not read whether a reservation is interruptible.
    "karpenter.k8s.aws/capacity-reservation-interruptible",
];

/// What one requirement asks that nodewright cannot launch: `(field suffix, message)` errors
/// (nothing it launches would match) and warnings (part of it can never take effect).
pub struct Findings {
    pub errors: Vec<(String, String)>,
    pub warnings: Vec<(String, String)>,
}

/// Checks one NodePool requirement against what nodewright launches.
pub fn requirement_findings(r: &NodeSelectorRequirement) -> Findings {
    let mut found = Findings {
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let key = r.key.as_str();
    if let Some((_, launched)) = LAUNCHABLE_VALUES.iter().find(|(k, _)| *k == key) {
        let admits = |v: &str| match r.operator {
            Operator::In => r.values.iter().any(|x| x == v),
            Operator::NotIn => !r.values.iter().any(|x| x == v),
            Operator::Exists => true,
            Operator::DoesNotExist | Operator::Gt | Operator::Lt => false,
        };
        let list = launched.join(", ");
        if !launched.iter().any(|v| admits(v)) {
            found.errors.push((
                suffix(r.operator).into(),
                format!("allows none of the values nodewright launches for {key} ({list})"),
            ));
        } else if r.operator == Operator::In {
            let never: Vec<&str> = r
                .values
                .iter()
                .map(String::as_str)
                .filter(|v| !launched.contains(v))
                .collect();
            if !never.is_empty() {
                found.warnings.push((
                    ".values".into(),
                    format!(
                        "{} never launched: nodewright launches {key} {list} only",
                        never.join(", ")
                    ),
                ));
            }
        }
    }
    if UNLABELLED_KEYS.contains(&key) {
        let why = format!("nodewright's instance catalog does not label nodes with {key}");
        match r.operator {
            Operator::In | Operator::Exists | Operator::Gt | Operator::Lt => found.errors.push((
                suffix(r.operator).into(),
                format!("{why}, so no instance type it launches would match"),
            )),
            Operator::NotIn | Operator::DoesNotExist => found
                .warnings
                .push((".key".into(), format!("has no effect: {why}"))),
        }
    }
    found
}

/// Where a requirement's problem is written: its values when it lists any, else its operator.
fn suffix(operator: Operator) -> &'static str {
    match operator {
        Operator::In | Operator::NotIn => ".values",
        _ => ".operator",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, operator: Operator, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    #[test]
    fn each_requirement_is_refused_warned_about_or_accepted_by_what_nodewright_launches() {
        use Operator::*;
        // (requirement, errors at, warnings at)
        let cases: &[(NodeSelectorRequirement, &[&str], &[&str])] = &[
            (req(labels::OS, In, &["linux"]), &[], &[]),
            (req(labels::OS, In, &["windows"]), &[".values"], &[]),
            (req(labels::OS, NotIn, &["linux"]), &[".values"], &[]),
            (req(labels::OS, NotIn, &["windows"]), &[], &[]),
            (req(labels::OS, DoesNotExist, &[]), &[".operator"], &[]),
            (
                req(labels::OS, In, &["linux", "windows"]),
                &[],
                &[".values"],
            ),
            (req(labels::ARCH, In, &["arm64"]), &[], &[]),
            (req(labels::ARCH, In, &["s390x"]), &[".values"], &[]),
            (req(labels::CAPACITY_TYPE, In, &["reserved"]), &[], &[]),
            (
                req(labels::CAPACITY_TYPE, In, &["spot", "reserved"]),
                &[],
                &[],
            ),
            (
                req(labels::CAPACITY_TYPE, In, &["spot", "dedicated"]),
                &[],
                &[".values"],
            ),
            (
                req(
                    labels::CAPACITY_TYPE,
                    NotIn,
                    &["spot", "on-demand", "reserved"],
                ),
                &[".values"],
                &[],
            ),
            (req(labels::CAPACITY_TYPE, Exists, &[]), &[], &[]),
            (req(labels::REGION, In, &["us-east-1"]), &[".values"], &[]),
            (
                req("karpenter.k8s.aws/instance-cpu-manufacturer", In, &["amd"]),
                &[".values"],
                &[],
            ),
            (
                req("karpenter.k8s.aws/instance-ebs-bandwidth", Gt, &["1000"]),
                &[".operator"],
                &[],
            ),
            (
                req(
                    "karpenter.k8s.aws/instance-capability-flex",
                    NotIn,
                    &["true"],
                ),
                &[],
                &[".key"],
            ),
            (
                req("node.kubernetes.io/windows-build", Exists, &[]),
                &[".operator"],
                &[],
            ),
            (
                req("karpenter.k8s.aws/instance-family", In, &["m5"]),
                &[],
                &[],
            ),
            (req("team", In, &["a"]), &[], &[]),
        ];
        for (r, errors, warnings) in cases {
            let found = requirement_findings(r);
            let at = |v: &[(String, String)]| v.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>();
            assert_eq!(at(&found.errors), *errors, "errors of {r:?}");
            assert_eq!(at(&found.warnings), *warnings, "warnings of {r:?}");
        }
    }

    #[test]
    fn windows_families_are_refused_with_what_can_be_launched_instead() {
        for family in ["windows2019", "Windows2022"] {
            let why = unlaunchable_family(family).expect("refused");
            assert!(why.contains("Linux nodes only"), "{why}");
            assert!(why.contains(family), "{why}");
        }
        for family in ["al2023", "AL2", "Bottlerocket", "Custom"] {
            assert_eq!(unlaunchable_family(family), None, "{family}");
        }
    }

    #[test]
    fn the_labels_said_missing_are_missing_from_every_bundled_instance_type() {
        let types = crate::catalog::bundled_instance_types().expect("the bundled catalog");
        for (t, _) in types {
            let carried = t.labels();
            for key in UNLABELLED_KEYS {
                assert!(!carried.contains_key(*key), "{} carries {key}", t.name);
            }
            assert_eq!(carried.get(labels::OS).map(String::as_str), Some("linux"));
        }
    }
}
