//! `KubeCluster` against an emulated Kubernetes API server.
//!
//! The emulated API server below is NOT Kubernetes: it is a few canned routes on
//! 127.0.0.1:<free port> that answer with Kubernetes-shaped JSON, record every request (path,
//! decoded query, body, content type) and can be told to throttle once, to conflict once, or
//! to not serve the Karpenter CRDs / events.k8s.io. It exists so these tests can check what
//! the adapters send (selectors, pagination, patches, events) and how they react to the
//! answers, until the simulated cluster (tests/src/kube_sim) is available.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use nodewright::api::{Taint, TaintEffect};
use nodewright::kube::{
    ClusterSettings, ConfigOrigin, ConfigSource, DefaultPoolParams, EventSink, EventType, KubeCluster, NodeOps,
    NodeSource, ObjectKind, PodRef, PodSource, RetryPolicy, usable,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------- emulated API server

#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    query: HashMap<String, String>,
    content_type: String,
    body: Value,
}

#[derive(Default)]
struct World {
    requests: Vec<Request>,
    /// Answer the next `GET /api/v1/nodes` with 429.
    throttle_nodes_once: bool,
    /// Answer the next node PATCH with 409.
    conflict_once: bool,
    /// `None`: the Karpenter CRDs are not installed (404 on their paths).
    crds: Option<HashMap<&'static str, Vec<Value>>>,
    /// Status code for every Karpenter CRD list.
    crds_fail_with: Option<u16>,
    config_map: Option<Value>,
    events_v1_served: bool,
    /// Status code for every event create, to make event writing fail.
    events_fail_with: Option<u16>,
    pending_pods: Vec<Value>,
    bound_pods: Vec<Value>,
    nodes: Vec<Value>,
}

type Shared = Arc<Mutex<World>>;

fn status(code: u16, reason: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": reason});
    (StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(body)).into_response()
}

/// A list response honouring `limit`/`continue` (the token is the offset).
fn list(kind: &str, items: &[Value], query: &HashMap<String, String>) -> Response {
    let start: usize = query.get("continue").and_then(|c| c.parse().ok()).unwrap_or(0);
    let limit: usize = query.get("limit").and_then(|l| l.parse().ok()).unwrap_or(usize::MAX);
    let end = start.saturating_add(limit).min(items.len());
    let mut metadata = json!({"resourceVersion": "100"});
    if end < items.len() {
        metadata["continue"] = json!(end.to_string());
    }
    axum::Json(json!({"kind": format!("{kind}List"), "apiVersion": "v1", "metadata": metadata, "items": items[start.min(end)..end]}))
        .into_response()
}

