//! Emptiness is decided on a list read before the taint: a pod the scheduler binds between
//! the re-check and the taint would be evicted by the drain, for a node that is no longer
//! empty. So an empty node's pods are read once more after the taint (from then on nothing
//! new is scheduled there) and, if one that would move has arrived, the removal is called
//! off: the taint comes off first and then the removal marker (a crash in between leaves a
//! marked node, whose removal the next sweep continues, never a tainted node nobody
//! removes), with a log line and an Event.

use k8s_openapi::api::core::v1::Pod;
use nodewright::api::labels::DISRUPTED_TAINT;
use nodewright::disruption::{DISRUPTION_ANNOTATION, Reason};
use nodewright::drain::reschedulable;
use nodewright::kube::{EventType, NodeDisruption, ObjectKind};

use super::act::{SweepError, kube};

/// Why a node tainted for `reason` must not be drained after all, read from its pods as
/// they are after the taint: for an empty node, any pod that would have to move (not a
/// DaemonSet, mirror or finished pod, nor one already terminating).
pub(crate) fn landed_after_taint(pods: &[Pod], reason: Reason) -> Option<String> {
    if reason != Reason::Empty {
        return None;
    }
    reschedulable(pods).next().map(|p| {
        format!(
            "pod {}/{} was scheduled on it while it was being tainted",
            p.metadata.namespace.as_deref().unwrap_or("default"),
            p.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// Reads the node's pods again after the taint and calls the removal off if one landed.
/// Answers why it was called off, if it was.
pub(crate) async fn recheck_after_taint<K: NodeDisruption>(
    cluster: &K,
    name: &str,
    reason: Reason,
) -> Result<Option<String>, SweepError> {
    if reason != Reason::Empty {
        return Ok(None);
    }
    let pods = cluster
        .pods_on_node(name)
        .await
        .map_err(kube("re-reading the node's pods after tainting"))?;
    let Some(why) = landed_after_taint(&pods, reason) else {
        return Ok(None);
    };
    cluster
        .untaint(name, DISRUPTED_TAINT)
        .await
        .map_err(kube("untainting a node whose removal was called off"))?;
    cluster
        .annotate_node(name, DISRUPTION_ANNOTATION, "")
        .await
        .map_err(kube("clearing the removal marker"))?;
    tracing::info!(node = name, why, "removal called off after the taint");
    cluster
        .object_event(
            ObjectKind::Node,
            name,
            "DisruptionCalledOff",
            &format!("not removed ({}): {why}; taint removed", reason.as_str()),
            EventType::Normal,
        )
        .await;
    Ok(Some(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, extra: serde_json::Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        });
        json_merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn json_merge(into: &mut serde_json::Value, from: serde_json::Value) {
        match (into, from) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    json_merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    #[test]
    fn an_empty_nodes_removal_is_called_off_only_for_a_pod_that_would_have_to_move() {
        let daemon = || {
            pod(
                "aws-node",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "aws-node", "uid": "1", "controller": true}]}}),
            )
        };
        let mirror = || {
            pod(
                "kube-proxy",
                json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
            )
        };
        let finished = || pod("job-1", json!({"status": {"phase": "Succeeded"}}));
        let leaving = || {
            pod(
                "old",
                json!({"metadata": {"deletionTimestamp": "2026-03-02T10:00:00Z"}}),
            )
        };
        let web = || pod("web-1", json!({}));
        // (pods after the taint, the reason of the removal, called off with)
        let cases: Vec<(Vec<Pod>, Reason, Option<&str>)> = vec![
            (vec![], Reason::Empty, None),
            (
                vec![daemon(), mirror(), finished(), leaving()],
                Reason::Empty,
                None,
            ),
            (
                vec![daemon(), web()],
                Reason::Empty,
                Some("pod shop/web-1 was scheduled on it while it was being tainted"),
            ),
            // Other removals move their pods on purpose: nothing to call off.
            (vec![web()], Reason::Expired, None),
            (vec![web()], Reason::Underutilized, None),
        ];
        for (pods, reason, want) in cases {
            let names: Vec<_> = pods.iter().map(|p| p.metadata.name.clone()).collect();
            assert_eq!(
                landed_after_taint(&pods, reason).as_deref(),
                want,
                "{names:?} ({reason:?})"
            );
        }
    }
}
