//! What a node boots with, from its EC2NodeClass: the AMI family (which user data format),
//! and the launch template spec (image, user data, security groups, instance profile,
//! volumes, metadata options). Pure: images and security groups are resolved by the caller.

use std::collections::BTreeMap;

use crate::api::{EC2NodeClassSpec, Taint};
use crate::aws::launch_templates::{BlockDevice, MetadataOptions, ReservationUse};
use crate::aws::{AmiAlias, LaunchTemplateSpec, role_name};
use crate::userdata::{AmiFamily, NodeBootstrap, UserDataError, render_user_data};

/// What the cluster tells every node (from DescribeCluster).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    pub name: String,
    pub endpoint: String,
    pub ca_bundle_base64: String,
    pub service_cidr: String,
    /// `major.minor`, for AMI aliases.
    pub kubernetes_version: String,
}

#[derive(Debug, thiserror::Error)]
pub enum NodeTemplateError {
    #[error("EC2NodeClass {class}: {field}: {reason}")]
    Field {
        class: String,
        field: &'static str,
        reason: String,
    },
    #[error("EC2NodeClass {class}: user data")]
    UserData {
        class: String,
        #[source]
        source: UserDataError,
    },
}

/// The bootstrap format: the first alias's family, else `amiFamily`. Karpenter v1 requires
/// `amiFamily` when no term is an alias, so neither is an error naming the field.
pub fn ami_family(class: &str, spec: &EC2NodeClassSpec) -> Result<AmiFamily, NodeTemplateError> {
    let field_error = |field, reason: String| NodeTemplateError::Field {
        class: class.to_string(),
        field,
        reason,
    };
    if let Some(alias) = spec
        .ami_selector_terms
        .iter()
        .find_map(|t| t.alias.as_deref())
    {
        let parsed = AmiAlias::parse(alias)
            .map_err(|e| field_error("spec.amiSelectorTerms[].alias", e.to_string()))?;
        return Ok(match parsed.family {
            crate::aws::AmiFamily::Al2023 => AmiFamily::Al2023,
            crate::aws::AmiFamily::Al2 => AmiFamily::Al2,
            crate::aws::AmiFamily::Bottlerocket => AmiFamily::Bottlerocket,
        });
    }
    match spec
        .ami_family
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("al2023") => Ok(AmiFamily::Al2023),
        Some("al2") => Ok(AmiFamily::Al2),
        Some("bottlerocket") => Ok(AmiFamily::Bottlerocket),
        Some("custom") => Ok(AmiFamily::Custom),
        Some(other) => Err(field_error(
            "spec.amiFamily",
            format!("{other:?} is not one of AL2023, AL2, Bottlerocket, Custom"),
        )),
        None => Err(field_error(
            "spec.amiFamily",
            "required when no amiSelectorTerms entry is an alias".into(),
        )),
    }
}

/// Everything that goes into one launch template.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTemplateInput<'a> {
    pub class_name: &'a str,
    pub spec: &'a EC2NodeClassSpec,
    pub cluster: &'a ClusterFacts,
    pub image_id: &'a str,
    pub security_group_ids: Vec<String>,
    /// The instance profile nodes of this class get, resolved by the caller from
    /// [`profile_choice`].
    pub instance_profile: &'a str,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// For a spot launch (see [`LaunchTemplateSpec::spot`]).
    pub spot: bool,
    /// See [`LaunchTemplateSpec::reservations`].
    pub reservations: Option<ReservationUse>,
}

/// Where the instance profile of a class's nodes comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileChoice {
    /// The class names `instanceProfile`: used as it is.
    Named(String),
    /// The stack's own profile (`NODE_INSTANCE_PROFILE`): the class names the stack's node
    /// role, or neither a role nor a profile. No IAM call is needed.
    StackDefault,
    /// The class names another `role` (its bare name here): nodewright's profile for it,
    /// created if needed.
    ForRole(String),
}

/// The profile choice for a class, given the stack's node role (`NODE_ROLE`). Roles are
/// compared by bare name, so `nodes`, `team/nodes` and a role ARN ending in `/nodes` are
/// the same role. Karpenter v1 makes `role` and `instanceProfile` exclusive; should both
/// be set, the named profile wins, as it is the more explicit of the two.
pub fn profile_choice(spec: &EC2NodeClassSpec, default_node_role: &str) -> ProfileChoice {
    if let Some(profile) = spec
        .instance_profile
        .as_deref()
        .filter(|p| !p.trim().is_empty())
    {
        return ProfileChoice::Named(profile.to_string());
    }
    let role = spec.role.as_deref().map(role_name).unwrap_or_default();
    if role.is_empty() || role == role_name(default_node_role) {
        ProfileChoice::StackDefault
    } else {
        ProfileChoice::ForRole(role.to_string())
    }
}

