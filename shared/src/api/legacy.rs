//! The legacy `karpenter.sh/v1alpha5` Provisioner and `karpenter.k8s.aws/v1alpha1`
//! AWSNodeTemplate, converted to v1 NodePool and EC2NodeClass so that clusters configured for
//! Karpenter before v0.32 work unchanged.
//!
//! The mapping follows Karpenter's v1beta1 change list and v1 migration guide
//! (`designs/v1beta1-full-changelist.md`, karpenter.sh/v1.0/upgrading/v1-migration), with
//! the v1alpha5 semantics kept where v1 would otherwise change behaviour:
//! - `ttlSecondsAfterEmpty: N` -> `consolidationPolicy: WhenEmpty`, `consolidateAfter: Ns`.
//! - `consolidation.enabled: true` -> `WhenEmptyOrUnderutilized` (v1beta1 `WhenUnderutilized`),
//!   `consolidateAfter: 0s`.
//! - neither -> `WhenEmptyOrUnderutilized` with `consolidateAfter: Never`. v1alpha5 documented
//!   "if omitted, the feature is disabled, nodes will never scale down": `Never` disables
//!   consolidation in v1, keeping that. The policy is v1's default so that a user who later
//!   sets `consolidateAfter` gets v1's usual behaviour.
//! - `ttlSecondsUntilExpired: N` -> `expireAfter` as a Go duration; absent -> `Never`, since
//!   v1alpha5 documented "if omitted, the feature is disabled and nodes will never expire"
//!   (v1 would otherwise default to 720h and start replacing nodes).
//! - The kubelet configuration moves to the EC2NodeClass, as in Karpenter v1.
//!
//! Past ~450 lines on purpose: the v1alpha5 types and their field-by-field conversion to v1
//! are read side by side, as Karpenter's change list is.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::defaults::{NODE_CLASS_GROUP, NODE_CLASS_KIND};
use super::diagnostics::{Note, Severity};
use super::{
    AmiSelectorTerm, BlockDeviceMapping, ConsolidationPolicy, Disruption, Duration, EC2NodeClass,
    EC2NodeClassSpec, KubeletConfiguration, Meta, MetadataOptions, NillableDuration,
    NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassRef, NodePool, NodePoolSpec,
    NodeSelectorRequirement, Operator, Quantity, SelectorTerm, Taint, TemplateMeta, labels,
};

/// The legacy `karpenter.sh/v1alpha5` `Provisioner` kind, converted to a v1 NodePool on load;
/// named apart from the service that provisions, [`crate::provision::Provisioner`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct V1Alpha5Provisioner {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: ProvisionerSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisionerSpec {
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<Taint>,
    #[serde(default)]
    pub startup_taints: Vec<Taint>,
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirement>,
    #[serde(default)]
    pub kubelet_configuration: Option<LegacyKubelet>,
    /// The inline AWS provider block (deprecated in v1alpha5 in favour of providerRef).
    #[serde(default)]
    pub provider: Option<AWSNodeTemplateSpec>,
    #[serde(default)]
    pub provider_ref: Option<ProviderRef>,
    #[serde(default)]
    pub ttl_seconds_after_empty: Option<i64>,
    #[serde(default)]
    pub ttl_seconds_until_expired: Option<i64>,
    #[serde(default)]
    pub limits: Option<Limits>,
    #[serde(default)]
    pub weight: Option<i32>,
    #[serde(default)]
    pub consolidation: Option<Consolidation>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderRef {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default)]
    pub resources: BTreeMap<String, Quantity>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consolidation {
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// v1alpha5 `kubeletConfiguration`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LegacyKubelet {
    #[serde(default, rename = "clusterDNS")]
    pub cluster_dns: Vec<String>,
    #[serde(default)]
    pub container_runtime: Option<String>,
    #[serde(default)]
    pub max_pods: Option<i32>,
    #[serde(default)]
    pub pods_per_core: Option<i32>,
    #[serde(default)]
    pub system_reserved: BTreeMap<String, String>,
    #[serde(default)]
    pub kube_reserved: BTreeMap<String, String>,
    #[serde(default)]
    pub eviction_hard: BTreeMap<String, String>,
    #[serde(default)]
    pub eviction_soft: BTreeMap<String, String>,
    #[serde(default)]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    #[serde(default)]
    pub eviction_max_pod_grace_period: Option<i32>,
    #[serde(default, rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(default, rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(default, rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AWSNodeTemplate {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: AWSNodeTemplateSpec,
}

