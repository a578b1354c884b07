//! The simulated control plane: kubelet / cloud node lifecycle over a fake cloud (a plain
//! in-memory instance list), the scheduler, and the workload controllers, driven by `step()`
//! on the manual clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams, PostParams};
use nodewright_world::kube_sim::{
    Arch, CloudView, CloudViewError, InstanceState, NodeCapacity, SimClock, SimCluster, SimConfig,
    SimInstance,
};
use serde_json::json;

/// The fake cloud: instances the test puts there, as they are.
#[derive(Default)]
struct FakeCloud(Mutex<Vec<SimInstance>>);

impl FakeCloud {
    fn set_state(&self, id: &str, state: InstanceState) {
        for i in self
            .0
            .lock()
            .unwrap()
            .iter_mut()
            .filter(|i| i.instance_id == id)
        {
            i.state = state;
        }
    }
}

impl CloudView for FakeCloud {
    fn instances(&self) -> BoxFuture<'_, Result<Vec<SimInstance>, CloudViewError>> {
        let list = self.0.lock().unwrap().clone();
        Box::pin(async move { Ok(list) })
    }
}

fn m5_large(instance_type: &str) -> Option<NodeCapacity> {
    (instance_type == "m5.large").then(|| NodeCapacity {
        cpu_milli: 2000,
        memory_bytes: 8 * 1024 * 1024 * 1024,
        pods: 29,
        arch: Arch::Amd64,
        extended: BTreeMap::new(),
        reserved_cpu_milli: 70,
        reserved_memory_bytes: 1024 * 1024 * 1024,
    })
}

const AL2023: &str = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n\
Content-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n\
spec:\n  cluster:\n    name: c1\n  kubelet:\n    flags:\n    - --node-labels=karpenter.sh/nodepool=default,karpenter.sh/capacity-type=spot\n\
    - --register-with-taints=dedicated=batch:NoSchedule\n--//--\n";

const AL2: &str = "#!/bin/bash\n/etc/eks/bootstrap.sh 'c1' --kubelet-extra-args \
'--node-labels=karpenter.sh/nodepool=legacy --register-with-taints=legacy=true:NoExecute'\n";

/// Every fake instance launched at the instant the manual clock starts.
const LAUNCH: jiff::Timestamp = jiff::Timestamp::constant(1_735_689_600, 0);

fn instance(id: &str, user_data: &str) -> SimInstance {
    SimInstance {
        instance_id: id.to_string(),
        instance_type: "m5.large".to_string(),
        zone: "us-east-1b".to_string(),
        private_dns_name: format!("{}.ec2.internal", id.trim_start_matches("i-")),
        private_ip: Some("10.0.0.9".to_string()),
        state: InstanceState::Running,
        launch_time: LAUNCH,
        user_data: Some(user_data.to_string()),
        tags: BTreeMap::new(),
    }
}

async fn world(instances: Vec<SimInstance>) -> (SimCluster, Arc<FakeCloud>, kube::Client) {
    let cloud = Arc::new(FakeCloud(Mutex::new(instances)));
    let cfg = SimConfig {
        boot_delay: Duration::from_secs(30),
        ready_delay: Duration::from_secs(10),
        node_removal_delay: Duration::from_secs(20),
        clock: SimClock::manual_at(LAUNCH),
        ..SimConfig::default()
    }
    .with_cloud(cloud.clone(), Arc::new(m5_large));
    let sim = SimCluster::start(cfg).await.unwrap();
    let client = sim.client().await.unwrap();
    (sim, cloud, client)
}

