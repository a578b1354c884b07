//! Adapter tests against canned EC2 answers (`aws-smithy-mocks`): what moto cannot show —
//! capacity errors, throttling, several pages.

use aws_sdk_ec2::operation::create_fleet::{CreateFleetError, CreateFleetOutput};
use aws_sdk_ec2::operation::describe_instance_types::DescribeInstanceTypesOutput;
use aws_sdk_ec2::types::{
    ArchitectureType, CreateFleetError as SdkFleetError, CreateFleetInstance,
    FleetLaunchTemplateOverrides, InstanceLifecycle, InstanceType as SdkInstanceType,
    InstanceTypeInfo, LaunchTemplateAndOverridesResponse, MemoryInfo, ProcessorInfo, VCpuInfo,
};
use aws_smithy_mocks::{MockResponseInterceptor, Rule, RuleMode, mock};
use aws_smithy_types::error::ErrorMetadata;

use crate::catalog::CapacityType;

use super::{
    Ec2Adapter, ErrorClass, Fleet, FleetOverride, FleetRequest, InstanceTypeSource,
    LaunchTemplateRef,
};

/// An EC2 client whose every call is answered by the rules; retries are off so one rule
/// answer is one call.
fn ec2(rules: &[&Rule]) -> aws_sdk_ec2::Client {
    let mut interceptor = MockResponseInterceptor::new().rule_mode(RuleMode::MatchAny);
    for rule in rules {
        interceptor = interceptor.with_rule(rule);
    }
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "AKIDTEST", "secret", None, None, "test",
        ))
        .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
        .http_client(aws_smithy_mocks::create_mock_http_client())
        .interceptor(interceptor)
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

fn request(capacity_type: CapacityType) -> FleetRequest {
    FleetRequest {
        client_token: "claim-1".into(),
        launch_template: LaunchTemplateRef {
            id: "lt-1".into(),
            name: "nodewright/demo/abc".into(),
        },
        overrides: vec![
            FleetOverride {
                instance_type: "m5.large".into(),
                subnet_id: "subnet-a".into(),
                zone: "us-east-1a".into(),
                priority: None,
            },
            FleetOverride {
                instance_type: "c5.large".into(),
                subnet_id: "subnet-b".into(),
                zone: "us-east-1b".into(),
                priority: None,
            },
        ],
        capacity_type,
        reservation_kind: None,
        tags: [("nodewright.io/nodeclaim".to_string(), "claim-1".to_string())].into(),
    }
}

fn fleet_error(instance_type: &str, subnet: &str, code: &str) -> SdkFleetError {
    SdkFleetError::builder()
        .launch_template_and_overrides(
            LaunchTemplateAndOverridesResponse::builder()
                .overrides(
                    FleetLaunchTemplateOverrides::builder()
                        .instance_type(SdkInstanceType::from(instance_type))
                        .subnet_id(subnet)
                        .build(),
                )
                .build(),
        )
        .lifecycle(InstanceLifecycle::Spot)
        .error_code(code)
        .error_message(format!("{code} for {instance_type}"))
        .build()
}

#[tokio::test]
async fn insufficient_capacity_per_override_is_reported_as_fleet_errors_classified() {
    let rule = mock!(aws_sdk_ec2::Client::create_fleet)
        .match_requests(|r| {
            r.client_token() == Some("claim-1")
                && r.r#type() == Some(&aws_sdk_ec2::types::FleetType::Instant)
                && r.tag_specifications().iter().any(|s| {
                    s.tags().iter().any(|t| {
                        t.key() == Some("nodewright.io/cluster") && t.value() == Some("demo")
                    })
                })
        })
        .then_output(|| {
            CreateFleetOutput::builder()
                .errors(fleet_error(
                    "m5.large",
                    "subnet-a",
                    "InsufficientInstanceCapacity",
                ))
                .errors(fleet_error(
                    "c5.large",
                    "subnet-b",
                    "MaxSpotInstanceCountExceeded",
                ))
                .build()
        });
    let adapter = Ec2Adapter::new(ec2(&[&rule]), "demo");

    let outcome = adapter
        .create_fleet(&request(CapacityType::Spot))
        .await
        .expect("answered");

    assert!(outcome.instances.is_empty());
    let errors: Vec<(&str, &str, &str, ErrorClass)> = outcome
        .errors
        .iter()
        .map(|e| {
            (
                e.instance_type.as_str(),
                e.zone.as_str(),
                e.code.as_str(),
                e.class,
            )
        })
        .collect();
    assert_eq!(
        errors,
        [
            (
                "m5.large",
                "us-east-1a",
                "InsufficientInstanceCapacity",
                ErrorClass::InsufficientCapacity
            ),
            (
                "c5.large",
                "us-east-1b",
                "MaxSpotInstanceCountExceeded",
                ErrorClass::InsufficientCapacity
            ),
        ]
    );
    assert_eq!(rule.num_calls(), 1);
}