/// v1alpha1 AWSNodeTemplate spec; the inline v1alpha5 `provider` block has the same fields
/// except `userData`, `amiSelector` and `detailedMonitoring`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AWSNodeTemplateSpec {
    /// Some inline providers carried `apiVersion: extensions.karpenter.sh/v1alpha1`, `kind: AWS`.
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub ami_family: Option<String>,
    #[serde(default)]
    pub ami_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub context: Option<String>,
    #[serde(default)]
    pub instance_profile: Option<String>,
    #[serde(default)]
    pub subnet_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub security_group_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    #[serde(default)]
    pub launch_template: Option<String>,
    #[serde(default)]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default)]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    #[serde(default)]
    pub user_data: Option<String>,
    #[serde(default)]
    pub detailed_monitoring: Option<bool>,
}

/// A converted Provisioner. With errors among its notes it is converted as far as it could
/// be, so that validation still finds every other problem in it, and it is never used.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertedProvisioner {
    pub node_pool: NodePool,
    /// The EC2NodeClass made from an inline `provider:` block, named after the Provisioner.
    pub node_class: Option<EC2NodeClass>,
    /// Kubelet settings for the class named by `providerRef`, which lives in another document.
    pub kubelet_for_ref: Option<KubeletConfiguration>,
    /// What could not be converted (errors) or carried over (warnings).
    pub notes: Vec<Note>,
}

/// A converted AWSNodeTemplate; as a Provisioner, converted as far as it could be.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertedNodeTemplate {
    pub node_class: EC2NodeClass,
    pub notes: Vec<Note>,
}

/// True when any note is an error: the converted object must not be used.
pub fn has_errors(notes: &[Note]) -> bool {
    notes.iter().any(|n| n.severity == Severity::Error)
}

/// Converts a v1alpha5 Provisioner; the errors among the notes say why it cannot be used.
pub fn convert_provisioner(p: &V1Alpha5Provisioner) -> ConvertedProvisioner {
    let s = &p.spec;
    let mut notes = Vec::new();
    let seconds = |field: &str, n: Option<i64>, notes: &mut Vec<Note>| match n {
        Some(n) if n < 0 => {
            notes.push(Note::error(
                field,
                format!("must be 0 or more seconds, got {n}"),
            ));
            None
        }
        other => other.map(|n| Duration::from_secs(n as u64)),
    };
    let empty_after = seconds(
        "spec.ttlSecondsAfterEmpty",
        s.ttl_seconds_after_empty,
        &mut notes,
    );
    let expire_after = seconds(
        "spec.ttlSecondsUntilExpired",
        s.ttl_seconds_until_expired,
        &mut notes,
    );
    let consolidation = s
        .consolidation
        .as_ref()
        .and_then(|c| c.enabled)
        .unwrap_or(false);

    let (consolidation_policy, consolidate_after) = match (empty_after, consolidation) {
        (Some(_), true) => {
            notes.push(Note::error(
                "spec.ttlSecondsAfterEmpty",
                "ttlSecondsAfterEmpty and consolidation.enabled are mutually exclusive (as in v1alpha5); keep one",
            ));
            (ConsolidationPolicy::WhenEmpty, NillableDuration::Never)
        }
        (Some(d), false) => (ConsolidationPolicy::WhenEmpty, NillableDuration::After(d)),
        (None, true) => (
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            NillableDuration::After(Duration::from_secs(0)),
        ),
        (None, false) => (
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            NillableDuration::Never,
        ),
    };

    let kubelet = s
        .kubelet_configuration
        .as_ref()
        .map(|k| convert_kubelet(k, &mut notes));
    let (class_name, node_class, kubelet_for_ref) = match (&s.provider_ref, &s.provider) {
        (Some(r), provider) => {
            if provider.is_some() {
                notes.push(Note::error(
                    "spec.provider",
                    "provider and providerRef are mutually exclusive; keep providerRef",
                ));
            }
            if let Some(kind) = r.kind.as_deref().filter(|k| *k != "AWSNodeTemplate") {
                notes.push(Note::error(
                    "spec.providerRef.kind",
                    format!("{kind:?} is not supported; allowed: AWSNodeTemplate"),
                ));
            }
            (r.name.clone(), None, kubelet)
        }
        (None, Some(provider)) => {
            let meta = Meta {
                name: p.metadata.name.clone(),
                ..Meta::default()
            };
            let mut converted = convert_aws(meta, provider, "spec.provider", false);
            notes.append(&mut converted.notes);
            converted.node_class.spec.kubelet = kubelet;
            (p.metadata.name.clone(), Some(converted.node_class), None)
        }
        (None, None) => {
            notes.push(Note::error(
                "spec.providerRef",
                "a Provisioner needs providerRef (or an inline provider) naming its AWSNodeTemplate",
            ));
            (String::new(), None, None)
        }
    };

    let node_pool = NodePool {
        metadata: p.metadata.clone(),
        spec: NodePoolSpec {
            template: NodeClaimTemplate {
                metadata: TemplateMeta {
                    labels: s.labels.clone(),
                    annotations: s.annotations.clone(),
                },
                spec: NodeClaimTemplateSpec {
                    node_class_ref: NodeClassRef {
                        group: NODE_CLASS_GROUP.into(),
                        kind: NODE_CLASS_KIND.into(),
                        name: class_name,
                    },
                    taints: s.taints.clone(),
                    startup_taints: s.startup_taints.clone(),
                    requirements: with_v1alpha5_defaults(&s.requirements),
                    expire_after: Some(
                        expire_after.map_or(NillableDuration::Never, NillableDuration::After),
                    ),
                    termination_grace_period: None,
                },
            },
            disruption: Disruption {
                consolidation_policy,
                consolidate_after,
                budgets: Disruption::default_budgets(),
            },
            limits: s
                .limits
                .as_ref()
                .map(|l| l.resources.clone())
                .unwrap_or_default(),
            weight: s.weight,
            replicas: None,
        },
    };
    ConvertedProvisioner {
        node_pool,
        node_class,
        kubelet_for_ref,
        notes,
    }
}

