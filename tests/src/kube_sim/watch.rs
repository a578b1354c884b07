//! `?watch=true` on a collection: a stream of `{"type": ..., "object": ...}` lines, as the
//! API server sends them.
//!
//! Emulated, and named as such: instead of a change feed from the store, the stream
//! re-lists the collection (with the request's label and field selectors) every
//! [`TICK`] and reports the differences: ADDED, MODIFIED (resourceVersion changed) and
//! DELETED. An object that leaves a field selector is reported DELETED, as the real server
//! does. Without `resourceVersion` (or with `"0"`) every current object is first sent as
//! ADDED; with any other value the stream starts from that version: objects written since
//! (a newer resourceVersion) are sent first, as ADDED — a list-then-watch client such as
//! `kubectl get -w` misses nothing created between its list and its watch; objects deleted
//! in between are not reported (the store keeps no history). The stream ends after
//! `timeoutSeconds` (default 30 minutes), when the client goes away, or when the test drops
//! every watch (`SimCluster::drop_watches`).

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// How often the collection is re-listed: small against every latency nodewright measures.
pub const TICK: Duration = Duration::from_millis(20);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

type Snapshot = HashMap<String, (String, Value)>;

/// The objects of a list answer by namespace/name, with resourceVersion.
fn snapshot(list: &Value) -> Snapshot {
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .map(|item| {
            let meta = &item["metadata"];
            let key = format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap_or(""),
                meta["name"].as_str().unwrap_or("")
            );
            let rv = meta["resourceVersion"].as_str().unwrap_or("").to_string();
            (key, (rv, item))
        })
        .collect()
}

/// The events that turn `before` into `after`, in a stable order.
pub fn diff(before: &Snapshot, after: &Snapshot) -> Vec<Value> {
    let mut events = BTreeMap::new();
    for (key, (rv, obj)) in after {
        match before.get(key) {
            None => {
                events.insert(key.clone(), json!({"type": "ADDED", "object": obj}));
            }
            Some((old, _)) if old != rv => {
                events.insert(key.clone(), json!({"type": "MODIFIED", "object": obj}));
            }
            Some(_) => {}
        }
    }
    for (key, (_, obj)) in before {
        if !after.contains_key(key) {
            events.insert(key.clone(), json!({"type": "DELETED", "object": obj}));
        }
    }
    events.into_values().collect()
}

/// A streaming watch answer; `list` lists the collection as a GET would, each item with
/// its `apiVersion` and `kind` (watch events carry whole objects), and `present` shapes the
/// object an event carries (kubectl's `get -w` wants each as a one-row Table).
/// The stream also ends once `dropped` returns true.
pub fn respond<F, D, P>(
    list: F,
    dropped: D,
    present: P,
    query: &BTreeMap<String, String>,
) -> Response
where
    F: Fn() -> Result<Value, Response> + Send + 'static,
    D: Fn() -> bool + Send + Sync + 'static,
    P: Fn(Value) -> Value + Send + Sync + 'static,
{
    let first = match list() {
        Ok(v) => snapshot(&v),
        Err(e) => return e,
    };
    let from_now = query
        .get("resourceVersion")
        .is_some_and(|rv| !rv.is_empty() && rv != "0");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|s| s.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let ends = Instant::now() + timeout;
    let since: u64 = query
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(u64::MAX);
    let start: Snapshot = if from_now {
        first
            .into_iter()
            .filter(|(_, (rv, _))| rv.parse::<u64>().is_ok_and(|rv| rv <= since))
            .collect()
    } else {
        Snapshot::new()
    };
    let stream = futures::stream::unfold(
        (start, list, dropped, present),
        move |(mut seen, list, dropped, present)| async move {
            loop {
                if dropped() {
                    return None;
                }
                let now = match list() {
                    Ok(v) => snapshot(&v),
                    Err(_) => return None,
                };
                let events = diff(&seen, &now);
                seen = now;
                if !events.is_empty() {
                    let mut lines = String::new();
                    for mut e in events {
                        e["object"] = present(e["object"].take());
                        lines.push_str(&e.to_string());
                        lines.push('\n');
                    }
                    return Some((
                        Ok::<_, Infallible>(Bytes::from(lines)),
                        (seen, list, dropped, present),
                    ));
                }
                if Instant::now() >= ends {
                    return None;
                }
                tokio::time::sleep(TICK).await;
            }
        },
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(items: &[(&str, &str)]) -> Snapshot {
        items
            .iter()
            .map(|(k, rv)| (k.to_string(), (rv.to_string(), json!({"k": k}))))
            .collect()
    }

    #[test]
    fn the_difference_of_two_listings_is_added_modified_and_deleted_events() {
        let before = snap(&[("ns/a", "1"), ("ns/b", "2"), ("ns/c", "3")]);
        let after = snap(&[("ns/a", "1"), ("ns/b", "5"), ("ns/d", "6")]);
        let kinds: Vec<(String, String)> = diff(&before, &after)
            .iter()
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_string(),
                    e["object"]["k"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want = [("MODIFIED", "ns/b"), ("DELETED", "ns/c"), ("ADDED", "ns/d")];
        assert_eq!(
            kinds,
            want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec()
        );
        assert!(diff(&after, &after).is_empty());
    }
}
