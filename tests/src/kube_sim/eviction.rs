//! The eviction subresource's PodDisruptionBudget check, computed the way the disruption
//! controller fills `PodDisruptionBudgetStatus` and the eviction REST handler reads it
//! (k8s.io/kubernetes pkg/controller/disruption, pkg/registry/core/pod/storage/eviction.go).
//!
//! The eviction check computes the budget status fresh on every eviction instead of reading
//! the stored one, so there is no window in which a stale status allows a second eviction;
//! the disruption controller's step (`controller.rs`) writes the same computation into
//! `status` for readers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::selectors::selector_matches;
use super::status::ApiError;

/// The message of the 429 the real server answers.
pub const VIOLATION_MESSAGE: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

/// The computed status of one budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetStatus {
    pub expected_pods: i32,
    pub desired_healthy: i32,
    pub current_healthy: i32,
}

impl BudgetStatus {
    pub fn disruptions_allowed(&self) -> i32 {
        (self.current_healthy - self.desired_healthy).max(0)
    }
}

/// Ready=True and not being deleted: what the disruption controller counts as healthy.
pub fn is_healthy(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && is_ready(pod)
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn labels(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.labels.clone().unwrap_or_default()
}

/// Whether the budget selects this pod (policy/v1: an empty selector selects every pod of
/// the namespace; a missing one selects none).
pub fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    pdb.metadata.namespace == pod.metadata.namespace
        && pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .is_some_and(|sel| selector_matches(sel, &labels(pod)))
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)`, which the disruption
/// controller uses for both minAvailable and maxUnavailable.
pub fn scaled_round_up(v: &IntOrString, total: i32) -> Result<i32, String> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let scaled = (pct * i64::from(total) + 99) / 100;
            Ok(i32::try_from(scaled).unwrap_or(i32::MAX))
        }
    }
}

/// Computes the budget's status over the pods it selects.
///
/// `controller_scale` answers, for a pod, the uid and desired replicas of the workload that
/// controls it (a ReplicaSet's Deployment, a StatefulSet); pods without one count as one each.
pub fn budget_status(
    pdb: &PodDisruptionBudget,
    selected: &[&Pod],
    controller_scale: &dyn Fn(&Pod) -> Option<(String, i32)>,
) -> Result<BudgetStatus, String> {
    let current_healthy = selected.iter().filter(|p| is_healthy(p)).count() as i32;
    let expected_scale = || {
        let mut by_controller: BTreeMap<String, i32> = BTreeMap::new();
        let mut uncontrolled = 0;
        for p in selected {
            match controller_scale(p) {
                Some((uid, scale)) => {
                    by_controller.insert(uid, scale);
                }
                None => uncontrolled += 1,
            }
        }
        by_controller.values().sum::<i32>() + uncontrolled
    };
    let spec = pdb.spec.clone().unwrap_or_default();
    let (expected_pods, desired_healthy) = match (&spec.max_unavailable, &spec.min_available) {
        (Some(max), _) => {
            let expected = expected_scale();
            (
                expected,
                (expected - scaled_round_up(max, expected)?).max(0),
            )
        }
        (None, Some(IntOrString::Int(min))) => (selected.len() as i32, *min),
        (None, Some(min)) => {
            let expected = expected_scale();
            (expected, scaled_round_up(min, expected)?)
        }
        (None, None) => (selected.len() as i32, 0),
    };
    Ok(BudgetStatus {
        expected_pods,
        desired_healthy,
        current_healthy,
    })
}

/// Decides an eviction: `Ok(())` to delete the pod, or the error the server answers.
pub fn check(
    pod: &Pod,
    pdbs: &[PodDisruptionBudget],
    namespace_pods: &[Pod],
    controller_scale: &dyn Fn(&Pod) -> Option<(String, i32)>,
) -> Result<(), ApiError> {
    // canIgnorePDB: terminal, pending or already-deleting pods are evicted regardless.
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    if pod.metadata.deletion_timestamp.is_some()
        || matches!(phase, "Succeeded" | "Failed" | "Pending")
    {
        return Ok(());
    }
    let matching: Vec<&PodDisruptionBudget> = pdbs.iter().filter(|b| selects(b, pod)).collect();
    let pdb = match matching.as_slice() {
        [] => return Ok(()),
        [one] => *one,
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let selected: Vec<&Pod> = namespace_pods.iter().filter(|p| selects(pdb, p)).collect();
    let status = budget_status(pdb, &selected, controller_scale).map_err(ApiError::internal)?;
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let refuse = || {
        ApiError::too_many_requests(
            VIOLATION_MESSAGE,
            json!([{
                "reason": "DisruptionBudget",
                "message": format!(
                    "The disruption budget {name} needs {} healthy pods and has {} currently",
                    status.desired_healthy, status.current_healthy
                ),
            }]),
        )
    };
    if !is_healthy(pod) {
        // unhealthyPodEvictionPolicy: AlwaysAllow, or IfHealthyBudget (the default).
        let policy = pdb
            .spec
            .as_ref()
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
        if policy == Some("AlwaysAllow") || status.current_healthy >= status.desired_healthy {
            return Ok(());
        }
        return Err(refuse());
    }
    if status.disruptions_allowed() <= 0 {
        return Err(refuse());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(name: &str, ready: bool, rs: Option<&str>) -> Pod {
        let mut v = json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        });
        if let Some(rs) = rs {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": rs, "controller": true}]);
        }
        serde_json::from_value(v).unwrap_or_default()
    }

    fn pdb(field: &str, value: Value) -> PodDisruptionBudget {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, field: value}
        }))
        .unwrap_or_default()
    }

    /// Every pod belongs to one controller that wants `scale` replicas.
    fn scale(n: i32) -> impl Fn(&Pod) -> Option<(String, i32)> {
        move |p: &Pod| {
            p.metadata
                .owner_references
                .as_ref()
                .and_then(|o| o.first())
                .map(|o| (o.uid.clone(), n))
        }
    }

    fn three_ready() -> Vec<Pod> {
        (0..3)
            .map(|i| pod(&format!("p{i}"), true, Some("rs")))
            .collect()
    }

    #[test]
    fn budgets_allow_or_refuse_eviction_of_one_of_three_ready_pods() {
        let pods = three_ready();
        // (budget, allowed?) for 3 healthy pods of a 3-replica controller.
        let cases = [
            (pdb("minAvailable", json!(2)), true),
            (pdb("minAvailable", json!(3)), false),
            (pdb("minAvailable", json!("67%")), false), // ceil(2.01) = 3 desired
            (pdb("minAvailable", json!("66%")), true),  // ceil(1.98) = 2 desired
            (pdb("maxUnavailable", json!(1)), true),
            (pdb("maxUnavailable", json!(0)), false),
            (pdb("maxUnavailable", json!("10%")), true), // rounds up to 1
            (pdb("maxUnavailable", json!("0%")), false),
        ];
        for (budget, allowed) in cases {
            let got = check(&pods[0], std::slice::from_ref(&budget), &pods, &scale(3));
            assert_eq!(got.is_ok(), allowed, "{:?}", budget.spec);
            if let Err(e) = got {
                assert_eq!(
                    (e.code, e.reason, e.message.as_str()),
                    (429, "TooManyRequests", VIOLATION_MESSAGE)
                );
            }
        }
    }

    #[test]
    fn max_unavailable_counts_missing_replicas_of_the_controller() {
        // 3 pods exist but the controller wants 4: one is already unavailable.
        let pods = three_ready();
        let st = budget_status(
            &pdb("maxUnavailable", json!(1)),
            &pods.iter().collect::<Vec<_>>(),
            &scale(4),
        );
        assert_eq!(st.map(|s| s.disruptions_allowed()), Ok(0));
    }

    #[test]
    fn unready_pod_is_evictable_while_the_budget_is_healthy() {
        let mut pods = three_ready();
        pods.push(pod("sick", false, Some("rs")));
        assert!(check(&pods[3], &[pdb("minAvailable", json!(3))], &pods, &scale(4)).is_ok());
        assert!(check(&pods[3], &[pdb("minAvailable", json!(4))], &pods, &scale(4)).is_err());
    }

    #[test]
    fn pending_pod_ignores_the_budget_and_two_budgets_are_an_error() {
        let pods = three_ready();
        let mut pending = pod("pending", false, None);
        if let Some(s) = pending.status.as_mut() {
            s.phase = Some("Pending".into());
        }
        assert!(
            check(
                &pending,
                &[pdb("minAvailable", json!(100))],
                &pods,
                &scale(3)
            )
            .is_ok()
        );
        let two = [
            pdb("minAvailable", json!(1)),
            pdb("maxUnavailable", json!(1)),
        ];
        assert_eq!(
            check(&pods[0], &two, &pods, &scale(3))
                .err()
                .map(|e| e.code),
            Some(500)
        );
    }
}
