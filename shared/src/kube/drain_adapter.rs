//! [`PodEviction`] and [`NodeRemoval`] for `KubeCluster`. Evictions are sent once, without
//! the retry helper: a 429 from the Eviction API is a PodDisruptionBudget's answer, which
//! the drain handles by asking again later, not a throttle to retry at once.

use ::kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::cluster::{FIELD_MANAGER, KubeCluster};
use super::drain_ports::{Eviction, NodeRemoval, PodEviction};
use super::error::KubeError;
use super::ports::PodRef;

fn delete_params(grace_seconds: i64) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(u32::try_from(grace_seconds.max(0)).unwrap_or(u32::MAX)),
        ..Default::default()
    }
}

impl PodEviction for KubeCluster {
    async fn pods_on_node(&self, node: &str) -> Result<Vec<Pod>, KubeError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        self.list_all(&api, lp, "pods").await
    }

    async fn evict(&self, pod: &PodRef, grace_seconds: i64) -> Result<Eviction, KubeError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let ep = EvictParams {
            delete_options: Some(delete_params(grace_seconds)),
            ..Default::default()
        };
        match api.evict(&pod.name, &ep).await {
            Ok(_) => Ok(Eviction::Evicted),
            Err(::kube::Error::Api(s)) if s.code == 429 => Ok(Eviction::Blocked),
            Err(::kube::Error::Api(s)) if s.code == 404 => Ok(Eviction::Gone),
            Err(source) => Err(KubeError::Api {
                verb: "evict",
                resource: format!("pods/{}/{}", pod.namespace, pod.name),
                source,
            }),
        }
    }

    async fn delete_pod(&self, pod: &PodRef, grace_seconds: i64) -> Result<(), KubeError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let resource = format!("pods/{}/{}", pod.namespace, pod.name);
        let dp = delete_params(grace_seconds);
        match self
            .settings
            .retry
            .run("delete", &resource, || api.delete(&pod.name, &dp))
            .await
        {
            Err(e) if e.is_not_found() => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl NodeRemoval for KubeCluster {
    async fn delete_node(&self, node: &str) -> Result<bool, KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let resource = format!("nodes/{node}");
        let dp = DeleteParams::default();
        match self
            .settings
            .retry
            .run("delete", &resource, || api.delete(node, &dp))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn annotate_node(&self, node: &str, key: &str, value: &str) -> Result<(), KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let patch = json!({"metadata": {"annotations": {key: value}}});
        let patch = Patch::Merge(&patch);
        let resource = format!("nodes/{node}");
        self.settings
            .retry
            .run("patch", &resource, || api.patch(node, &pp, &patch))
            .await?;
        Ok(())
    }
}
