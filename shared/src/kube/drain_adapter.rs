//! [`PodEviction`] and [`NodeRemoval`] for `KubeCluster`. Evictions are sent once, without
//! the retry helper: a 429 from the Eviction API is a PodDisruptionBudget's answer, which
//! the drain handles by asking again later, not a throttle to retry at once.

use ::kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::Eviction as EvictionRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{self as meta, ObjectMeta};
use serde_json::json;

use super::cluster::{FIELD_MANAGER, KubeCluster};
use super::drain_ports::{Eviction, NodeRemoval, PodEviction};
use super::error::KubeError;
use super::ports::PodRef;
use crate::takeover::KARPENTER_TERMINATION_FINALIZER;

/// The grace to ask for, and the pod's uid as a precondition when known: a pod re-created
/// under the same name since it was read (a StatefulSet's) is another pod, which the API
/// server then refuses to remove with a 409.
fn delete_params(pod: &PodRef, grace_seconds: i64) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(u32::try_from(grace_seconds.max(0)).unwrap_or(u32::MAX)),
        preconditions: (!pod.uid.is_empty()).then(|| Preconditions {
            uid: Some(pod.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    }
}

/// The Eviction, written from k8s-openapi's type rather than sent with kube's
/// `Api::evict`: kube-core 5 serializes its options as `delete_options`, a field the API
/// server does not know and drops, so neither the grace period nor the uid precondition
/// would reach it.
fn eviction_request(pod: &PodRef, grace_seconds: i64) -> EvictionRequest {
    EvictionRequest {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            ..Default::default()
        },
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(grace_seconds.max(0)),
            preconditions: (!pod.uid.is_empty()).then(|| meta::Preconditions {
                uid: Some(pod.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        }),
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
        let sent = api
            .create_subresource::<_, serde_json::Value>(
                "eviction",
                &pod.name,
                &PostParams::default(),
                &eviction_request(pod, grace_seconds),
            )
            .await;
        match sent {
            Ok(_) => Ok(Eviction::Evicted),
            Err(::kube::Error::Api(s)) if s.code == 429 => Ok(Eviction::Blocked),
            // 409: the uid precondition failed, so the pod that was read is gone.
            Err(::kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Eviction::Gone),
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
        let dp = delete_params(pod, grace_seconds);
        match self
            .settings
            .retry
            .run("delete", &resource, || api.delete(&pod.name, &dp))
            .await
        {
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl KubeCluster {
    /// A Node kept after its DELETE by Karpenter's termination finalizer (a node nodewright
    /// adopted) would stay Terminating while Karpenter is stopped. Called once EC2 reports
    /// the instance shutting down or terminated, as Karpenter's own termination releases it
    /// once the instance goes. A Node already gone is done.
    async fn release_karpenter_finalizer(&self, node: Node) -> Result<(), KubeError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        match self
            .rewrite_node(&name, Some(node), finalizer_release)
            .await
        {
            Err(e) if e.is_not_found() => Ok(()),
            other => other,
        }
    }
}

/// The merge patch that takes Karpenter's termination finalizer off `node`, guarded by the
/// resourceVersion read; `None` when it does not carry it.
fn finalizer_release(node: &Node) -> Option<serde_json::Value> {
    let finalizers = node.metadata.finalizers.as_deref().unwrap_or_default();
    if !finalizers
        .iter()
        .any(|f| f == KARPENTER_TERMINATION_FINALIZER)
    {
        return None;
    }
    let rest: Vec<&String> = finalizers
        .iter()
        .filter(|f| *f != KARPENTER_TERMINATION_FINALIZER)
        .collect();
    Some(json!({"metadata": {
        "finalizers": rest,
        "resourceVersion": node.metadata.resource_version,
    }}))
}

impl NodeRemoval for KubeCluster {
    async fn delete_node(&self, node: &str, instance_gone: bool) -> Result<bool, KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let resource = format!("nodes/{node}");
        let dp = DeleteParams::default();
        match self
            .settings
            .retry
            .run("delete", &resource, || api.delete(node, &dp))
            .await
        {
            Ok(deleted) => {
                // Still there: held by a finalizer, marked for deletion.
                if let (Some(kept), true) = (deleted.left(), instance_gone) {
                    self.release_karpenter_finalizer(kept).await?;
                }
                Ok(true)
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(finalizers: &[&str]) -> Node {
        serde_json::from_value(json!({"metadata": {
            "name": "n", "resourceVersion": "7", "finalizers": finalizers,
        }}))
        .unwrap()
    }

    #[test]
    fn only_karpenters_finalizer_comes_off_and_only_at_the_version_read() {
        let cases = [
            (vec![], None),
            (vec!["example.com/keep"], None),
            (
                vec![KARPENTER_TERMINATION_FINALIZER],
                Some(json!({"metadata": {"finalizers": [], "resourceVersion": "7"}})),
            ),
            (
                vec!["example.com/keep", KARPENTER_TERMINATION_FINALIZER],
                Some(
                    json!({"metadata": {"finalizers": ["example.com/keep"], "resourceVersion": "7"}}),
                ),
            ),
        ];
        for (finalizers, want) in cases {
            assert_eq!(
                finalizer_release(&node(&finalizers)),
                want,
                "{finalizers:?}"
            );
        }
    }
}
