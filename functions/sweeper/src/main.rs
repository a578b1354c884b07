//! Wiring only: configuration from the environment, JSON logs, clients built once per cold
//! start, then the Lambda runtime. Environment (read once, typed, by
//! `nodewright_provisioner::environment`):
//! - `CLUSTER_NAME` (required): the EKS cluster.
//! - `NODE_INSTANCE_PROFILE`, `NODE_ROLE`, `DEFAULT_CAPACITY_TYPES`, `DEFAULT_CPU_LIMIT`,
//!   `DEFAULT_AMI_ALIAS`: as the provisioner's, so the default NodePool (when neither CRDs
//!   nor the ConfigMap hold one) is the same one it provisions for, and the replacement
//!   an expired or drifted node gets before it drains launches as the provisioner would.
//! - `NODE_REPAIR`: `true` replaces unhealthy nodes (the template's `NodeRepair`).
//! - `TAKE_OVER_KARPENTER`: `true` adopts the instances Karpenter launched for the cluster
//!   (the template's `TakeOverFromKarpenter`).
//! - `KUBECONFIG`: when set, the Kubernetes client comes from it (local runs) instead of
//!   an EKS token.

use std::sync::Arc;

use anyhow::Context as _;
use lambda_runtime::{LambdaEvent, service_fn};
use nodewright::aws::ProfileLeftoversAdapter;
use nodewright::eks::{describe_cluster, function_client, install_crypto_provider};
use nodewright::kube::{ClusterSettings, DEFAULT_CONFIG_TTL, KubeCluster, StateConfigMap};
use nodewright::lease::{Elector, KubeLeases};
use nodewright::telemetry::{self, Function};
use nodewright_provisioner::environment::FunctionEnv;
use nodewright_provisioner::wiring::{live_ports, replacement_core};
use nodewright_sweeper::{
    LEASE_DURATION, LEASE_NAME, LEASE_NAMESPACE, ProfileCollection, State, handler,
};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    tracing::info!(version = nodewright::VERSION, "nodewright sweeper starting");
    install_crypto_provider();
    let env = FunctionEnv::from_lookup(|name| std::env::var(name).ok())?;
    let node_repair =
        nodewright_sweeper::node_repair_from(std::env::var("NODE_REPAIR").ok().as_deref())?;
    let takeover =
        nodewright::takeover::setting_from(std::env::var("TAKE_OVER_KARPENTER").ok().as_deref())?;
    let cluster_name = env.cluster_name.clone();
    telemetry::install(&cluster_name, Function::Sweeper)?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let region = aws
        .region()
        .map(|r| r.to_string())
        .context("no AWS region")?;
    let cluster = describe_cluster(&aws_sdk_eks::Client::new(&aws), &cluster_name).await?;
    let client = function_client(&aws, &cluster, env.kubeconfig).await?;
    let reporting = env.container.clone();
    let mut settings = ClusterSettings::new(env.default_pool.clone(), reporting.clone());
    settings.config_ttl = DEFAULT_CONFIG_TTL;
    let leases = KubeLeases::new(client.clone(), LEASE_NAMESPACE);
    let elector = Elector::new(leases, LEASE_NAME, &reporting, LEASE_DURATION);
    let shared = Arc::new(StateConfigMap::new(client.clone()));
    let clock = nodewright::clock::from_setting(
        std::env::var(nodewright::clock::CLOCK_VARIABLE)
            .ok()
            .as_deref(),
    )?;
    let kube = KubeCluster::with_clock(client, settings, clock.clone());
    // Leftover instance profiles: this cluster's, checked against every instance in the
    // region.
    let profiles = ProfileCollection::new(
        ProfileLeftoversAdapter::new(
            aws_sdk_iam::Client::new(&aws),
            aws_sdk_ec2::Client::new(&aws),
            &cluster_name,
        ),
        &cluster_name,
        env.node_role.clone(),
    );
    // Replacements launch through the provisioning core, as the interruption function's.
    let ports = live_ports(&aws, &cluster_name, &region);
    let ec2_adapter = ports.ec2.clone();
    let provisioner = replacement_core(kube.clone(), ports, &cluster, shared, &env)?;
    let state = State::new(kube, ec2_adapter, cluster_name.clone(), clock)
        .with_lease(elector)
        .with_profile_collection(profiles)
        .with_node_repair(node_repair)
        .with_preferences(env.preferences)
        .with_takeover(takeover)
        .with_replacer(tokio::sync::Mutex::new(provisioner));
    let state = &state;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        handler(event, state).await
    }))
    .await
}
