//! The local world in one value: moto seeded like an EKS account with `template.yaml`
//! deployed into it (`sam deploy`'s transform, then a CloudFormation stack), and a
//! simulated cluster whose kubelet turns the instances moto holds for this cluster into
//! nodes, sized from the bundled catalog. The demo and the end-to-end scenarios both start
//! here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::Context;
use aws_config::SdkConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use serde_json::Value;

use crate::aws_front::AwsFront;
use crate::kube_sim::eks_auth::EksAuth;
use crate::kube_sim::{
    Arch, Ec2CloudView, InstanceCapacity, NodeCapacity, SimClock, SimCluster, SimConfig,
};
use crate::moto::stack::{self, Stack};
use crate::moto::{Moto, SeedSpec, Seeded, seed};

pub struct World {
    pub moto: Moto,
    /// What the account had before the deploy (network, AMIs, the EKS cluster).
    pub seeded: Seeded,
    /// The deployed stack: its outputs are what the functions are given.
    pub stack: Stack,
    /// Straight to moto: the harness's own reads and the simulated kubelet's.
    pub sdk: SdkConfig,
    /// Through [`World::front`], signed as the provisioner: what the functions under test
    /// are given (see [`World::function_sdk`] for the others).
    pub product_sdk: SdkConfig,
    /// Per function of the stack (`ProvisionerFunction`, ...): temporary credentials of
    /// the execution role Lambda holds for it.
    pub function_credentials: BTreeMap<String, Credentials>,
    /// The proxy in front of moto where AWS-side faults are armed.
    pub front: AwsFront,
    pub sim: SimCluster,
    /// The interruption queue as SQS runs it, on the world's clock ([`crate::sqs`]).
    pub queue: Arc<crate::sqs::EmulatedQueue>,
    pub sqs: Arc<crate::sqs::Sqs>,
    /// Per function of the stack: the `SenderId` SQS records for what it sends.
    pub senders: BTreeMap<String, String>,
}

/// The provisioner's logical id in `template.yaml`.
pub const PROVISIONER: &str = "ProvisionerFunction";

/// The variables `template.yaml` gives the provisioner (Globals included); the world
/// passes each on as the deployed function holds it.
const PROVISIONER_VARIABLES: [&str; 13] = [
    "CLUSTER_NAME",
    "RUST_LOG",
    "NODEWRIGHT_FUNCTION",
    "POLL_INTERVAL",
    "INVOCATION_BUDGET",
    "DEADLINE_MARGIN",
    "LEASE_DURATION",
    "DEFAULT_CAPACITY_TYPES",
    "DEFAULT_CPU_LIMIT",
    "NODE_ROLE",
    "NODE_INSTANCE_PROFILE",
    "PREFERENCE_POLICY",
    "MIN_VALUES_POLICY",
];

/// Each function's credentials: its execution role as Lambda holds it in the deployed
/// stack, assumed through moto's STS.
async fn function_identities(
    admin: &SdkConfig,
    stack: &Stack,
) -> anyhow::Result<BTreeMap<String, Credentials>> {
    let mut out = BTreeMap::new();
    for (function, deployed) in &stack.deployed.functions {
        let credentials = crate::moto::iam::function_credentials(admin, &deployed.role, function)
            .await
            .with_context(|| format!("assuming the execution role of {function}"))?;
        out.insert(function.clone(), credentials);
    }
    Ok(out)
}

fn signed_as(config: &SdkConfig, credentials: &Credentials) -> SdkConfig {
    config
        .to_builder()
        .credentials_provider(SharedCredentialsProvider::new(credentials.clone()))
        .build()
}

