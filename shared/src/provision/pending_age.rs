//! How long pods have waited for capacity: the provisioner's `OldestPendingPodAge` gauge,
//! which the stack's `PodsPendingTooLongAlarm` holds to a bound. A pod that can never be
//! provisioned (no NodePool fits it) keeps the gauge high until it is fixed or deleted:
//! that is an incident too, and its Events say why.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;

/// The longest any of `pending` has waited for capacity by `now`: since the scheduler
/// found it unschedulable (its `PodScheduled=False` condition's transition), not since it
/// was created, so a pod held back by a scheduling gate or a volume does not count the time
/// before it asked for a node; its creation when the condition carries no time. `None`
/// when no pod says when.
pub fn oldest(pending: &[Pod], now: SystemTime) -> Option<Duration> {
    pending
        .iter()
        .filter_map(waiting_since)
        .map(|t| now.duration_since(SystemTime::from(t)).unwrap_or_default())
        .max()
}

fn waiting_since(pod: &Pod) -> Option<jiff::Timestamp> {
    let unschedulable = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.last_transition_time.as_ref());
    unschedulable
        .or(pod.metadata.creation_timestamp.as_ref())
        .map(|t| t.0)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn created_at(second: Option<i64>) -> Pod {
        let mut p = Pod::default();
        p.metadata.creation_timestamp =
            second.map(|s| Time(jiff::Timestamp::from_second(s).expect("a valid time")));
        p
    }

    #[test]
    fn a_pod_waits_from_when_the_scheduler_found_no_room_not_from_its_creation() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut gated = created_at(Some(100));
        gated.status = Some(k8s_openapi::api::core::v1::PodStatus {
            conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                last_transition_time: Some(Time(
                    jiff::Timestamp::from_second(970).expect("a valid time"),
                )),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert_eq!(oldest(&[gated], now), Some(Duration::from_secs(30)));
    }

    #[test]
    fn without_a_scheduling_condition_the_oldest_pending_pod_counts_from_its_creation() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        // (creation times, expected age)
        let table: [(&[Option<i64>], Option<u64>); 5] = [
            (&[], None),
            (&[None], None),
            (&[Some(990)], Some(10)),
            (&[Some(990), Some(400), None, Some(999)], Some(600)),
            // A clock behind the API server's: the pod has not waited at all.
            (&[Some(1_010)], Some(0)),
        ];
        for (created, age) in table {
            let pods: Vec<Pod> = created.iter().copied().map(created_at).collect();
            assert_eq!(
                oldest(&pods, now),
                age.map(Duration::from_secs),
                "{created:?}"
            );
        }
    }
}
