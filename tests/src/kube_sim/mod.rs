//! A simulated EKS cluster on loopback that the unmodified `kube::Client` talks to over HTTP.
//!
//! [`SimCluster::start`] serves, on `127.0.0.1` at a free port, the subset of the Kubernetes
//! REST API nodewright uses — pods (with eviction and status), nodes, PodDisruptionBudgets,
//! Deployments, ReplicaSets, DaemonSets, ConfigMaps, both Event APIs, namespaces and the
//! Karpenter custom resources behind a CRD switch — with the real JSON shapes, resource
//! versions, and `meta/v1 Status` errors. [`SimCluster::step`] runs one round of the
//! simulated control plane on the [`SimClock`]: the kubelet / cloud node lifecycle (EC2
//! instances become Nodes), the ReplicaSet and DaemonSet controllers, the disruption
//! controller's PodDisruptionBudget status, the scheduler, and pod start-up, and the end of
//! Terminating pods: a pod a node runs is deleted gracefully
//! (`deletionTimestamp` + `deletionGracePeriodSeconds`, gone once its grace has run out on
//! the clock; see `graceful.rs`). Any other object with finalizers is only marked by a
//! DELETE and goes once a write removes the last of them (`finalizers.rs`).
//!
//! Watch is served by re-listing (see `watch.rs`). Authentication (EKS tokens and access
//! entries) and RBAC are enforced (`eks_auth.rs`, `authz.rs`). Not simulated: server-side
//! apply field management (apply is a merge patch), admission (quotas, limit ranges, pod
//! security), namespace lifecycle (objects may be created in any namespace), aggregated
//! discovery, and protobuf.

// Handlers return `Result<_, ApiError>` whose error is the HTTP answer itself (status,
// reason, message, headers); boxing it in every handler would only add noise to a test
// server.
#![allow(clippy::result_large_err)]

mod age;
pub mod authz;
mod clock;
mod cloud;
mod controller;
mod crd_schema;
mod ec2;
pub mod eks_auth;
mod event_view;
mod eviction;
mod faults;
mod finalizers;
mod graceful;
mod jsonpath;
mod kubelet;
mod node_lease;
mod openapi;
mod patch;
mod pod_removals;
mod podspec;
mod printers;
mod request_log;
mod resources;
mod scheduler;
mod selectors;
mod server;
mod state;
mod status;
mod store;
mod strict;
mod subresources;
mod table;
mod userdata;
mod validation;
mod watch;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

pub use clock::SimClock;
pub use cloud::{
    Arch, CloudView, CloudViewError, InstanceCapacity, InstanceState, NodeCapacity, SimInstance,
};
pub use ec2::Ec2CloudView;
pub use faults::{Fault, FaultTarget};
pub use pod_removals::{PodRemoval, Via};
pub use request_log::LoggedRequest;
pub use status::ApiError;
pub use userdata::{RegistrationFlags, parse_user_data};

use state::Shared;
use store::Write;

/// How the simulated cluster behaves.
#[derive(Clone)]
pub struct SimConfig {
    /// Cluster name, used in the kubeconfig and by [`Ec2CloudView`].
    pub cluster_name: String,
    pub region: String,
    pub clock: SimClock,
    /// Whether the Karpenter CRDs start installed.
    pub crds_installed: bool,
    /// From instance launch to the Node being registered (EKS AL2023 nodes join in roughly
    /// 30 s to a minute).
    pub boot_delay: Duration,
    /// From registration to Ready (CNI start-up; ~10 s on EKS).
    pub ready_delay: Duration,
    /// From binding to the pod being Running and Ready.
    pub pod_start_delay: Duration,
    /// From the instance shutting down to the Node object being deleted; the node is
    /// NotReady in between (the cloud node lifecycle controller polls every few seconds).
    pub node_removal_delay: Duration,
    /// The EC2 side; without it the kubelet simulation does nothing.
    pub cloud: Option<Arc<dyn CloudView>>,
    /// Capacity of instance types; needed with `cloud`.
    pub capacity: Option<Arc<dyn InstanceCapacity>>,
    /// Accept only EKS bearer tokens validated against STS ([`eks_auth`]); `None` serves
    /// anyone, as the plain kubeconfig of [`SimCluster::kubeconfig_yaml`] expects.
    pub eks_auth: Option<eks_auth::EksAuth>,
}

impl std::fmt::Debug for SimConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimConfig")
            .field("cluster_name", &self.cluster_name)
            .field("region", &self.region)
            .field("crds_installed", &self.crds_installed)
            .field("boot_delay", &self.boot_delay)
            .field("ready_delay", &self.ready_delay)
            .field("pod_start_delay", &self.pod_start_delay)
            .field("node_removal_delay", &self.node_removal_delay)
            .field("cloud", &self.cloud.is_some())
            .finish()
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cluster_name: "nodewright-local".to_string(),
            region: "us-east-1".to_string(),
            clock: SimClock::manual(),
            crds_installed: false,
            boot_delay: Duration::from_secs(40),
            ready_delay: Duration::from_secs(10),
            pod_start_delay: Duration::ZERO,
            node_removal_delay: Duration::from_secs(30),
            cloud: None,
            capacity: None,
            eks_auth: None,
        }
    }
}

