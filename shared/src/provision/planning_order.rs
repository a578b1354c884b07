//! The order pending pods are handed to the solver. Among pods the solver cannot tell
//! apart (same requests, same constraints) it fills capacity on its way in this order, and
//! each instance in flight was launched for particular pods: were a pod that just arrived
//! put on it, the pod it was launched for would be planned a claim of its own, whose
//! ClientToken (from its pods) replays the earlier launch, and the new pod would get no
//! instance until one registers. So: pods a solve of this container already planned for
//! first, then the oldest (creation time, then when this container first saw them).

use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;

use crate::ids::PodUid;

/// Sorts `pending` into planning order (stable: ties keep the API server's order).
pub fn sort_for_planning(
    pending: &mut [Pod],
    planned: &HashSet<PodUid>,
    first_seen: &HashMap<PodUid, SystemTime>,
) {
    pending.sort_by_cached_key(|p| {
        let uid = PodUid::of(p);
        (
            !planned.contains(&uid),
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            first_seen.get(&uid).copied(),
        )
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn pod(name: &str, created_s: i64) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some(format!("uid-{name}"));
        p.metadata.creation_timestamp = Some(Time(
            jiff::Timestamp::from_second(created_s).expect("a valid time"),
        ));
        p
    }

    fn names(pods: &[Pod]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn pods_already_planned_for_come_before_a_pod_that_just_arrived() {
        // The API server lists by name: latency-10 before latency-9.
        let mut pending = vec![pod("latency-10", 100), pod("latency-9", 100)];
        let planned = HashSet::from([PodUid::new("uid-latency-9")]);
        sort_for_planning(&mut pending, &planned, &HashMap::new());
        assert_eq!(names(&pending), ["latency-9", "latency-10"]);
    }

    #[test]
    fn without_plans_the_oldest_go_first_by_creation_then_by_when_first_seen() {
        // A container that just took over has planned nothing yet.
        let mut pending = vec![
            pod("c", 300),
            pod("b-seen-later", 200),
            pod("b-seen-first", 200),
            pod("a", 100),
        ];
        let first_seen = HashMap::from([
            (PodUid::new("uid-b-seen-later"), at(20)),
            (PodUid::new("uid-b-seen-first"), at(10)),
        ]);
        sort_for_planning(&mut pending, &HashSet::new(), &first_seen);
        assert_eq!(names(&pending), ["a", "b-seen-first", "b-seen-later", "c"]);
    }
}