#[tokio::test]
async fn a_launched_spot_instance_is_reported_with_its_zone_from_the_request() {
    let rule = mock!(aws_sdk_ec2::Client::create_fleet).then_output(|| {
        CreateFleetOutput::builder()
            .instances(
                CreateFleetInstance::builder()
                    .launch_template_and_overrides(
                        LaunchTemplateAndOverridesResponse::builder()
                            .overrides(
                                FleetLaunchTemplateOverrides::builder()
                                    .instance_type(SdkInstanceType::from("c5.large"))
                                    .subnet_id("subnet-b")
                                    .build(),
                            )
                            .build(),
                    )
                    .lifecycle(InstanceLifecycle::Spot)
                    .instance_ids("i-1")
                    .instance_type(SdkInstanceType::from("c5.large"))
                    .build(),
            )
            .errors(fleet_error(
                "m5.large",
                "subnet-a",
                "InsufficientInstanceCapacity",
            ))
            .build()
    });
    let adapter = Ec2Adapter::new(ec2(&[&rule]), "demo");

    let outcome = adapter
        .create_fleet(&request(CapacityType::Spot))
        .await
        .expect("answered");

    let launched: Vec<(&str, &str, &str, CapacityType)> = outcome
        .instances
        .iter()
        .map(|i| {
            (
                i.id.as_str(),
                i.instance_type.as_str(),
                i.zone.as_str(),
                i.capacity_type,
            )
        })
        .collect();
    assert_eq!(
        launched,
        [("i-1", "c5.large", "us-east-1b", CapacityType::Spot)]
    );
    assert_eq!(outcome.errors.len(), 1);
}

#[tokio::test]
async fn a_throttled_create_fleet_is_classified_as_throttled() {
    let rule = mock!(aws_sdk_ec2::Client::create_fleet).then_error(|| {
        CreateFleetError::generic(
            ErrorMetadata::builder()
                .code("RequestLimitExceeded")
                .message("Request limit exceeded.")
                .build(),
        )
    });
    let adapter = Ec2Adapter::new(ec2(&[&rule]), "demo");

    let err = adapter
        .create_fleet(&request(CapacityType::OnDemand))
        .await
        .unwrap_err();

    assert_eq!(err.class(), ErrorClass::Throttled, "{err:?}");
    assert!(err.to_string().contains("claim-1"), "{err}");
}

#[tokio::test]
async fn more_than_sixty_instance_types_are_refused_before_calling_ec2() {
    let rule = mock!(aws_sdk_ec2::Client::create_fleet)
        .then_output(|| CreateFleetOutput::builder().build());
    let adapter = Ec2Adapter::new(ec2(&[&rule]), "demo");
    let mut req = request(CapacityType::Spot);
    req.overrides = (0..61)
        .map(|i| FleetOverride {
            instance_type: format!("m{i}.large"),
            subnet_id: "subnet-a".into(),
            zone: "us-east-1a".into(),
            priority: None,
        })
        .collect();

    let err = adapter.create_fleet(&req).await.unwrap_err();

    assert_eq!(err.class(), ErrorClass::InvalidParameter);
    assert_eq!(rule.num_calls(), 0);
}

fn type_info(name: &str, arch: ArchitectureType) -> InstanceTypeInfo {
    InstanceTypeInfo::builder()
        .instance_type(SdkInstanceType::from(name))
        .processor_info(
            ProcessorInfo::builder()
                .supported_architectures(arch)
                .build(),
        )
        .v_cpu_info(VCpuInfo::builder().default_v_cpus(2).build())
        .memory_info(MemoryInfo::builder().size_in_mib(8192).build())
        .build()
}

#[tokio::test]
async fn instance_types_from_every_page_are_returned() {
    let first = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .match_requests(|r| r.next_token().is_none())
        .then_output(|| {
            DescribeInstanceTypesOutput::builder()
                .instance_types(type_info("m5.large", ArchitectureType::X8664))
                .next_token("page-2")
                .build()
        });
    let second = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .match_requests(|r| r.next_token() == Some("page-2"))
        .then_output(|| {
            DescribeInstanceTypesOutput::builder()
                .instance_types(type_info("m7g.large", ArchitectureType::Arm64))
                .build()
        });
    let adapter = Ec2Adapter::new(ec2(&[&first, &second]), "demo");

    let types = adapter.instance_types().await.expect("answered");

    let names: Vec<(&str, &str, u32)> = types
        .iter()
        .map(|t| (t.name.as_str(), t.arch.as_str(), t.generation))
        .collect();
    assert_eq!(names, [("m5.large", "amd64", 5), ("m7g.large", "arm64", 7)]);
    assert_eq!((first.num_calls(), second.num_calls()), (1, 1));
}

#[tokio::test]
async fn create_fleet_refusing_a_profile_iam_has_not_propagated_is_classified_propagating() {
    let rule = mock!(aws_sdk_ec2::Client::create_fleet).then_error(|| {
        CreateFleetError::generic(
            ErrorMetadata::builder()
                .code("InvalidParameterValue")
                .message(
                    "Value (nodewright_demo_0123456789abcdef) for parameter \
                     iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
                )
                .build(),
        )
    });
    let adapter = Ec2Adapter::new(ec2(&[&rule]), "demo");

    let err = adapter
        .create_fleet(&request(CapacityType::Spot))
        .await
        .unwrap_err();

    assert_eq!(err.class(), ErrorClass::Propagating, "{err:?}");
}

#[tokio::test]
async fn deleting_a_template_that_is_already_gone_is_success() {
    use super::LaunchTemplates;
    let rule = mock!(aws_sdk_ec2::Client::delete_launch_template).then_error(|| {
        aws_sdk_ec2::operation::delete_launch_template::DeleteLaunchTemplateError::generic(
            ErrorMetadata::builder()
                .code("InvalidLaunchTemplateName.NotFoundException")
                .message(
                    "At least one of the launch templates specified in the request does not exist.",
                )
                .build(),
        )
    });
    let adapter = Ec2Adapter::new(ec2(&[&rule]), "demo");

    adapter
        .delete_launch_template("nodewright/demo/0123456789abcdef")
        .await
        .expect("already gone is what we wanted");
    assert_eq!(rule.num_calls(), 1);
}