/// Converts a v1alpha1 AWSNodeTemplate; the errors among the notes say why it cannot be used.
pub fn convert_node_template(t: &AWSNodeTemplate) -> ConvertedNodeTemplate {
    convert_aws(t.metadata.clone(), &t.spec, "spec", true)
}

fn convert_kubelet(k: &LegacyKubelet, notes: &mut Vec<Note>) -> KubeletConfiguration {
    if k.container_runtime.is_some() {
        notes.push(Note::warning(
            "spec.kubeletConfiguration.containerRuntime",
            "ignored: Karpenter v1 removed it and nodes always run containerd",
        ));
    }
    KubeletConfiguration {
        max_pods: k.max_pods,
        pods_per_core: k.pods_per_core,
        system_reserved: k.system_reserved.clone(),
        kube_reserved: k.kube_reserved.clone(),
        eviction_hard: k.eviction_hard.clone(),
        eviction_soft: k.eviction_soft.clone(),
        eviction_soft_grace_period: k.eviction_soft_grace_period.clone(),
        eviction_max_pod_grace_period: k.eviction_max_pod_grace_period,
        cluster_dns: k.cluster_dns.clone(),
        cpu_cfs_quota: k.cpu_cfs_quota,
        image_gc_high_threshold_percent: k.image_gc_high_threshold_percent,
        image_gc_low_threshold_percent: k.image_gc_low_threshold_percent,
    }
}

/// v1alpha1 defaulted `amiFamily` to AL2.
const LEGACY_DEFAULT_AMI_FAMILY: &str = "AL2";

