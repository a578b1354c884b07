//! The Kubernetes side of nodewright: narrow ports shaped like the domain, pure conversions
//! from Kubernetes objects into solver inputs, and adapters over an unmodified `kube::Client`.
//!
//! Inside this crate the external crate is spelled `::kube::...`, because this module is
//! itself `crate::kube`.

mod cache;
mod cluster;
mod cluster_config;
mod config;
mod drain_adapter;
mod drain_ports;
mod error;
mod events;
mod existing;
mod karpenter_leader;
mod pending;
mod ports;
mod provider_id;
mod removal_marks;
mod sides;
mod state_config_map;

pub use cache::{CachedConfig, Clock, ConfigMemo, DEFAULT_CONFIG_TTL, SystemClock};
pub use cluster::{ClusterSettings, KubeCluster};
pub use config::{
    ConfigLoad, ConfigOrigin, DEFAULT_CONFIG_MAP_NAME, DEFAULT_CONFIG_MAP_NAMESPACE,
    DEFAULT_POOL_FILE, DefaultPoolParams, ObjectRef, cluster_file, comma_separated,
    config_map_file, default_pool_documents, default_pool_inputs, holds_node_pool, pool_readiness,
    usable,
};
pub use drain_ports::{Eviction, NodeRemoval, PodEviction};
pub use error::{KubeError, RetryPolicy};
pub use events::{REPORTING_CONTROLLER, event_name};
pub use existing::{
    InFlight, Readiness, existing_nodes, in_flight_name, readiness, tainted_for_disruption,
};
pub use karpenter_leader::KarpenterLeader;
pub use pending::{
    BOUND_FIELD_SELECTOR, PENDING_FIELD_SELECTOR, group_by_node, holds_resources, is_provisionable,
};
pub use ports::{
    ConfigSource, EventSink, EventType, NodeOps, NodeSource, ObjectKind, PdbSource,
    PendingPodWatch, PodRef, PodSource, PoolStatusSink,
};
pub use provider_id::{AwsProviderId, instance_of, parse_provider_id, provider_id};
pub use removal_marks::{EXCLUDED_BY_REMOVAL, Marks, RemovalMarks, removal_patch};
pub use sides::{Cluster, NodeDisruption};
pub use state_config_map::{STATE_CONFIG_MAP_NAME, STATE_CONFIG_MAP_NAMESPACE, StateConfigMap};
