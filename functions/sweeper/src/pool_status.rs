//! Each NodePool's `status` (`nodewright::disruption::pool_statuses`: its nodes' summed
//! capacity and their count, the scale subresource's `statuspath`), written when it has
//! changed since this container last wrote it: `kubectl get nodepools` shows the count,
//! `kubectl scale nodepool` reads it. A write that fails is logged and tried again by the
//! next sweep; nothing decides on it.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Node;
use nodewright::api::NodePool;
use nodewright::disruption::{Snapshot, pool_statuses};
use nodewright::kube::PoolStatusSink;

use super::State;

pub(crate) async fn write_statuses<K: PoolStatusSink, E, R>(
    state: &State<K, E, R>,
    pools: &[NodePool],
    nodes: &[Node],
    snapshot: &Snapshot,
) {
    let owned: HashSet<&str> = snapshot
        .nodes
        .iter()
        .filter(|n| n.owned_instance)
        .map(|n| n.name.as_str())
        .collect();
    let names: Vec<String> = pools.iter().map(|p| p.metadata.name.clone()).collect();
    let is_owned = |n: &Node| {
        n.metadata
            .name
            .as_deref()
            .is_some_and(|x| owned.contains(x))
    };
    for (pool, status) in pool_statuses(&names, nodes, &is_owned) {
        let written = state
            .pool_status
            .lock()
            .ok()
            .and_then(|w| w.get(&pool).cloned());
        if written.as_ref() == Some(&status) {
            continue;
        }
        match state.kube.write_pool_status(&pool, status.clone()).await {
            Ok(()) => {
                if let Ok(mut w) = state.pool_status.lock() {
                    w.insert(pool, status);
                }
            }
            Err(e) => {
                tracing::warn!(pool, error = %nodewright::error_chain(&e), "writing the NodePool's status failed; the next sweep tries again")
            }
        }
    }
}
