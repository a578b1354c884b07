//! `nodewright doctor`: before and after a deploy, what the install guide asks of the
//! account and the cluster, read as the functions will read it, one PASS or FAIL line per
//! check with the fix. The reads are here and in `doctor/network.rs`; the judgements are
//! `doctor/checks.rs` and `doctor/reach.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use aws_sdk_iam::error::{ProvideErrorMetadata, SdkError};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use kube::api::Api;
use nodewright::aws::{Ec2Adapter, ErrorClass, NetworkDiscovery, classify};
use nodewright::kube::{
    ClusterSettings, ConfigOrigin, ConfigSource, DefaultPoolParams, KarpenterLeader, KubeCluster,
};
use nodewright::provision::launch::EKS_CLUSTER_NAME_TAG;
use nodewright::takeover::{KARPENTER_NODECLASS_TAG, KARPENTER_NODEPOOL_TAG, karpenter_running};
use serde::Deserialize as _;

use crate::exit::Exit;

mod checks;
mod grants;
mod network;
mod reach;

use checks::{Check, Endpoint, Found, Verdict};
use reach::{ClusterNetwork, Functions};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Access {
    Rbac,
    ClusterAdmin,
}

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The EKS cluster the stack serves.
    #[arg(long)]
    pub cluster: String,
    /// The cluster's region; default: the AWS config chain's.
    #[arg(long)]
    pub region: Option<String>,
    /// Read the cluster through this kubeconfig instead of through EKS (DescribeCluster
    /// and a token as `nodewright eks-token` mints it).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use with --kubeconfig (default: its current context).
    #[arg(long, requires = "kubeconfig")]
    pub context: Option<String>,
    /// The nodewright stack, read for where it runs the functions (default:
    /// nodewright-<cluster>; before the deploy it does not exist yet).
    #[arg(long)]
    pub stack: Option<String>,
    /// The stack's KubernetesAccess parameter: with cluster-admin no RBAC is needed.
    /// Default: the deployed stack's, else rbac.
    #[arg(long, value_enum)]
    pub kubernetes_access: Option<Access>,
    /// The prefix of the groups the functions' access entries map to, as given to
    /// `nodewright rbac --group-prefix`.
    #[arg(long, default_value = crate::rbac::DEFAULT_GROUP_PREFIX)]
    pub group_prefix: String,
}

pub async fn run(args: Args) -> anyhow::Result<Exit> {
    nodewright::eks::install_crypto_provider();
    let (aws, _) = crate::aws::aws_config(args.region.as_deref()).await?;
    let stack = args
        .stack
        .clone()
        .unwrap_or_else(|| format!("nodewright-{}", args.cluster));
    let (parameters, mut report) = match network::stack_parameters(&aws, &stack).await {
        Ok(None) if args.stack.is_some() => (
            None,
            vec![Check::fail(
                "stack",
                format!("stack {stack} does not exist"),
                "pass the name the stack was deployed with, or leave --stack out before the \
                 deploy",
            )],
        ),
        Ok(parameters) => (parameters, Vec::new()),
        Err(e) => (
            None,
            vec![Check::fail(
                "stack",
                e,
                "pass --stack, and allow cloudformation:DescribeStacks",
            )],
        ),
    };
    let deployed_access = parameters
        .as_ref()
        .and_then(|p| p.get("KubernetesAccess"))
        .map(|a| a == "cluster-admin");
    let cluster_admin = match args.kubernetes_access {
        Some(access) => access == Access::ClusterAdmin,
        None => deployed_access.unwrap_or(false),
    };
    report.extend(cluster(&aws, &args.cluster, parameters.as_ref()).await);
    report.push(access_entries(&aws, &args.cluster, cluster_admin, &args.group_prefix).await);
    report.push(node_role(&aws, &args.cluster).await);
    match cluster_checks(&args, &aws, cluster_admin, parameters.as_ref()).await {
        Ok(checks) => report.extend(checks),
        Err(e) => report.push(Check::fail(
            "Kubernetes API",
            format!("{e:#}"),
            "point --kubeconfig at the cluster, or let doctor reach it through EKS with \
             credentials that have an access entry",
        )),
    }
    print!("{}", render(&report));
    Ok(if report.iter().any(Check::failed) {
        Exit::Problems
    } else {
        Exit::Ok
    })
}

