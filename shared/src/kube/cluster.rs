//! `KubeCluster`: the ports implemented over an unmodified `kube::Client`. Every call goes
//! through one retry helper; lists are paginated and filtered by the API server.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ::kube::Client;
use ::kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::cache::{Clock, ConfigMemo, SystemClock};
use super::config::{DEFAULT_CONFIG_MAP_NAME, DEFAULT_CONFIG_MAP_NAMESPACE, DefaultPoolParams};
use super::error::{KubeError, RetryPolicy};
use super::pending::{
    BOUND_FIELD_SELECTOR, PENDING_FIELD_SELECTOR, group_by_node, is_provisionable,
};
use super::ports::{NodeOps, NodeSource, PdbSource, PendingPodWatch, PodSource, PoolStatusSink};
use crate::api::Taint;

/// Times one list starts over after its continue token expired; more means the list
/// cannot be read consistently now, and the next poll tries again.
const MAX_LIST_RESTARTS: u32 = 2;

/// What a `KubeCluster` needs besides the client.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// The ConfigMap read when no Karpenter CRD holds a NodePool.
    pub config_map_namespace: String,
    pub config_map_name: String,
    /// Builds the NodePool used when neither the CRDs nor the ConfigMap hold one.
    pub default_pool: DefaultPoolParams,
    /// Events' `reportingInstance`: which function (and container) wrote them.
    pub reporting_instance: String,
    /// Items per list page. 500 is what kubectl and client-go's pager use.
    pub page_size: u32,
    pub retry: RetryPolicy,
    /// How long a loaded configuration is reused (zero: read every time). A warm function
    /// polls every few seconds and NodePools change far less often; see
    /// [`super::DEFAULT_CONFIG_TTL`].
    pub config_ttl: Duration,
}

impl ClusterSettings {
    pub fn new(default_pool: DefaultPoolParams, reporting_instance: impl Into<String>) -> Self {
        ClusterSettings {
            config_map_namespace: DEFAULT_CONFIG_MAP_NAMESPACE.into(),
            config_map_name: DEFAULT_CONFIG_MAP_NAME.into(),
            default_pool,
            reporting_instance: reporting_instance.into(),
            page_size: 500,
            retry: RetryPolicy::default(),
            config_ttl: Duration::ZERO,
        }
    }
}

/// The cluster, through the Kubernetes API. Cheap to clone (the client is shared).
#[derive(Clone)]
pub struct KubeCluster {
    pub(super) client: Client,
    pub(super) settings: ClusterSettings,
    pub(super) clock: Arc<dyn Clock>,
    /// Set once `events.k8s.io/v1` answered 404 and a core/v1 Event worked instead, so later
    /// events go straight to core/v1.
    pub(super) core_events_only: Arc<AtomicBool>,
    /// The last configuration loaded and when, reused for `settings.config_ttl`.
    pub(super) config_memo: Arc<ConfigMemo>,
}

/// Field manager recorded on our patches, so `kubectl` shows who changed a node.
pub(super) const FIELD_MANAGER: &str = "nodewright";
/// Times a Node is read and written again when it changed between the read and the write.
pub(super) const CONFLICT_ATTEMPTS: u32 = 3;

impl KubeCluster {
    pub fn new(client: Client, settings: ClusterSettings) -> Self {
        Self::with_clock(client, settings, Arc::new(SystemClock))
    }

    pub fn with_clock(client: Client, settings: ClusterSettings, clock: Arc<dyn Clock>) -> Self {
        let config_memo = Arc::new(ConfigMemo::new(clock.clone(), settings.config_ttl));
        KubeCluster {
            client,
            settings,
            config_memo,
            clock,
            core_events_only: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn settings(&self) -> &ClusterSettings {
        &self.settings
    }

    /// Lists every page of `api` with `lp`'s selectors. An expired continue token (410) is
    /// returned as an error: the next poll starts over, which is cheaper than reasoning
    /// about a half-read list.
    pub(super) async fn list_all<K>(
        &self,
        api: &Api<K>,
        lp: ListParams,
        resource: &str,
    ) -> Result<Vec<K>, KubeError>
    where
        K: Clone + DeserializeOwned + Debug,
    {
        let first = lp.limit(self.settings.page_size);
        let mut lp = first.clone();
        let mut out = Vec::new();
        let mut restarts = 0;
        loop {
            let page = match self
                .settings
                .retry
                .run("list", resource, || api.list(&lp))
                .await
            {
                Ok(page) => page,
                // 410 Gone on a later page: the continue token expired (etcd compacted
                // its resource version). The pages read so far may be inconsistent with
                // the rest, so the list starts again, as client-go's pager does.
                Err(e)
                    if e.status_code() == Some(410)
                        && lp.continue_token.is_some()
                        && restarts < MAX_LIST_RESTARTS =>
                {
                    restarts += 1;
                    tracing::info!(resource, restarts, "continue token expired; listing again");
                    out.clear();
                    lp = first.clone();
                    continue;
                }
                Err(e) => return Err(e),
            };
            out.extend(page.items);
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
                _ => return Ok(out),
            }
        }
    }

    async fn patch_node(&self, node: &str, patch: serde_json::Value) -> Result<(), KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let resource = format!("nodes/{node}");
        let patch = Patch::Merge(&patch);
        self.settings
            .retry
            .run("patch", &resource, || api.patch(node, &pp, &patch))
            .await?;
        Ok(())
    }
}

