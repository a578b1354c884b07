//! Launching a capacity window's floor ahead of demand. The floor is asked of the
//! provisioning core as placeholder pods it plans like any others: one per node of the
//! floor (hostname anti-affinity among themselves), pinned to the pool, tolerating its
//! taints, requesting next to nothing. The solver puts one on each of the pool's nodes
//! already there or in flight and launches only the shortfall; nothing is created in the
//! cluster, so no real pod ever waits on or is displaced by a placeholder.
//!
//! The placeholders' uids, which name the launch (its ClientToken), carry the pool and the
//! hour: a retry within the hour is the same launch, a floor lost later is launched again
//! the next hour at the latest.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use nodewright::api::labels::NODEPOOL;
use nodewright::disruption::{Snapshot, floor};
use nodewright::provision::Replacement;

use super::State;
use super::act::Report;

/// The label the placeholders select each other by.
const PLACEHOLDER_LABEL: &str = "nodewright.io/capacity-floor";

/// The placeholder pods for `nodes` nodes of `pool`, for the hour of `now`.
pub fn placeholders(pool: &str, nodes: usize, now: Timestamp) -> Vec<Pod> {
    let hour = now.as_second().div_euclid(3600);
    (0..nodes)
        .filter_map(|i| {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": format!("capacity-floor-{pool}-{i}"),
                    "namespace": "kube-system",
                    "uid": format!("capacity-floor/{pool}/{hour}/{i}"),
                    "labels": {PLACEHOLDER_LABEL: pool},
                },
                "spec": {
                    "containers": [{"name": "floor", "image": "placeholder",
                        "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}],
                    "nodeSelector": {NODEPOOL: pool},
                    "tolerations": [{"operator": "Exists"}],
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchLabels": {PLACEHOLDER_LABEL: pool}},
                        "topologyKey": "kubernetes.io/hostname",
                    }]}},
                },
                "status": {"phase": "Pending"},
            }))
            .ok()
        })
        .collect()
}

/// Asks the core for each pool's floor that holds now; what it launched goes in `report`.
pub(crate) async fn launch_floors<K, E, R: Replacement>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    now: Timestamp,
    report: &mut Report,
) {
    let Some(replacer) = &state.replacer else {
        return;
    };
    for pool in &snapshot.pools {
        let nodes = floor(&pool.capacity, now);
        if nodes == 0 {
            continue;
        }
        let pods = placeholders(&pool.name, nodes, now);
        let asker = format!("capacity-floor/{}", pool.name);
        match replacer.replace(&asker, &pods, None, now.into()).await {
            Ok(r) => {
                if !r.launched_instances.is_empty() {
                    tracing::info!(pool = pool.name, floor = nodes, instances = ?r.launched_instances, "capacity floor launched ahead of demand");
                }
                if !r.unschedulable.is_empty() {
                    tracing::warn!(pool = pool.name, unschedulable = ?r.unschedulable, "part of the capacity floor cannot be launched");
                }
                report.floor_launched.extend(r.launched_instances);
            }
            Err(e) => {
                tracing::warn!(pool = pool.name, error = %nodewright::error_chain(&e), "launching the capacity floor failed; the next sweep retries");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uids(pods: &[Pod]) -> Vec<String> {
        pods.iter().filter_map(|p| p.metadata.uid.clone()).collect()
    }

    #[test]
    fn a_floor_of_n_nodes_is_n_placeholders_pinned_to_the_pool_and_apart() {
        let now: Timestamp = "2026-03-02T10:20:00Z".parse().unwrap();
        let pods = placeholders("web", 3, now);
        assert_eq!(pods.len(), 3);
        for p in &pods {
            let spec = p.spec.as_ref().unwrap();
            assert_eq!(
                spec.node_selector
                    .as_ref()
                    .unwrap()
                    .get(NODEPOOL)
                    .map(String::as_str),
                Some("web")
            );
            let anti = spec
                .affinity
                .as_ref()
                .unwrap()
                .pod_anti_affinity
                .as_ref()
                .unwrap();
            let term = &anti
                .required_during_scheduling_ignored_during_execution
                .as_ref()
                .unwrap()[0];
            assert_eq!(term.topology_key, "kubernetes.io/hostname");
        }
        let mut distinct = uids(&pods);
        distinct.dedup();
        assert_eq!(distinct.len(), 3);
    }

    #[test]
    fn the_same_hour_asks_for_the_same_launch_and_the_next_hour_for_a_new_one() {
        let at = |s: &str| placeholders("web", 1, s.parse().unwrap());
        assert_eq!(
            uids(&at("2026-03-02T10:01:00Z")),
            uids(&at("2026-03-02T10:59:00Z"))
        );
        assert_ne!(
            uids(&at("2026-03-02T10:59:00Z")),
            uids(&at("2026-03-02T11:00:00Z"))
        );
    }
}
