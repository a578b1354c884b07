//! Launch templates, content-addressed: the name is `nodewright/<cluster>/<hash>` where the
//! hash covers everything in the spec, so an unchanged spec reuses its template and a
//! changed one gets a new template. Old ones are collected by the provisioner
//! (`provision::template_gc` decides which).

use std::collections::BTreeMap;
use std::time::SystemTime;

use aws_sdk_ec2::types::{
    LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceMetadataProtocolIpv6, LaunchTemplateTagSpecificationRequest,
    RequestLaunchTemplateData, ResourceType, Tag, VolumeType,
};
use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Ec2Adapter;
use super::convert::{filter, tag_spec};
use super::errors::{AwsError, ErrorClass, api};
use super::ports::LaunchTemplates;
use crate::catalog::ReservationKind;

/// Hex digits of the spec hash in the name: 64 bits, as Karpenter's template hash.
const HASH_HEX_LEN: usize = 16;

/// Everything a node's launch template says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LaunchTemplateSpec {
    pub image_id: String,
    /// Plain text; base64-encoded when sent.
    pub user_data: String,
    pub security_group_ids: Vec<String>,
    pub instance_profile: String,
    pub block_devices: Vec<BlockDevice>,
    pub metadata: MetadataOptions,
    pub associate_public_ip_address: Option<bool>,
    pub detailed_monitoring: bool,
    /// Tags of the template itself (the EC2NodeClass tags); instances, volumes and the
    /// fleet get theirs from the CreateFleet call, the network interface (and the spot
    /// request) from the template's data, with the ownership tag added.
    pub tags: BTreeMap<String, String>,
    /// A template for spot launches. Its data also tags the spot instance request, which
    /// the launch policy requires tagged (`LaunchOnlyTaggedAsOurs`) and CreateFleet cannot
    /// tag; an on-demand launch creates no such request, and EC2 fails a launch whose
    /// template tags a resource type it does not create, so the two never share a template.
    pub spot: bool,
    /// Where a launch from it may take capacity reservations (`None`: EC2's default, any
    /// open reservation that matches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservations: Option<ReservationUse>,
}

/// How a launch template's instances use capacity reservations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ReservationUse {
    /// Into this reservation only (a reserved launch).
    Only { id: String, kind: ReservationKind },
    /// Into none: the class's spot and on-demand launches, so that they never take room in
    /// an open reservation that its reserved launches are planned into (as Karpenter).
    None,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    pub device_name: String,
    pub volume_size_gib: Option<i32>,
    pub volume_type: Option<String>,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub encrypted: Option<bool>,
    pub kms_key_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub delete_on_termination: Option<bool>,
}

/// Instance metadata service options; the default is Karpenter's (IMDSv2 required, hop
/// limit 1, IPv6 endpoint off).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetadataOptions {
    pub http_endpoint_enabled: bool,
    pub http_tokens_required: bool,
    pub http_put_response_hop_limit: i32,
    pub http_protocol_ipv6: bool,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        MetadataOptions {
            http_endpoint_enabled: true,
            http_tokens_required: true,
            http_put_response_hop_limit: 1,
            http_protocol_ipv6: false,
        }
    }
}

/// A template to launch from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchTemplateRef {
    pub id: String,
    pub name: String,
}

/// One of this cluster's templates, as listed for garbage collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedLaunchTemplate {
    pub name: String,
    pub id: String,
    /// EC2's `CreateTime`; None if EC2 did not say (such a template is never collected).
    pub created: Option<SystemTime>,
}

/// `nodewright/<cluster>/`: every template of this cluster is named with it.
pub fn launch_template_prefix(cluster: &str) -> String {
    format!("nodewright/{cluster}/")
}

impl LaunchTemplateSpec {
    /// `nodewright/<cluster>/<first 16 hex digits of sha256(spec)>`.
    pub fn name(&self, cluster: &str) -> String {
        // Serialising a struct of strings, numbers and a BTreeMap cannot fail; should it
        // ever, the Debug form is an equally stable input.
        let bytes = serde_json::to_vec(self).unwrap_or_else(|_| format!("{self:?}").into_bytes());
        let hash = hex::encode(Sha256::digest(&bytes));
        format!(
            "{}{}",
            launch_template_prefix(cluster),
            &hash[..HASH_HEX_LEN]
        )
    }

