//! A capacity window's headroom in the plan: the CPU and memory a NodePool keeps free
//! ([`super::capacity::headroom`]). Removing a node takes its own free room and, for the
//! pods that move, as much of the other nodes' free room as they request; a removal that
//! would leave the pool with less free than the headroom is kept.

use std::collections::HashMap;

use jiff::Timestamp;

use super::capacity::headroom;
use super::snapshot::{NodeView, PoolPolicy};
use crate::resources::{Resources, format_milli};

/// Per pool: the free room of its nodes not being disrupted, and what the removals planned
/// so far take from it.
#[derive(Default, Clone)]
pub(super) struct Room<'a> {
    free: HashMap<&'a str, Resources>,
    taken: HashMap<&'a str, Resources>,
}

/// What removing `node` takes from its pool's free room.
fn taken_by(node: &NodeView) -> Resources {
    let mut r = node.free.clone().unwrap_or_default();
    r.add(&node.moving_requests);
    r
}

impl<'a> Room<'a> {
    /// Counts a node of `pool` that stays unless the plan removes it.
    pub(super) fn count(&mut self, pool: &'a str, node: &NodeView) {
        if let Some(free) = &node.free {
            self.free.entry(pool).or_default().add(free);
        }
    }

    /// Records that the plan removes `node` from `pool`.
    pub(super) fn take(&mut self, pool: &'a str, node: &NodeView) {
        self.taken.entry(pool).or_default().add(&taken_by(node));
    }

    /// The headroom `pool` keeps at `now` when removing `node` would leave less free, as
    /// text for the kept reason (`cpu 4, memory 16Gi`).
    pub(super) fn short(
        &self,
        pool: &PoolPolicy,
        node: &NodeView,
        now: Timestamp,
    ) -> Option<String> {
        let want = headroom(&pool.capacity, now);
        if want.cpu <= 0 && want.memory <= 0 {
            return None;
        }
        let name = pool.name.as_str();
        let mut after = self.free.get(name).cloned().unwrap_or_default();
        if let Some(taken) = self.taken.get(name) {
            after.sub(taken);
        }
        after.sub(&taken_by(node));
        let short = (want.cpu > 0 && after.cpu < want.cpu)
            || (want.memory > 0 && after.memory < want.memory);
        short.then(|| {
            [
                (want.cpu > 0).then(|| format!("cpu {}", format_milli(want.cpu, false))),
                (want.memory > 0).then(|| format!("memory {}", format_milli(want.memory, true))),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::capacity::CapacityWindow;
    use crate::disruption::testkit::{node, pool, t};

    fn cpus(n: i64) -> Resources {
        Resources {
            cpu: n * 1000,
            ..Default::default()
        }
    }

    #[test]
    fn a_removed_nodes_moving_pods_take_the_free_room_they_move_into() {
        let mut p = pool("web");
        p.capacity = vec![CapacityWindow {
            schedule: None,
            duration: std::time::Duration::ZERO,
            lead: std::time::Duration::ZERO,
            nodes: 0,
            headroom: cpus(4),
        }];
        let with = |name: &str, free: i64, moving: i64| {
            let mut n = node(name, "web");
            n.free = Some(cpus(free));
            n.moving_requests = cpus(moving);
            n
        };
        // 8 free in all. A node with 1 free whose pods move 2 takes 3: 5 left, enough.
        // One whose pods move 4 takes 5: 3 left, short.
        let (other, light, heavy) = (with("a", 7, 0), with("b", 1, 2), with("c", 1, 4));
        for (candidate, short) in [(&light, false), (&heavy, true)] {
            let mut room = Room::default();
            room.count("web", &other);
            room.count("web", candidate);
            assert_eq!(
                room.short(&p, candidate, t("10:00:00")).is_some(),
                short,
                "{}",
                candidate.name
            );
        }
        // A removal already planned counts: after taking `light` (3), `a` alone is short.
        let mut room = Room::default();
        room.count("web", &other);
        room.count("web", &light);
        room.take("web", &light);
        assert_eq!(
            room.short(&p, &other, t("10:00:00")).as_deref(),
            Some("cpu 4")
        );
    }
}
