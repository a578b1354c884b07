//! The ports: what the functions ask of the cluster, shaped like the domain. Each is a small
//! trait so a handler asks only for the capability it needs and a test can hand it a fake.

use std::collections::HashMap;
use std::fmt;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::config::ConfigLoad;
use super::error::KubeError;
use crate::api::Taint;

/// Pods the provisioner plans for, and pods that already occupy nodes.
pub trait PodSource: Send + Sync {
    /// Pods the scheduler could not place and that new capacity could help (see
    /// [`super::is_provisionable`]), across all namespaces.
    fn pending_pods(&self) -> impl Future<Output = Result<Vec<Pod>, KubeError>> + Send;
    /// Pods bound to a node and not finished, by node name (DaemonSet pods included).
    fn bound_pods_by_node(
        &self,
    ) -> impl Future<Output = Result<HashMap<String, Vec<Pod>>, KubeError>> + Send;
    /// Every Namespace's labels, for pod (anti-)affinity terms with a `namespaceSelector`;
    /// asked only when some term has one.
    fn namespace_labels(
        &self,
    ) -> impl Future<Output = Result<crate::scheduling::NamespaceLabels, KubeError>> + Send;
    /// Every PersistentVolumeClaim, PersistentVolume and StorageClass, for where pods
    /// with claims may run; asked only when some pod has one.
    fn volume_objects(
        &self,
    ) -> impl Future<Output = Result<crate::scheduling::VolumeObjects, KubeError>> + Send;
}

/// A wake-up each time a pod turns provisionable, so the provisioner acts in about a
/// second instead of at its next poll (Karpenter watches pods for the same reason).
pub trait PendingPodWatch: Send + Sync {
    /// A stream that yields once per pod event that leaves a pod provisionable; it ends
    /// when the server ends the watch (after `timeout`) or the connection drops.
    fn watch_pending(
        &self,
        timeout: std::time::Duration,
    ) -> impl Future<Output = Result<futures::stream::BoxStream<'static, ()>, KubeError>> + Send;
}

/// The PodDisruptionBudgets of every namespace: the sweeper keeps a node whose pods a
/// budget allows no disruption of now, instead of tainting it for a drain the Eviction API
/// would refuse.
pub trait PdbSource: Send + Sync {
    fn pod_disruption_budgets(
        &self,
    ) -> impl Future<Output = Result<Vec<PodDisruptionBudget>, KubeError>> + Send;
}

pub trait NodeSource: Send + Sync {
    fn nodes(&self) -> impl Future<Output = Result<Vec<Node>, KubeError>> + Send;
    fn daemon_sets(&self) -> impl Future<Output = Result<Vec<DaemonSet>, KubeError>> + Send;
}

/// The NodePools and EC2NodeClasses in force, from the highest-priority source that has any.
pub trait ConfigSource: Send + Sync {
    fn load(&self) -> impl Future<Output = Result<ConfigLoad, KubeError>> + Send;
}

/// Changes to nodes. Each is idempotent: applying it twice leaves the node as once.
pub trait NodeOps: Send + Sync {
    /// Adds `taint` unless the node already has a taint with the same key and effect.
    fn taint(
        &self,
        node: &str,
        taint: &Taint,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;
    /// Removes every taint with `key` (any effect); writes nothing when there is none.
    fn untaint(&self, node: &str, key: &str) -> impl Future<Output = Result<(), KubeError>> + Send;
    fn cordon(&self, node: &str) -> impl Future<Output = Result<(), KubeError>> + Send;
    fn label(
        &self,
        node: &str,
        key: &str,
        value: &str,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;
    /// Sets (`Some`) and removes (`None`) labels in one write.
    fn relabel(
        &self,
        node: &str,
        labels: &[(&str, Option<&str>)],
    ) -> impl Future<Output = Result<(), KubeError>> + Send;
}

/// `Normal` or `Warning`, the two event types Kubernetes knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(&self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The pod an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    /// Lets `kubectl describe pod` find the event; empty when unknown.
    pub uid: String,
}

impl PodRef {
    pub fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

/// Cluster-scoped objects events can be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    NodePool,
    EC2NodeClass,
    Node,
}

impl ObjectKind {
    pub fn kind(&self) -> &'static str {
        match self {
            ObjectKind::NodePool => "NodePool",
            ObjectKind::EC2NodeClass => "EC2NodeClass",
            ObjectKind::Node => "Node",
        }
    }

    pub fn api_version(&self) -> &'static str {
        match self {
            ObjectKind::NodePool => "karpenter.sh/v1",
            ObjectKind::EC2NodeClass => "karpenter.k8s.aws/v1",
            ObjectKind::Node => "v1",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

/// A NodePool's `status` (`disruption::pool_statuses`), merged into what is there, with
/// its conditions from `dependents` (`disruption::conditions`: each keeps the time the
/// object says it last changed).
pub trait PoolStatusSink: Send + Sync {
    fn write_pool_status(
        &self,
        pool: &str,
        status: serde_json::Value,
        dependents: &[crate::disruption::WantedCondition],
        now: jiff::Timestamp,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;
}

/// Tells people what happened, through Kubernetes Events. Never fails the caller: an event
/// that cannot be written is logged and dropped, since no decision depends on it.
pub trait EventSink: Send + Sync {
    fn pod_event(
        &self,
        pod: &PodRef,
        reason: &str,
        message: &str,
        type_: EventType,
    ) -> impl Future<Output = ()> + Send;
    fn object_event(
        &self,
        kind: ObjectKind,
        name: &str,
        reason: &str,
        message: &str,
        type_: EventType,
    ) -> impl Future<Output = ()> + Send;
}