async fn handle(
    State(world): State<Shared>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let mut w = world.lock().unwrap_or_else(|e| e.into_inner());
    w.requests.push(Request { method: method.to_string(), path: path.clone(), query: query.clone(), content_type, body: body_json.clone() });
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["api", "v1", "pods"]) => match query.get("fieldSelector").map(String::as_str) {
            Some("spec.nodeName=,status.phase=Pending") => list("Pod", &w.pending_pods, &query),
            Some("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed") => list("Pod", &w.bound_pods, &query),
            // Refusing an unfiltered list makes a missing selector fail loudly.
            _ => status(400, "BadRequest"),
        },
        ("GET", ["api", "v1", "nodes"]) => {
            if std::mem::take(&mut w.throttle_nodes_once) {
                return status(429, "TooManyRequests");
            }
            list("Node", &w.nodes, &query)
        }
        ("GET", ["api", "v1", "nodes", name]) => match w.nodes.iter().find(|n| n["metadata"]["name"] == *name) {
            Some(node) => axum::Json(node.clone()).into_response(),
            None => status(404, "NotFound"),
        },
        ("PATCH", ["api", "v1", "nodes", name]) => {
            if std::mem::take(&mut w.conflict_once) {
                return status(409, "Conflict");
            }
            let Some(node) = w.nodes.iter_mut().find(|n| n["metadata"]["name"] == *name) else {
                return status(404, "NotFound");
            };
            json_patch::merge(node, &body_json);
            axum::Json(node.clone()).into_response()
        }
        ("GET", ["apis", "apps", "v1", "daemonsets"]) => list("DaemonSet", &[], &query),
        ("GET", ["apis", group @ ("karpenter.sh" | "karpenter.k8s.aws"), version, plural]) => {
            let key = format!("{group}/{version}/{plural}");
            if let Some(code) = w.crds_fail_with {
                return status(code, "InternalError");
            }
            match &w.crds {
                None => (StatusCode::NOT_FOUND, "404 page not found").into_response(),
                Some(crds) => match crds.iter().find(|(k, _)| **k == key) {
                    Some((_, items)) => list("X", items, &query),
                    None => (StatusCode::NOT_FOUND, "404 page not found").into_response(),
                },
            }
        }
        ("GET", ["api", "v1", "namespaces", "kube-system", "configmaps", "nodewright"]) => match &w.config_map {
            Some(cm) => axum::Json(cm.clone()).into_response(),
            None => status(404, "NotFound"),
        },
        ("POST", ["apis", "events.k8s.io", "v1", "namespaces", _, "events"]) => {
            if !w.events_v1_served {
                return (StatusCode::NOT_FOUND, "404 page not found").into_response();
            }
            match w.events_fail_with {
                Some(code) => status(code, "Forbidden"),
                None => (StatusCode::CREATED, axum::Json(body_json)).into_response(),
            }
        }
        ("POST", ["api", "v1", "namespaces", _, "events"]) => match w.events_fail_with {
            Some(code) => status(code, "Forbidden"),
            None => (StatusCode::CREATED, axum::Json(body_json)).into_response(),
        },
        _ => status(404, "NotFound"),
    }
}

struct EmulatedApiServer {
    world: Shared,
    cluster: KubeCluster,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl EmulatedApiServer {
    async fn start(world: World, page_size: u32) -> EmulatedApiServer {
        let world = Arc::new(Mutex::new(world));
        let app = Router::new().fallback(handle).with_state(world.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(async { rx.await.unwrap_or(()) }).await;
        });
        let url: axum::http::Uri = format!("http://{addr}").parse().expect("url");
        let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
        let mut settings = ClusterSettings::new(default_params(), "provisioner-test");
        settings.page_size = page_size;
        // Same shape as the default policy, with waits short enough for a test.
        settings.retry = RetryPolicy {
            attempts: 3,
            first_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            max_retry_after: Duration::from_millis(50),
        };
        EmulatedApiServer { world, cluster: KubeCluster::new(client, settings), shutdown: Some(tx) }
    }

    fn requests(&self) -> Vec<Request> {
        self.world.lock().unwrap_or_else(|e| e.into_inner()).requests.clone()
    }

    fn requests_to(&self, method: &str, path_prefix: &str) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.method == method && r.path.starts_with(path_prefix)).collect()
    }
}

impl Drop for EmulatedApiServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

// ---------------------------------------------------------------- canned objects

fn default_params() -> DefaultPoolParams {
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

fn pending_pod(name: &str, reason: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": reason}]}
    })
}

fn bound_pod(name: &str, node: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
        "status": {"phase": "Running"}
    })
}

fn node(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "resourceVersion": "7", "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0",
                 "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    })
}

const NODE_POOL_YAML: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: from-configmap}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: standard}
";

const NODE_CLASS_YAML: &str = "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: standard}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
";

fn config_map() -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "nodewright", "namespace": "kube-system"},
        "data": {"classes.yaml": NODE_CLASS_YAML, "pools.yaml": NODE_POOL_YAML}
    })
}

// ---------------------------------------------------------------- pods and nodes

