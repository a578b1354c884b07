//! Launching a capacity window's floor ahead of demand. The floor is asked of the
//! provisioning core as placeholder pods it plans like any others: one per node of the
//! floor (hostname anti-affinity among themselves), pinned to the pool, tolerating its
//! taints, requesting next to nothing. The solver puts one on each of the pool's nodes
//! already there or in flight and launches only the shortfall; nothing is created in the
//! cluster, so no real pod ever waits on or is displaced by a placeholder.
//!
//! A headroom (CPU and memory kept free) is asked for the same way, as placeholder pods of
//! its size in pieces ([`headroom_placeholders`]) that may share nodes: the solver books
//! them on free room already there and launches the rest.
//!
//! A static NodePool's `replicas` is a floor that always holds: the sweeper launches what
//! its pool lacks (the solver opens claims on a static pool for its floor only), and a
//! static node replaced for drift, expiry or repair is replaced by one more node of its
//! pool, asked as the pool's whole floor less the node going ([`static_replacement`]).
//!
//! The placeholders' uids, which name the launch (its ClientToken), carry the pool and the
//! hour: a retry within the hour is the same launch; a launch whose instance died is tried
//! again under a new token (`provision::attempts`).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use nodewright::api::labels::NODEPOOL;
use nodewright::disruption::{Snapshot, floor, headroom};
use nodewright::provision::Replacement;
use nodewright::resources::Resources;

use super::State;
use super::act::Report;

/// The label the placeholders select each other by, naming their pool: a static pool
/// launches only for placeholders that carry it.
const PLACEHOLDER_LABEL: &str = nodewright::api::labels::CAPACITY_FLOOR;

/// The placeholder pods for `nodes` nodes of `pool`, for the hour of `now`.
pub fn placeholders(pool: &str, nodes: usize, now: Timestamp) -> Vec<Pod> {
    let floor = Placeholders::new("capacity-floor", "floor", pool, now);
    (0..nodes as u64)
        .filter_map(|i| {
            let mut pod = floor.pod(i, "1m", "1Mi");
            pod["metadata"]["labels"] = serde_json::json!({PLACEHOLDER_LABEL: pool});
            pod["spec"]["affinity"] = serde_json::json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {PLACEHOLDER_LABEL: pool}},
                    "topologyKey": "kubernetes.io/hostname",
                }]
            }});
            serde_json::from_value(pod).ok()
        })
        .collect()
}

/// The placeholders of one kind (the floor's, a headroom's) for a pool in one hour.
struct Placeholders<'a> {
    kind: &'static str,
    container: &'static str,
    pool: &'a str,
    hour: i64,
}

impl<'a> Placeholders<'a> {
    fn new(kind: &'static str, container: &'static str, pool: &'a str, now: Timestamp) -> Self {
        let hour = now.as_second().div_euclid(3600);
        Placeholders {
            kind,
            container,
            pool,
            hour,
        }
    }