/// What `make deploy` leaves in the cluster besides the stack: the access entries EKS holds
/// for the functions' roles (returned, for the AWS front to answer EKS with), and, when they map the roles to groups rather than
/// cluster-admin, the RBAC `nodewright rbac` prints for those groups (applied to the store
/// as `kubectl apply` would create it).
fn grant_access(
    sim: &SimCluster,
    stack: &Stack,
) -> anyhow::Result<Vec<crate::kube_sim::eks_auth::AccessEntry>> {
    let entries = crate::access_entries::of_functions(&stack.deployed)?;
    let least_privilege = entries.iter().any(|e| !e.cluster_admin);
    sim.set_access_entries(entries.clone())?;
    if least_privilege {
        let cli = crate::kit::debug_binary("nodewright")?;
        let out = std::process::Command::new(&cli)
            .arg("rbac")
            .output()
            .with_context(|| format!("running {} rbac", cli.display()))?;
        anyhow::ensure!(
            out.status.success(),
            "nodewright rbac failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for doc in serde_yaml::Deserializer::from_slice(&out.stdout) {
            let value: Value =
                serde::Deserialize::deserialize(doc).context("nodewright rbac prints YAML")?;
            if !value.is_null() {
                sim.apply_json(value)
                    .context("the simulated cluster stores the RBAC")?;
            }
        }
    }
    Ok(entries)
}

/// Deploys `template.yaml` as the stack of `cluster` (`ClusterName` and `parameters`).
pub async fn deploy_stack(
    moto: &Moto,
    cluster: &str,
    parameters: &BTreeMap<String, String>,
) -> anyhow::Result<Stack> {
    let mut parameters = parameters.clone();
    parameters.insert("ClusterName".into(), cluster.to_string());
    let name = stack::stack_name(cluster);
    let deployed = stack::deploy(moto, &name, &parameters)
        .await
        .with_context(|| format!("deploying template.yaml as stack {name}"))?;
    Ok(Stack::new(deployed)?)
}

/// The stack's interruption queue, emulated with the settings the deployed template gives
/// it and its dead-letter queue.
fn emulated_queue(stack: &Stack, clock: SimClock) -> anyhow::Result<crate::sqs::EmulatedQueue> {
    let template = stack
        .deployed
        .template
        .as_ref()
        .context("the deployed stack carries no template")?;
    let settings = crate::lambda::settings::queue_settings(template, "InterruptionQueue")?;
    Ok(crate::sqs::EmulatedQueue::new(
        &stack.queue_url,
        &stack.queue_arn,
        &stack.dead_letter_queue_url,
        settings,
        clock,
    ))
}

/// The SenderId SQS records for each function's calls: its role's id and the session name
/// Lambda gave it (`AROA…:<function>`).
async fn know_senders(
    admin: &SdkConfig,
    stack: &Stack,
    credentials: &BTreeMap<String, Credentials>,
    sqs: &crate::sqs::Sqs,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut senders = BTreeMap::new();
    let iam = aws_sdk_iam::Client::new(admin);
    for (function, deployed) in &stack.deployed.functions {
        let role_name = deployed.role.rsplit('/').next().unwrap_or_default();
        let role = iam
            .get_role()
            .role_name(role_name)
            .send()
            .await
            .with_context(|| format!("GetRole {role_name}"))?;
        let role_id = role.role().map(|r| r.role_id()).unwrap_or_default();
        let sender = format!("{role_id}:{function}");
        if let Some(c) = credentials.get(function) {
            sqs.know_sender(c.access_key_id(), &sender);
        }
        senders.insert(function.clone(), sender);
    }
    Ok(senders)
}

/// Node capacity for every bundled instance type, from the same arithmetic the solver uses
/// (capacity minus kube-reserved, system-reserved and the eviction threshold).
pub fn catalog_capacity() -> anyhow::Result<Arc<dyn InstanceCapacity>> {
    let types =
        nodewright::catalog::bundled_instance_types().context("the bundled catalog loads")?;
    Ok(capacity_table(types.into_iter().map(|(it, _)| it)))
}

/// Node capacity for every type moto's DescribeInstanceTypes lists, read through the
/// product's own EC2 adapter: the live catalog offers previous generations (c3, m4, ...)
/// that the bundled catalog leaves out, and a node of any type the provisioner may launch
/// must be able to join.
pub async fn region_capacity(
    sdk: &SdkConfig,
    cluster: &str,
) -> anyhow::Result<Arc<dyn InstanceCapacity>> {
    use nodewright::aws::InstanceTypeSource as _;
    let adapter = nodewright::aws::Ec2Adapter::new(aws_sdk_ec2::Client::new(sdk), cluster);
    let types = adapter
        .instance_types()
        .await
        .context("DescribeInstanceTypes against moto")?;
    Ok(capacity_table(types))
}

