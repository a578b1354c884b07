//! An emulated Kubernetes API server for the adapter tests. It is NOT Kubernetes: a few
//! canned routes on 127.0.0.1:<free port> that answer with Kubernetes-shaped JSON, record
//! every request (path, decoded query, body, content type) and can be told to throttle once,
//! to conflict once, to fail, or to not serve the Karpenter CRDs / events.k8s.io.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use nodewright::kube::{ClusterSettings, DefaultPoolParams, KubeCluster, RetryPolicy};
use serde_json::{Value, json};

// ---------------------------------------------------------------- emulated API server

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub content_type: String,
    pub body: Value,
}

#[derive(Default)]
pub struct World {
    pub requests: Vec<Request>,
    /// Answer the next `GET /api/v1/nodes` with 429.
    pub throttle_nodes_once: bool,
    /// Answer the next node PATCH with 409.
    pub conflict_once: bool,
    /// `None`: the Karpenter CRDs are not installed (404 on their paths).
    pub crds: Option<HashMap<&'static str, Vec<Value>>>,
    /// Status code for every Karpenter CRD list.
    pub crds_fail_with: Option<u16>,
    pub config_map: Option<Value>,
    pub events_v1_served: bool,
    /// Status code for every event create, to make event writing fail.
    pub events_fail_with: Option<u16>,
    pub pending_pods: Vec<Value>,
    pub bound_pods: Vec<Value>,
    pub nodes: Vec<Value>,
}

type Shared = Arc<Mutex<World>>;

fn status(code: u16, reason: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": reason});
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response()
}

/// A list response honouring `limit`/`continue` (the token is the offset).
fn list(kind: &str, items: &[Value], query: &HashMap<String, String>) -> Response {
    let start: usize = query
        .get("continue")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(usize::MAX);
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
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut w = world.lock().unwrap_or_else(|e| e.into_inner());
    w.requests.push(Request {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        content_type,
        body: body_json.clone(),
    });
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["api", "v1", "pods"]) => match query.get("fieldSelector").map(String::as_str) {
            Some("spec.nodeName=,status.phase=Pending") => list("Pod", &w.pending_pods, &query),
            Some("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed") => {
                list("Pod", &w.bound_pods, &query)
            }
            // Refusing an unfiltered list makes a missing selector fail loudly.
            _ => status(400, "BadRequest"),
        },
        ("GET", ["api", "v1", "nodes"]) => {
            if std::mem::take(&mut w.throttle_nodes_once) {
                return status(429, "TooManyRequests");
            }
            list("Node", &w.nodes, &query)
        }
        ("GET", ["api", "v1", "nodes", name]) => {
            match w.nodes.iter().find(|n| n["metadata"]["name"] == *name) {
                Some(node) => axum::Json(node.clone()).into_response(),
                None => status(404, "NotFound"),
            }
        }
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
        (
            "GET",
            [
                "apis",
                group @ ("karpenter.sh" | "karpenter.k8s.aws"),
                version,
                plural,
            ],
        ) => {
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
        (
            "GET",
            [
                "api",
                "v1",
                "namespaces",
                "kube-system",
                "configmaps",
                "nodewright",
            ],
        ) => match &w.config_map {
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

pub struct EmulatedApiServer {
    world: Shared,
    pub cluster: KubeCluster,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl EmulatedApiServer {
    pub async fn start(world: World, page_size: u32) -> EmulatedApiServer {
        let world = Arc::new(Mutex::new(world));
        let app = Router::new().fallback(handle).with_state(world.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async { rx.await.unwrap_or(()) })
                .await;
        });
        let url: axum::http::Uri = format!("http://{addr}").parse().expect("url");
        nodewright::eks::install_crypto_provider();
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
        EmulatedApiServer {
            world,
            cluster: KubeCluster::new(client, settings),
            shutdown: Some(tx),
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.world
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .requests
            .clone()
    }

    pub fn requests_to(&self, method: &str, path_prefix: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && r.path.starts_with(path_prefix))
            .collect()
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

pub fn pending_pod(name: &str, reason: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": reason}]}
    })
}

pub fn bound_pod(name: &str, node: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
        "status": {"phase": "Running"}
    })
}

pub fn node(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "resourceVersion": "7", "labels": {"karpenter.sh/nodepool": "general"}},
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

pub fn config_map() -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "nodewright", "namespace": "kube-system"},
        "data": {"classes.yaml": NODE_CLASS_YAML, "pools.yaml": NODE_POOL_YAML}
    })
}