fn convert_aws(
    metadata: Meta,
    a: &AWSNodeTemplateSpec,
    at: &str,
    template: bool,
) -> ConvertedNodeTemplate {
    let mut notes = Vec::new();
    if a.launch_template.is_some() {
        notes.push(Note::error(
            format!("{at}.launchTemplate"),
            "launch templates are not supported (Karpenter removed them in v1beta1); \
             describe the node with amiSelector, userData, blockDeviceMappings and metadataOptions",
        ));
    }
    let family = a
        .ami_family
        .clone()
        .unwrap_or_else(|| LEGACY_DEFAULT_AMI_FAMILY.into());
    let (ami_family, ami_selector_terms) = if !a.ami_selector.is_empty() {
        // Selected AMIs keep the family's bootstrap, which v1 expresses with amiFamily.
        (Some(family), ami_terms(&a.ami_selector))
    } else {
        let alias = match family.as_str() {
            "AL2" => Some("al2"),
            "AL2023" => Some("al2023"),
            "Bottlerocket" => Some("bottlerocket"),
            "Windows2019" => Some("windows2019"),
            "Windows2022" => Some("windows2022"),
            "Custom" => {
                notes.push(Note::error(
                    format!("{at}.amiFamily"),
                    "amiFamily Custom needs an amiSelector naming the AMIs",
                ));
                None
            }
            other => {
                notes.push(Note::error(
                    format!("{at}.amiFamily"),
                    format!("{other:?} has no AMI alias in Karpenter v1 (Ubuntu was removed); allowed: AL2, AL2023, Bottlerocket, Windows2019, Windows2022, or Custom with an amiSelector"),
                ));
                None
            }
        };
        match alias {
            Some(alias) => (
                None,
                vec![AmiSelectorTerm {
                    alias: Some(format!("{alias}@latest")),
                    ..AmiSelectorTerm::default()
                }],
            ),
            // Kept as written, so validation reports nothing more about the AMIs.
            None => (Some(family), Vec::new()),
        }
    };
    let field = |name: &str| format!("{at}.{name}");
    let subnets = selector_terms(&a.subnet_selector, &field("subnetSelector"), &mut notes);
    let groups = selector_terms(
        &a.security_group_selector,
        &field("securityGroupSelector"),
        &mut notes,
    );
    if !template && (a.user_data.is_some() || !a.ami_selector.is_empty()) {
        notes.push(Note::warning(
            at.to_owned(),
            "userData and amiSelector were only read from AWSNodeTemplate in v1alpha5; carried over anyway",
        ));
    }
    let spec = EC2NodeClassSpec {
        ami_family,
        ami_selector_terms,
        subnet_selector_terms: subnets,
        security_group_selector_terms: groups,
        role: None,
        instance_profile: a.instance_profile.clone(),
        user_data: a.user_data.clone(),
        block_device_mappings: a.block_device_mappings.clone(),
        metadata_options: a.metadata_options.clone(),
        tags: a.tags.clone(),
        kubelet: None,
        associate_public_ip_address: None,
        detailed_monitoring: a.detailed_monitoring,
        instance_store_policy: None,
        context: a.context.clone(),
        capacity_reservation_selector_terms: Vec::new(),
    };
    ConvertedNodeTemplate {
        node_class: EC2NodeClass { metadata, spec },
        notes,
    }
}

/// v1alpha1 selector keys that name ids rather than tags (`aws-ids` early, `aws::ids` later).
const ID_KEYS: &[&str] = &["aws-ids", "aws::ids"];

