//! The Events that answer "why isn't this node going away?": one per kept candidate on the
//! node, rate-limited so a node kept for hours does not get sixty an hour.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use nodewright::disruption::{Kept, KeptWhy, Reason};
use nodewright::kube::{EventSink, EventType, ObjectKind};

use super::State;

/// A kept node gets its Event again after this long if the reason stays the same (a new
/// reason is told at once). Kubernetes keeps Events for an hour by default.
pub const KEPT_EVENT_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// What each kept node was last told, and when (a warm container's memory: a cold start may
/// repeat one Event, which is harmless). A reason is compared by its stable parts
/// ([`KeptWhy::stable`]): "empty, 40s to go" and "empty, 10s to go" are one reason.
#[derive(Debug, Default)]
pub struct KeptEventLog {
    told: HashMap<String, (Reason, KeptWhy, Timestamp)>,
}

impl KeptEventLog {
    /// Whether `kept` is due an Event at `now`: never told, told another reason, or told
    /// this one at least [`KEPT_EVENT_INTERVAL`] ago. A due Event is recorded as told.
    pub fn due(&mut self, kept: &Kept, now: Timestamp) -> bool {
        let key = (kept.reason, kept.why.stable());
        let due = match self.told.get(&kept.node) {
            Some((reason, why, at)) => {
                (*reason, why) != (key.0, &key.1)
                    || now.duration_since(*at).unsigned_abs() >= KEPT_EVENT_INTERVAL
            }
            None => true,
        };
        if due {
            self.told.insert(kept.node.clone(), (key.0, key.1, now));
        }
        due
    }

    /// Forgets the nodes that are no longer in the cluster, so the memory of a warm
    /// container does not grow with every node it ever kept.
    pub fn forget_all_but(&mut self, nodes: &HashSet<&str>) {
        self.told.retain(|node, _| nodes.contains(node.as_str()));
    }

    pub fn len(&self) -> usize {
        self.told.len()
    }

    pub fn is_empty(&self) -> bool {
        self.told.is_empty()
    }
}

/// Leaves (or skips, if told recently) the Event for each kept node, after forgetting the
/// nodes not among `nodes` (the sweep's list); returns how many were written.
pub(crate) async fn kept_events<K: EventSink, E, R>(
    state: &State<K, E, R>,
    kept: &[Kept],
    nodes: &[Node],
    now: Timestamp,
) -> usize {
    let due: Vec<&Kept> = {
        let mut log = state.kept_events.lock().unwrap_or_else(|e| e.into_inner());
        let present: HashSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        log.forget_all_but(&present);
        kept.iter().filter(|k| log.due(k, now)).collect()
    };
    for k in &due {
        let message = format!("not disrupted ({}): {}", k.reason.as_str(), k.why);
        state
            .kube
            .object_event(
                ObjectKind::Node,
                &k.node,
                "DisruptionBlocked",
                &message,
                EventType::Normal,
            )
            .await;
    }
    due.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(node: &str, reason: Reason, why: KeptWhy) -> Kept {
        Kept {
            node: node.into(),
            reason,
            why,
        }
    }

    fn empty_for(secs: u64) -> KeptWhy {
        KeptWhy::EmptyTooRecently {
            remaining: Duration::from_secs(secs),
        }
    }

    fn recent(secs: u64) -> KeptWhy {
        KeptWhy::TooRecent {
            remaining: Duration::from_secs(secs),
        }
    }

    fn at(minute: i64, second: i64) -> Timestamp {
        Timestamp::from_second(1_770_000_000 + minute * 60 + second).unwrap()
    }

    #[test]
    fn a_reason_is_told_once_per_fifteen_minutes_whatever_its_countdown_and_a_new_one_at_once() {
        let pdb = || KeptWhy::PodDisruptionBudget {
            pod: "default/db-0".into(),
            pdb: "default/db".into(),
        };
        // (when, what is kept, an Event due?), in order, for one node.
        let steps = [
            (at(0, 0), kept("a", Reason::Empty, empty_for(50)), true),
            // The countdown moved: the same reason, within 15 minutes.
            (at(0, 20), kept("a", Reason::Empty, empty_for(30)), false),
            (at(0, 40), kept("a", Reason::Empty, empty_for(10)), false),
            // Another reason: told at once.
            (at(1, 0), kept("a", Reason::Underutilized, recent(20)), true),
            (
                at(1, 10),
                kept("a", Reason::Underutilized, recent(10)),
                false,
            ),
            (at(2, 0), kept("a", Reason::Underutilized, pdb()), true),
            (at(16, 59), kept("a", Reason::Underutilized, pdb()), false),
            // Fifteen minutes after it was told: told again, once.
            (at(17, 0), kept("a", Reason::Underutilized, pdb()), true),
            (at(17, 30), kept("a", Reason::Underutilized, pdb()), false),
            // The same words for another disruption reason are another reason.
            (at(18, 0), kept("a", Reason::Expired, pdb()), true),
        ];
        let mut log = KeptEventLog::default();
        for (i, (now, k, want)) in steps.iter().enumerate() {
            assert_eq!(log.due(k, *now), *want, "step {i}: {k:?}");
        }
    }

    #[test]
    fn nodes_are_told_apart_and_forgotten_once_they_are_gone() {
        let mut log = KeptEventLog::default();
        assert!(log.due(&kept("a", Reason::Empty, empty_for(50)), at(0, 0)));
        assert!(log.due(&kept("b", Reason::Empty, empty_for(50)), at(0, 0)));
        assert!(!log.due(&kept("b", Reason::Empty, empty_for(40)), at(0, 10)));
        log.forget_all_but(&HashSet::from(["a"]));
        assert_eq!(log.len(), 1);
        // Forgotten: a node of that name seen again is told at once.
        assert!(log.due(&kept("b", Reason::Empty, empty_for(30)), at(0, 20)));
        assert!(!log.due(&kept("a", Reason::Empty, empty_for(30)), at(0, 20)));
        log.forget_all_but(&HashSet::new());
        assert!(log.is_empty());
    }
}
