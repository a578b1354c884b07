//! `EventSink` for `KubeCluster`: `events.k8s.io/v1` Events, or core/v1 Events where the
//! newer API is not served. Failing to write an event is logged, never returned.

use std::sync::atomic::{AtomicU64, Ordering};

use ::kube::api::{Api, PostParams};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use sha2::{Digest, Sha256};

use super::cluster::KubeCluster;
use super::error::KubeError;
use super::ports::{EventSink, EventType, ObjectKind, PodRef};

/// `reportingController` of every event nodewright writes.
pub const REPORTING_CONTROLLER: &str = "nodewright.io/provisioner";
/// Where events about cluster-scoped objects (NodePools, nodes) go, as kubectl looks for them.
const CLUSTER_EVENT_NAMESPACE: &str = "default";
/// events.k8s.io/v1 validation: `note` at most 1 kB, `reason`/`action` at most 128 bytes.
const MAX_NOTE: usize = 1024;
const MAX_SHORT: usize = 128;
/// Object names are at most 253 characters; the event name adds `.` and 16 hex digits.
const MAX_NAME_STEM: usize = 253 - 17;

/// Makes two events written in the same nanosecond differ in name.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// `<object>.<16 hex digits>`, like client-go's `<object>.<unix nanos in hex>`, with the
/// nanos hashed together with a sequence number so names do not collide within a process.
pub fn event_name(object: &str, now: Timestamp, sequence: u64) -> String {
    let mut hash = Sha256::new();
    hash.update(now.as_nanosecond().to_be_bytes());
    hash.update(sequence.to_be_bytes());
    hash.update(object.as_bytes());
    let digest = hash.finalize();
    format!(
        "{}.{}",
        truncate(object, MAX_NAME_STEM),
        hex::encode(&digest[..8])
    )
}

/// Cuts `s` to at most `max` bytes on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

struct Draft<'a> {
    namespace: &'a str,
    regarding: ObjectReference,
    reason: &'a str,
    message: &'a str,
    type_: EventType,
}

impl KubeCluster {
    async fn emit(&self, draft: Draft<'_>) {
        let now = self.clock.now();
        let object = draft.regarding.name.clone().unwrap_or_default();
        let name = event_name(&object, now, SEQUENCE.fetch_add(1, Ordering::Relaxed));
        if !self.core_events_only.load(Ordering::Relaxed) {
            match self.create_events_v1(&draft, &name, now).await {
                Ok(()) => return,
                // 404 here is usually the API group not being served; a missing namespace
                // answers 404 too, and then the core/v1 attempt below fails and is logged.
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    tracing::warn!(
                        error = crate::error_chain(&e),
                        reason = draft.reason,
                        object,
                        "could not write an event"
                    );
                    return;
                }
            }
        }
        match self.create_core_event(&draft, &name, now).await {
            Ok(()) => self.core_events_only.store(true, Ordering::Relaxed),
            Err(e) => {
                tracing::warn!(
                    error = crate::error_chain(&e),
                    reason = draft.reason,
                    object,
                    "could not write an event"
                )
            }
        }
    }

    async fn create_events_v1(
        &self,
        d: &Draft<'_>,
        name: &str,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        let event = k8s_openapi::api::events::v1::Event {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(d.namespace.into()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            // Our reasons are verbs of what nodewright did or decided (`Nominated`,
            // `Launched`), which is what `action` asks for.
            action: Some(truncate(d.reason, MAX_SHORT).into()),
            reason: Some(truncate(d.reason, MAX_SHORT).into()),
            note: Some(truncate(d.message, MAX_NOTE).into()),
            regarding: Some(d.regarding.clone()),
            reporting_controller: Some(REPORTING_CONTROLLER.into()),
            reporting_instance: Some(truncate(&self.settings.reporting_instance, MAX_SHORT).into()),
            type_: Some(d.type_.as_str().into()),
            ..Default::default()
        };
        let api: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), d.namespace);
        let resource = format!("events.events.k8s.io/{}", d.namespace);
        let pp = PostParams::default();
        self.settings
            .retry
            .run("create", &resource, || api.create(&pp, &event))
            .await?;
        Ok(())
    }

    /// The legacy form: first/last timestamps and a count. `eventTime` is left out because
    /// core/v1 validates an event that has one by the new API's rules (action required).
    async fn create_core_event(
        &self,
        d: &Draft<'_>,
        name: &str,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        let event = k8s_openapi::api::core::v1::Event {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(d.namespace.into()),
                ..Default::default()
            },
            involved_object: d.regarding.clone(),
            reason: Some(truncate(d.reason, MAX_SHORT).into()),
            message: Some(truncate(d.message, MAX_NOTE).into()),
            type_: Some(d.type_.as_str().into()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            source: Some(EventSource {
                component: Some(REPORTING_CONTROLLER.into()),
                host: None,
            }),
            reporting_component: Some(REPORTING_CONTROLLER.into()),
            reporting_instance: Some(truncate(&self.settings.reporting_instance, MAX_SHORT).into()),
            ..Default::default()
        };
        let api: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), d.namespace);
        let resource = format!("events/{}", d.namespace);
        let pp = PostParams::default();
        self.settings
            .retry
            .run("create", &resource, || api.create(&pp, &event))
            .await?;
        Ok(())
    }
}

impl EventSink for KubeCluster {
    async fn pod_event(&self, pod: &PodRef, reason: &str, message: &str, type_: EventType) {
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        };
        self.emit(Draft {
            namespace: &pod.namespace,
            regarding,
            reason,
            message,
            type_,
        })
        .await;
    }

    async fn object_event(
        &self,
        kind: ObjectKind,
        name: &str,
        reason: &str,
        message: &str,
        type_: EventType,
    ) {
        let regarding = ObjectReference {
            api_version: Some(kind.api_version().into()),
            kind: Some(kind.kind().into()),
            name: Some(name.into()),
            ..Default::default()
        };
        self.emit(Draft {
            namespace: CLUSTER_EVENT_NAMESPACE,
            regarding,
            reason,
            message,
            type_,
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_keep_the_object_name_and_differ_per_event() {
        let t = Timestamp::UNIX_EPOCH;
        let a = event_name("web-5d8f7-abcde", t, 0);
        let b = event_name("web-5d8f7-abcde", t, 1);
        assert!(a.starts_with("web-5d8f7-abcde."), "{a}");
        assert_eq!(a.len(), "web-5d8f7-abcde.".len() + 16);
        assert!(
            a.rsplit('.')
                .next()
                .is_some_and(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
        );
        assert_ne!(a, b);
    }

    #[test]
    fn long_object_names_are_cut_to_keep_the_event_name_valid() {
        let long = "x".repeat(300);
        assert_eq!(event_name(&long, Timestamp::UNIX_EPOCH, 0).len(), 253);
        assert_eq!(truncate("ééé", 3), "é");
    }
}
