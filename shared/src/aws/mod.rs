//! AWS adapters: narrow ports ([`ports`]) and their EC2/SSM/IAM/Pricing implementations,
//! one module per AWS resource. SDK types are converted to the core's own types as they
//! arrive and never reach a decision.

pub mod capacity_reservations;
pub mod cloud;
pub mod delegate;
pub mod errors;
pub mod fleet;
pub mod fleet_errors;
pub mod images;
pub mod instance_profiles;
pub mod instance_types;
pub mod instances;
pub mod launch_templates;
pub mod network;
pub mod ownership;
pub mod ports;
pub mod price_list;
pub mod pricing;
pub mod profile_leftovers;
pub mod queue;
pub mod status_checks;

mod convert;

pub use cloud::{Cloud, OwnedInstances};
pub use delegate::Delegate;
pub use errors::{ApiError, AwsError, ErrorClass, classify, classify_code, classify_error};
pub use fleet::{FleetError, FleetOutcome, FleetOverride, FleetRequest, LaunchedInstance};
pub use fleet_errors::{Reach, quota_group, reach};
pub use images::{AliasVersion, AmiAlias, AmiFamily, Image, ImageAdapter, ssm_parameter_path};
pub use instance_profiles::{IamAdapter, instance_profile_name, profile_name_prefix, role_name};
pub use instance_types::{SpotPrice, TypeOffering};
pub use instances::{InstanceState, OwnedInstance, TerminateOutcome};
pub use launch_templates::{
    LaunchTemplateRef, LaunchTemplateSpec, OwnedLaunchTemplate, launch_template_prefix,
};
pub use network::{SecurityGroup, Subnet, pick_subnet_per_zone};
pub use ownership::{InstanceOwnership, is_owned};
pub use ports::{
    Fleet, ImageResolver, Impaired, InstanceInventory, InstanceProfileLeftovers, InstanceProfiles,
    InstanceStatusChecks, InstanceTypeSource, LaunchTemplates, NetworkDiscovery,
    OnDemandPriceSource, OwnInstanceProfile, StatusCheck,
};
pub use pricing::{BundledPrices, PricingAdapter, pricing_client, pricing_endpoint_region};
pub use profile_leftovers::ProfileLeftoversAdapter;
pub use queue::{FollowUpQueue, MAX_DELAY, SqsQueue};

use crate::api::labels::OWNERSHIP_TAG;

/// The EC2 adapter of one cluster: implements [`InstanceTypeSource`], [`NetworkDiscovery`],
/// [`Fleet`], [`LaunchTemplates`] and [`InstanceInventory`].
#[derive(Debug, Clone)]
pub struct Ec2Adapter {
    client: aws_sdk_ec2::Client,
    cluster: String,
}

impl Ec2Adapter {
    pub fn new(client: aws_sdk_ec2::Client, cluster: impl Into<String>) -> Ec2Adapter {
        Ec2Adapter {
            client,
            cluster: cluster.into(),
        }
    }

    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The ownership tag pair every instance and template this adapter creates carries.
    fn ownership(&self) -> (String, String) {
        (OWNERSHIP_TAG.to_string(), self.cluster.clone())
    }
}

#[cfg(test)]
mod mock_tests;

#[cfg(test)]
mod errors_tests;