impl PodSource for KubeCluster {
    async fn pending_pods(&self) -> Result<Vec<Pod>, KubeError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(PENDING_FIELD_SELECTOR);
        let pods = self.list_all(&api, lp, "pods").await?;
        Ok(pods.into_iter().filter(is_provisionable).collect())
    }

    async fn bound_pods_by_node(&self) -> Result<HashMap<String, Vec<Pod>>, KubeError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(BOUND_FIELD_SELECTOR);
        Ok(group_by_node(self.list_all(&api, lp, "pods").await?))
    }

    async fn namespace_labels(&self) -> Result<crate::scheduling::NamespaceLabels, KubeError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let namespaces = self
            .list_all(&api, ListParams::default(), "namespaces")
            .await?;
        Ok(namespaces
            .into_iter()
            .filter_map(|n| Some((n.metadata.name?, n.metadata.labels.unwrap_or_default())))
            .collect())
    }

    async fn volume_objects(&self) -> Result<crate::scheduling::VolumeObjects, KubeError> {
        let every = ListParams::default;
        let claims: Api<PersistentVolumeClaim> = Api::all(self.client.clone());
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let classes: Api<StorageClass> = Api::all(self.client.clone());
        Ok(crate::scheduling::VolumeObjects::new(
            self.list_all(&claims, every(), "persistentvolumeclaims")
                .await?,
            self.list_all(&volumes, every(), "persistentvolumes")
                .await?,
            self.list_all(&classes, every(), "storageclasses").await?,
        ))
    }
}

impl PendingPodWatch for KubeCluster {
    async fn watch_pending(&self, timeout: Duration) -> Result<BoxStream<'static, ()>, KubeError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        // The API server caps a watch at `timeoutSeconds`; kube's own read timeout is 295 s.
        let seconds = timeout.as_secs().clamp(1, 290) as u32;
        let wp = WatchParams::default()
            .fields(PENDING_FIELD_SELECTOR)
            .timeout(seconds);
        let stream = api.watch(&wp, "0").await.map_err(|source| KubeError::Api {
            verb: "watch",
            resource: "pods".into(),
            source,
        })?;
        Ok(stream
            .filter_map(|event| async move {
                match event {
                    Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod))
                        if is_provisionable(&pod) =>
                    {
                        Some(())
                    }
                    // Bound or deleted pods, bookmarks and watch errors wake nothing; a
                    // broken watch ends the stream and the handler falls back to polling.
                    _ => None,
                }
            })
            .boxed())
    }
}

impl NodeSource for KubeCluster {
    async fn nodes(&self) -> Result<Vec<Node>, KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        self.list_all(&api, ListParams::default(), "nodes").await
    }

    async fn daemon_sets(&self) -> Result<Vec<DaemonSet>, KubeError> {
        let api: Api<DaemonSet> = Api::all(self.client.clone());
        self.list_all(&api, ListParams::default(), "daemonsets.apps")
            .await
    }
}

