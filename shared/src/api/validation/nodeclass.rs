//! EC2NodeClass rules, after the `karpenter.k8s.aws/v1` CRD's validations.

use super::launchable::unlaunchable_family;
use crate::api::diagnostics::FieldError;
use crate::api::{AmiSelectorTerm, EC2NodeClass, SelectorTerm};

/// AMI families an alias may name (`family@version`) that nodewright launches; Karpenter's
/// Windows families are refused with their own reason ([`unlaunchable_family`]).
const ALIAS_FAMILIES: &[&str] = &["al2", "al2023", "bottlerocket"];
const AMI_FAMILIES: &[&str] = &["AL2", "AL2023", "Bottlerocket", "Custom"];

/// Tag keys nodewright and Karpenter set on instances themselves; a user value would break
/// ownership or cluster discovery (the v1 CRD rejects the first four).
const RESTRICTED_TAG_PREFIXES: &[&str] = &["kubernetes.io/cluster/", "nodewright.io/"];
const RESTRICTED_TAGS: &[&str] = &[
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
    "eks:eks-cluster-name",
];

/// EC2's limit on tags per resource (an instance, its volumes and network interfaces).
pub const EC2_MAX_TAGS: usize = 50;
/// The tags every launch adds of its own: ownership, NodePool, NodeClaim,
/// `kubernetes.io/cluster/<cluster>`, `eks:eks-cluster-name`, `Name`, and the four drift
/// tags (`provision::launch` holds a test that counts them).
pub const OWN_INSTANCE_TAGS: usize = 10;
/// The most `spec.tags` a class may carry so that its launches stay within EC2's limit.
pub const MAX_NODECLASS_TAGS: usize = EC2_MAX_TAGS - OWN_INSTANCE_TAGS;

