//! Wiring only: configuration from the environment, JSON logs, clients built once per cold
//! start, then the Lambda runtime. Environment (read once, typed, by
//! `nodewright_provisioner::environment`):
//! - `CLUSTER_NAME` (required): the EKS cluster.
//! - `NODE_INSTANCE_PROFILE`: instance profile for EC2NodeClasses that name `NODE_ROLE` or
//!   neither a role nor an `instanceProfile`; classes naming another role get a profile
//!   nodewright creates in IAM.
//! - `NODE_ROLE`, `DEFAULT_CAPACITY_TYPES`, `DEFAULT_CPU_LIMIT`, `DEFAULT_AMI_ALIAS`: the
//!   default NodePool, used when neither CRDs nor the ConfigMap hold one (see
//!   `default_pool_params`).
//! - `KUBECONFIG`: when set, the Kubernetes client comes from it (local runs) instead of
//!   an EKS token.
//! - `POLL_INTERVAL`, `INVOCATION_BUDGET`: see the library.
//! - `BATCH_IDLE_DURATION`, `BATCH_FIRST_IDLE_DURATION`, `BATCH_MAX_DURATION`: the
//!   batching window, see the library's `batching`.
//! - `DEADLINE_MARGIN`, `LEASE_DURATION`, `LEASE_NAME`, `LEASE_NAMESPACE`: see the
//!   library's `coverage` and `deadline`; the AWS SDK's operation timeouts follow the margin.
//! - `NODEWRIGHT_CLOCK`: unset in AWS; the local world's accelerated time otherwise (see
//!   `nodewright::clock`).

use std::sync::Arc;

use anyhow::Context as _;
use lambda_runtime::{LambdaEvent, service_fn};
use nodewright::aws::{Ec2Adapter, IamAdapter, ImageAdapter, PricingAdapter};
use nodewright::clock::CLOCK_VARIABLE;
use nodewright::eks::{describe_cluster, function_client, install_crypto_provider};
use nodewright::kube::{ClusterSettings, DEFAULT_CONFIG_TTL, KubeCluster, StateConfigMap};
use nodewright::lease::KubeLeases;
use nodewright::provision::ProvisionerSettings;
use nodewright::telemetry::{self, Function};
use nodewright_provisioner::coverage::LeaseSetup;
use nodewright_provisioner::deadline::sdk_timeouts;
use nodewright_provisioner::environment::ProvisionerEnv;
use nodewright_provisioner::{State, cluster_facts, handler};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    // Lines carry their own time: CloudWatch stamps them too, but a log read anywhere else
    // (the benches, a local run) needs it to tell where a pod's wait went.
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    tracing::info!(
        version = nodewright::VERSION,
        "nodewright provisioner starting"
    );
    install_crypto_provider();
    let ProvisionerEnv {
        function: env,
        handler: handler_config,
        coverage,
        batch,
    } = ProvisionerEnv::from_lookup(|name| std::env::var(name).ok())?;
    let clock = nodewright::clock::from_setting(std::env::var(CLOCK_VARIABLE).ok().as_deref())?;
    let cluster_name = env.cluster_name.clone();
    telemetry::install(&cluster_name, Function::Provisioner)?;

    // Every AWS call gives up well inside the deadline margin, so a launch sent just before
    // the margin begins is answered (or abandoned) before Lambda's deadline.
    let (operation, attempt) = sdk_timeouts(coverage.deadline_margin);
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_timeout(operation)
                .operation_attempt_timeout(attempt)
                .build(),
        )
        .load()
        .await;
    let region = aws
        .region()
        .map(|r| r.to_string())
        .context("no AWS region")?;
    let cluster = describe_cluster(&aws_sdk_eks::Client::new(&aws), &cluster_name).await?;
    let client = function_client(&aws, &cluster, env.kubeconfig).await?;
    // One log stream per container in Lambda: it names this container in Events and in
    // the Lease's holder identity.
    let container = env.container.clone();
    let mut settings = ClusterSettings::new(env.default_pool, env.container);
    settings.config_ttl = DEFAULT_CONFIG_TTL;
    let leases = KubeLeases::new(client.clone(), &coverage.lease_namespace);
    // Exclusions are shared with the interruption function (a spot warning's reclaimed
    // offering) through the cluster's nodewright-state ConfigMap.
    let shared = Arc::new(StateConfigMap::new(client.clone()));
    let kube = KubeCluster::with_clock(client, settings, clock.clone());
    let ec2 = aws_sdk_ec2::Client::new(&aws);
    let state = State::new(
        kube,
        Ec2Adapter::new(ec2.clone(), &cluster_name),
        ImageAdapter::new(ec2, aws_sdk_ssm::Client::new(&aws)),
        PricingAdapter::from_config(&aws, &region),
        IamAdapter::new(aws_sdk_iam::Client::new(&aws), &cluster_name),
        ProvisionerSettings {
            cluster: cluster_facts(&cluster),
            default_instance_profile: env.node_instance_profile,
            default_node_role: env.node_role,
            batch,
            preferences: env.preferences,
            min_values: env.min_values,
        },
        handler_config,
    )?
    .with_clock(clock)
    .with_coverage(
        coverage,
        Some(LeaseSetup {
            store: leases,
            container,
        }),
    );
    state
        .provisioner()
        .lock()
        .await
        .set_shared_state(Some(shared));
    let state = &state;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        handler(event, state).await
    }))
    .await
}
