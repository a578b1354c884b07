//! The provisioning core as the functions that launch replacements hold it (the
//! interruption function and the sweeper): the provisioner's own adapters, settings and
//! shared exclusions, built once per cold start.

use std::sync::Arc;

use nodewright::aws::{Ec2Adapter, IamAdapter, ImageAdapter, PricingAdapter};
use nodewright::eks::EksCluster;
use nodewright::kube::{KubeCluster, StateConfigMap};
use nodewright::provision::{AwsPorts, BatchWindow, Provisioner, ProvisionerSettings};

use crate::cluster_facts;
use crate::environment::FunctionEnv;

/// Every AWS port as a function in AWS answers it.
pub type LivePorts = AwsPorts<Ec2Adapter, ImageAdapter, PricingAdapter, IamAdapter>;

/// The ports from the function's SDK configuration.
pub fn live_ports(aws: &aws_config::SdkConfig, cluster_name: &str, region: &str) -> LivePorts {
    let ec2 = aws_sdk_ec2::Client::new(aws);
    AwsPorts {
        ec2: Ec2Adapter::new(ec2.clone(), cluster_name),
        images: ImageAdapter::new(ec2, aws_sdk_ssm::Client::new(aws)),
        prices: PricingAdapter::from_config(aws, region),
        iam: IamAdapter::new(aws_sdk_iam::Client::new(aws), cluster_name),
    }
}

/// A provisioner for replacements: nodes launched as the provisioner launches them
/// (with the stack's `NODE_INSTANCE_PROFILE` and `NODE_ROLE` from `env`), and the reclaimed offerings
/// shared with the provisioner through the cluster's `nodewright-state` ConfigMap.
pub fn replacement_core(
    kube: KubeCluster,
    ports: LivePorts,
    cluster: &EksCluster,
    shared: Arc<StateConfigMap>,
    env: &FunctionEnv,
) -> anyhow::Result<Provisioner<KubeCluster, LivePorts>> {
    let mut provisioner = Provisioner::new(
        kube,
        ports,
        ProvisionerSettings {
            cluster: cluster_facts(cluster),
            default_instance_profile: env.node_instance_profile.clone(),
            default_node_role: env.node_role.clone(),
            batch: BatchWindow::default(),
            preferences: env.preferences,
            min_values: env.min_values,
        },
    )?;
    provisioner.set_shared_state(Some(shared));
    Ok(provisioner)
}
