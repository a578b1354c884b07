//! Each NodePool's `status`: its nodes' summed capacity and their count
//! (`nodewright::disruption::pool_statuses`, the scale subresource's `statuspath`) and its
//! conditions (`ValidationSucceeded`, `NodeClassReady`, `Ready`:
//! `nodewright::disruption::node_pool_dependents`), written when either has changed since
//! this container last wrote it: `kubectl get nodepools` shows the count and READY,
//! `kubectl scale nodepool` reads the count. A write that fails is logged and tried again
//! by the next sweep; nothing decides on it.

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use nodewright::disruption::{Snapshot, node_pool_dependents, pool_statuses};
use nodewright::kube::{ConfigLoad, PoolStatusSink, pool_readiness};
use serde_json::json;

use super::State;

pub(crate) async fn write_statuses<K: PoolStatusSink, E, R>(
    state: &State<K, E, R>,
    config: &ConfigLoad,
    nodes: &[Node],
    snapshot: &Snapshot,
    now: Timestamp,
) {
    let owned: HashSet<&str> = snapshot
        .nodes
        .iter()
        .filter(|n| n.owned_instance)
        .map(|n| n.name.as_str())
        .collect();
    let readiness: HashMap<String, _> = pool_readiness(&config.inputs, &config.problems)
        .into_iter()
        .map(|(pool, own, class)| (pool, node_pool_dependents(own.as_deref(), &class)))
        .collect();
    let names: Vec<String> = readiness.keys().cloned().collect();
    let is_owned = |n: &Node| {
        n.metadata
            .name
            .as_deref()
            .is_some_and(|x| owned.contains(x))
    };
    for (pool, status) in pool_statuses(&names, nodes, &is_owned) {
        let dependents = readiness.get(&pool).cloned().unwrap_or_default();
        // What was written, conditions without their times, which the write keeps.
        let wanted = json!({"status": status, "conditions": dependents
            .iter()
            .map(|d| [d.kind, d.status, &d.reason, &d.message])
            .collect::<Vec<_>>()});
        let written = state
            .pool_status
            .lock()
            .ok()
            .and_then(|w| w.get(&pool).cloned());
        if written.as_ref() == Some(&wanted) {
            continue;
        }
        match state
            .kube
            .write_pool_status(&pool, status, &dependents, now)
            .await
        {
            Ok(()) => {
                if let Ok(mut w) = state.pool_status.lock() {
                    w.insert(pool, wanted);
                }
            }
            Err(e) => {
                tracing::warn!(pool, error = %nodewright::error_chain(&e), "writing the NodePool's status failed; the next sweep tries again")
            }
        }
    }
}