fn capacity_table(
    types: impl IntoIterator<Item = nodewright::catalog::InstanceType>,
) -> Arc<dyn InstanceCapacity> {
    let table: HashMap<String, NodeCapacity> = types
        .into_iter()
        .map(|it| {
            let capacity = it.capacity(None);
            let overhead = it.overhead(None);
            let extended: BTreeMap<String, i64> = capacity
                .extended
                .iter()
                .map(|(k, v)| (k.clone(), v / 1000))
                .collect();
            let node = NodeCapacity {
                cpu_milli: capacity.cpu,
                memory_bytes: capacity.memory / 1000,
                pods: (capacity.pods / 1000) as u32,
                arch: if it.arch == "arm64" {
                    Arch::Arm64
                } else {
                    Arch::Amd64
                },
                extended,
                reserved_cpu_milli: overhead.cpu,
                reserved_memory_bytes: overhead.memory / 1000,
            };
            (it.name, node)
        })
        .collect();
    Arc::new(move |name: &str| table.get(name).cloned())
}

impl World {
    /// Starts moto, seeds it for `cluster`, deploys `template.yaml` into it, and starts the
    /// simulated cluster on `clock` with its kubelet reading instances from moto.
    pub async fn start(cluster: &str, config: SimConfig) -> anyhow::Result<World> {
        World::start_with(cluster, &BTreeMap::new(), config).await
    }

    /// [`World::start`] with stack parameters besides `ClusterName` (`PollInterval`).
    pub async fn start_with(
        cluster: &str,
        parameters: &BTreeMap<String, String>,
        mut config: SimConfig,
    ) -> anyhow::Result<World> {
        let pace = config.clock.world_time().map(|t| t.path().to_path_buf());
        let moto = Moto::start_on(pace)
            .await
            .context("moto starts (run `make setup` if the venv is missing)")?;
        let sdk = moto.sdk_config().await;
        let seeded = seed(&sdk, &SeedSpec::new(cluster))
            .await
            .context("moto is seeded")?;
        let stack = deploy_stack(&moto, cluster, parameters).await?;
        let ec2 = aws_sdk_ec2::Client::new(&sdk);
        config.cluster_name = cluster.to_string();
        config.eks_auth = Some(EksAuth::new(cluster, moto.url()).trusting_the_harness());
        let config = config.with_cloud(
            Arc::new(Ec2CloudView::new(ec2, cluster)),
            region_capacity(&sdk, cluster).await?,
        );
        let sim = SimCluster::start(config)
            .await
            .context("the simulated cluster starts")?;
        let entries = grant_access(&sim, &stack)?;
        let front = AwsFront::start(moto.url()).await?;
        front.set_access_entries(entries);
        front.use_clock(sim.clock());
        if let Some(time) = sim.clock().world_time() {
            time.watch_process(moto.pid());
        }
        let function_credentials = function_identities(&sdk, &stack).await?;
        let queue = Arc::new(emulated_queue(&stack, sim.clock())?);
        let sqs = Arc::new(crate::sqs::Sqs::new(vec![queue.clone()]));
        let senders = know_senders(&sdk, &stack, &function_credentials, &sqs).await?;
        front.emulate_sqs(sqs.clone());
        let provisioner = function_credentials
            .get(PROVISIONER)
            .with_context(|| format!("template.yaml has no {PROVISIONER}"))?;
        let product_sdk = signed_as(&front.sdk_config(&sdk), provisioner);
        Ok(World {
            moto,
            seeded,
            stack,
            sdk,
            product_sdk,
            function_credentials,
            front,
            sim,
            queue,
            sqs,
            senders,
        })
    }

