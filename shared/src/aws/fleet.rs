//! Launching one node: CreateFleet `instant` with target capacity 1 over a list of
//! (instance type, subnet) overrides, tagged in the same call so no instance is ever
//! untagged.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, InstanceLifecycle, InstanceType as SdkInstanceType,
    OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest,
    TargetCapacitySpecificationRequest,
};

use crate::catalog::{CapacityType, ReservationKind};

use super::Ec2Adapter;
use super::convert::tag_spec;
use super::errors::{AwsError, ErrorClass, api, classify_error};
use super::launch_templates::LaunchTemplateRef;
use super::ports::Fleet;
use crate::scheduling::MAX_INSTANCE_TYPES;

#[derive(Debug, Clone, PartialEq)]
pub struct FleetOverride {
    pub instance_type: String,
    pub subnet_id: String,
    pub zone: String,
    /// Lower is preferred; honoured by on-demand (`prioritized`) only.
    pub priority: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FleetRequest {
    /// The node claim id: CreateFleet's idempotency token, so a repeated invocation
    /// cannot launch twice.
    pub client_token: String,
    pub launch_template: LaunchTemplateRef,
    pub overrides: Vec<FleetOverride>,
    pub capacity_type: CapacityType,
    /// For a reserved launch, the kind of its reservation (a capacity block is launched
    /// with target capacity type `capacity-block`).
    pub reservation_kind: Option<ReservationKind>,
    /// Instance and volume tags; the adapter adds the ownership tag itself.
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchedInstance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
}

/// One override EC2 could not launch, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetError {
    pub instance_type: String,
    pub zone: String,
    pub code: String,
    pub message: String,
    pub class: ErrorClass,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetOutcome {
    pub instances: Vec<LaunchedInstance>,
    pub errors: Vec<FleetError>,
}

/// The capacity type of an instance from its lifecycle and the capacity reservation it
/// runs in: spot if EC2 says so, reserved while it runs in a reservation, otherwise
/// on-demand (an instance whose reservation ended runs on as on-demand, and Karpenter's
/// `capacityreservation.capacitytype` controller relabels it so).
pub fn capacity_type_of(lifecycle: Option<&str>, reservation: Option<&str>) -> CapacityType {
    if lifecycle.and_then(CapacityType::parse) == Some(CapacityType::Spot) {
        CapacityType::Spot
    } else if reservation.is_some_and(|r| !r.is_empty()) {
        CapacityType::Reserved
    } else {
        CapacityType::OnDemand
    }
}

fn validate(request: &FleetRequest) -> Result<(), AwsError> {
    if request.overrides.is_empty() {
        return Err(AwsError::NoOverrides {
            client_token: request.client_token.clone(),
        });
    }
    let types: BTreeSet<&str> = request
        .overrides
        .iter()
        .map(|o| o.instance_type.as_str())
        .collect();
    if types.len() > MAX_INSTANCE_TYPES {
        return Err(AwsError::TooManyInstanceTypes {
            client_token: request.client_token.clone(),
            count: types.len(),
            max: MAX_INSTANCE_TYPES,
        });
    }
    Ok(())
}

impl Ec2Adapter {
    fn fleet_call(
        &self,
        request: &FleetRequest,
    ) -> aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder {
        let mut tags = request.tags.clone();
        let (k, v) = self.ownership();
        tags.insert(k, v);
        let overrides = request
            .overrides
            .iter()
            .map(|o| {
                FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(SdkInstanceType::from(o.instance_type.as_str()))
                    .subnet_id(&o.subnet_id)
                    .availability_zone(&o.zone)
                    .set_priority(o.priority)
                    .build()
            })
            .collect();
        let template = FleetLaunchTemplateSpecificationRequest::builder()
            .launch_template_id(&request.launch_template.id)
            .version("$Latest")
            .build();
        let prioritized = request.overrides.iter().any(|o| o.priority.is_some());
        let (default_type, call) = match request.capacity_type {
            CapacityType::Spot => (
                DefaultTargetCapacityType::Spot,
                self.client.create_fleet().spot_options(
                    SpotOptionsRequest::builder()
                        .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                        .build(),
                ),
            ),
            CapacityType::Reserved => (
                match request.reservation_kind {
                    Some(ReservationKind::CapacityBlock) => {
                        DefaultTargetCapacityType::CapacityBlock
                    }
                    _ => DefaultTargetCapacityType::OnDemand,
                },
                self.client.create_fleet(),
            ),
            CapacityType::OnDemand => (
                DefaultTargetCapacityType::OnDemand,
                self.client.create_fleet().on_demand_options(
                    OnDemandOptionsRequest::builder()
                        .allocation_strategy(if prioritized {
                            FleetOnDemandAllocationStrategy::Prioritized
                        } else {
                            FleetOnDemandAllocationStrategy::LowestPrice
                        })
                        .build(),
                ),
            ),
        };
        call.r#type(FleetType::Instant)
            .client_token(&request.client_token)
            .launch_template_configs(
                FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(template)
                    .set_overrides(Some(overrides))
                    .build(),
            )
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(default_type)
                    .build(),
            )
            .tag_specifications(tag_spec(ResourceType::Instance, &tags))
            .tag_specifications(tag_spec(ResourceType::Volume, &tags))
            // The fleet itself too: the IAM policy allows CreateFleet on `fleet/*` only
            // with the ownership tag in the request (template.yaml, LaunchOnlyTaggedAsOurs).
            .tag_specifications(tag_spec(ResourceType::Fleet, &tags))
    }
}