/// The checks that read the cluster: its configuration and what it asks of AWS, and the
/// RBAC. An error here is the cluster not being readable at all.
async fn cluster_checks(
    args: &Args,
    aws: &aws_config::SdkConfig,
    cluster_admin: bool,
    parameters: Option<&BTreeMap<String, String>>,
) -> anyhow::Result<Vec<Check>> {
    let kube = crate::status::client_for(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        args.kubeconfig.is_none().then_some(args.cluster.as_str()),
        args.region.as_deref(),
    )
    .await?;
    let reader = KubeCluster::new(
        kube.clone(),
        ClusterSettings::new(default_pool(&args.cluster, parameters), "nodewright-doctor"),
    );
    let load = reader
        .load()
        .await
        .context("reading the configuration from the cluster")?;
    let source = match &load.source {
        ConfigOrigin::Crds => "Karpenter's CRDs".to_string(),
        ConfigOrigin::ConfigMap { namespace, name } => format!("ConfigMap {namespace}/{name}"),
        ConfigOrigin::Default => "no NodePool: the stack's default pool".to_string(),
    };
    let mut report = vec![checks::configuration(&source, &load.problems)];
    if checks::wants_spot(&load.inputs.node_pools) {
        let iam = aws_sdk_iam::Client::new(aws);
        report.push(checks::spot_role(
            &role_exists(&iam, "AWSServiceRoleForEC2Spot").await,
        ));
    }
    let ec2 = Ec2Adapter::new(aws_sdk_ec2::Client::new(aws), args.cluster.clone());
    for class in &load.inputs.node_classes {
        let subnets = ec2.subnets(&class.spec.subnet_selector_terms).await;
        let groups = ec2
            .security_groups(&class.spec.security_group_selector_terms)
            .await;
        report.push(checks::discovery(
            &class.metadata.name,
            subnets
                .map(|s| s.len())
                .map_err(|e| nodewright::error_chain(&e)),
            groups
                .map(|g| g.len())
                .map_err(|e| nodewright::error_chain(&e)),
        ));
    }
    let prefix = &args.group_prefix;
    report.push(checks::rbac(
        &missing_rbac(&kube, prefix).await,
        cluster_admin,
        prefix,
    ));
    let running = reader
        .karpenter_leases()
        .await
        .map(|leases| karpenter_running(&leases, jiff::Timestamp::now()))
        .map_err(|e| nodewright::error_chain(&e));
    let fleet = karpenter_fleet(&aws_sdk_ec2::Client::new(aws), &args.cluster).await;
    report.push(checks::karpenter(&running, &fleet));
    Ok(report)
}

/// Karpenter's running instances of `cluster`: by its NodePool tag and the cluster tag every
/// Karpenter version writes, then sorted by whether adoption can take them.
async fn karpenter_fleet(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
) -> Result<checks::KarpenterFleet, String> {
    let filter = |name: String, values: &[&str]| {
        aws_sdk_ec2::types::Filter::builder()
            .name(name)
            .set_values(Some(values.iter().map(|v| v.to_string()).collect()))
            .build()
    };
    let reservations = ec2
        .describe_instances()
        .filters(filter(
            format!("tag:kubernetes.io/cluster/{cluster}"),
            &["owned"],
        ))
        .filters(filter("tag-key".into(), &[KARPENTER_NODEPOOL_TAG]))
        .filters(filter(
            "instance-state-name".into(),
            &["pending", "running"],
        ))
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| nodewright::error_chain(&e))?;
    let mut fleet = checks::KarpenterFleet::default();
    for i in reservations.iter().flat_map(|r| r.instances()) {
        let tag = |k: &str| i.tags().iter().any(|t| t.key() == Some(k));
        let named = i
            .tags()
            .iter()
            .any(|t| t.key() == Some(EKS_CLUSTER_NAME_TAG) && t.value() == Some(cluster));
        if named && tag(KARPENTER_NODECLASS_TAG) {
            fleet.adoptable += 1;
        } else {
            fleet
                .not_adoptable
                .push(i.instance_id().unwrap_or_default().to_string());
        }
    }
    Ok(fleet)
}

