//! The Events that answer "why isn't this node going away?": one per kept candidate on the
//! node, rate-limited so a node kept for hours does not get sixty a hour.

use std::time::Duration;

use jiff::Timestamp;
use nodewright::disruption::Kept;
use nodewright::kube::{EventSink, EventType, ObjectKind};

use super::State;

/// A kept node gets its Event again after this long if the reason stays the same (a new
/// reason is told at once). Kubernetes keeps Events for an hour by default.
pub const KEPT_EVENT_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// Leaves (or skips, if told recently) the Event for each kept node; returns how many
/// were written.
pub(crate) async fn kept_events<K: EventSink, E, R>(
    state: &State<K, E, R>,
    kept: &[Kept],
    now: Timestamp,
) -> usize {
    let mut written = 0;
    for k in kept {
        let why = k.why.to_string();
        let due = {
            let mut told = state.kept_events.lock().unwrap_or_else(|e| e.into_inner());
            let due = match told.get(&k.node) {
                Some((last_why, at)) => {
                    *last_why != why
                        || now.duration_since(*at).unsigned_abs() >= KEPT_EVENT_INTERVAL
                }
                None => true,
            };
            if due {
                told.insert(k.node.clone(), (why.clone(), now));
            }
            due
        };
        if due {
            let message = format!("not disrupted ({}): {why}", k.reason.as_str());
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
            written += 1;
        }
    }
    written
}
