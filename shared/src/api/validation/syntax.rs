//! Kubernetes label syntax, Karpenter's restricted label keys, and cron schedules.

use crate::api::labels;

/// Label keys in restricted domains that Karpenter accepts anyway
/// (kubernetes-sigs/karpenter `pkg/apis/v1/labels.go` WellKnownLabels, plus the deprecated
/// beta aliases the v1 CRD lists for requirements).
const WELL_KNOWN: &[&str] = &[
    labels::NODEPOOL,
    labels::CAPACITY_TYPE,
    labels::ZONE,
    labels::REGION,
    labels::INSTANCE_TYPE,
    labels::ARCH,
    labels::OS,
    "node.kubernetes.io/windows-build",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

/// Domains reserved by the kubelet's node restriction or by Karpenter (`RestrictedLabelDomains`
/// in Karpenter core and the AWS provider).
const RESTRICTED_DOMAINS: &[&str] = &[
    "kubernetes.io",
    "k8s.io",
    "karpenter.sh",
    "karpenter.k8s.aws",
];

/// Sub-domains of the restricted ones that are allowed (`LabelDomainExceptions`).
const DOMAIN_EXCEPTIONS: &[&str] = &[
    "kops.k8s.io",
    "node.kubernetes.io",
    "node-restriction.kubernetes.io",
    "node-role.kubernetes.io",
];

/// Keys that interfere with provisioning (`RestrictedLabels`), plus the NodePool label that
/// nodewright sets itself.
const RESTRICTED_KEYS: &[&str] = &[labels::HOSTNAME, labels::NODEPOOL];

/// `karpenter.k8s.aws/` labels the AWS provider knows (its WellKnownLabels): the
/// instance's and, on reserved nodes, the reservation's.
const AWS_WELL_KNOWN_SUFFIXES: &[&str] = &[
    "instance-category",
    "instance-family",
    "instance-generation",
    "instance-local-nvme",
    "instance-size",
    "instance-cpu",
    "instance-cpu-manufacturer",
    "instance-cpu-sustained-clock-speed-mhz",
    "instance-memory",
    "instance-ebs-bandwidth",
    "instance-network-bandwidth",
    "instance-gpu-name",
    "instance-gpu-manufacturer",
    "instance-gpu-count",
    "instance-gpu-memory",
    "instance-accelerator-name",
    "instance-accelerator-manufacturer",
    "instance-accelerator-count",
    "instance-hypervisor",
    "instance-encryption-in-transit-supported",
    "instance-capability-flex",
    "capacity-reservation-id",
    "capacity-reservation-type",
    "capacity-reservation-interruptible",
];

fn in_domain(domain: &str, parent: &str) -> bool {
    domain == parent || domain.ends_with(&format!(".{parent}"))
}

/// Why a NodePool may not use `key` as a label or requirement, if it may not.
pub fn restricted_key(key: &str) -> Option<String> {
    if RESTRICTED_KEYS.contains(&key) {
        return Some(format!("label {key:?} is restricted"));
    }
    if WELL_KNOWN.contains(&key) {
        return None;
    }
    let (domain, name) = key.split_once('/')?;
    if domain == "karpenter.k8s.aws" && AWS_WELL_KNOWN_SUFFIXES.contains(&name) {
        return None;
    }
    if DOMAIN_EXCEPTIONS.iter().any(|e| in_domain(domain, e)) {
        return None;
    }
    RESTRICTED_DOMAINS.iter().find(|r| in_domain(domain, r)).map(|r| {
        format!(
            "label domain {r:?} is restricted; allowed there are the well-known labels ({}, karpenter.k8s.aws/instance-*) and the domains {}",
            WELL_KNOWN[1..7].join(", "),
            DOMAIN_EXCEPTIONS.join(", ")
        )
    })
}

fn name_part_ok(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

fn dns_subdomain_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
            !part.is_empty()
                && part.starts_with(ok)
                && part.ends_with(ok)
                && part.chars().all(|c| ok(c) || c == '-')
        })
}