pub(super) fn err(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Every rule about one EC2NodeClass. `legacy` is true for classes converted from v1alpha5 or
/// v1alpha1: those may have neither role nor instanceProfile, because Karpenter then used its
/// global `aws.defaultInstanceProfile` setting, which nodewright's stack provides.
pub fn node_class_errors(nc: &EC2NodeClass, legacy: bool) -> Vec<FieldError> {
    let s = &nc.spec;
    let mut errors = Vec::new();
    match (&s.role, &s.instance_profile) {
        (Some(_), Some(_)) => errors.push(err(
            "spec.role",
            "role and instanceProfile are mutually exclusive; set exactly one",
        )),
        (None, None) if !legacy => errors.push(err(
            "spec.role",
            "set exactly one of role (an IAM role name) or instanceProfile",
        )),
        _ => {}
    }
    if let Some(f) = &s.ami_family {
        if let Some(why) = unlaunchable_family(f) {
            errors.push(err("spec.amiFamily", why));
        } else if !AMI_FAMILIES.contains(&f.as_str()) {
            errors.push(err(
                "spec.amiFamily",
                format!(
                    "unknown AMI family {f:?}; allowed: {}",
                    AMI_FAMILIES.join(", ")
                ),
            ));
        }
    }
    if let Some(p) = &s.instance_store_policy
        && p != "RAID0"
    {
        errors.push(err(
            "spec.instanceStorePolicy",
            format!("{p:?} is not allowed; allowed: RAID0"),
        ));
    }
    ami_terms(&s.ami_selector_terms, s.ami_family.is_some(), &mut errors);
    selector_terms(
        "spec.subnetSelectorTerms",
        &s.subnet_selector_terms,
        false,
        &mut errors,
    );
    selector_terms(
        "spec.securityGroupSelectorTerms",
        &s.security_group_selector_terms,
        true,
        &mut errors,
    );
    errors.extend(super::reservations::reservation_term_errors(
        &s.capacity_reservation_selector_terms,
    ));
    if s.tags.len() > MAX_NODECLASS_TAGS {
        errors.push(err(
            "spec.tags",
            format!(
                "{} tags; EC2 allows {EC2_MAX_TAGS} per instance and nodewright adds \
                 {OWN_INSTANCE_TAGS} of its own, so at most {MAX_NODECLASS_TAGS}",
                s.tags.len()
            ),
        ));
    }
    for key in s.tags.keys() {
        let restricted = RESTRICTED_TAGS.contains(&key.as_str())
            || RESTRICTED_TAG_PREFIXES.iter().any(|p| key.starts_with(p));
        if key.is_empty() {
            errors.push(err("spec.tags", "empty tag keys are not allowed"));
        } else if restricted {
            errors.push(err(
                format!("spec.tags[{key}]"),
                format!(
                    "tag {key:?} is set by nodewright itself; restricted: {}, {}",
                    RESTRICTED_TAGS.join(", "),
                    RESTRICTED_TAG_PREFIXES
                        .iter()
                        .map(|p| format!("{p}*"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if let Some(o) = &s.metadata_options {
        let one_of =
            |field: &str, v: &Option<String>, allowed: &[&str], errors: &mut Vec<FieldError>| {
                if let Some(v) = v
                    && !allowed.contains(&v.as_str())
                {
                    errors.push(err(
                        format!("spec.metadataOptions.{field}"),
                        format!("{v:?} is not allowed; allowed: {}", allowed.join(", ")),
                    ));
                }
            };
        one_of(
            "httpEndpoint",
            &o.http_endpoint,
            &["enabled", "disabled"],
            &mut errors,
        );
        one_of(
            "httpProtocolIPv6",
            &o.http_protocol_ipv6,
            &["enabled", "disabled"],
            &mut errors,
        );
        one_of(
            "httpTokens",
            &o.http_tokens,
            &["required", "optional"],
            &mut errors,
        );
        if let Some(h) = o.http_put_response_hop_limit
            && !(1..=64).contains(&h)
        {
            errors.push(err(
                "spec.metadataOptions.httpPutResponseHopLimit",
                format!("{h} is out of range; allowed: 1 to 64"),
            ));
        }
    }
    if s.block_device_mappings
        .iter()
        .filter(|b| b.root_volume == Some(true))
        .count()
        > 1
    {
        errors.push(err(
            "spec.blockDeviceMappings",
            "at most one mapping may be the rootVolume",
        ));
    }
    if let Some(k) = &s.kubelet
        && let (Some(high), Some(low)) = (
            k.image_gc_high_threshold_percent,
            k.image_gc_low_threshold_percent,
        )
        && high <= low
    {
        errors.push(err(
            "spec.kubelet.imageGCHighThresholdPercent",
            format!("{high} must be greater than imageGCLowThresholdPercent ({low})"),
        ));
    }
    errors
}

fn ami_terms(terms: &[AmiSelectorTerm], has_family: bool, errors: &mut Vec<FieldError>) {
    if terms.is_empty() {
        if !has_family {
            errors.push(err(
                "spec.amiSelectorTerms",
                "at least one term is required, e.g. - alias: al2023@latest",
            ));
        }
        return;
    }
    let has_alias = terms.iter().any(|t| t.alias.is_some());
    if has_alias && terms.len() > 1 {
        errors.push(err(
            "spec.amiSelectorTerms",
            "a term with alias must be the only term",
        ));
    }
    if !has_alias && !has_family {
        errors.push(err("spec.amiFamily", "required when no amiSelectorTerms has an alias: it says how to bootstrap the selected AMIs"));
    }
    for (i, t) in terms.iter().enumerate() {
        let field = format!("spec.amiSelectorTerms[{i}]");
        let others = t.id.is_some() as usize
            + t.name.is_some() as usize
            + t.owner.is_some() as usize
            + t.ssm_parameter.is_some() as usize
            + !t.tags.is_empty() as usize;
        match (&t.alias, &t.id) {
            (None, None) if t.name.is_none() && t.ssm_parameter.is_none() && t.tags.is_empty() => {
                errors.push(err(
                    &field,
                    "expected at least one of alias, id, name, tags, ssmParameter",
                ));
            }
            (Some(alias), _) => {
                if others > 0 {
                    errors.push(err(
                        format!("{field}.alias"),
                        "alias cannot be combined with other fields in the same term",
                    ));
                }
                if let Some(m) = alias_error(alias) {
                    errors.push(err(format!("{field}.alias"), m));
                }
            }
            (None, Some(_)) if others > 1 => {
                errors.push(err(
                    format!("{field}.id"),
                    "id cannot be combined with other fields in the same term",
                ));
            }
            _ => {}
        }
        tag_map_errors(&field, &t.tags, errors);
    }
}

/// `family@version`, family one of [`ALIAS_FAMILIES`].
fn alias_error(alias: &str) -> Option<String> {
    let Some((family, version)) = alias.split_once('@') else {
        return Some(format!(
            "{alias:?} is not family@version, e.g. al2023@latest"
        ));
    };
    if let Some(why) = unlaunchable_family(family) {
        return Some(why);
    }
    if !ALIAS_FAMILIES.contains(&family) {
        return Some(format!(
            "unknown AMI family {family:?} in alias; allowed: {}",
            ALIAS_FAMILIES.join(", ")
        ));
    }
    if version.is_empty() {
        return Some(format!(
            "{alias:?} has no version; use latest or a pinned version like v20240807"
        ));
    }
    None
}

fn selector_terms(
    field: &str,
    terms: &[SelectorTerm],
    names_allowed: bool,
    errors: &mut Vec<FieldError>,
) {
    let allowed = if names_allowed {
        "id, name, tags"
    } else {
        "id, tags"
    };
    if terms.is_empty() {
        errors.push(err(field, format!("at least one term is required, e.g. - tags: {{karpenter.sh/discovery: my-cluster}} ({allowed})")));
        return;
    }
    for (i, t) in terms.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if t.id.is_none() && t.name.is_none() && t.tags.is_empty() {
            errors.push(err(&at, format!("expected at least one of {allowed}")));
        }
        if t.name.is_some() && !names_allowed {
            errors.push(err(
                format!("{at}.name"),
                "subnets are selected by id or tags only",
            ));
        }
        if t.id.is_some() && (t.name.is_some() || !t.tags.is_empty()) {
            errors.push(err(
                format!("{at}.id"),
                "id cannot be combined with other fields in the same term",
            ));
        }
        tag_map_errors(&at, &t.tags, errors);
    }
}

fn tag_map_errors(
    field: &str,
    tags: &std::collections::BTreeMap<String, String>,
    errors: &mut Vec<FieldError>,
) {
    for (k, v) in tags {
        if k.is_empty() || v.is_empty() {
            errors.push(err(format!("{field}.tags"), format!("empty tag keys or values are not allowed (use \"*\" to match any value), got {k:?}: {v:?}")));
        }
    }
}