/// The stack's default NodePool, for a cluster that holds no NodePool: as the deployed
/// stack's parameters build it, or before the deploy as the template's defaults do.
fn default_pool(cluster: &str, parameters: Option<&BTreeMap<String, String>>) -> DefaultPoolParams {
    let capacity_types = parameters
        .map(|p| network::list(p, "DefaultCapacityTypes"))
        .unwrap_or_else(|| vec!["spot".into(), "on-demand".into()]);
    let cpu_limit = match parameters {
        Some(p) => p
            .get("DefaultCpuLimit")
            .filter(|v| !v.trim().is_empty())
            .cloned(),
        None => Some("1000".into()),
    };
    DefaultPoolParams {
        cluster_name: cluster.to_string(),
        node_role: format!("nodewright-node-{cluster}"),
        capacity_types,
        cpu_limit,
        ami_alias: "al2023@latest".into(),
        ..Default::default()
    }
}

/// `PASS  name: detail` / `FAIL  name: why` with the fix on the next line.
fn render(report: &[Check]) -> String {
    let mut out = String::new();
    for c in report {
        match &c.verdict {
            Verdict::Pass(detail) => out.push_str(&format!("PASS  {}: {detail}\n", c.name)),
            Verdict::Fail { why, fix } => {
                out.push_str(&format!("FAIL  {}: {why}\n      fix: {fix}\n", c.name))
            }
        }
    }
    out
}

/// The cluster and its endpoint as the stack's functions reach it, then its authentication
/// mode.
async fn cluster(
    aws: &aws_config::SdkConfig,
    name: &str,
    parameters: Option<&BTreeMap<String, String>>,
) -> Vec<Check> {
    const NAME: &str = "EKS cluster";
    let answer = aws_sdk_eks::Client::new(aws)
        .describe_cluster()
        .name(name)
        .send()
        .await;
    let Some(cluster) = answer.as_ref().ok().and_then(|a| a.cluster()) else {
        let why = answer
            .err()
            .map(|e| nodewright::error_chain(&e))
            .unwrap_or_else(|| "DescribeCluster answered without a cluster".into());
        return vec![Check::fail(
            NAME,
            why,
            "check --cluster and --region, and eks:DescribeCluster",
        )];
    };
    let mode = cluster
        .access_config()
        .and_then(|a| a.authentication_mode())
        .map(|m| m.as_str());
    let authentication = checks::authentication(name, mode);
    let reach = reach_of(aws, cluster.resources_vpc_config(), parameters).await;
    let endpoint = match reach {
        Ok(detail) => Check::pass(
            NAME,
            format!(
                "{name}, {}, Kubernetes {}; endpoint {detail}",
                cluster
                    .status()
                    .map(|s| s.as_str())
                    .unwrap_or("status unknown"),
                cluster.version().unwrap_or("?")
            ),
        ),
        Err((why, fix)) => Check::fail(NAME, format!("endpoint {why}"), fix),
    };
    vec![endpoint, authentication]
}

/// Whether the functions reach the endpoint `vpc` describes, from where the stack runs
/// them.
async fn reach_of(
    aws: &aws_config::SdkConfig,
    vpc: Option<&aws_sdk_eks::types::VpcConfigResponse>,
    parameters: Option<&BTreeMap<String, String>>,
) -> reach::Reach {
    let endpoint = Endpoint {
        public: vpc.is_none_or(|v| v.endpoint_public_access()),
        public_cidrs: vpc
            .map(|v| v.public_access_cidrs().to_vec())
            .unwrap_or_default(),
        private: vpc.is_some_and(|v| v.endpoint_private_access()),
    };
    let cluster_vpc = vpc.and_then(|v| v.vpc_id());
    let private_in = cluster_vpc.filter(|_| endpoint.private);
    let functions = network::functions(aws, parameters, private_in)
        .await
        .map_err(|e| {
            (
                format!("where the stack runs the functions: {e}"),
                "allow ec2:DescribeSubnets and ec2:DescribeNatGateways".to_string(),
            )
        })?;
    // The private endpoint's interfaces carry the cluster security group and any
    // additional groups; their rules matter only to functions in a VPC.
    let mut cluster = ClusterNetwork {
        vpc: vpc.and_then(|v| v.vpc_id()).map(str::to_string),
        groups: vpc
            .and_then(|v| v.cluster_security_group_id())
            .into_iter()
            .map(str::to_string)
            .chain(
                vpc.map(|v| v.security_group_ids().to_vec())
                    .unwrap_or_default(),
            )
            .collect(),
        inbound: Vec::new(),
    };
    if endpoint.private && matches!(functions, Functions::InVpc(_)) {
        cluster.inbound = network::inbound(aws, &cluster.groups)
            .await
            .map_err(|e| (e, "allow ec2:DescribeSecurityGroups".to_string()))?;
    }
    reach::judge(&endpoint, &functions, &cluster)
}