/// A qualified name (`prefix/name` or `name`), as label keys and taint keys must be.
pub fn label_key_error(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if prefix.is_some_and(|p| !dns_subdomain_ok(p)) {
        return Some(format!(
            "{key:?} is not a valid key: the prefix must be a DNS subdomain (lowercase letters, digits, '-', '.')"
        ));
    }
    if !name_part_ok(name) {
        return Some(format!(
            "{key:?} is not a valid key: the name must be 1-63 characters of letters, digits, '-', '_', '.', starting and ending with a letter or digit"
        ));
    }
    None
}

/// A label value: empty, or up to 63 characters like a key's name part.
pub fn label_value_error(value: &str) -> Option<String> {
    if value.is_empty() || name_part_ok(value) {
        None
    } else {
        Some(format!(
            "{value:?} is not a valid label value: at most 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit"
        ))
    }
}

/// Macros accepted by Karpenter's budget schedule (robfig/cron descriptors).
const CRON_MACROS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];
const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Checks a budget schedule: a macro or five cron fields (minute hour day-of-month month
/// day-of-week), each `*`, `?`, or a list of values/ranges with optional `/step`.
pub fn cron_error(schedule: &str) -> Option<String> {
    let s = schedule.trim();
    if s.starts_with('@') {
        return (!CRON_MACROS.contains(&s)).then(|| {
            format!(
                "{s:?} is not a known macro; allowed: {}",
                CRON_MACROS.join(", ")
            )
        });
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(format!(
            "{s:?} has {} fields; a schedule needs 5 (minute hour day-of-month month day-of-week) or a macro like @daily",
            fields.len()
        ));
    }
    let specs: [(&str, u32, u32, &[&str]); 5] = [
        ("minute", 0, 59, &[]),
        ("hour", 0, 23, &[]),
        ("day-of-month", 1, 31, &[]),
        ("month", 1, 12, MONTHS),
        ("day-of-week", 0, 7, DAYS),
    ];
    for (field, (what, lo, hi, names)) in fields.iter().zip(specs) {
        let value_ok = |v: &str| {
            v.parse::<u32>().is_ok_and(|n| (lo..=hi).contains(&n))
                || names.contains(&v.to_ascii_uppercase().as_str())
        };
        let ok = *field == "?"
            || field.split(',').all(|part| {
                let (range, step) = match part.split_once('/') {
                    Some((r, s)) => (r, Some(s)),
                    None => (part, None),
                };
                let step_ok = step.is_none_or(|s| s.parse::<u32>().is_ok_and(|n| n > 0));
                let range_ok = range == "*"
                    || match range.split_once('-') {
                        Some((a, b)) => value_ok(a) && value_ok(b),
                        None => value_ok(range),
                    };
                step_ok && range_ok
            });
        if !ok {
            return Some(format!(
                "{s:?}: the {what} field {field:?} is not valid (values {lo}-{hi})"
            ));
        }
    }
    None
}

#[cfg(test)]
mod props {
    use super::*;

    proptest::proptest! {
        #[test]
        fn any_text_is_judged_as_a_key_value_or_schedule_never_a_panic(text in "\\PC{0,80}") {
            let _ = label_key_error(&text);
            let _ = label_value_error(&text);
            let _ = restricted_key(&text);
            let _ = cron_error(&text);
        }

        #[test]
        fn label_values_kubernetes_accepts_are_accepted(
            value in "([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?"
        ) {
            proptest::prop_assert_eq!(label_value_error(&value), None);
        }

        #[test]
        fn a_label_value_with_a_character_kubernetes_refuses_is_refused(
            head in "[a-z0-9]{0,20}", bad in "[^A-Za-z0-9._-]", tail in "[a-z0-9]{0,20}"
        ) {
            let value = format!("{head}{bad}{tail}");
            proptest::prop_assert!(label_value_error(&value).is_some(), "{:?}", value);
        }
    }
}