impl SimConfig {
    /// Connects the kubelet simulation to a cloud and the capacity of its instance types.
    pub fn with_cloud(
        mut self,
        cloud: Arc<dyn CloudView>,
        capacity: Arc<dyn InstanceCapacity>,
    ) -> Self {
        self.cloud = Some(cloud);
        self.capacity = Some(capacity);
        self
    }
}

/// Failures of the simulated cluster's own API (not of requests it serves).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot bind the simulated API server on 127.0.0.1")]
    Bind(#[source] std::io::Error),
    #[error("the simulated cluster's kubeconfig is not accepted by kube")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    #[error("cannot build a kube::Client for the simulated cluster")]
    Client(#[source] kube::Error),
    #[error(
        "the simulated cluster does not store {api_version} {kind} (a kind it serves is needed)"
    )]
    UnknownKind { api_version: String, kind: String },
    #[error("the simulated cluster refused the object")]
    Api(#[source] ApiError),
    #[error("the simulated cluster authenticates no one (SimConfig::eks_auth is None)")]
    NoAuth,
}

/// Stores any object of a served kind as given (status included), creating or replacing
/// it; namespaced objects without a namespace go to `default`. Returns what is stored.
fn store_object(shared: &Shared, value: Value) -> Result<Value, SimError> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let res = resources::find_kind(&api_version, &kind)
        .ok_or(SimError::UnknownKind { api_version, kind })?;
    // The namespace the store files it under, as a create would: none for cluster-scoped
    // kinds (looked up under "default", a re-applied NodePool was taken for a create).
    let ns =
        validation::namespace_for(&resources::RESOURCES[res], "", &value).map_err(SimError::Api)?;
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let now = shared.clock.rfc3339();
    let mut store = shared.store();
    let exists = store.get(res, &ns, &name).is_ok();
    let out = if exists {
        store.replace(res, &ns, &name, value, Write::Internal)
    } else {
        store.create(res, &ns, value, &now, Write::Internal)
    };
    out.map_err(SimError::Api)
}

/// What one [`SimCluster::step`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StepReport {
    pub nodes_registered: Vec<String>,
    pub nodes_ready: Vec<String>,
    pub nodes_not_ready: Vec<String>,
    pub nodes_deleted: Vec<String>,
    pub pods_created: Vec<String>,
    pub pods_deleted: Vec<String>,
    /// `namespace/name -> node`.
    pub pods_bound: Vec<(String, String)>,
    pub pods_unschedulable: Vec<String>,
    pub pods_started: Vec<String>,
    /// Terminating pods the kubelets stopped (grace elapsed, or their node gone).
    pub pods_stopped: Vec<String>,
    /// Problems the round met (a cloud listing that failed); the round carries on.
    pub errors: Vec<String>,
}

struct Inner {
    shared: Arc<Shared>,
    addr: SocketAddr,
    config: SimConfig,
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(tx) = self
            .shutdown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = tx.send(());
        }
    }
}

/// A handle on a running simulated cluster; clones share it. The server stops when the
/// last handle is dropped or on [`SimCluster::shutdown`].
#[derive(Clone)]
pub struct SimCluster {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCluster")
            .field("url", &self.url())
            .finish()
    }
}