    /// An SDK configuration through [`World::front`] signed as `function` (a logical id
    /// of `template.yaml`, `SweeperFunction`), so only its role's actions pass.
    pub fn function_sdk(&self, function: &str) -> anyhow::Result<SdkConfig> {
        let credentials = self
            .function_credentials
            .get(function)
            .with_context(|| format!("template.yaml has no function {function}"))?;
        Ok(signed_as(&self.front.sdk_config(&self.sdk), credentials))
    }

    pub fn clock(&self) -> SimClock {
        self.sim.clock()
    }

    /// Brings a manual simulated clock up to real time. Instances carry moto's real launch
    /// times, later than the clock's start by however long starting moto and the handler
    /// took on this machine; boot and readiness are measured from the launch, so a clock
    /// left behind would hold the nodes back for that long.
    pub fn catch_up_clock(&self) {
        let lag = jiff::Timestamp::now().duration_since(self.clock().now());
        if let Ok(lag) = std::time::Duration::try_from(lag) {
            self.clock().advance(lag);
        }
    }

    /// Applies every document of a YAML file (any kind the simulated API serves).
    pub fn apply_yaml(&self, text: &str) -> anyhow::Result<usize> {
        let mut n = 0;
        for doc in serde_yaml::Deserializer::from_str(text) {
            let value: Value = serde::Deserialize::deserialize(doc).context("a YAML document")?;
            if value.is_null() {
                continue;
            }
            self.sim
                .apply_json(value)
                .context("the simulated cluster accepts the document")?;
            n += 1;
        }
        Ok(n)
    }

    /// The environment the provisioner binary runs with against this world, as Lambda
    /// fills it: the variables the deployed function holds (from `template.yaml`), the
    /// role's temporary credentials, and what only the local world needs: the AWS SDK
    /// through [`World::front`] and a kubeconfig for the simulated cluster (written into
    /// `dir`).
    pub fn function_env(
        &self,
        dir: &std::path::Path,
    ) -> anyhow::Result<Vec<(&'static str, String)>> {
        let kubeconfig = self.function_kubeconfig(PROVISIONER, dir)?;
        let credentials = self
            .function_credentials
            .get(PROVISIONER)
            .with_context(|| format!("the stack has no {PROVISIONER}"))?;
        let deployed = self.stack.deployed.function(PROVISIONER)?;
        let mut env = Vec::new();
        for (name, value) in &deployed.environment {
            let known = PROVISIONER_VARIABLES
                .iter()
                .find(|v| **v == name.as_str())
                .with_context(|| {
                    format!(
                        "the deployed {PROVISIONER} has variable {name}, unknown to the world \
                         (add it to PROVISIONER_VARIABLES)"
                    )
                })?;
            env.push((*known, value.clone()));
        }
        env.extend(crate::moto::sdk_env(self.front.url(), credentials));
        env.push(("KUBECONFIG", kubeconfig.display().to_string()));
        Ok(env)
    }

    /// The deployed `function`'s `TAKE_OVER_KARPENTER`, as its binary would read it.
    pub fn takeover_setting(&self, function: &str) -> anyhow::Result<bool> {
        let deployed = self.stack.deployed.function(function)?;
        let value = deployed.environment.get("TAKE_OVER_KARPENTER");
        nodewright::takeover::setting_from(value.map(String::as_str)).map_err(anyhow::Error::msg)
    }

    /// Replaces `{{cluster}}` in an example so its selectors find the seeded subnets.
    pub fn example(&self, name: &str) -> anyhow::Result<String> {
        let path = crate::moto::workspace_root().join("examples").join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(text.replace("demo-cluster", &self.seeded.cluster))
    }

    /// [`World::example`] with each `(from, to)` replaced; an edit whose `from` the file no
    /// longer contains is an error naming it, so a changed example cannot silently leave a
    /// scenario testing something else.
    pub fn example_edited(&self, name: &str, edits: &[(&str, &str)]) -> anyhow::Result<String> {
        let mut text = self.example(name)?;
        for (from, to) in edits {
            anyhow::ensure!(
                text.contains(from),
                "examples/{name} no longer contains {from:?}; update the scenario that edits it"
            );
            text = text.replace(from, to);
        }
        Ok(text)
    }
}