fn ready(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

#[tokio::test]
async fn an_instance_becomes_a_ready_node_with_its_user_data_labels_and_taints_then_goes_away() {
    let (sim, cloud, client) =
        world(vec![instance("i-al2023", AL2023), instance("i-al2", AL2)]).await;
    let nodes: Api<Node> = Api::all(client);

    assert!(
        sim.step().await.nodes_registered.is_empty(),
        "no node before the boot delay"
    );
    sim.clock().advance(Duration::from_secs(30));
    let report = sim.step().await;
    assert_eq!(report.nodes_registered.len(), 2);

    let n = nodes.get("al2023.ec2.internal").await.unwrap();
    assert_eq!(ready(&n).as_deref(), Some("False"));
    let labels = n.metadata.labels.clone().unwrap();
    for (k, v) in [
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.sh/capacity-type", "spot"),
        ("topology.kubernetes.io/zone", "us-east-1b"),
        ("topology.kubernetes.io/region", "us-east-1"),
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/hostname", "al2023.ec2.internal"),
    ] {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k}");
    }
    let spec = n.spec.clone().unwrap();
    assert_eq!(
        spec.provider_id.as_deref(),
        Some("aws:///us-east-1b/i-al2023")
    );
    let taints: Vec<(String, String)> = spec
        .taints
        .unwrap()
        .into_iter()
        .map(|t| (t.key, t.effect))
        .collect();
    assert!(taints.contains(&("dedicated".into(), "NoSchedule".into())));
    assert!(taints.contains(&("node.kubernetes.io/not-ready".into(), "NoSchedule".into())));
    let alloc = n.status.unwrap().allocatable.unwrap();
    assert_eq!(alloc.get("cpu").map(|q| q.0.as_str()), Some("1930m"));

    let legacy = nodes.get("al2.ec2.internal").await.unwrap();
    assert_eq!(
        legacy
            .labels()
            .get("karpenter.sh/nodepool")
            .map(String::as_str),
        Some("legacy")
    );
    let t = &legacy.spec.unwrap().taints.unwrap()[0];
    assert_eq!(
        (t.key.as_str(), t.value.as_deref(), t.effect.as_str()),
        ("legacy", Some("true"), "NoExecute")
    );

    sim.clock().advance(Duration::from_secs(10));
    assert_eq!(sim.step().await.nodes_ready.len(), 2);
    let n = nodes.get("al2023.ec2.internal").await.unwrap();
    assert_eq!(ready(&n).as_deref(), Some("True"));
    assert!(
        !n.spec
            .unwrap()
            .taints
            .unwrap()
            .iter()
            .any(|t| t.key == "node.kubernetes.io/not-ready")
    );

    cloud.set_state("i-al2023", InstanceState::ShuttingDown);
    assert_eq!(sim.step().await.nodes_not_ready, ["al2023.ec2.internal"]);
    assert_eq!(
        ready(&nodes.get("al2023.ec2.internal").await.unwrap()).as_deref(),
        Some("Unknown")
    );
    cloud.set_state("i-al2023", InstanceState::Terminated);
    sim.clock().advance(Duration::from_secs(20));
    assert_eq!(sim.step().await.nodes_deleted, ["al2023.ec2.internal"]);
    assert!(
        nodes
            .get_opt("al2023.ec2.internal")
            .await
            .unwrap()
            .is_none()
    );
    assert!(nodes.get_opt("al2.ec2.internal").await.unwrap().is_some());
}

use kube::ResourceExt;

fn deployment(name: &str, replicas: i32, cpu: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx",
                                       "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}}
    }))
    .unwrap()
}

fn phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