impl SimCluster {
    /// Binds `127.0.0.1:0` and serves the API until dropped. Needs a Tokio runtime.
    pub async fn start(config: SimConfig) -> Result<SimCluster, SimError> {
        let shared = Arc::new(Shared::new(config.clock.clone(), config.crds_installed));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(SimError::Bind)?;
        let addr = listener.local_addr().map_err(SimError::Bind)?;
        let mut app = axum::Router::new()
            .fallback(server::handle)
            .with_state(shared.clone());
        if let Some(auth) = config.eks_auth.clone() {
            app = app.layer(axum::middleware::from_fn_with_state(
                Arc::new(auth),
                eks_auth::require_token,
            ));
        }
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "simulated API server stopped");
            }
        });
        Ok(SimCluster {
            inner: Arc::new(Inner {
                shared,
                addr,
                config,
                shutdown: Mutex::new(Some(tx)),
            }),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    pub fn cluster_name(&self) -> &str {
        &self.inner.config.cluster_name
    }

    /// A kubeconfig whose cluster, context and user are named after the cluster; no auth
    /// (the harness: see [`eks_auth::EksAuth::trusting_the_harness`]).
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_with_user("{}")
    }

    /// A kubeconfig like [`kubeconfig_yaml`](Self::kubeconfig_yaml) whose user is `user`
    /// (a YAML flow mapping: `{token: ...}`, `{exec: {...}}`).
    pub fn kubeconfig_with_user(&self, user: &str) -> String {
        let name = &self.inner.config.cluster_name;
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\n\
             contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\n\
             current-context: {name}\nusers:\n- name: {name}\n  user: {user}\n",
            url = self.url()
        )
    }

    /// The `kube::Config` that [`kubeconfig_yaml`](Self::kubeconfig_yaml) gives, to adjust
    /// before building a client (for example `default_retry = false`: kube 5 retries every
    /// 429, 503 and 504 up to 15 times with backoff growing to 1000 s, and the eviction API
    /// answers 429 for a budget that does not allow a disruption).
    pub async fn config(&self) -> Result<kube::Config, SimError> {
        // kube's rustls connector is built even for http:// and panics when the process has
        // no crypto provider chosen and more than one is compiled in (aws-lc-rs and ring
        // both are here); an already installed provider is kept.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml())
            .map_err(SimError::Kubeconfig)?;
        kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(SimError::Kubeconfig)
    }

    /// The unmodified `kube::Client`, built from [`kubeconfig_yaml`](Self::kubeconfig_yaml)
    /// with kube's defaults.
    pub async fn client(&self) -> Result<kube::Client, SimError> {
        kube::Client::try_from(self.config().await?).map_err(SimError::Client)
    }

    pub fn clock(&self) -> SimClock {
        self.inner.shared.clock.clone()
    }

    pub fn set_crds_installed(&self, on: bool) {
        self.inner.shared.set_crds_installed(on);
    }

    /// Stores any object of a served kind as given (status included), creating or replacing
    /// it; namespaced objects without a namespace go to `default`. Returns what is stored.
    pub fn apply_json(&self, value: Value) -> Result<Value, SimError> {
        store_object(&self.inner.shared, value)
    }

    /// A stored object, by kind (`"v1"`, `"Pod"`), namespace (ignored for cluster-scoped
    /// kinds) and name.
    pub fn get_json(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let res = resources::find_kind(api_version, kind)?;
        let namespace = match resources::RESOURCES[res].namespaced {
            true => namespace,
            false => "",
        };
        self.inner
            .shared
            .store()
            .get(res, namespace, name)
            .ok()
            .cloned()
    }

    /// All stored objects of a kind, in every namespace.
    pub fn list_json(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let Some(res) = resources::find_kind(api_version, kind) else {
            return Vec::new();
        };
        self.inner.shared.store().list(res, None).cloned().collect()
    }

    /// Audits every pod a client evicts or deletes from a node from now on (see
    /// [`PodRemoval`]); off by default.
    pub fn audit_pod_removals(&self) {
        self.inner.shared.store().start_pod_removal_audit();
    }

    /// The pods clients evicted or deleted from nodes since the last call (see
    /// [`PodRemoval`]); empty unless [`audit_pod_removals`](Self::audit_pod_removals) is on.
    pub fn take_pod_removals(&self) -> Vec<PodRemoval> {
        self.inner.shared.store().take_pod_removals()
    }

    /// Ends every open watch, as an API server restart or a load balancer's idle timeout
    /// does; clients see their stream end.
    pub fn drop_watches(&self) {
        self.inner.shared.drop_watches();
    }

    /// Watches being served right now.
    pub fn open_watches(&self) -> usize {
        self.inner.shared.open_watches()
    }

    /// Makes the next matching requests fail (see [`Fault`]).
    pub fn inject(&self, fault: Fault) {
        self.inner.shared.faults().inject(fault);
    }

    /// Stores `object` (as [`apply_json`](Self::apply_json)) just before the first request
    /// matching `method` and `target` is served, once: a change another client makes at that
    /// very moment (a pod bound to a node between a client's read and its write).
    pub fn apply_before(&self, method: &str, target: FaultTarget, object: Value) {
        self.inner.shared.faults().before(faults::Before {
            method: Some(method.to_ascii_uppercase()),
            target,
            object,
        });
    }

    /// Delays every request whose path starts with `path_prefix` by `delay` of the
    /// simulation clock's time (on a manual clock, at most 20 ms of wall-clock time each:
    /// see [`SimClock::sleep`]).
    pub fn slow(&self, path_prefix: &str, delay: Duration) {
        self.inner
            .shared
            .faults()
            .slow(path_prefix.to_string(), delay);
    }

    /// Every request served so far, as `METHOD plural[/subresource]` (`GET pods`, `WATCH
    /// pods`, `PATCH nodes`), or `METHOD path` for paths that name no resource.
    pub fn requests(&self) -> Vec<String> {
        self.inner.shared.requests()
    }

    /// RBAC's refusals so far, each the 403's message; empty without [`SimConfig::eks_auth`].
    pub fn rbac_refusals(&self) -> Vec<String> {
        self.inner.shared.refusals()
    }

    /// Who may do what from now on (see [`eks_auth`]); without [`SimConfig::eks_auth`]
    /// nothing is checked, so this is an error.
    pub fn set_access_entries(
        &self,
        entries: impl IntoIterator<Item = eks_auth::AccessEntry>,
    ) -> Result<(), SimError> {
        let auth = self
            .inner
            .config
            .eks_auth
            .as_ref()
            .ok_or(SimError::NoAuth)?;
        auth.set_access_entries(entries);
        Ok(())
    }

    /// Logs every request from now on whole (see [`LoggedRequest`]); off by default.
    pub fn log_requests(&self) {
        self.inner.shared.start_request_log();
    }

    /// The logged requests with this HTTP method whose path starts with `path_prefix`, in
    /// the order they were served; empty unless [`log_requests`](Self::log_requests) is on.
    pub fn logged_requests(&self, method: &str, path_prefix: &str) -> Vec<LoggedRequest> {
        self.inner
            .shared
            .logged_requests()
            .into_iter()
            .filter(|r| r.method == method && r.path.starts_with(path_prefix))
            .collect()
    }

    /// Every list page holds at most `items` items from now on (with a `continue` token
    /// for the rest), whatever `limit` the client asked; [`SimCluster::clear_faults`] ends it.
    pub fn short_pages(&self, items: usize) {
        self.inner.shared.faults().cap_pages(items);
    }

    /// The kubelet of `node` stops (a wedged kernel, a dead container runtime) while its
    /// instance runs on: the node goes Ready Unknown with the unreachable taints, as the
    /// node lifecycle controller marks it, its Lease is no longer renewed, and nothing on
    /// it starts or stops again.
    pub fn stop_kubelet(&self, node: &str) -> Result<(), SimError> {
        let ts = clock::format_ts(self.inner.shared.clock.now());
        let mut store = self.inner.shared.store();
        let mut n = store
            .get(resources::NODES, "", node)
            .map_err(SimError::Api)?
            .clone();
        kubelet::mark_unreachable(&mut n, &ts);
        store
            .replace(resources::NODES, "", node, n, store::Write::Internal)
            .map_err(SimError::Api)?;
        Ok(())
    }

    /// Removes every injected fault and delay.
    pub fn clear_faults(&self) {
        self.inner.shared.faults().clear();
    }

    /// One round of the simulated control plane: kubelet / cloud node lifecycle, then the
    /// controllers, then the scheduler, then pod start-up.
    pub async fn step(&self) -> StepReport {
        let mut report = StepReport::default();
        let cfg = &self.inner.config;
        if let (Some(cloud), Some(capacity)) = (&cfg.cloud, &cfg.capacity) {
            match cloud.instances().await {
                Ok(instances) => {
                    let mut store = self.inner.shared.store();
                    kubelet::sync_nodes(
                        &mut store,
                        cfg,
                        capacity.as_ref(),
                        &instances,
                        self.inner.shared.clock.now(),
                        &mut report,
                    );
                }
                Err(e) => report.errors.push(format!("listing cloud instances: {e}")),
            }
        }
        let now = self.inner.shared.clock.now();
        let mut store = self.inner.shared.store();
        node_lease::renew(&mut store, now);
        graceful::stop_terminating(&mut store, now, &mut report);
        controller::reconcile(&mut store, now, &mut report);
        scheduler::schedule_pending(&mut store, now, cfg.pod_start_delay, &mut report);
        kubelet::start_pods(&mut store, now, cfg.pod_start_delay, &mut report);
        report
    }

    /// Runs [`step`](Self::step) every `interval` (real time) until the cluster is dropped.
    pub fn run_in_background(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(inner) = weak.upgrade() else { break };
                let report = SimCluster { inner }.step().await;
                for e in &report.errors {
                    tracing::warn!(error = %e, "simulated cluster step");
                }
            }
        })
    }

    /// Runs [`step`](Self::step) every `every` of the simulation clock's time (the world's
    /// own time, see [`crate::world_time`]) until the cluster is dropped; a step counts as
    /// the world working.
    pub fn step_in_background(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let clock = self.clock();
        tokio::spawn(async move {
            loop {
                clock.sleep(every).await;
                let Some(inner) = weak.upgrade() else { break };
                let _busy = clock.busy();
                let report = SimCluster { inner }.step().await;
                for e in &report.errors {
                    tracing::warn!(error = %e, "simulated cluster step");
                }
            }
        })
    }

    /// Stops the server (also happens when the last handle is dropped).
    pub fn shutdown(self) {
        if let Some(tx) = self
            .inner
            .shutdown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = tx.send(());
        }
    }
}
