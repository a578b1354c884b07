//! `nodewright doctor` against the local world (moto with the deployed stack, the simulated
//! cluster with Karpenter's CRDs and the RBAC `make deploy` applies): every check passes on
//! a correct install, and each fails, with its fix, in a misconfiguration staged for it.
//! Real: the CLI binary, the AWS SDK against moto, kube against the simulated API server.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Output;

use aws_sdk_eks::types::VpcConfigRequest;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use nodewright_world::kube_sim::SimConfig;
use nodewright_world::world::World;

const CLUSTER: &str = "doctor-demo";

struct Doctor {
    world: World,
    kubeconfig: PathBuf,
}

impl Doctor {
    async fn new() -> Doctor {
        let world = World::start(
            CLUSTER,
            SimConfig {
                crds_installed: true,
                ..SimConfig::default()
            },
        )
        .await
        .expect("the local world starts");
        let pools = world.example("getting-started.yaml").unwrap();
        let pools = pools.replace(
            "values: [\"on-demand\"]",
            "values: [\"spot\", \"on-demand\"]",
        );
        world.apply_yaml(&pools).unwrap();
        let dir = std::env::temp_dir().join(format!("nodewright-doctor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, world.sim.kubeconfig_yaml()).unwrap();
        Doctor { world, kubeconfig }
    }

    /// The CLI's answer, and its report's lines.
    async fn run(&self) -> (Output, String) {
        self.run_with(&[]).await
    }

    async fn run_with(&self, args: &[&str]) -> (Output, String) {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
            .args(["doctor", "--cluster", CLUSTER, "--kubeconfig"])
            .arg(&self.kubeconfig)
            .args(args)
            .env_clear()
            .env("HOME", std::env::temp_dir())
            // Through the world's AWS front, which answers what moto's EKS does not model:
            // the authentication mode and the access entries.
            .envs(nodewright_world::moto::sdk_env(
                self.world.front.url(),
                &self.world.moto.admin_credentials(),
            ))
            .output()
            .await
            .expect("the CLI runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out, text)
    }

    async fn failing(&self) -> Vec<String> {
        self.failing_with(&[]).await
    }

    async fn failing_with(&self, args: &[&str]) -> Vec<String> {
        let (out, text) = self.run_with(args).await;
        let failing: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("FAIL  "))
            .map(|l| l.split(':').next().unwrap_or_default().to_string())
            .collect();
        // Shown when an assertion on the list fails.
        println!("{text}");
        let code = out.status.code();
        assert_eq!(
            code,
            Some(if failing.is_empty() { 0 } else { 1 }),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        failing
    }
}

fn fix_of(text: &str, check: &str) -> String {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with(&format!("FAIL  {check}:")));
    lines.next();
    lines
        .next()
        .and_then(|l| l.trim().strip_prefix("fix: "))
        .unwrap_or_else(|| panic!("no fix for {check} in:\n{text}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_a_correct_install_and_fails_each_staged_misconfiguration_with_its_fix() {
    let d = Doctor::new().await;
    let iam = aws_sdk_iam::Client::new(&d.world.sdk);
    let eks = aws_sdk_eks::Client::new(&d.world.sdk);
    let ec2 = aws_sdk_ec2::Client::new(&d.world.sdk);

    // A pool allows spot and the account has never launched spot: the service-linked role
    // is missing.
    assert_eq!(d.failing().await, ["spot service-linked role"]);
    let (_, text) = d.run().await;
    assert!(fix_of(&text, "spot service-linked role").contains("create-service-linked-role"));
    iam.create_service_linked_role()
        .aws_service_name("spot.amazonaws.com")
        .send()
        .await
        .expect("created");
    let (out, text) = d.run().await;
    assert!(out.status.success(), "a correct install passes:\n{text}");
    for check in [
        "EKS cluster",
        "node role",
        "configuration",
        "spot service-linked role",
        "subnet and security group discovery",
        "Kubernetes RBAC",
        "Karpenter",
    ] {
        assert!(
            text.contains(&format!("PASS  {check}: ")),
            "{check} in:\n{text}"
        );
    }

    // A cluster that reads only aws-auth.
    d.world.front.set_authentication_mode("CONFIG_MAP");
    assert_eq!(d.failing().await, ["authentication mode"]);
    let (_, text) = d.run().await;
    assert!(
        fix_of(&text, "authentication mode").contains("authenticationMode=API_AND_CONFIG_MAP"),
        "{text}"
    );
    d.world.front.set_authentication_mode("API");

    // The sweeper's access entry gone.
    let entries = nodewright_world::access_entries::of_functions(&d.world.stack.deployed).unwrap();
    let sweeper_role = &d.world.stack.deployed.functions["SweeperFunction"].role;
    d.world.front.set_access_entries(
        entries
            .iter()
            .filter(|e| &e.principal_arn != sweeper_role)
            .cloned()
            .collect(),
    );
    assert_eq!(d.failing().await, ["access entries"]);
    let (_, text) = d.run().await;
    assert!(
        text.contains("no access entry maps a role to nodewright-sweeper"),
        "{text}"
    );
    d.world.front.set_access_entries(entries);

    // RBAC not applied (one object deleted).
    let client = d.world.sim.client().await.unwrap();
    Api::<ClusterRole>::all(client.clone())
        .delete("nodewright-sweeper", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(d.failing().await, ["Kubernetes RBAC"]);
    let (_, text) = d.run().await;
    assert!(text.contains("clusterrole/nodewright-sweeper"), "{text}");
    assert_eq!(
        fix_of(&text, "Kubernetes RBAC"),
        "nodewright rbac | kubectl apply -f -"
    );
    let rbac = String::from_utf8(
        std::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
            .arg("rbac")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    d.world.apply_yaml(&rbac).unwrap();

    // A ClusterRole an older release applied: one grant short of today's.
    let mut older: serde_json::Value = serde_yaml::Deserializer::from_str(&rbac)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .find(|doc: &serde_json::Value| {
            doc["kind"] == "ClusterRole" && doc["metadata"]["name"] == "nodewright-sweeper"
        })
        .expect("the sweeper's ClusterRole");
    older["rules"]
        .as_array_mut()
        .unwrap()
        .retain(|r| !r["resources"].to_string().contains("pods/eviction"));
    d.world
        .apply_yaml(&serde_yaml::to_string(&older).unwrap())
        .unwrap();
    assert_eq!(d.failing().await, ["Kubernetes RBAC"]);
    let (_, text) = d.run().await;
    assert!(
        text.contains("clusterrole/nodewright-sweeper lacks create pods/eviction (core)"),
        "{text}"
    );
    d.world.apply_yaml(&rbac).unwrap();

    // RBAC applied for other groups than the stack's access entries name: every binding
    // grants its role to a group no function is in.
    let platform = String::from_utf8(
        std::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
            .args(["rbac", "--group-prefix", "platform"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    d.world.apply_yaml(&platform).unwrap();
    assert_eq!(d.failing().await, ["Kubernetes RBAC"]);
    let (_, text) = d.run().await;
    for f in ["provisioner", "interruption", "sweeper"] {
        for kind in ["clusterrolebinding", "rolebinding"] {
            assert!(
                text.contains(&format!(
                    "{kind}/nodewright-{f} binding group nodewright-{f}"
                )),
                "{text}"
            );
        }
    }
    // Told the prefix the RBAC was applied with, doctor finds the access entries (the
    // stack's, `nodewright-*`) mapping no function to those groups instead.
    assert_eq!(
        d.failing_with(&["--group-prefix", "platform"]).await,
        ["access entries"]
    );
    let (_, text) = d.run_with(&["--group-prefix", "platform"]).await;
    assert!(
        text.contains("no access entry maps a role to platform-provisioner"),
        "{text}"
    );
    d.world.apply_yaml(&rbac).unwrap();

    // A NodePool with a field Karpenter's schema does not have.
    d.world
        .apply_yaml(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: typo}\n\
             spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: [], expireAfterr: 1h}}}\n",
        )
        .unwrap();
    assert_eq!(d.failing().await, ["configuration"]);
    let (_, text) = d.run().await;
    assert!(
        text.contains("expireAfterr"),
        "the unknown field is named:\n{text}"
    );
    let pools = ApiResource::from_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"));
    Api::<DynamicObject>::all_with(client.clone(), &pools)
        .delete("typo", &DeleteParams::default())
        .await
        .expect("deleted");

    // The subnets lose their discovery tag.
    let subnets = ec2.describe_subnets().send().await.unwrap();
    let ids: Vec<String> = subnets
        .subnets()
        .iter()
        .filter_map(|s| s.subnet_id().map(str::to_string))
        .collect();
    ec2.delete_tags()
        .set_resources(Some(ids.clone()))
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("karpenter.sh/discovery")
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(d.failing().await, ["subnet and security group discovery"]);
    ec2.create_tags()
        .set_resources(Some(ids))
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("karpenter.sh/discovery")
                .value(CLUSTER)
                .build(),
        )
        .send()
        .await
        .unwrap();

    // The node role taken out of its instance profile.
    let node = format!("nodewright-node-{CLUSTER}");
    iam.remove_role_from_instance_profile()
        .instance_profile_name(&node)
        .role_name(&node)
        .send()
        .await
        .unwrap();
    assert_eq!(d.failing().await, ["node role"]);
    let (_, text) = d.run().await;
    assert!(
        fix_of(&text, "node role").contains("add-role-to-instance-profile"),
        "{text}"
    );
    iam.add_role_to_instance_profile()
        .instance_profile_name(&node)
        .role_name(&node)
        .send()
        .await
        .unwrap();

    // Karpenter's controller still running: its leader Lease renewed a moment ago.
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "karpenter-leader-election", "namespace": "karpenter"},
        "spec": {"holderIdentity": "karpenter-6f7c9d-x2k4p", "leaseDurationSeconds": 15,
                 "renewTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
    });
    d.world.sim.apply_json(lease).unwrap();
    assert_eq!(d.failing().await, ["Karpenter"]);
    let (_, text) = d.run().await;
    assert!(
        text.contains("karpenter/karpenter-leader-election"),
        "{text}"
    );
    assert!(
        fix_of(&text, "Karpenter").contains("--replicas=0"),
        "{text}"
    );
    let leases =
        ApiResource::from_gvk(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"));
    Api::<DynamicObject>::namespaced_with(client.clone(), "karpenter", &leases)
        .delete("karpenter-leader-election", &DeleteParams::default())
        .await
        .expect("deleted");

    // An instance Karpenter launched before v1: its NodePool and cluster tags, no
    // eks:eks-cluster-name, so a takeover would leave it alone.
    let image = d.world.seeded.images[0].image_id.clone();
    let old = ec2
        .run_instances()
        .image_id(image)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Instance)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key("karpenter.sh/nodepool")
                        .value("default")
                        .build(),
                )
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key(format!("kubernetes.io/cluster/{CLUSTER}"))
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let old = old.instances()[0].instance_id().unwrap().to_string();
    assert_eq!(d.failing().await, ["Karpenter"]);
    let (_, text) = d.run().await;
    assert!(
        text.contains(&old) && text.contains("before Karpenter v1"),
        "{text}"
    );
    ec2.terminate_instances()
        .instance_ids(&old)
        .send()
        .await
        .unwrap();

    // A public endpoint closed to the functions' addresses, no private endpoint.
    public_endpoint(&eks, "203.0.113.0/24").await;
    assert_eq!(d.failing().await, ["EKS cluster"]);
    let (_, text) = d.run().await;
    assert!(
        fix_of(&text, "EKS cluster").contains("FunctionSubnetIds"),
        "{text}"
    );
    public_endpoint(&eks, "0.0.0.0/0").await;

    // A private endpoint only, with the stack running the functions outside any VPC.
    eks.update_cluster_config()
        .name(CLUSTER)
        .resources_vpc_config(
            VpcConfigRequest::builder()
                .endpoint_public_access(false)
                .endpoint_private_access(true)
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(d.failing().await, ["EKS cluster"]);
    let (_, text) = d.run().await;
    assert!(
        text.contains("private only: functions outside a VPC")
            && fix_of(&text, "EKS cluster").contains("FunctionSubnetIds"),
        "{text}"
    );
    // The stack redeployed into the cluster's VPC with a group of the functions' own,
    // which the cluster security group does not admit yet.
    let seeded = &d.world.seeded;
    let functions_group = ec2
        .create_security_group()
        .group_name("nodewright-functions")
        .description("nodewright's functions")
        .vpc_id(&seeded.vpc_id)
        .send()
        .await
        .unwrap()
        .group_id
        .unwrap();
    let subnets: Vec<&str> = seeded.subnets.iter().map(|s| s.id.as_str()).collect();
    let parameters = BTreeMap::from([
        ("FunctionSubnetIds".to_string(), subnets.join(",")),
        (
            "FunctionSecurityGroupIds".to_string(),
            functions_group.clone(),
        ),
        ("FunctionVpcId".to_string(), seeded.vpc_id.clone()),
        // Read again below, for the default pool and the RBAC.
        ("DefaultCapacityTypes".to_string(), "on-demand".to_string()),
        ("KubernetesAccess".to_string(), "cluster-admin".to_string()),
    ]);
    nodewright_world::world::deploy_stack(&d.world.moto, CLUSTER, &parameters)
        .await
        .unwrap();
    let cluster_group = eks
        .describe_cluster()
        .name(CLUSTER)
        .send()
        .await
        .unwrap()
        .cluster
        .and_then(|c| c.resources_vpc_config?.cluster_security_group_id)
        .expect("EKS names the cluster security group");
    assert_eq!(d.failing().await, ["EKS cluster"]);
    let (_, text) = d.run().await;
    assert_eq!(
        fix_of(&text, "EKS cluster"),
        format!(
            "aws ec2 authorize-security-group-ingress --group-id {cluster_group} --protocol \
             tcp --port 443 --source-group {functions_group}"
        ),
        "{text}"
    );
    // The fix, as the line says it.
    ec2.authorize_security_group_ingress()
        .group_id(&cluster_group)
        .ip_permissions(
            aws_sdk_ec2::types::IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(443)
                .to_port(443)
                .user_id_group_pairs(
                    aws_sdk_ec2::types::UserIdGroupPair::builder()
                        .group_id(&functions_group)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(d.failing().await, Vec::<String>::new());
    let (_, text) = d.run().await;
    assert!(
        text.contains(&format!(
            "private, from the functions' VPC: {cluster_group} accepts 443 from them"
        )),
        "{text}"
    );

    // Without Karpenter's CRDs and a ConfigMap, the stack's default pool is what the
    // functions would use, as the deployed stack's parameters build it: valid, and
    // on-demand only (DefaultCapacityTypes above), so no spot role is asked for.
    d.world.sim.set_crds_installed(false);
    assert_eq!(d.failing().await, Vec::<String>::new());
    let (_, text) = d.run().await;
    assert!(
        text.contains("PASS  configuration: no NodePool: the stack's default pool")
            && !text.contains("spot service-linked role"),
        "{text}"
    );
    // And the stack grants cluster-admin (KubernetesAccess above): no RBAC is asked for.
    assert!(
        text.contains("PASS  Kubernetes RBAC: not needed: the stack grants cluster-admin"),
        "{text}"
    );
    d.world.sim.set_crds_installed(true);

    // A cluster doctor cannot read: what AWS answered is still reported.
    let unreachable = d
        .world
        .sim
        .kubeconfig_yaml()
        .replace(&d.world.sim.url(), "http://127.0.0.1:9");
    std::fs::write(&d.kubeconfig, unreachable).unwrap();
    assert_eq!(d.failing().await, ["Kubernetes API"]);
    let (_, text) = d.run().await;
    assert!(
        text.contains("PASS  EKS cluster: ") && text.contains("PASS  node role: "),
        "{text}"
    );
}

/// The cluster's endpoint public only, open to `cidr`.
async fn public_endpoint(eks: &aws_sdk_eks::Client, cidr: &str) {
    eks.update_cluster_config()
        .name(CLUSTER)
        .resources_vpc_config(
            VpcConfigRequest::builder()
                .endpoint_public_access(true)
                .endpoint_private_access(false)
                .public_access_cidrs(cidr)
                .build(),
        )
        .send()
        .await
        .unwrap();
}