impl PoolStatusSink for KubeCluster {
    /// A NodePool gone, or a legacy Provisioner's (no `karpenter.sh/v1` object by its
    /// name), has no status to write: not an error. The object is read first for the
    /// conditions' times; the sweeper is their only writer.
    async fn write_pool_status(
        &self,
        pool: &str,
        mut status: serde_json::Value,
        dependents: &[crate::disruption::WantedCondition],
        now: jiff::Timestamp,
    ) -> Result<(), KubeError> {
        let resource = ::kube::api::ApiResource {
            group: "karpenter.sh".into(),
            version: "v1".into(),
            api_version: "karpenter.sh/v1".into(),
            kind: "NodePool".into(),
            plural: "nodepools".into(),
        };
        let api: Api<::kube::api::DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let name = format!("nodepools/{pool}/status");
        let current = match self
            .settings
            .retry
            .run("get", &name, || api.get_status(pool))
            .await
        {
            Err(e) if e.is_not_found() => return Ok(()),
            other => other?,
        };
        let meta = &current.metadata;
        let created = meta.creation_timestamp.as_ref().map_or(now, |t| t.0);
        let existing = current.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        status["conditions"] = serde_json::Value::Array(crate::disruption::conditions(
            dependents,
            &existing,
            created,
            meta.generation.unwrap_or(0),
            now,
        ));
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let body = serde_json::json!({ "status": status });
        let patch = Patch::Merge(&body);
        match self
            .settings
            .retry
            .run("patch", &name, || api.patch_status(pool, &pp, &patch))
            .await
        {
            Err(e) if e.is_not_found() => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl PdbSource for KubeCluster {
    async fn pod_disruption_budgets(&self) -> Result<Vec<PodDisruptionBudget>, KubeError> {
        let api: Api<PodDisruptionBudget> = Api::all(self.client.clone());
        self.list_all(&api, ListParams::default(), "poddisruptionbudgets.policy")
            .await
    }
}

impl KubeCluster {
    /// A JSON merge patch replaces `spec.taints` whole, so the current list is read and
    /// written back as `edit` makes it ([`KubeCluster::rewrite_node`]): a concurrent change
    /// (the node lifecycle controller removing `not-ready`) is not undone. `edit` answers
    /// `None` when the taints are already as wanted.
    async fn edit_taints(
        &self,
        node: &str,
        edit: impl Fn(&[k8s_openapi::api::core::v1::Taint]) -> Option<Vec<serde_json::Value>>,
    ) -> Result<(), KubeError> {
        self.rewrite_node(node, None, |current| {
            let all = current
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            edit(&all).map(|taints| json!({"spec": {"taints": taints}}))
        })
        .await
    }

    /// A read-modify-write of one Node: `change` makes a merge patch from the Node as read
    /// (`None`: it is as wanted already), sent with that read's `resourceVersion`, so a
    /// write that would undo someone else's change fails with 409 and the Node is read
    /// again, at most [`CONFLICT_ATTEMPTS`] times. `read`: the Node when the caller has just
    /// read it, for the first attempt.
    pub(super) async fn rewrite_node(
        &self,
        node: &str,
        read: Option<Node>,
        change: impl Fn(&Node) -> Option<serde_json::Value>,
    ) -> Result<(), KubeError> {
        // Boxed: it holds two Nodes and a get and a patch in flight, and it sits inside
        // every removal's future.
        Box::pin(self.rewrite_node_in_place(node, read, change)).await
    }

    async fn rewrite_node_in_place(
        &self,
        node: &str,
        mut read: Option<Node>,
        change: impl Fn(&Node) -> Option<serde_json::Value>,
    ) -> Result<(), KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let resource = format!("nodes/{node}");
        for _ in 0..CONFLICT_ATTEMPTS {
            let current = match read.take() {
                Some(n) if n.metadata.resource_version.is_some() => n,
                _ => {
                    self.settings
                        .retry
                        .run("get", &resource, || api.get(node))
                        .await?
                }
            };
            let Some(mut patch) = change(&current) else {
                return Ok(());
            };
            patch["metadata"]["resourceVersion"] = json!(current.metadata.resource_version);
            match self.patch_node(node, patch).await {
                Err(e) if e.is_conflict() => continue,
                other => return other,
            }
        }
        Err(KubeError::Conflict {
            node: node.to_owned(),
            attempts: CONFLICT_ATTEMPTS,
        })
    }
}

impl NodeOps for KubeCluster {
    async fn taint(&self, node: &str, taint: &Taint) -> Result<(), KubeError> {
        self.edit_taints(node, |all| {
            if all
                .iter()
                .any(|t| t.key == taint.key && t.effect == effect_name(taint))
            {
                return None;
            }
            let added = k8s_openapi::api::core::v1::Taint {
                key: taint.key.clone(),
                value: taint.value.clone(),
                effect: effect_name(taint).into(),
                time_added: None,
            };
            Some(
                all.iter()
                    .chain(std::iter::once(&added))
                    .map(|t| serde_json::to_value(t).unwrap_or_default())
                    .collect(),
            )
        })
        .await
    }

    /// The same guarded read-modify-write as [`NodeOps::taint`], so a taint another
    /// controller added meanwhile is kept.
    async fn untaint(&self, node: &str, key: &str) -> Result<(), KubeError> {
        self.edit_taints(node, |all| {
            all.iter().any(|t| t.key == key).then(|| {
                all.iter()
                    .filter(|t| t.key != key)
                    .map(|t| serde_json::to_value(t).unwrap_or_default())
                    .collect()
            })
        })
        .await
    }

    async fn cordon(&self, node: &str) -> Result<(), KubeError> {
        self.patch_node(node, json!({"spec": {"unschedulable": true}}))
            .await
    }

    async fn label(&self, node: &str, key: &str, value: &str) -> Result<(), KubeError> {
        self.patch_node(node, json!({"metadata": {"labels": {key: value}}}))
            .await
    }

    async fn relabel(&self, node: &str, labels: &[(&str, Option<&str>)]) -> Result<(), KubeError> {
        // A merge patch removes a key whose value is null.
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        self.patch_node(node, json!({"metadata": {"labels": labels}}))
            .await
    }
}

fn effect_name(t: &Taint) -> &'static str {
    match t.effect {
        crate::api::TaintEffect::NoSchedule => "NoSchedule",
        crate::api::TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        crate::api::TaintEffect::NoExecute => "NoExecute",
    }
}
