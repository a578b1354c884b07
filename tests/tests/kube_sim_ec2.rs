//! `Ec2CloudView` against a moto server: an instance launched through CreateFleet from a
//! launch template, tagged for the cluster, is listed with its decoded user data, and the
//! kubelet simulation registers it as a Node.
//!
//! moto runs through the harness (`nodewright_world::moto`), on a free loopback port.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceType, RequestLaunchTemplateData, ResourceType, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use base64::Engine as _;
use nodewright_world::kube_sim::{
    Arch, CloudView, Ec2CloudView, InstanceState, NodeCapacity, SimCluster, SimConfig,
};

/// Signed as the world's administrator: moto enforces IAM (see `moto::iam`).
async fn ec2(moto: &nodewright_world::moto::Moto) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&moto.sdk_config().await)
}

#[tokio::test]
async fn fleet_instance_with_launch_template_user_data_becomes_a_labelled_node() {
    let moto = nodewright_world::moto::Moto::start()
        .await
        .expect("moto starts");
    let client = ec2(&moto).await;
    let ami = client
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .unwrap()
        .images()[0]
        .image_id()
        .unwrap()
        .to_string();
    let subnet = client.describe_subnets().send().await.unwrap().subnets()[0]
        .subnet_id()
        .unwrap()
        .to_string();
    let user_data = "kubelet:\n  flags:\n  - --node-labels=karpenter.sh/nodepool=moto\n";
    let lt = client
        .create_launch_template()
        .launch_template_name(format!("kube-sim-{}", std::process::id()))
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id(ami)
                .user_data(base64::engine::general_purpose::STANDARD.encode(user_data))
                .build(),
        )
        .send()
        .await
        .unwrap();
    let lt_id = lt
        .launch_template()
        .unwrap()
        .launch_template_id()
        .unwrap()
        .to_string();
    let cluster = format!("kube-sim-{}", std::process::id());
    client
        .create_fleet()
        .r#type(FleetType::Instant)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(DefaultTargetCapacityType::OnDemand)
                .build(),
        )
        .launch_template_configs(
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_id(lt_id)
                        .version("$Latest")
                        .build(),
                )
                .overrides(
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(InstanceType::M5Large)
                        .subnet_id(subnet)
                        .build(),
                )
                .build(),
        )
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(
                    Tag::builder()
                        .key("nodewright.io/cluster")
                        .value(&cluster)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();

    let view = Arc::new(Ec2CloudView::new(client, cluster));
    let listed = view.instances().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, InstanceState::Running);
    assert_eq!(listed[0].instance_type, "m5.large");
    assert_eq!(listed[0].user_data.as_deref(), Some(user_data));

    let capacity = |_: &str| {
        Some(NodeCapacity {
            cpu_milli: 2000,
            memory_bytes: 8 << 30,
            pods: 29,
            arch: Arch::Amd64,
            extended: BTreeMap::new(),
            reserved_cpu_milli: 0,
            reserved_memory_bytes: 0,
        })
    };
    let sim = SimCluster::start(SimConfig::default().with_cloud(view, Arc::new(capacity)))
        .await
        .unwrap();
    sim.clock().advance(Duration::from_secs(120));
    let report = sim.step().await;
    assert_eq!(report.errors, Vec::<String>::new());
    assert_eq!(
        report.nodes_registered,
        [listed[0].private_dns_name.clone()]
    );
    let node = sim
        .get_json("v1", "Node", "", &listed[0].private_dns_name)
        .unwrap();
    assert_eq!(node["metadata"]["labels"]["karpenter.sh/nodepool"], "moto");
}
