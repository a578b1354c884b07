//! What an EKS account has before nodewright is deployed, created in moto: a VPC with one
//! subnet in each of three zones, the node security group, EKS-optimized and Bottlerocket
//! AMIs with the public SSM parameters that name them, the EKS cluster (with its service
//! role) and the node role a Karpenter user already has. Everything `template.yaml`
//! creates (node role and instance profile, queues, rules, the functions' roles) comes
//! from deploying it ([`super::stack`]), never from here.
//!
//! The SSM parameter paths are written out here on purpose, not taken from the product's
//! path builder, so that a test resolving an alias checks that builder against AWS's
//! published layout (EKS user guide "Retrieve recommended Amazon Linux AMI IDs" and
//! Karpenter's `pkg/providers/amifamily/{al2023,al2,bottlerocket}.go`).

use std::collections::BTreeMap;
use std::error::Error as StdError;

use aws_config::SdkConfig;
use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};

/// One failed seeding step.
#[derive(Debug, thiserror::Error)]
#[error("seeding moto failed at {step}")]
pub struct SeedError {
    pub step: &'static str,
    #[source]
    pub source: Box<dyn StdError + Send + Sync>,
}

fn at<E: StdError + Send + Sync + 'static>(step: &'static str) -> impl FnOnce(E) -> SeedError {
    move |e| SeedError {
        step,
        source: Box::new(e),
    }
}

fn missing(step: &'static str, what: &str) -> SeedError {
    SeedError {
        step,
        source: format!("moto's answer has no {what}").into(),
    }
}

/// What to seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedSpec {
    /// The EKS cluster name; also the value of the discovery tags.
    pub cluster: String,
    /// Kubernetes `major.minor`, used in the SSM parameter paths and the cluster.
    pub kubernetes_version: String,
}

impl SeedSpec {
    pub fn new(cluster: impl Into<String>) -> SeedSpec {
        SeedSpec {
            cluster: cluster.into(),
            kubernetes_version: DEFAULT_KUBERNETES_VERSION.into(),
        }
    }
}

pub const DEFAULT_KUBERNETES_VERSION: &str = "1.32";
/// Zones of the seeded subnets; moto's us-east-1 has a-f.
pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// The EKS-optimized AMI release the pinned-version parameters name (`al2023@v20240807`).
pub const EKS_AMI_RELEASE: &str = "v20240807";
/// The Bottlerocket release the pinned-version parameters name (`bottlerocket@v1.20.0`;
/// the SSM path carries it without the `v`).
pub const BOTTLEROCKET_RELEASE: &str = "1.20.0";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeededSubnet {
    pub id: String,
    pub zone: String,
    pub cidr: String,
}

/// One AMI copied into moto and the SSM parameters (latest and pinned) that name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeededImage {
    /// `al2023`, `al2` or `bottlerocket`, as an alias spells it.
    pub family: &'static str,
    /// `x86_64` or `arm64`, as EC2 spells it.
    pub arch: &'static str,
    pub image_id: String,
    pub name: String,
    pub parameters: Vec<String>,
}

/// The ids of everything [`seed`] created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeded {
    pub cluster: String,
    pub kubernetes_version: String,
    pub vpc_id: String,
    pub subnets: Vec<SeededSubnet>,
    pub security_group_id: String,
    pub security_group_name: String,
    pub images: Vec<SeededImage>,
    pub cluster_arn: String,
    /// moto's random `https://....eks.amazonaws.com/` host; nothing answers there.
    pub cluster_endpoint: String,
}

impl Seeded {
    /// The seeded image of a family (`al2023`) and EC2 architecture (`x86_64`).
    pub fn image(&self, family: &str, arch: &str) -> Option<&SeededImage> {
        self.images
            .iter()
            .find(|i| i.family == family && i.arch == arch)
    }
}

/// Creates the account's pre-existing resources in moto (see the module doc).
pub async fn seed(config: &SdkConfig, spec: &SeedSpec) -> Result<Seeded, SeedError> {
    let ec2 = aws_sdk_ec2::Client::new(config);
    let network = seed_network(&ec2, spec).await?;
    let images = seed_images(&ec2, &aws_sdk_ssm::Client::new(config), spec).await?;
    let cluster_role_arn = seed_iam(&aws_sdk_iam::Client::new(config), spec).await?;
    let eks = aws_sdk_eks::Client::new(config);
    let (cluster_arn, cluster_endpoint) =
        seed_cluster(&eks, spec, &network, &cluster_role_arn).await?;
    Ok(Seeded {
        cluster: spec.cluster.clone(),
        kubernetes_version: spec.kubernetes_version.clone(),
        vpc_id: network.vpc_id,
        subnets: network.subnets,
        security_group_id: network.security_group_id,
        security_group_name: network.security_group_name,
        images,
        cluster_arn,
        cluster_endpoint,
    })
}

struct Network {
    vpc_id: String,
    subnets: Vec<SeededSubnet>,
    security_group_id: String,
    security_group_name: String,
}