    /// The template's data; `tags` (the ownership tag among them) go on what a launch
    /// creates that CreateFleet's own tag specifications cannot name.
    fn data(&self, tags: &BTreeMap<String, String>) -> RequestLaunchTemplateData {
        let m = &self.metadata;
        let metadata = LaunchTemplateInstanceMetadataOptionsRequest::builder()
            .http_endpoint(if m.http_endpoint_enabled {
                LaunchTemplateInstanceMetadataEndpointState::Enabled
            } else {
                LaunchTemplateInstanceMetadataEndpointState::Disabled
            })
            .http_tokens(if m.http_tokens_required {
                LaunchTemplateHttpTokensState::Required
            } else {
                LaunchTemplateHttpTokensState::Optional
            })
            .http_put_response_hop_limit(m.http_put_response_hop_limit)
            .http_protocol_ipv6(if m.http_protocol_ipv6 {
                LaunchTemplateInstanceMetadataProtocolIpv6::Enabled
            } else {
                LaunchTemplateInstanceMetadataProtocolIpv6::Disabled
            })
            .build();
        let mut data = RequestLaunchTemplateData::builder()
            .image_id(&self.image_id)
            .user_data(base64::engine::general_purpose::STANDARD.encode(&self.user_data))
            .set_security_group_ids(Some(self.security_group_ids.clone()))
            .iam_instance_profile(
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(&self.instance_profile)
                    .build(),
            )
            .metadata_options(metadata)
            .monitoring(
                aws_sdk_ec2::types::LaunchTemplatesMonitoringRequest::builder()
                    .enabled(self.detailed_monitoring)
                    .build(),
            );
        for d in &self.block_devices {
            let ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
                .set_volume_size(d.volume_size_gib)
                .set_volume_type(d.volume_type.as_deref().map(VolumeType::from))
                .set_iops(d.iops)
                .set_throughput(d.throughput)
                .set_encrypted(d.encrypted)
                .set_kms_key_id(d.kms_key_id.clone())
                .set_snapshot_id(d.snapshot_id.clone())
                .set_delete_on_termination(d.delete_on_termination)
                .build();
            data = data.block_device_mappings(
                LaunchTemplateBlockDeviceMappingRequest::builder()
                    .device_name(&d.device_name)
                    .ebs(ebs)
                    .build(),
            );
        }
        // Karpenter tags the same two in its templates (CreateLaunchTemplateInputBuilder).
        data = data.tag_specifications(launch_tag_spec(ResourceType::NetworkInterface, tags));
        if self.spot {
            data =
                data.tag_specifications(launch_tag_spec(ResourceType::SpotInstancesRequest, tags));
        }
        if let Some(reservations) = &self.reservations {
            data = with_reservations(data, reservations);
        }
        if let Some(public) = self.associate_public_ip_address {
            data = data.network_interfaces(
                aws_sdk_ec2::types::LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                    .device_index(0)
                    .associate_public_ip_address(public)
                    .set_groups(Some(self.security_group_ids.clone()))
                    .build(),
            );
            // Security groups go on the interface when one is specified (EC2 refuses both).
            data = data.set_security_group_ids(None);
        }
        data.build()
    }
}

/// `data` launching into `use_`'s reservations: `capacity-reservations-only` with the target
/// (and market type `capacity-block` for a block, which EC2 requires), or `none`.
fn with_reservations(
    data: aws_sdk_ec2::types::builders::RequestLaunchTemplateDataBuilder,
    use_: &ReservationUse,
) -> aws_sdk_ec2::types::builders::RequestLaunchTemplateDataBuilder {
    use aws_sdk_ec2::types::{
        CapacityReservationPreference, CapacityReservationTarget,
        LaunchTemplateCapacityReservationSpecificationRequest,
        LaunchTemplateInstanceMarketOptionsRequest, MarketType,
    };
    match use_ {
        ReservationUse::Only { id, kind } => {
            let data = data.capacity_reservation_specification(
                LaunchTemplateCapacityReservationSpecificationRequest::builder()
                    .capacity_reservation_preference(
                        CapacityReservationPreference::CapacityReservationsOnly,
                    )
                    .capacity_reservation_target(
                        CapacityReservationTarget::builder()
                            .capacity_reservation_id(id)
                            .build(),
                    )
                    .build(),
            );
            match kind {
                ReservationKind::CapacityBlock => data.instance_market_options(
                    LaunchTemplateInstanceMarketOptionsRequest::builder()
                        .market_type(MarketType::CapacityBlock)
                        .build(),
                ),
                ReservationKind::Default => data,
            }
        }
        ReservationUse::None => data.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_preference(CapacityReservationPreference::None)
                .build(),
        ),
    }
}

