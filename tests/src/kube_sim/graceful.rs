//! Graceful pod deletion, as the API server and the kubelet do it: a DELETE (or an
//! eviction) of a pod that a node runs does not remove it; it sets
//! `metadata.deletionTimestamp` (now + the grace period) and
//! `metadata.deletionGracePeriodSeconds`, and the pod stays, Terminating, until the
//! simulated kubelet stops it once that time has come on the simulation clock. A second
//! DELETE may shorten the grace, never lengthen it. A pod no node runs (unbound), one that
//! has finished, one on a node that is gone, and a DELETE with a grace of 0 go at once.
//!
//! The grace is the DELETE's `gracePeriodSeconds` (query or DeleteOptions body), else the
//! pod's `spec.terminationGracePeriodSeconds`, else 30 s, the API default.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::StepReport;
use super::clock::{format_ts, parse_ts};
use super::resources::{NODES, PODS};
use super::status::ApiError;
use super::store::{Store, Write};

const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The grace a DELETE asks for, if it names one.
pub fn requested_grace(q: &BTreeMap<String, String>, options: &Value) -> Option<i64> {
    q.get("gracePeriodSeconds")
        .and_then(|g| g.parse().ok())
        .or_else(|| options.get("gracePeriodSeconds").and_then(Value::as_i64))
}

fn runs_on_a_node(store: &Store, pod: &Value) -> bool {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str);
    !matches!(phase, "Succeeded" | "Failed")
        && node.is_some_and(|n| store.get(NODES, "", n).is_ok())
}

/// Deletes the pod `ns/name` gracefully at `now` (RFC 3339); returns the pod as it is after
/// the request (Terminating, or as it was when removed).
pub fn delete_pod(
    store: &mut Store,
    ns: &str,
    name: &str,
    grace: Option<i64>,
    now: &str,
) -> Result<Value, ApiError> {
    let mut pod = store.get(PODS, ns, name)?.clone();
    let grace = grace
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .max(0);
    if grace == 0 || !runs_on_a_node(store, &pod) {
        return store.delete_cascade(PODS, ns, name);
    }
    let now_t = parse_ts(Some(now)).unwrap_or_else(Timestamp::now);
    let due = now_t + SignedDuration::from_secs(grace);
    let current = parse_ts(
        pod.pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str),
    );
    if current.is_some_and(|c| c <= due) {
        return Ok(pod);
    }
    pod["metadata"]["deletionTimestamp"] = json!(format_ts(due));
    pod["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
    store.replace(PODS, ns, name, pod, Write::Internal)
}

/// The simulated kubelets stop the Terminating pods whose grace has run out at `now`, and
/// any Terminating pod whose node is gone; they leave the store. A node whose kubelet no
/// longer reports (Ready Unknown) stops nothing: its pods stay Terminating until the Node
/// is deleted, as on a real cluster.
pub fn stop_terminating(store: &mut Store, now: Timestamp, report: &mut StepReport) {
    let mut nodes = BTreeSet::new();
    let mut unreachable = BTreeSet::new();
    for n in store.list(NODES, None) {
        let Some(name) = n.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        if super::kubelet::ready_status(n).as_deref() == Some("Unknown") {
            unreachable.insert(name.to_string());
        }
        nodes.insert(name.to_string());
    }
    let due: Vec<(String, String)> = store
        .list(PODS, None)
        .filter(|p| {
            let Some(at) = parse_ts(
                p.pointer("/metadata/deletionTimestamp")
                    .and_then(Value::as_str),
            ) else {
                return false;
            };
            let node = p
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("");
            (at <= now && !unreachable.contains(node)) || !nodes.contains(node)
        })
        .filter_map(|p| {
            let s = |k: &str| p.pointer(k).and_then(Value::as_str).map(str::to_string);
            Some((s("/metadata/namespace")?, s("/metadata/name")?))
        })
        .collect();
    for (ns, name) in due {
        if store.delete_cascade(PODS, &ns, &name).is_ok() {
            report.pods_stopped.push(format!("{ns}/{name}"));
        }
    }
}
