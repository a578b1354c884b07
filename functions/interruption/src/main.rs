//! Wiring only: configuration from the environment, JSON logs, clients built once per cold
//! start, then the Lambda runtime. Environment (read once, typed, by
//! `nodewright_provisioner::environment`):
//! - `CLUSTER_NAME` (required): the EKS cluster.
//! - `QUEUE_URL` (required): the queue this function consumes, where its
//!   delayed follow-ups go.
//! - `NODE_INSTANCE_PROFILE`, `NODE_ROLE`, `DEFAULT_CAPACITY_TYPES`, `DEFAULT_CPU_LIMIT`,
//!   `DEFAULT_AMI_ALIAS`: as the provisioner's, since replacements launch through the same
//!   provisioning core.
//! - `TAKE_OVER_KARPENTER`: `true` adopts an instance Karpenter launched for the cluster
//!   when an event names it (the template's `TakeOverFromKarpenter`).
//! - `KUBECONFIG`: when set, the Kubernetes client comes from it (local runs) instead of
//!   an EKS token.

use std::sync::Arc;

use anyhow::Context as _;
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{LambdaEvent, service_fn};
use nodewright::aws::SqsQueue;
use nodewright::eks::{describe_cluster, function_client, install_crypto_provider};
use nodewright::interruption::Origin;
use nodewright::kube::{ClusterSettings, DEFAULT_CONFIG_TTL, KubeCluster, StateConfigMap};
use nodewright::telemetry::{self, Function};
use nodewright_interruption::{Settings, State, handler};
use nodewright_provisioner::environment::FunctionEnv;
use nodewright_provisioner::wiring::{live_ports, replacement_core};
use tokio::sync::Mutex;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    tracing::info!(
        version = nodewright::VERSION,
        "nodewright interruption starting"
    );
    install_crypto_provider();
    let lookup = |name: &str| std::env::var(name).ok();
    let env = FunctionEnv::from_lookup(lookup)?;
    let cluster_name = env.cluster_name.clone();
    telemetry::install(&cluster_name, Function::Interruption)?;
    let queue_url = lookup("QUEUE_URL").context("QUEUE_URL is not set")?;
    let account = account_of_queue(&queue_url)
        .with_context(|| format!("QUEUE_URL {queue_url:?} names no account"))?;

    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let region = aws
        .region()
        .map(|r| r.to_string())
        .context("no AWS region")?;
    let cluster = describe_cluster(&aws_sdk_eks::Client::new(&aws), &cluster_name).await?;
    let client = function_client(&aws, &cluster, env.kubeconfig).await?;
    let mut settings = ClusterSettings::new(env.default_pool.clone(), env.container.clone());
    settings.config_ttl = DEFAULT_CONFIG_TTL;
    // Exclusions (the reclaimed offering) are shared with the provisioner through the
    // cluster's nodewright-state ConfigMap.
    let shared = Arc::new(StateConfigMap::new(client.clone()));
    let clock =
        nodewright::clock::from_setting(lookup(nodewright::clock::CLOCK_VARIABLE).as_deref())?;
    let kube = KubeCluster::with_clock(client, settings, clock.clone());
    let ports = live_ports(&aws, &cluster_name, &region);
    let ec2_adapter = ports.ec2.clone();
    let provisioner = replacement_core(kube.clone(), ports, &cluster, shared, &env)?;
    let sender_id = own_sender_id(&aws).await?;
    let state = State {
        clock,
        kube,
        ec2: ec2_adapter,
        replacer: Mutex::new(provisioner),
        queue: SqsQueue::new(aws_sdk_sqs::Client::new(&aws), queue_url),
        settings: Settings {
            cluster: cluster_name,
            origin: Origin { account, region },
            sender_id: Some(sender_id),
            take_over_karpenter: nodewright::takeover::setting_from(
                lookup("TAKE_OVER_KARPENTER").as_deref(),
            )?,
        },
    };
    let state = &state;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        handler(event, state).await
    }))
    .await
}

/// What SQS records as the sender of this function's own messages: its role session's user
/// id (`AROA…:<session>`), as STS GetCallerIdentity names it.
async fn own_sender_id(aws: &aws_config::SdkConfig) -> anyhow::Result<String> {
    let me = aws_sdk_sts::Client::new(aws)
        .get_caller_identity()
        .send()
        .await
        .context("STS GetCallerIdentity (the function's own identity)")?;
    me.user_id()
        .map(str::to_string)
        .context("GetCallerIdentity named no user id")
}

/// `https://sqs.<region>.amazonaws.com/<account>/<name>` -> the account: the queue is the
/// stack's own, so its account is the function's, with no STS call at cold start.
fn account_of_queue(url: &str) -> Option<String> {
    let mut parts = url.trim_end_matches('/').rsplit('/');
    let _name = parts.next()?;
    let account = parts.next()?;
    (account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit())).then(|| account.into())
}