impl Ec2Adapter {
    async fn find_launch_template(
        &self,
        name: &str,
    ) -> Result<Option<LaunchTemplateRef>, AwsError> {
        let result = self
            .client
            .describe_launch_templates()
            .launch_template_names(name)
            .send()
            .await;
        match result {
            Ok(out) => Ok(out.launch_templates().iter().find_map(|t| {
                Some(LaunchTemplateRef {
                    id: t.launch_template_id.clone()?,
                    name: t.launch_template_name.clone()?,
                })
            })),
            Err(e) => {
                let err = api(|source| AwsError::DescribeLaunchTemplates {
                    name: name.to_string(),
                    source,
                })(e);
                if err.class() == ErrorClass::NotFound {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }
}

impl LaunchTemplates for Ec2Adapter {
    async fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, AwsError> {
        let name = spec.name(&self.cluster);
        if let Some(found) = self.find_launch_template(&name).await? {
            return Ok(found);
        }
        let mut tags = spec.tags.clone();
        let (k, v) = self.ownership();
        tags.insert(k, v);
        let created = self
            .client
            .create_launch_template()
            .launch_template_name(&name)
            .launch_template_data(spec.data(&tags))
            .tag_specifications(tag_spec(ResourceType::LaunchTemplate, &tags))
            .send()
            .await;
        match created {
            Ok(out) => {
                let id = out
                    .launch_template
                    .and_then(|t| t.launch_template_id)
                    .ok_or_else(|| AwsError::LaunchTemplateVanished { name: name.clone() })?;
                Ok(LaunchTemplateRef { id, name })
            }
            // Another invocation created it between our describe and create: theirs is
            // identical (same hash), use it.
            Err(e)
                if aws_smithy_types::error::metadata::ProvideErrorMetadata::code(&e)
                    == Some("InvalidLaunchTemplateName.AlreadyExistsException") =>
            {
                self.find_launch_template(&name)
                    .await?
                    .ok_or(AwsError::LaunchTemplateVanished { name })
            }
            Err(e) => Err(api(|source| AwsError::CreateLaunchTemplate {
                name,
                source,
            })(e)),
        }
    }

    async fn list_launch_templates(&self) -> Result<Vec<OwnedLaunchTemplate>, AwsError> {
        let (k, v) = self.ownership();
        let prefix = launch_template_prefix(&self.cluster);
        let templates = self
            .client
            .describe_launch_templates()
            .filters(filter(&format!("tag:{k}"), &[v]))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(api(|source| AwsError::DescribeLaunchTemplates {
                name: format!("{prefix}*"),
                source,
            }))?;
        // Tag AND name: a template someone tagged by hand, or copied with our tag, is not
        // ours unless it also carries our name.
        Ok(templates
            .into_iter()
            .filter_map(|t| {
                let name = t.launch_template_name?;
                name.starts_with(&prefix).then(|| OwnedLaunchTemplate {
                    id: t.launch_template_id.unwrap_or_default(),
                    created: t.create_time.and_then(|c| SystemTime::try_from(c).ok()),
                    name,
                })
            })
            .collect())
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), AwsError> {
        let prefix = launch_template_prefix(&self.cluster);
        if !name.starts_with(&prefix) {
            return Err(AwsError::NotOurLaunchTemplate {
                name: name.to_string(),
                prefix,
            });
        }
        let result = self
            .client
            .delete_launch_template()
            .launch_template_name(name)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) => {
                let err = api(|source| AwsError::DeleteLaunchTemplate {
                    name: name.to_string(),
                    source,
                })(e);
                // Already gone (another container collected it) is what we wanted.
                if err.class() == ErrorClass::NotFound {
                    Ok(())
                } else {
                    Err(err)
                }
            }
        }
    }
}

/// Tags for what a launch from the template creates (the launch-template flavour of
/// [`tag_spec`]).
fn launch_tag_spec(
    resource: ResourceType,
    tags: &BTreeMap<String, String>,
) -> LaunchTemplateTagSpecificationRequest {
    let mut spec = LaunchTemplateTagSpecificationRequest::builder().resource_type(resource);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(k).value(v).build());
    }
    spec.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_specs_share_a_name_and_any_change_gives_a_new_one() {
        let spec = LaunchTemplateSpec {
            image_id: "ami-1".into(),
            ..Default::default()
        };
        let name = spec.name("demo");
        assert!(name.starts_with("nodewright/demo/"), "{name}");
        assert_eq!(name.len(), "nodewright/demo/".len() + HASH_HEX_LEN);
        assert_eq!(spec.clone().name("demo"), name);
        let changed = LaunchTemplateSpec {
            user_data: "x".into(),
            ..spec.clone()
        };
        assert_ne!(changed.name("demo"), name);
    }

    #[test]
    fn reservations_give_their_own_templates_and_none_keeps_the_name_it_had() {
        let spec = LaunchTemplateSpec {
            image_id: "ami-1".into(),
            ..Default::default()
        };
        // A template without reservations hashes as before they were read: an upgrade
        // must not make every node's template look changed.
        let hashed = serde_json::to_string(&spec).unwrap_or_default();
        assert!(!hashed.contains("reservations"), "{hashed}");
        let with = |r| LaunchTemplateSpec {
            reservations: Some(r),
            ..spec.clone()
        };
        let only = |id: &str| ReservationUse::Only {
            id: id.into(),
            kind: ReservationKind::Default,
        };
        let names = [
            spec.name("demo"),
            with(ReservationUse::None).name("demo"),
            with(only("cr-0aa")).name("demo"),
            with(only("cr-0bb")).name("demo"),
        ];
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
    }
}
