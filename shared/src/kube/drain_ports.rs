//! The ports a drain and a node removal use: evicting and deleting pods, deleting and
//! annotating nodes. Each operation is safe to repeat (already gone is success).

use k8s_openapi::api::core::v1::Pod;

use super::error::KubeError;
use super::ports::PodRef;

/// What the Eviction API answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Accepted: the pod is terminating with the grace period asked for.
    Evicted,
    /// 429: a PodDisruptionBudget allows no disruption now; ask again later.
    Blocked,
    /// 404: the pod is already gone.
    Gone,
}

pub trait PodEviction: Send + Sync {
    /// Pods bound to `node`, finished ones included (the plan skips them).
    fn pods_on_node(&self, node: &str) -> impl Future<Output = Result<Vec<Pod>, KubeError>> + Send;
    fn evict(
        &self,
        pod: &PodRef,
        grace_seconds: i64,
    ) -> impl Future<Output = Result<Eviction, KubeError>> + Send;
    /// Deletes the pod regardless of PodDisruptionBudgets; already gone is success.
    fn delete_pod(
        &self,
        pod: &PodRef,
        grace_seconds: i64,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;
}

pub trait NodeRemoval: Send + Sync {
    /// Deletes the Node object; `false` when it was already gone. `instance_gone`: EC2
    /// reports its instance shutting down or terminated, the moment Karpenter releases its
    /// termination finalizer, so the Node of an adopted instance is released too; otherwise
    /// such a Node stays Terminating until a later removal step finds the instance gone.
    fn delete_node(
        &self,
        node: &str,
        instance_gone: bool,
    ) -> impl Future<Output = Result<bool, KubeError>> + Send;
    /// Sets one annotation on the node (a marker that work was done, for idempotency).
    fn annotate_node(
        &self,
        node: &str,
        key: &str,
        value: &str,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;
}