fn split_list(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A v1alpha1 selector map -> v1 terms: ids become one term each; tags become one term whose
/// tags are ANDed, as the map's entries were.
fn selector_terms(
    selector: &BTreeMap<String, String>,
    field: &str,
    notes: &mut Vec<Note>,
) -> Vec<SelectorTerm> {
    let mut tags = selector.clone();
    let ids: Vec<String> = ID_KEYS
        .iter()
        .filter_map(|k| tags.remove(*k))
        .flat_map(|v| split_list(&v).collect::<Vec<_>>())
        .collect();
    if ids.is_empty() {
        return if tags.is_empty() {
            Vec::new()
        } else {
            vec![SelectorTerm {
                tags,
                ..SelectorTerm::default()
            }]
        };
    }
    if !tags.is_empty() {
        notes.push(Note::warning(
            field,
            "selects by ids; the other tags are dropped because v1 selects by id alone",
        ));
    }
    ids.into_iter()
        .map(|id| SelectorTerm {
            id: Some(id),
            ..SelectorTerm::default()
        })
        .collect()
}

/// A v1alpha1 amiSelector -> v1 terms: `aws::ids` one term per id; otherwise `aws::name` and
/// the tags in one term, repeated for each of `aws::owners`.
fn ami_terms(selector: &BTreeMap<String, String>) -> Vec<AmiSelectorTerm> {
    let mut tags = selector.clone();
    let ids: Vec<String> = ID_KEYS
        .iter()
        .filter_map(|k| tags.remove(*k))
        .flat_map(|v| split_list(&v).collect::<Vec<_>>())
        .collect();
    if !ids.is_empty() {
        return ids
            .into_iter()
            .map(|id| AmiSelectorTerm {
                id: Some(id),
                ..AmiSelectorTerm::default()
            })
            .collect();
    }
    let name = tags.remove("aws::name");
    let owners: Vec<String> = tags
        .remove("aws::owners")
        .map(|o| split_list(&o).collect())
        .unwrap_or_default();
    let base = AmiSelectorTerm {
        name,
        tags,
        ..AmiSelectorTerm::default()
    };
    if owners.is_empty() {
        return vec![base];
    }
    owners
        .into_iter()
        .map(|owner| AmiSelectorTerm {
            owner: Some(owner),
            ..base.clone()
        })
        .collect()
}

/// Brings a `karpenter.sh/v1beta1` NodePool to the v1 shape where that is a plain move:
/// `disruption.expireAfter` -> `template.spec.expireAfter`, `nodeClassRef.apiVersion` ->
/// `group`, `WhenUnderutilized` -> `WhenEmptyOrUnderutilized`. A v1beta1 `kubelet` block is
/// reported: v1 reads it from the EC2NodeClass.
pub fn upgrade_v1beta1_node_pool(mut value: Value, notes: &mut Vec<Note>) -> Value {
    let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) else {
        return value;
    };
    let expire = spec
        .get_mut("disruption")
        .and_then(Value::as_object_mut)
        .and_then(|d| {
            if d.get("consolidationPolicy").and_then(Value::as_str) == Some("WhenUnderutilized") {
                d.insert(
                    "consolidationPolicy".into(),
                    Value::from("WhenEmptyOrUnderutilized"),
                );
            }
            d.remove("expireAfter")
        });
    let template_spec = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut);
    if let Some(ts) = template_spec {
        if let Some(expire) = expire {
            ts.entry("expireAfter").or_insert(expire);
        }
        if ts.remove("kubelet").is_some() {
            notes.push(Note::warning(
                "spec.template.spec.kubelet",
                "ignored: Karpenter v1 reads kubelet settings from the EC2NodeClass; move them to its spec.kubelet",
            ));
        }
        if let Some(r) = ts.get_mut("nodeClassRef").and_then(Value::as_object_mut)
            && let Some(api) = r.remove("apiVersion")
        {
            let group = api
                .as_str()
                .and_then(|a| a.split('/').next())
                .unwrap_or_default()
                .to_owned();
            r.entry("group").or_insert(Value::from(group));
        }
    }
    value
}

#[derive(Serialize)]
struct Manifest<'a, T> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    #[serde(flatten)]
    object: &'a T,
}

/// Renders NodePools and EC2NodeClasses as v1 YAML documents separated by `---`.
pub fn render_v1_yaml(
    pools: &[NodePool],
    classes: &[EC2NodeClass],
) -> Result<String, serde_yaml::Error> {
    let mut docs = Vec::new();
    for np in pools {
        docs.push(serde_yaml::to_string(&Manifest {
            api_version: "karpenter.sh/v1",
            kind: "NodePool",
            object: np,
        })?);
    }
    for nc in classes {
        docs.push(serde_yaml::to_string(&Manifest {
            api_version: "karpenter.k8s.aws/v1",
            kind: "EC2NodeClass",
            object: nc,
        })?);
    }
    Ok(docs.join("---\n"))
}

#[cfg(test)]
mod tests;

/// The requirements Karpenter's v1alpha5 defaulting added to a Provisioner that did not
/// name them, so a converted Provisioner launches what it launched under Karpenter:
/// on-demand, amd64, and (when no instance-type key is named) instance categories c, m, r
/// of generation 3 or later ("If requirements are left empty, karpenter will default to
/// the following", Karpenter v0.2x getting-started, step11-create-provisioner.sh).
fn with_v1alpha5_defaults(
    requirements: &[NodeSelectorRequirement],
) -> Vec<NodeSelectorRequirement> {
    let names = |key: &str| requirements.iter().any(|r| r.key == key);
    let req = |key: &str, operator: Operator, values: &[&str]| NodeSelectorRequirement {
        key: key.into(),
        operator,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    };
    let mut out = requirements.to_vec();
    if !names(labels::CAPACITY_TYPE) {
        out.push(req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]));
    }
    if !names(labels::ARCH) {
        out.push(req(labels::ARCH, Operator::In, &["amd64"]));
    }
    let names_instance_shape = requirements.iter().any(|r| {
        r.key == labels::INSTANCE_TYPE || r.key.starts_with("karpenter.k8s.aws/instance-")
    });
    if !names_instance_shape {
        out.push(req(
            labels::INSTANCE_CATEGORY,
            Operator::In,
            &["c", "m", "r"],
        ));
        out.push(req(labels::INSTANCE_GENERATION, Operator::Gt, &["2"]));
    }
    out
}