/// Our outcome from EC2's answer; zones missing from an answer are looked up by subnet in
/// the request.
pub fn outcome(request: &FleetRequest, out: &CreateFleetOutput) -> FleetOutcome {
    let zone_of = |zone: Option<&str>, subnet: Option<&str>| -> String {
        zone.map(str::to_string)
            .or_else(|| {
                let subnet = subnet?;
                request
                    .overrides
                    .iter()
                    .find(|o| o.subnet_id == subnet)
                    .map(|o| o.zone.clone())
            })
            .unwrap_or_default()
    };
    let mut result = FleetOutcome::default();
    for launched in out.instances() {
        let overrides = launched
            .launch_template_and_overrides
            .as_ref()
            .and_then(|l| l.overrides.as_ref());
        let zone = zone_of(
            overrides.and_then(|o| o.availability_zone.as_deref()),
            overrides.and_then(|o| o.subnet_id.as_deref()),
        );
        let instance_type = launched
            .instance_type
            .as_ref()
            .or(overrides.and_then(|o| o.instance_type.as_ref()))
            .map(|t| t.as_str().to_string())
            .unwrap_or_default();
        let capacity_type = match launched.lifecycle.as_ref() {
            Some(InstanceLifecycle::Spot) => CapacityType::Spot,
            Some(_) if request.capacity_type != CapacityType::Reserved => CapacityType::OnDemand,
            _ => request.capacity_type,
        };
        for id in launched.instance_ids() {
            result.instances.push(LaunchedInstance {
                id: id.clone(),
                instance_type: instance_type.clone(),
                zone: zone.clone(),
                capacity_type,
            });
        }
    }
    for e in out.errors() {
        let overrides = e
            .launch_template_and_overrides
            .as_ref()
            .and_then(|l| l.overrides.as_ref());
        let code = e.error_code.clone().unwrap_or_default();
        let message = e.error_message.clone().unwrap_or_default();
        result.errors.push(FleetError {
            instance_type: overrides
                .and_then(|o| o.instance_type.as_ref())
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            zone: zone_of(
                overrides.and_then(|o| o.availability_zone.as_deref()),
                overrides.and_then(|o| o.subnet_id.as_deref()),
            ),
            class: classify_error(&code, &message),
            code,
            message,
        });
    }
    result
}

impl Fleet for Ec2Adapter {
    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetOutcome, AwsError> {
        validate(request)?;
        let out = self
            .fleet_call(request)
            .send()
            .await
            .map_err(api(|source| AwsError::CreateFleet {
                client_token: request.client_token.clone(),
                source,
            }))?;
        Ok(outcome(request, &out))
    }
}