/// The launch template spec for a node of this class, with the instance profile the caller
/// resolved (see [`profile_choice`]).
pub fn launch_template_spec(
    input: &NodeTemplateInput<'_>,
) -> Result<LaunchTemplateSpec, NodeTemplateError> {
    let spec = input.spec;
    let family = ami_family(input.class_name, spec)?;
    let bootstrap = NodeBootstrap {
        cluster_name: input.cluster.name.clone(),
        endpoint: input.cluster.endpoint.clone(),
        ca_bundle_base64: input.cluster.ca_bundle_base64.clone(),
        service_cidr: input.cluster.service_cidr.clone(),
        cluster_dns: vec![],
        labels: input.labels.clone(),
        taints: input.taints.clone(),
        // One template serves every candidate type, so max pods is left to the AMI's own
        // per-type default unless the class sets `kubelet.maxPods`.
        max_pods: None,
        kubelet: spec.kubelet.clone(),
    };
    let user_data =
        render_user_data(family, &bootstrap, spec.user_data.as_deref()).map_err(|source| {
            NodeTemplateError::UserData {
                class: input.class_name.to_string(),
                source,
            }
        })?;
    let mut security_group_ids = input.security_group_ids.clone();
    security_group_ids.sort();
    Ok(LaunchTemplateSpec {
        image_id: input.image_id.to_string(),
        user_data,
        security_group_ids,
        instance_profile: input.instance_profile.to_string(),
        block_devices: block_devices(input.class_name, spec)?,
        metadata: metadata(spec),
        associate_public_ip_address: spec.associate_public_ip_address,
        detailed_monitoring: spec.detailed_monitoring.unwrap_or(false),
        tags: spec.tags.clone(),
        spot: input.spot,
        reservations: input.reservations.clone(),
    })
}

const GIB: i64 = 1 << 30;

fn block_devices(
    class: &str,
    spec: &EC2NodeClassSpec,
) -> Result<Vec<BlockDevice>, NodeTemplateError> {
    let field_error = |field, reason: String| NodeTemplateError::Field {
        class: class.to_string(),
        field,
        reason,
    };
    let mut out = Vec::new();
    for m in &spec.block_device_mappings {
        let Some(device_name) = m.device_name.clone() else {
            continue;
        };
        let ebs = m.ebs.clone().unwrap_or_default();
        let volume_size_gib = match &ebs.volume_size {
            None => None,
            Some(q) => {
                let bytes = q.milli().map_err(|e| {
                    field_error("spec.blockDeviceMappings[].ebs.volumeSize", e.to_string())
                })? / 1000;
                // EBS sizes are whole GiB; round a size like 100G up rather than under-size.
                let gib = (bytes + GIB - 1) / GIB;
                Some(i32::try_from(gib).map_err(|_| {
                    field_error(
                        "spec.blockDeviceMappings[].ebs.volumeSize",
                        format!("{} is larger than EBS allows", q.0),
                    )
                })?)
            }
        };
        let small = |v: Option<i64>, field| {
            v.map(|x| {
                i32::try_from(x).map_err(|_| field_error(field, format!("{x} is out of range")))
            })
            .transpose()
        };
        out.push(BlockDevice {
            device_name,
            volume_size_gib,
            volume_type: ebs.volume_type.clone(),
            iops: small(ebs.iops, "spec.blockDeviceMappings[].ebs.iops")?,
            throughput: small(ebs.throughput, "spec.blockDeviceMappings[].ebs.throughput")?,
            encrypted: ebs.encrypted,
            kms_key_id: ebs.kms_key_id.clone(),
            snapshot_id: ebs.snapshot_id.clone(),
            delete_on_termination: ebs.delete_on_termination,
        });
    }
    Ok(out)
}