    /// Placeholder `i`: `<kind>-<pool>-<i>` in kube-system, its uid `<kind>/<pool>/<hour>/<i>`,
    /// Pending, pinned to the pool, tolerating every taint, requesting `cpu` and `memory`.
    fn pod(&self, i: u64, cpu: &str, memory: &str) -> serde_json::Value {
        let Placeholders {
            kind,
            container,
            pool,
            hour,
        } = self;
        serde_json::json!({
            "metadata": {
                "name": format!("{kind}-{pool}-{i}"),
                "namespace": "kube-system",
                "uid": format!("{kind}/{pool}/{hour}/{i}"),
            },
            "spec": {
                "containers": [{"name": container, "image": "placeholder",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                "nodeSelector": {NODEPOOL: pool},
                "tolerations": [{"operator": "Exists"}],
            },
            "status": {"phase": "Pending"},
        })
    }
}

/// What a node of a static pool going for drift, expiry or repair is replaced with: the
/// pool's floor, which the nodes staying hold but for one, so exactly one node of the pool
/// is launched (none while the pool is over its count), wherever the node's pods then go.
pub fn static_replacement(
    snapshot: &Snapshot,
    node: &k8s_openapi::api::core::v1::Node,
    now: Timestamp,
) -> Option<Vec<Pod>> {
    let pool = node.metadata.labels.as_ref()?.get(NODEPOOL)?;
    let replicas = snapshot.pools.iter().find(|p| &p.name == pool)?.replicas?;
    Some(placeholders(pool, replicas, now))
}

/// The most pieces a headroom is cut into; each asks for at most 1 CPU and 4 GiB below it.
const MAX_HEADROOM_PIECES: u64 = 64;
const PIECE_CPU: u64 = 1_000;
const PIECE_MEMORY: u64 = 4 * 1024 * 1024 * 1024 * 1000;

/// Placeholder pods for `headroom` in `pool`, for the hour of `now`: the headroom cut into
/// pieces of at most 1 CPU and 4 GiB (fewer, larger ones past 64 pieces), so the solver
/// finds them room on the nodes already there, piece by piece, and launches only what no
/// node has free. Unlike the floor's, they may share a node.
pub fn headroom_placeholders(pool: &str, headroom: &Resources, now: Timestamp) -> Vec<Pod> {
    let (cpu, memory) = (headroom.cpu.max(0) as u64, headroom.memory.max(0) as u64);
    if cpu == 0 && memory == 0 {
        return Vec::new();
    }
    let pieces = (cpu.div_ceil(PIECE_CPU))
        .max(memory.div_ceil(PIECE_MEMORY))
        .clamp(1, MAX_HEADROOM_PIECES);
    // Milli-units: a CPU piece in millicores, memory in bytes (rounded up).
    let piece_cpu = format!("{}m", cpu.div_ceil(pieces).max(1));
    let piece_memory = (memory.div_ceil(pieces) / 1000).max(1 << 20).to_string();
    let headroom = Placeholders::new("capacity-headroom", "headroom", pool, now);
    (0..pieces)
        .filter_map(|i| serde_json::from_value(headroom.pod(i, &piece_cpu, &piece_memory)).ok())
        .collect()
}

/// Asks the core for each pool's floor and headroom that hold now; what it launched goes
/// in `report`. They are asked apart: the floor counts nodes, and may count another
/// node's replacement as one, but a headroom is room, and a replacement's room is the
/// pods' it was launched for.
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
        let nodes = floor(&pool.capacity, now).max(pool.replicas.unwrap_or(0));
        let asks = [
            ("capacity-floor", placeholders(&pool.name, nodes, now)),
            (
                "capacity-headroom",
                headroom_placeholders(&pool.name, &headroom(&pool.capacity, now), now),
            ),
        ];
        for (kind, pods) in asks.into_iter().filter(|(_, pods)| !pods.is_empty()) {
            let asker = format!("{kind}/{}", pool.name);
            match replacer.replace(&asker, &pods, None, now.into()).await {
                Ok(r) => {
                    if !r.launched_instances.is_empty() {
                        tracing::info!(pool = pool.name, kind, floor = nodes, instances = ?r.launched_instances, "capacity launched ahead of demand");
                    }
                    if !r.unschedulable.is_empty() {
                        tracing::warn!(pool = pool.name, kind, unschedulable = ?r.unschedulable, "part of the capacity floor cannot be launched");
                    }
                    report.floor_launched.extend(r.launched_instances);
                }
                Err(e) => {
                    tracing::warn!(pool = pool.name, kind, error = %nodewright::error_chain(&e), "launching the capacity floor failed; the next sweep retries");
                }
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
    fn a_headroom_is_cut_into_pieces_of_at_most_one_cpu_and_four_gib() {
        let now: Timestamp = "2026-03-02T10:20:00Z".parse().unwrap();
        let gib = 1024 * 1024 * 1024 * 1000_i64;
        let requests = |pods: &[Pod]| -> Vec<(String, String)> {
            pods.iter()
                .map(|p| {
                    let r = p.spec.as_ref().unwrap().containers[0]
                        .resources
                        .as_ref()
                        .unwrap()
                        .requests
                        .as_ref()
                        .unwrap();
                    (r["cpu"].0.clone(), r["memory"].0.clone())
                })
                .collect()
        };
        let res = |cpu: i64, memory: i64| Resources {
            cpu,
            memory,
            ..Default::default()
        };
        // 4 CPUs and 8 GiB: four pieces of 1 CPU, 2 GiB.
        let four = headroom_placeholders("web", &res(4_000, 8 * gib), now);
        assert_eq!(
            requests(&four),
            vec![("1000m".to_string(), (2 * gib / 1000).to_string()); 4]
        );
        // Memory decides: 1 CPU and 16 GiB is four pieces of 250m, 4 GiB.
        let mem = headroom_placeholders("web", &res(1_000, 16 * gib), now);
        assert_eq!(
            requests(&mem)[0],
            ("250m".to_string(), (4 * gib / 1000).to_string())
        );
        assert_eq!(mem.len(), 4);
        // Huge: at most 64 pieces; none asked: none.
        assert_eq!(
            headroom_placeholders("web", &res(500_000, 0), now).len(),
            64
        );
        assert!(headroom_placeholders("web", &res(0, 0), now).is_empty());
        // Pinned to the pool, free to share a node.
        let spec = four[0].spec.as_ref().unwrap();
        assert_eq!(spec.node_selector.as_ref().unwrap()[NODEPOOL], "web");
        assert!(spec.affinity.is_none());
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

    #[test]
    fn placeholders_are_named_and_identified_by_kind_pool_hour_and_index_in_kube_system() {
        let now: Timestamp = "2026-03-02T10:20:00Z".parse().unwrap();
        let hour = now.as_second().div_euclid(3600);
        let floor = &placeholders("web", 2, now)[1];
        // 1.5 CPUs: two pieces.
        let two_cpus = Resources {
            cpu: 1_500,
            ..Default::default()
        };
        let headroom = &headroom_placeholders("web", &two_cpus, now)[1];
        let meta = |p: &Pod| {
            (
                p.metadata.name.clone().unwrap(),
                p.metadata.namespace.clone().unwrap(),
                p.metadata.uid.clone().unwrap(),
            )
        };
        assert_eq!(
            meta(floor),
            (
                "capacity-floor-web-1".to_string(),
                "kube-system".to_string(),
                format!("capacity-floor/web/{hour}/1")
            )
        );
        assert_eq!(
            meta(headroom),
            (
                "capacity-headroom-web-1".to_string(),
                "kube-system".to_string(),
                format!("capacity-headroom/web/{hour}/1")
            )
        );
        for (p, container) in [(floor, "floor"), (headroom, "headroom")] {
            let spec = p.spec.as_ref().unwrap();
            assert_eq!(spec.containers[0].name, container);
            assert_eq!(spec.containers[0].image.as_deref(), Some("placeholder"));
            let tolerations = spec.tolerations.as_ref().unwrap();
            assert_eq!(tolerations.len(), 1);
            assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            assert_eq!(phase, Some("Pending"));
        }
        let floor_requests = floor.spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap();
        assert_eq!(floor_requests["cpu"].0, "1m");
        assert_eq!(floor_requests["memory"].0, "1Mi");
        // Only the floor's placeholders keep apart from each other.
        assert!(headroom.metadata.labels.is_none());
        assert!(headroom.spec.as_ref().unwrap().affinity.is_none());
    }
}