fn scheduled_condition(p: &Pod) -> Option<(String, Option<String>, Option<String>)> {
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// A world with one Ready m5.large node.
async fn one_ready_node() -> (SimCluster, Arc<FakeCloud>, kube::Client) {
    let w = world(vec![instance("i-al2023", AL2023)]).await;
    w.0.clock().advance(Duration::from_secs(30));
    w.0.step().await;
    w.0.clock().advance(Duration::from_secs(10));
    w.0.step().await;
    w
}

#[tokio::test]
async fn deployment_pods_schedule_onto_fitting_nodes_and_the_rest_are_unschedulable() {
    let (sim, _cloud, client) = one_ready_node().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    // The node taints dedicated=batch:NoSchedule; tolerate it so that only cpu limits.
    let mut d = deployment("web", 3, "800m");
    let tmpl = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    tmpl.tolerations = Some(vec![
        serde_json::from_value(json!({"key": "dedicated", "operator": "Exists"})).unwrap(),
    ]);
    deploys.create(&PostParams::default(), &d).await.unwrap();

    let report = sim.step().await;
    assert_eq!(report.pods_created.len(), 3);
    assert_eq!(
        report.pods_bound.len(),
        2,
        "1930m allocatable fits two 800m pods"
    );
    let listed = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items;
    let running: Vec<&Pod> = listed.iter().filter(|p| phase(p) == "Running").collect();
    assert_eq!(running.len(), 2);
    assert!(
        running
            .iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some("al2023.ec2.internal"))
    );
    let pending: Vec<&Pod> = listed.iter().filter(|p| phase(p) == "Pending").collect();
    assert_eq!(
        scheduled_condition(pending[0]),
        Some((
            "False".into(),
            Some("Unschedulable".into()),
            Some("0/1 nodes are available: 1 Insufficient cpu.".into())
        ))
    );
    let owner = &pending[0].metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "ReplicaSet");
    assert!(owner.name.starts_with("web-"));

    // A pod without the toleration is kept off by the taint.
    let plain: Pod = serde_json::from_value(json!({"metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &plain).await.unwrap();
    sim.step().await;
    let (status, _, message) = scheduled_condition(&pods.get("plain").await.unwrap()).unwrap();
    assert_eq!(status, "False");
    assert_eq!(
        message.as_deref(),
        Some("0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: batch}.")
    );
}

#[tokio::test]
async fn an_evicted_deployment_pod_comes_back_pending_and_scaling_down_removes_pods() {
    let (sim, _cloud, client) = one_ready_node().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut d = deployment("api", 3, "100m");
    let tmpl = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    tmpl.tolerations = Some(vec![
        serde_json::from_value(json!({"key": "dedicated", "operator": "Exists"})).unwrap(),
    ]);
    deploys.create(&PostParams::default(), &d).await.unwrap();
    sim.step().await;
    let before = pods
        .list(&ListParams::default().labels("app=api"))
        .await
        .unwrap()
        .items;
    assert_eq!(before.iter().filter(|p| phase(p) == "Running").count(), 3);

    let victim = before[0].name_any();
    pods.evict(&victim, &EvictParams::default()).await.unwrap();
    // Deleted gracefully: Terminating, and no longer counted by its ReplicaSet.
    let evicted = pods.get_opt(&victim).await.unwrap();
    assert!(evicted.is_some_and(|p| p.metadata.deletion_timestamp.is_some()));
    // Cordon the node so that the replacement stays Pending where we can see it.
    let nodes: Api<Node> = Api::all(sim.client().await.unwrap());
    nodes
        .patch(
            "al2023.ec2.internal",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    let report = sim.step().await;
    assert_eq!(report.pods_created.len(), 1);
    let replacement = pods
        .get(report.pods_created[0].trim_start_matches("default/"))
        .await
        .unwrap();
    assert_eq!(phase(&replacement), "Pending");
    assert_eq!(
        scheduled_condition(&replacement).map(|c| c.2),
        Some(Some(
            "0/1 nodes are available: 1 node(s) were unschedulable.".into()
        ))
    );

    deploys
        .patch(
            "api",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    let report = sim.step().await;
    assert_eq!(report.pods_deleted.len(), 2);
    assert!(
        report
            .pods_deleted
            .contains(&format!("default/{}", replacement.name_any())),
        "the unbound pod goes first"
    );
    // The bound pod that goes is Terminating for its grace period, as in Kubernetes: still
    // listed, with a deletionTimestamp, and no longer counted by the ReplicaSet.
    let listed = pods
        .list(&ListParams::default().labels("app=api"))
        .await
        .unwrap()
        .items;
    let (terminating, left): (Vec<_>, Vec<_>) = listed
        .into_iter()
        .partition(|p| p.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.len(), 1);
    assert_eq!(left.len(), 1);
    assert_eq!(phase(&left[0]), "Running");
    let status = deploys.get("api").await.unwrap().status.unwrap();
    assert_eq!((status.replicas, status.ready_replicas), (Some(1), Some(1)));
}

#[tokio::test]
async fn a_daemonset_puts_one_bound_pod_on_each_ready_node() {
    let (sim, _cloud, client) =
        world(vec![instance("i-al2023", AL2023), instance("i-al2", AL2)]).await;
    sim.apply_json(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"tolerations": [{"operator": "Exists"}],
                                       "containers": [{"name": "a", "image": "agent", "resources": {"requests": {"cpu": "50m"}}}]}}}
    }))
    .unwrap();
    sim.clock().advance(Duration::from_secs(30));
    sim.step().await;
    let pods: Api<Pod> = Api::namespaced(client, "kube-system");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nodes are not Ready yet"
    );
    sim.clock().advance(Duration::from_secs(10));
    sim.step().await;
    let mut on: Vec<String> = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap())
        .collect();
    on.sort();
    assert_eq!(on, ["al2.ec2.internal", "al2023.ec2.internal"]);
    sim.step().await;
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        2,
        "no second pod per node"
    );
}
