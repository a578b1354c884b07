//! How long pods have waited for capacity: the provisioner's `OldestPendingPodAge` gauge,
//! which the stack's `PodsPendingTooLongAlarm` holds to a bound.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;

/// The longest any of `pending` has existed by `now`. Creation time is when a pod starts
/// waiting: it waits until it is bound, and a bound pod never waits again (a pod evicted
/// from a node comes back as a new pod). `None` when no pod carries a creation time.
pub fn oldest(pending: &[Pod], now: SystemTime) -> Option<Duration> {
    pending
        .iter()
        .filter_map(|p| p.metadata.creation_timestamp.as_ref())
        .map(|t| {
            now.duration_since(SystemTime::from(t.0))
                .unwrap_or_default()
        })
        .max()
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
    fn the_oldest_pending_pod_counts_from_its_creation() {
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