#[tokio::test]
async fn pending_pods_are_filtered_by_the_api_server_read_page_by_page_and_checked_client_side() {
    let world = World {
        pending_pods: vec![
            pending_pod("web-1", "Unschedulable"),
            pending_pod("gated", "SchedulingGated"),
            pending_pod("web-2", "Unschedulable"),
        ],
        ..World::default()
    };
    let server = EmulatedApiServer::start(world, 2).await;
    let pods = server.cluster.pending_pods().await.expect("pending pods");
    let names: Vec<_> = pods.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
    assert_eq!(names, ["web-1", "web-2"]);

    let lists = server.requests_to("GET", "/api/v1/pods");
    assert_eq!(lists.len(), 2, "three pods in pages of two");
    for r in &lists {
        assert_eq!(r.query.get("fieldSelector").map(String::as_str), Some("spec.nodeName=,status.phase=Pending"));
        assert_eq!(r.query.get("limit").map(String::as_str), Some("2"));
    }
    assert_eq!(lists[0].query.get("continue"), None);
    assert_eq!(lists[1].query.get("continue").map(String::as_str), Some("2"));
}

#[tokio::test]
async fn bound_pods_are_listed_with_the_bound_selector_and_grouped_by_node() {
    let world = World {
        bound_pods: vec![bound_pod("a1", "node-a"), bound_pod("b1", "node-b"), bound_pod("a2", "node-a")],
        ..World::default()
    };
    let server = EmulatedApiServer::start(world, 500).await;
    let by_node = server.cluster.bound_pods_by_node().await.expect("bound pods");
    assert_eq!(by_node.get("node-a").map(Vec::len), Some(2));
    assert_eq!(by_node.get("node-b").map(Vec::len), Some(1));
    let lists = server.requests_to("GET", "/api/v1/pods");
    assert_eq!(
        lists[0].query.get("fieldSelector").map(String::as_str),
        Some("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
    );
}

#[tokio::test]
async fn a_throttled_list_is_retried_and_succeeds() {
    let world = World { throttle_nodes_once: true, nodes: vec![node("node-a")], ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let nodes = server.cluster.nodes().await.expect("nodes after one 429");
    assert_eq!(nodes.len(), 1);
    assert_eq!(server.requests_to("GET", "/api/v1/nodes").len(), 2, "one 429, then the answer");
}

// ---------------------------------------------------------------- configuration

#[tokio::test]
async fn without_karpenter_crds_the_configmap_is_the_configuration() {
    let world = World { crds: None, config_map: Some(config_map()), ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let load = server.cluster.load().await.expect("config");
    assert_eq!(load.source, ConfigOrigin::ConfigMap { namespace: "kube-system".into(), name: "nodewright".into() });
    assert_eq!(load.problems, vec![]);
    let (pools, classes, dropped) = usable(&load.inputs, &load.problems);
    assert_eq!(pools.iter().map(|p| p.metadata.name.as_str()).collect::<Vec<_>>(), ["from-configmap"]);
    assert_eq!(classes.len(), 1);
    assert!(dropped.is_empty());
    assert_eq!(load.inputs.node_pool_sources[0].file, "configmap/kube-system/nodewright/pools.yaml");
    // Every Karpenter kind was asked for (each answered 404) before the ConfigMap was read.
    let crd_lists: Vec<String> = server.requests_to("GET", "/apis/karpenter").into_iter().map(|r| r.path).collect();
    for path in [
        "/apis/karpenter.sh/v1/nodepools",
        "/apis/karpenter.sh/v1beta1/nodepools",
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
        "/apis/karpenter.sh/v1alpha5/provisioners",
        "/apis/karpenter.k8s.aws/v1alpha1/awsnodetemplates",
    ] {
        assert!(crd_lists.iter().any(|p| p == path), "{path} in {crd_lists:?}");
    }
}

#[tokio::test]
async fn karpenter_objects_in_the_cluster_take_priority_over_the_configmap() {
    let node_pool = json!({
        "metadata": {"name": "general", "resourceVersion": "42", "uid": "u1",
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "standard"}}}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    });
    let node_class: Value = serde_yaml::from_str(NODE_CLASS_YAML).expect("yaml");
    let crds = HashMap::from([
        ("karpenter.sh/v1/nodepools", vec![node_pool]),
        ("karpenter.k8s.aws/v1/ec2nodeclasses", vec![node_class]),
    ]);
    let world = World { crds: Some(crds), config_map: Some(config_map()), ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let load = server.cluster.load().await.expect("config");
    assert_eq!(load.source, ConfigOrigin::Crds);
    assert_eq!(load.problems, vec![], "status and server-set metadata are not configuration");
    let (pools, classes, _) = usable(&load.inputs, &load.problems);
    assert_eq!((pools.len(), classes.len()), (1, 1));
    assert_eq!(pools[0].metadata.name, "general");
    assert!(server.requests_to("GET", "/api/v1/namespaces").is_empty(), "the ConfigMap is not read");
}

#[tokio::test]
async fn with_no_nodepool_anywhere_the_stack_default_pool_is_used() {
    let crds = HashMap::from([("karpenter.sh/v1/nodepools", vec![]), ("karpenter.k8s.aws/v1/ec2nodeclasses", vec![])]);
    let world = World { crds: Some(crds), config_map: None, ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let load = server.cluster.load().await.expect("config");
    assert_eq!(load.source, ConfigOrigin::Default);
    let (pools, classes, dropped) = usable(&load.inputs, &load.problems);
    assert_eq!((pools.len(), classes.len(), dropped.len()), (1, 1, 0));
    assert_eq!(pools[0].metadata.name, "default");
    assert_eq!(classes[0].spec.role.as_deref(), Some("nodewright-node"));
}

#[tokio::test]
async fn a_server_error_on_a_crd_list_fails_the_load_instead_of_falling_back() {
    // Falling back to the ConfigMap or the default pool because the API server had a bad
    // moment would launch nodes the user never asked for; the load fails and the next poll
    // tries again.
    let world = World { crds_fail_with: Some(500), config_map: Some(config_map()), ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let err = server.cluster.load().await.expect_err("a 500 that persists fails the load");
    assert_eq!(err.status_code(), Some(500));
    assert!(err.to_string().starts_with("list awsnodetemplates.karpenter.k8s.aws/v1alpha1"), "{err}");
    assert_eq!(server.requests_to("GET", "/apis/karpenter").len(), 3, "three tries, then the error");
    assert!(server.requests_to("GET", "/api/v1/namespaces").is_empty(), "the ConfigMap is not read");
}

#[tokio::test]
async fn a_configmap_that_cannot_be_decoded_fails_the_load() {
    let world = World { crds: None, config_map: Some(json!("not a configmap")), ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let err = server.cluster.load().await.expect_err("undecodable ConfigMap");
    assert!(err.to_string().starts_with("get configmaps/kube-system/nodewright"), "{err}");
}

// ---------------------------------------------------------------- events

#[tokio::test]
async fn a_pod_event_is_an_events_k8s_io_event_from_the_provisioner() {
    let world = World { events_v1_served: true, ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let pod = PodRef { namespace: "shop".into(), name: "web-1".into(), uid: "uid-web-1".into() };
    server.cluster.pod_event(&pod, "Nominated", "will run on nodeclaim/nc-1", EventType::Normal).await;
    let posts = server.requests_to("POST", "/apis/events.k8s.io/v1/namespaces/shop/events");
    assert_eq!(posts.len(), 1);
    let e = &posts[0].body;
    assert_eq!(e["reportingController"], "nodewright.io/provisioner");
    assert_eq!(e["reportingInstance"], "provisioner-test");
    assert_eq!(e["action"], "Nominated");
    assert_eq!(e["reason"], "Nominated");
    assert_eq!(e["note"], "will run on nodeclaim/nc-1");
    assert_eq!(e["type"], "Normal");
    assert_eq!(e["regarding"], json!({"apiVersion": "v1", "kind": "Pod", "name": "web-1", "namespace": "shop", "uid": "uid-web-1"}));
    assert!(e["eventTime"].as_str().is_some_and(|t| t.contains('T')), "eventTime {}", e["eventTime"]);
    assert!(e["metadata"]["name"].as_str().is_some_and(|n| n.starts_with("web-1.")));
}

#[tokio::test]
async fn without_events_k8s_io_events_fall_back_to_core_v1_and_stay_there() {
    let world = World { events_v1_served: false, ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let c = &server.cluster;
    c.object_event(ObjectKind::NodePool, "general", "InvalidNodePool", "spec.weight: must be 1..100", EventType::Warning).await;
    c.object_event(ObjectKind::NodePool, "general", "InvalidNodePool", "again", EventType::Warning).await;
    assert_eq!(server.requests_to("POST", "/apis/events.k8s.io").len(), 1, "asked once, then remembered");
    let core = server.requests_to("POST", "/api/v1/namespaces/default/events");
    assert_eq!(core.len(), 2);
    let e = &core[0].body;
    assert_eq!(e["involvedObject"], json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general"}));
    assert_eq!((e["reason"].as_str(), e["type"].as_str()), (Some("InvalidNodePool"), Some("Warning")));
    assert_eq!(e["source"]["component"], "nodewright.io/provisioner");
}

#[tokio::test]
async fn an_event_that_cannot_be_written_does_not_fail_the_caller_or_fall_back() {
    let world = World { events_v1_served: true, events_fail_with: Some(403), ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    let pod = PodRef { namespace: "shop".into(), name: "web-1".into(), uid: String::new() };
    server.cluster.pod_event(&pod, "Nominated", "x", EventType::Normal).await;
    assert_eq!(server.requests_to("POST", "/apis/events.k8s.io").len(), 1, "403 is not retried");
    assert!(server.requests_to("POST", "/api/v1").is_empty(), "403 is not a reason to try core/v1");
}

// ---------------------------------------------------------------- node operations

fn disrupted() -> Taint {
    Taint { key: "nodewright.io/disrupted".into(), value: None, effect: TaintEffect::NoSchedule }
}

#[tokio::test]
async fn tainting_keeps_existing_taints_guards_the_write_and_is_idempotent() {
    let world = World { nodes: vec![node("node-a")], ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    server.cluster.taint("node-a", &disrupted()).await.expect("taint");
    server.cluster.taint("node-a", &disrupted()).await.expect("taint again");
    let patches = server.requests_to("PATCH", "/api/v1/nodes/node-a");
    assert_eq!(patches.len(), 1, "the second call finds the taint and writes nothing");
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(patches[0].query.get("fieldManager").map(String::as_str), Some("nodewright"));
    assert_eq!(
        patches[0].body,
        json!({"metadata": {"resourceVersion": "7"}, "spec": {"taints": [
            {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
            {"key": "nodewright.io/disrupted", "effect": "NoSchedule"}
        ]}})
    );
}

#[tokio::test]
async fn a_taint_that_conflicts_is_read_again_and_reapplied() {
    let world = World { nodes: vec![node("node-a")], conflict_once: true, ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    server.cluster.taint("node-a", &disrupted()).await.expect("taint after a conflict");
    assert_eq!(server.requests_to("GET", "/api/v1/nodes/node-a").len(), 2);
    assert_eq!(server.requests_to("PATCH", "/api/v1/nodes/node-a").len(), 2);
}

#[tokio::test]
async fn cordon_and_label_are_merge_patches() {
    let world = World { nodes: vec![node("node-a")], ..World::default() };
    let server = EmulatedApiServer::start(world, 500).await;
    server.cluster.cordon("node-a").await.expect("cordon");
    server.cluster.label("node-a", "nodewright.io/drifted", "true").await.expect("label");
    let bodies: Vec<Value> = server.requests_to("PATCH", "/api/v1/nodes/node-a").into_iter().map(|r| r.body).collect();
    assert_eq!(
        bodies,
        [json!({"spec": {"unschedulable": true}}), json!({"metadata": {"labels": {"nodewright.io/drifted": "true"}}})]
    );
    let err = server.cluster.cordon("missing").await.expect_err("no such node");
    assert_eq!(err.status_code(), Some(404));
    assert!(err.to_string().starts_with("patch nodes/missing"), "{err}");
}