/// Every group the cluster's access entries map a principal to.
async fn access_entries(
    aws: &aws_config::SdkConfig,
    cluster: &str,
    cluster_admin: bool,
    prefix: &str,
) -> Check {
    const NAME: &str = "access entries";
    let eks = aws_sdk_eks::Client::new(aws);
    let listed = eks
        .list_access_entries()
        .cluster_name(cluster)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<String>, _>>()
        .await;
    let principals = match listed {
        Ok(p) => p,
        Err(e) => {
            return Check::fail(
                NAME,
                format!("ListAccessEntries: {}", nodewright::error_chain(&e)),
                "run doctor with eks:ListAccessEntries and eks:DescribeAccessEntry",
            );
        }
    };
    let mut mapped = Vec::new();
    for principal in principals {
        let entry = eks
            .describe_access_entry()
            .cluster_name(cluster)
            .principal_arn(&principal)
            .send()
            .await;
        match entry {
            Ok(e) => mapped.extend(
                e.access_entry()
                    .map(|a| a.kubernetes_groups().to_vec())
                    .unwrap_or_default(),
            ),
            Err(e) => {
                return Check::fail(
                    NAME,
                    format!(
                        "DescribeAccessEntry {principal}: {}",
                        nodewright::error_chain(&e)
                    ),
                    "run doctor with eks:DescribeAccessEntry",
                );
            }
        }
    }
    checks::access_entries(&mapped, cluster_admin, prefix)
}

/// The node role and instance profile the stack names `nodewright-node-<cluster>`.
async fn node_role(aws: &aws_config::SdkConfig, cluster: &str) -> Check {
    let iam = aws_sdk_iam::Client::new(aws);
    let name = format!("nodewright-node-{cluster}");
    let role = role_exists(&iam, &name).await;
    let answer = iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await;
    let holds = found(answer.map(|p| {
        let roles = p.instance_profile().map(|p| p.roles()).unwrap_or_default();
        roles.iter().any(|r| r.role_name() == name)
    }));
    checks::node_role(&name, &role, &name, &holds)
}

async fn role_exists(iam: &aws_sdk_iam::Client, name: &str) -> Found {
    found(iam.get_role().role_name(name).send().await.map(|_| true))
}

/// An IAM lookup's answer as a finding: what is not there (by the project's one error
/// classification, `nodewright::aws::classify`) is `No`, any other failure `Unknown`.
fn found<E, R>(answer: Result<bool, SdkError<E, R>>) -> Found
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match answer {
        Ok(true) => Found::Yes,
        Ok(false) => Found::No,
        Err(e) if classify(&e) == ErrorClass::NotFound => Found::No,
        Err(e) => Found::Unknown(nodewright::error_chain(&e)),
    }
}