/// The provisioner exactly as Lambda runs it (`nodewright_provisioner::handler`), wired to
/// this world: the real `kube::Client` against the simulated cluster and the real AWS SDK
/// clients against moto, through the world's [`crate::aws_front::AwsFront`].
pub mod provisioner {
    use std::time::Duration;

    use base64::Engine as _;
    use lambda_runtime::{Context, LambdaEvent};
    use nodewright::aws::{BundledPrices, Ec2Adapter, IamAdapter, ImageAdapter};
    use nodewright::kube::{ClusterSettings, DefaultPoolParams, KubeCluster};
    use nodewright::provision::{
        AwsPorts, BatchWindow, ClusterFacts, Provisioner, ProvisionerSettings,
    };
    use nodewright_provisioner::{HandlerConfig, State};
    use serde_json::{Value, json};

    use super::World;

    /// The handler's state over the real adapters, or over `E` wrapping the EC2 one.
    pub type ProvisionerState<E = Ec2Adapter> = State<KubeCluster, AwsPorts<E, ImageAdapter>>;

    /// The service CIDR the seeded cluster reports (moto's DescribeCluster has none).
    pub const SERVICE_CIDR: &str = "10.100.0.0/16";

    impl World {
        pub async fn provisioner(
            &self,
            config: HandlerConfig,
            batch: BatchWindow,
        ) -> anyhow::Result<ProvisionerState> {
            self.provisioner_over(config, batch, |ec2| ec2).await
        }

        /// As [`World::provisioner`], with the EC2 adapter wrapped by `wrap` (fault injection).
        pub async fn provisioner_over<E>(
            &self,
            config: HandlerConfig,
            batch: BatchWindow,
            wrap: impl FnOnce(Ec2Adapter) -> E,
        ) -> anyhow::Result<ProvisionerState<E>>
        where
            AwsPorts<E, ImageAdapter>: nodewright::aws::Cloud,
        {
            let cluster = self.seeded.cluster.clone();
            let mut kube_config = self.sim.config().await?;
            // A 429 from the API server must reach our own retry policy, not kube's
            // fifteen-try default (the eviction API answers 429 to mean "not now").
            kube_config.default_retry = false;
            let client = kube::Client::try_from(kube_config)?;
            let defaults = DefaultPoolParams {
                cluster_name: cluster.clone(),
                node_role: self.stack.node_role_name.clone(),
                capacity_types: vec!["spot".into(), "on-demand".into()],
                architectures: vec!["amd64".into()],
                instance_categories: vec!["c".into(), "m".into(), "r".into()],
                cpu_limit: Some("1000".into()),
                ami_alias: "al2023@latest".into(),
            };
            // As main.rs sets it: the configuration is reused for DEFAULT_CONFIG_TTL.
            let mut settings = ClusterSettings::new(defaults, "provisioner-local");
            settings.config_ttl = nodewright::kube::DEFAULT_CONFIG_TTL;
            // As the functions' mains: exclusions shared through nodewright-state.
            let shared = std::sync::Arc::new(nodewright::kube::StateConfigMap::new(client.clone()));
            // The configuration cache's TTL runs on the world's clock, as the functions'.
            let clock = std::sync::Arc::new(crate::kit::SimNow(self.clock()));
            let kube = KubeCluster::with_clock(client, settings, clock);
            let ec2 = aws_sdk_ec2::Client::new(&self.product_sdk);
            let ssm = aws_sdk_ssm::Client::new(&self.product_sdk);
            let settings = ProvisionerSettings {
                cluster: ClusterFacts {
                    name: cluster.clone(),
                    endpoint: self.sim.url(),
                    // The simulated cluster serves plain HTTP, so nodes need no CA; the user
                    // data still carries one, as on EKS. A placeholder, named as such.
                    ca_bundle_base64: base64::engine::general_purpose::STANDARD
                        .encode("placeholder CA of the simulated cluster (plain HTTP)\n"),
                    service_cidr: SERVICE_CIDR.into(),
                    kubernetes_version: self.seeded.kubernetes_version.clone(),
                },
                default_instance_profile: self.stack.instance_profile_name.clone(),
                default_node_role: self.stack.node_role_name.clone(),
                batch,
                preferences: Default::default(),
                min_values: Default::default(),
            };
            let aws = AwsPorts {
                ec2: wrap(Ec2Adapter::new(ec2.clone(), cluster.clone())),
                images: ImageAdapter::new(ec2, ssm),
                // moto has no Price List API: on-demand prices stay the bundled table's.
                prices: BundledPrices,
                iam: IamAdapter::new(aws_sdk_iam::Client::new(&self.product_sdk), cluster),
            };
            let mut provisioner = Provisioner::new(kube, aws, settings)?;
            provisioner.set_shared_state(Some(shared));
            Ok(ProvisionerState::with_provisioner(provisioner, config))
        }
    }