fn tags(resource: ResourceType, pairs: &[(&str, &str)]) -> TagSpecification {
    let mut spec = TagSpecification::builder().resource_type(resource);
    for (k, v) in pairs {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    spec.build()
}

async fn seed_network(ec2: &aws_sdk_ec2::Client, spec: &SeedSpec) -> Result<Network, SeedError> {
    let cluster = spec.cluster.as_str();
    let discovery = ("karpenter.sh/discovery", cluster);
    let cluster_tag = format!("kubernetes.io/cluster/{cluster}");
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .tag_specifications(tags(ResourceType::Vpc, &[("Name", cluster)]))
        .send()
        .await
        .map_err(at("CreateVpc"))?;
    let vpc_id = vpc
        .vpc
        .and_then(|v| v.vpc_id)
        .ok_or_else(|| missing("CreateVpc", "Vpc.VpcId"))?;
    let mut subnets = Vec::new();
    for (i, zone) in ZONES.iter().enumerate() {
        // /20 subnets, so each zone has room for thousands of nodes as in a real VPC.
        let cidr = format!("10.0.{}.0/20", i * 16);
        let name = format!("{cluster}-private-{zone}");
        let out = ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .cidr_block(&cidr)
            .availability_zone(*zone)
            .tag_specifications(tags(
                ResourceType::Subnet,
                &[("Name", &name), discovery, (&cluster_tag, "shared")],
            ))
            .send()
            .await
            .map_err(at("CreateSubnet"))?;
        let id = out
            .subnet
            .and_then(|s| s.subnet_id)
            .ok_or_else(|| missing("CreateSubnet", "Subnet.SubnetId"))?;
        subnets.push(SeededSubnet {
            id,
            zone: (*zone).to_string(),
            cidr,
        });
    }
    let security_group_name = format!("eks-cluster-sg-{cluster}");
    // `aws:eks:cluster-name` is set by EKS itself on the cluster security group; AWS refuses
    // user tags with the `aws:` prefix but moto accepts them, which lets the world carry it.
    let sg = ec2
        .create_security_group()
        .group_name(&security_group_name)
        .description("EKS cluster security group")
        .vpc_id(&vpc_id)
        .tag_specifications(tags(
            ResourceType::SecurityGroup,
            &[
                ("Name", &security_group_name),
                discovery,
                ("aws:eks:cluster-name", cluster),
            ],
        ))
        .send()
        .await
        .map_err(at("CreateSecurityGroup"))?;
    let security_group_id = sg
        .group_id
        .ok_or_else(|| missing("CreateSecurityGroup", "GroupId"))?;
    Ok(Network {
        vpc_id,
        subnets,
        security_group_id,
        security_group_name,
    })
}

/// One family x architecture: the AMI name AWS gives it and the SSM parameter paths.
fn image_table(v: &str) -> Vec<(&'static str, &'static str, String, Vec<String>)> {
    let eks = format!("/aws/service/eks/optimized-ami/{v}");
    let br = BOTTLEROCKET_RELEASE;
    let rel = EKS_AMI_RELEASE;
    let mut table = Vec::new();
    for arch in ["x86_64", "arm64"] {
        let name = format!("amazon-eks-node-al2023-{arch}-standard-{v}-{rel}");
        table.push((
            "al2023",
            arch,
            name.clone(),
            vec![
                format!("{eks}/amazon-linux-2023/{arch}/standard/recommended/image_id"),
                format!("{eks}/amazon-linux-2023/{arch}/standard/{name}/image_id"),
            ],
        ));
    }
    let al2_x86 = format!("amazon-eks-node-{v}-{rel}");
    table.push((
        "al2",
        "x86_64",
        al2_x86.clone(),
        vec![
            format!("{eks}/amazon-linux-2/recommended/image_id"),
            format!("{eks}/amazon-linux-2/{al2_x86}/image_id"),
        ],
    ));
    let al2_arm = format!("amazon-eks-arm64-node-{v}-{rel}");
    table.push((
        "al2",
        "arm64",
        al2_arm.clone(),
        vec![
            format!("{eks}/amazon-linux-2-arm64/recommended/image_id"),
            format!("{eks}/amazon-linux-2-arm64/{al2_arm}/image_id"),
        ],
    ));
    for arch in ["x86_64", "arm64"] {
        table.push((
            "bottlerocket",
            arch,
            format!("bottlerocket-aws-k8s-{v}-{arch}-v{br}-a1b2c3d4"),
            vec![
                format!("/aws/service/bottlerocket/aws-k8s-{v}/{arch}/latest/image_id"),
                format!("/aws/service/bottlerocket/aws-k8s-{v}/{arch}/{br}/image_id"),
            ],
        ));
    }
    table
}

async fn seed_images(
    ec2: &aws_sdk_ec2::Client,
    ssm: &aws_sdk_ssm::Client,
    spec: &SeedSpec,
) -> Result<Vec<SeededImage>, SeedError> {
    let mut images = Vec::new();
    // One DescribeImages per architecture, not per image: each lists hundreds of moto's
    // built-in images and took about a second of moto's CPU.
    let mut sources: BTreeMap<&str, String> = BTreeMap::new();
    for (family, arch, name, parameters) in image_table(&spec.kubernetes_version) {
        let source = match sources.get(arch) {
            Some(source) => source.clone(),
            None => {
                let source = source_image(ec2, arch).await?;
                sources.insert(arch, source.clone());
                source
            }
        };
        // CopyImage keeps the source's architecture; RegisterImage in moto drops it.
        let copy = ec2
            .copy_image()
            .source_image_id(&source)
            .source_region(super::REGION)
            .name(&name)
            .description(format!("nodewright test world: {family} {arch}"))
            .send()
            .await
            .map_err(at("CopyImage"))?;
        let image_id = copy
            .image_id
            .ok_or_else(|| missing("CopyImage", "ImageId"))?;
        for parameter in &parameters {
            ssm.put_parameter()
                .name(parameter)
                .value(&image_id)
                .r#type(aws_sdk_ssm::types::ParameterType::String)
                .overwrite(true)
                .send()
                .await
                .map_err(at("PutParameter"))?;
        }
        images.push(SeededImage {
            family,
            arch,
            image_id,
            name,
            parameters,
        });
    }
    Ok(images)
}

/// The id of one of moto's built-in Amazon images of an architecture (smallest id, so the
/// choice is stable). Asked first among the ids starting `ami-00`: moto holds about 1,300
/// Amazon images and serializing all of one architecture took it a second.
async fn source_image(ec2: &aws_sdk_ec2::Client, arch: &str) -> Result<String, SeedError> {
    for ids in [Some("ami-00*"), None] {
        let mut request = ec2
            .describe_images()
            .owners("amazon")
            .filters(Filter::builder().name("architecture").values(arch).build());
        if let Some(ids) = ids {
            request = request.filters(Filter::builder().name("image-id").values(ids).build());
        }
        let out = request.send().await.map_err(at("DescribeImages"))?;
        if let Some(id) = out.images().iter().filter_map(|i| i.image_id.clone()).min() {
            return Ok(id);
        }
    }
    Err(missing(
        "DescribeImages",
        &format!("Amazon image for {arch}"),
    ))
}

/// `KarpenterNodeRole-<cluster>`, the node role of Karpenter's getting-started guide.
fn karpenter_node_role(cluster: &str) -> String {
    format!("KarpenterNodeRole-{cluster}")
}

const EC2_TRUST_POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
const EKS_TRUST_POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

/// The cluster's service role (returns its ARN) and the node role an account moving from
/// Karpenter already has (Karpenter's getting-started name, which
/// `examples/getting-started.yaml` names in its EC2NodeClass `role`): the provisioner
/// creates an instance profile for it.
async fn seed_iam(iam: &aws_sdk_iam::Client, spec: &SeedSpec) -> Result<String, SeedError> {
    let role = iam
        .create_role()
        .role_name(format!("{}-eks-cluster", spec.cluster))
        .assume_role_policy_document(EKS_TRUST_POLICY)
        .send()
        .await
        .map_err(at("CreateRole"))?;
    let cluster_role_arn = role
        .role
        .map(|r| r.arn)
        .ok_or_else(|| missing("CreateRole", "Role.Arn"))?;
    iam.attach_role_policy()
        .role_name(format!("{}-eks-cluster", spec.cluster))
        .policy_arn("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy")
        .send()
        .await
        .map_err(at("AttachRolePolicy"))?;
    iam.create_role()
        .role_name(karpenter_node_role(&spec.cluster))
        .assume_role_policy_document(EC2_TRUST_POLICY)
        .send()
        .await
        .map_err(at("CreateRole"))?;
    Ok(cluster_role_arn)
}

async fn seed_cluster(
    eks: &aws_sdk_eks::Client,
    spec: &SeedSpec,
    network: &Network,
    cluster_role_arn: &str,
) -> Result<(String, String), SeedError> {
    // EKS's defaults, said outright: moto stores only what the request holds, and
    // DescribeCluster would then say there is no endpoint at all.
    let vpc = aws_sdk_eks::types::VpcConfigRequest::builder()
        .set_subnet_ids(Some(network.subnets.iter().map(|s| s.id.clone()).collect()))
        .security_group_ids(&network.security_group_id)
        .endpoint_public_access(true)
        .endpoint_private_access(false)
        .public_access_cidrs("0.0.0.0/0")
        .build();
    let out = eks
        .create_cluster()
        .name(&spec.cluster)
        .version(&spec.kubernetes_version)
        .role_arn(cluster_role_arn)
        .resources_vpc_config(vpc)
        .send()
        .await
        .map_err(at("CreateCluster"))?;
    let cluster = out
        .cluster
        .ok_or_else(|| missing("CreateCluster", "cluster"))?;
    let arn = cluster
        .arn
        .ok_or_else(|| missing("CreateCluster", "cluster.arn"))?;
    let endpoint = cluster.endpoint.unwrap_or_default();
    Ok((arn, endpoint))
}
