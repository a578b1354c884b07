//! The adapters under test, on a fresh simulated cluster that logs every request whole, and
//! the objects the tests store in it.

use std::time::Duration;

use nodewright::kube::{ClusterSettings, DefaultPoolParams, KubeCluster, RetryPolicy};
use nodewright_world::kube_sim::{LoggedRequest, SimCluster, SimConfig};
use serde_json::{Value, json};

/// `KubeCluster` over the unmodified `kube::Client`, talking to a simulated cluster.
pub struct Adapters {
    pub sim: SimCluster,
    pub cluster: KubeCluster,
}

impl Adapters {
    /// A cluster with or without the Karpenter CRDs installed, whose adapters read lists in
    /// pages of `page_size`.
    pub async fn start(crds_installed: bool, page_size: u32) -> Adapters {
        let sim = SimCluster::start(SimConfig {
            crds_installed,
            ..SimConfig::default()
        })
        .await
        .expect("simulated cluster starts");
        sim.log_requests();
        let config = sim.config().await.expect("config from the kubeconfig");
        // A 429 must reach the adapters' own retry policy, as in the functions' client.
        let config = nodewright::eks::without_client_retries(config);
        let client = kube::Client::try_from(config).expect("client");
        let mut settings = ClusterSettings::new(default_params(), "provisioner-test");
        settings.page_size = page_size;
        // Same shape as the default policy, with waits short enough for a test.
        settings.retry = RetryPolicy {
            attempts: 3,
            first_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            max_retry_after: Duration::from_millis(50),
        };
        Adapters {
            sim,
            cluster: KubeCluster::new(client, settings),
        }
    }

    /// Stores objects as given (status included).
    pub fn with(self, objects: impl IntoIterator<Item = Value>) -> Adapters {
        for object in objects {
            self.sim
                .apply_json(object)
                .expect("the simulated cluster stores it");
        }
        self
    }

    /// What the adapters sent with `method` to paths starting with `path_prefix`.
    pub fn requests_to(&self, method: &str, path_prefix: &str) -> Vec<LoggedRequest> {
        self.sim.logged_requests(method, path_prefix)
    }
}

pub fn default_params() -> DefaultPoolParams {
    DefaultPoolParams {
        cluster_name: "demo".into(),
        node_role: "nodewright-node".into(),
        capacity_types: vec!["on-demand".into()],
        architectures: vec!["amd64".into()],
        instance_categories: vec!["m".into()],
        cpu_limit: Some("100".into()),
        ami_alias: "al2023@latest".into(),
    }
}

/// An unbound Pending pod whose `PodScheduled` condition is False for `reason`.
pub fn pending_pod(name: &str, reason: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": reason}]}
    })
}

pub fn bound_pod(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
        "status": {"phase": "Running"}
    })
}

/// A Ready node that already carries one taint (`dedicated=web:NoSchedule`).
pub fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0",
                 "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    })
}

pub const NODE_POOL_YAML: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: from-configmap}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: standard}
";

pub const NODE_CLASS_YAML: &str = "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: standard}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
";

/// The ConfigMap `kube-system/nodewright` holding one pool and one class.
pub fn config_map() -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "nodewright", "namespace": "kube-system"},
        "data": {"classes.yaml": NODE_CLASS_YAML, "pools.yaml": NODE_POOL_YAML}
    })
}