    /// Invokes the handler the way the Lambda runtime does for an EventBridge Scheduler
    /// target: a JSON payload and a context.
    pub async fn invoke<E>(state: &ProvisionerState<E>) -> anyhow::Result<Value>
    where
        AwsPorts<E, ImageAdapter>: nodewright::aws::Cloud,
    {
        let event = LambdaEvent::new(scheduled_event(), Context::default());
        nodewright_provisioner::handler(event, state)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// What EventBridge Scheduler sends a target with no input configured.
    pub fn scheduled_event() -> Value {
        json!({"source": "nodewright.local", "detail-type": "Scheduled Event", "detail": {}})
    }

    /// [`quick`] for a handler on a `SkippingClock`: its idle waits cost no wall time, so
    /// it polls once a second of its own time and an invocation costs only its polls
    /// (at [`quick`]'s 100 ms, a skipped invocation spent most of its budget polling).
    pub fn skipped(budget: Duration) -> HandlerConfig {
        HandlerConfig {
            poll_interval: Duration::from_secs(1),
            budget,
        }
    }

    /// A handler configuration for tests: short polls, a few seconds of budget.
    pub fn quick(budget: Duration) -> HandlerConfig {
        HandlerConfig {
            poll_interval: Duration::from_millis(100),
            budget,
        }
    }
}

/// An instance moto holds for this world's cluster, read with the plain SDK (not through
/// nodewright's adapters, so tests check the product against an independent reading).
#[derive(Debug, Clone)]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `spot` or `on-demand`.
    pub lifecycle: String,
    pub tags: BTreeMap<String, String>,
}

impl World {
    /// Instances tagged `nodewright.io/cluster=<cluster>` that are not terminated.
    pub async fn instances(&self) -> anyhow::Result<Vec<Instance>> {
        let ec2 = aws_sdk_ec2::Client::new(&self.sdk);
        let filter = aws_sdk_ec2::types::Filter::builder()
            .name("tag:nodewright.io/cluster")
            .values(&self.seeded.cluster)
            .build();
        let out = ec2
            .describe_instances()
            .filters(filter)
            .send()
            .await
            .context("DescribeInstances against moto")?;
        Ok(out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter(|i| {
                i.state()
                    .and_then(|s| s.name())
                    .is_some_and(|n| n.as_str() != "terminated")
            })
            .map(|i| Instance {
                id: i.instance_id().unwrap_or_default().to_string(),
                instance_type: i
                    .instance_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                zone: i
                    .placement()
                    .and_then(|p| p.availability_zone())
                    .unwrap_or_default()
                    .to_string(),
                lifecycle: i
                    .instance_lifecycle()
                    .map_or_else(|| "on-demand".to_string(), |l| l.as_str().to_string()),
                tags: tags_of(i),
            })
            .collect())
    }
}

/// An EC2 instance's tags as a map.
pub fn tags_of(instance: &aws_sdk_ec2::types::Instance) -> BTreeMap<String, String> {
    instance
        .tags()
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect()
}