fn metadata(spec: &EC2NodeClassSpec) -> MetadataOptions {
    let default = MetadataOptions::default();
    let Some(m) = &spec.metadata_options else {
        return default;
    };
    MetadataOptions {
        http_endpoint_enabled: m
            .http_endpoint
            .as_deref()
            .map_or(default.http_endpoint_enabled, |v| v == "enabled"),
        http_tokens_required: m
            .http_tokens
            .as_deref()
            .map_or(default.http_tokens_required, |v| v == "required"),
        http_put_response_hop_limit: m
            .http_put_response_hop_limit
            .and_then(|h| i32::try_from(h).ok())
            .unwrap_or(default.http_put_response_hop_limit),
        http_protocol_ipv6: m
            .http_protocol_ipv6
            .as_deref()
            .map_or(default.http_protocol_ipv6, |v| v == "enabled"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{AmiSelectorTerm, BlockDeviceMapping, Quantity};

    fn spec_with_alias(alias: &str) -> EC2NodeClassSpec {
        EC2NodeClassSpec {
            ami_selector_terms: vec![AmiSelectorTerm {
                alias: Some(alias.into()),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn the_alias_decides_the_family_else_ami_family_else_it_is_an_error() {
        let cases: [(EC2NodeClassSpec, Option<AmiFamily>); 5] = [
            (spec_with_alias("al2023@latest"), Some(AmiFamily::Al2023)),
            (
                spec_with_alias("bottlerocket@v1.20.0"),
                Some(AmiFamily::Bottlerocket),
            ),
            (
                EC2NodeClassSpec {
                    ami_family: Some("Custom".into()),
                    ..Default::default()
                },
                Some(AmiFamily::Custom),
            ),
            (
                EC2NodeClassSpec {
                    ami_family: Some("Windows2022".into()),
                    ..Default::default()
                },
                None,
            ),
            (EC2NodeClassSpec::default(), None),
        ];
        for (spec, want) in cases {
            assert_eq!(ami_family("c", &spec).ok(), want, "{spec:?}");
        }
    }

    #[test]
    fn the_profile_is_the_named_one_else_the_stack_one_for_its_role_else_one_per_role() {
        let class = |role: Option<&str>, profile: Option<&str>| EC2NodeClassSpec {
            role: role.map(String::from),
            instance_profile: profile.map(String::from),
            ..Default::default()
        };
        let stack_role = "nodewright-node-demo";
        let cases = [
            (
                class(None, Some("team-profile")),
                ProfileChoice::Named("team-profile".into()),
            ),
            (
                class(Some("other-role"), Some("team-profile")),
                ProfileChoice::Named("team-profile".into()),
            ),
            (class(None, None), ProfileChoice::StackDefault),
            (class(None, Some(" ")), ProfileChoice::StackDefault),
            (class(Some(stack_role), None), ProfileChoice::StackDefault),
            (
                class(
                    Some("arn:aws:iam::123456789012:role/nodewright-node-demo"),
                    None,
                ),
                ProfileChoice::StackDefault,
            ),
            (
                class(Some("gpu-nodes"), None),
                ProfileChoice::ForRole("gpu-nodes".into()),
            ),
            (
                class(
                    Some("arn:aws:iam::123456789012:role/nodewright/gpu-nodes"),
                    None,
                ),
                ProfileChoice::ForRole("gpu-nodes".into()),
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(profile_choice(&spec, stack_role), want, "{spec:?}");
        }
        // A stack without a node role of its own (NODE_ROLE unset) creates profiles for
        // every role a class names.
        assert_eq!(
            profile_choice(&class(Some(stack_role), None), ""),
            ProfileChoice::ForRole(stack_role.into())
        );
    }

    #[test]
    fn the_spec_carries_the_class_profile_volumes_and_imds_defaults() {
        let mut spec = spec_with_alias("al2023@latest");
        spec.block_device_mappings = vec![BlockDeviceMapping {
            device_name: Some("/dev/xvda".into()),
            root_volume: Some(true),
            ebs: Some(crate::api::BlockDevice {
                volume_size: Some(Quantity("100Gi".into())),
                volume_type: Some("gp3".into()),
                ..Default::default()
            }),
        }];
        spec.tags.insert("team".into(), "web".into());
        let cluster = ClusterFacts {
            name: "demo".into(),
            endpoint: "https://example.eks.amazonaws.com".into(),
            ca_bundle_base64: "Y2E=".into(),
            service_cidr: "10.100.0.0/16".into(),
            kubernetes_version: "1.31".into(),
        };
        let input = NodeTemplateInput {
            class_name: "default",
            spec: &spec,
            cluster: &cluster,
            image_id: "ami-1",
            security_group_ids: vec!["sg-2".into(), "sg-1".into()],
            instance_profile: "demo-node",
            labels: BTreeMap::new(),
            taints: vec![],
            spot: false,
            reservations: None,
        };
        let Ok(lt) = launch_template_spec(&input) else {
            panic!("valid class must give a spec")
        };
        assert_eq!(lt.instance_profile, "demo-node");
        assert_eq!(lt.security_group_ids, ["sg-1", "sg-2"]);
        assert_eq!(
            lt.block_devices.first().and_then(|d| d.volume_size_gib),
            Some(100)
        );
        assert_eq!(lt.metadata, MetadataOptions::default());
        assert!(lt.user_data.contains("https://example.eks.amazonaws.com"));
        assert_eq!(lt.tags.get("team").map(String::as_str), Some("web"));
    }
}