/// What `nodewright rbac` creates that the cluster lacks (or that cannot be read), as
/// `kind/name`.
async fn missing_rbac(client: &kube::Client, prefix: &str) -> Vec<String> {
    const SYSTEM: &str = "kube-system";
    let wanted = match manifest_rules(prefix) {
        Ok(rules) => rules,
        Err(e) => return vec![format!("the manifests of `nodewright rbac` ({e})")],
    };
    let rules_of = |kind: &str, name: &str| {
        wanted
            .iter()
            .find(|(k, n, _)| k == kind && n == name)
            .map(|(_, _, r)| r.clone())
            .unwrap_or_default()
    };
    let mut missing = Vec::new();
    for f in ["provisioner", "interruption", "sweeper"] {
        let name = format!("nodewright-{f}");
        let c = client.clone();
        let role = fetched(Api::<ClusterRole>::all(c.clone()), &name).await;
        missing.extend(short_of(
            "clusterrole",
            &name,
            role.map(|r| r.map(|r| r.rules.unwrap_or_default())),
            &rules_of("ClusterRole", &name),
        ));
        let group = format!("{prefix}-{f}");
        let binding = fetched(Api::<ClusterRoleBinding>::all(c.clone()), &name).await;
        missing.extend(unbound(
            "clusterrolebinding",
            &name,
            binding.map(|b| b.map(|b| b.subjects.unwrap_or_default())),
            &group,
        ));
        let role = fetched(Api::<Role>::namespaced(c.clone(), SYSTEM), &name).await;
        missing.extend(short_of(
            "role",
            &name,
            role.map(|r| r.map(|r| r.rules.unwrap_or_default())),
            &rules_of("Role", &name),
        ));
        let binding = fetched(Api::<RoleBinding>::namespaced(c, SYSTEM), &name).await;
        missing.extend(unbound(
            "rolebinding",
            &name,
            binding.map(|b| b.map(|b| b.subjects.unwrap_or_default())),
            &group,
        ));
    }
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), SYSTEM);
    missing.extend(absent("configmap", config_maps, "nodewright-state").await);
    for lease in ["nodewright-provisioner", "nodewright-sweeper"] {
        let leases = Api::<Lease>::namespaced(client.clone(), SYSTEM);
        missing.extend(absent("lease", leases, lease).await);
    }
    missing
}

/// (kind, name, rules) of every role `nodewright rbac` prints.
fn manifest_rules(prefix: &str) -> anyhow::Result<Vec<(String, String, Vec<PolicyRule>)>> {
    #[derive(serde::Deserialize)]
    struct Doc {
        kind: String,
        metadata: kube::api::ObjectMeta,
        #[serde(default)]
        rules: Vec<PolicyRule>,
    }
    let text = crate::rbac::manifests(prefix)?;
    let mut roles = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let doc = Doc::deserialize(doc)?;
        if doc.kind == "ClusterRole" || doc.kind == "Role" {
            roles.push((doc.kind, doc.metadata.name.unwrap_or_default(), doc.rules));
        }
    }
    Ok(roles)
}

/// `kind/name` when the role is missing, and each grant of `wanted` it lacks.
fn short_of(
    kind: &str,
    name: &str,
    found: Result<Option<Vec<PolicyRule>>, String>,
    wanted: &[PolicyRule],
) -> Vec<String> {
    match found {
        Ok(Some(rules)) => grants::ungranted(wanted, &rules)
            .into_iter()
            .map(|g| format!("{kind}/{name} lacks {g}"))
            .collect(),
        Ok(None) => vec![format!("{kind}/{name}")],
        Err(e) => vec![format!("{kind}/{name} (cannot be read: {e})")],
    }
}

/// `kind/name` when the binding is missing or binds no `group`: the function whose access
/// entry maps it to that group would then get none of the role's grants.
fn unbound(
    kind: &str,
    name: &str,
    found: Result<Option<Vec<Subject>>, String>,
    group: &str,
) -> Option<String> {
    match found {
        Ok(Some(subjects)) if grants::binds_group(&subjects, group) => None,
        Ok(Some(_)) => Some(format!("{kind}/{name} binding group {group}")),
        Ok(None) => Some(format!("{kind}/{name}")),
        Err(e) => Some(format!("{kind}/{name} (cannot be read: {e})")),
    }
}

/// The object `kind/name`, if it exists.
async fn fetched<K>(api: Api<K>, name: &str) -> Result<Option<K>, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(|e| e.to_string())
}

/// `kind/name` unless the object is there.
async fn absent<K>(kind: &str, api: Api<K>, name: &str) -> Option<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match fetched(api, name).await {
        Ok(Some(_)) => None,
        Ok(None) => Some(format!("{kind}/{name}")),
        Err(e) => Some(format!("{kind}/{name} (cannot be read: {e})")),
    }
}
