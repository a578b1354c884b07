//! What a poll tells the cluster about what it cannot do: a `FailedScheduling` Event per
//! pod and reason, an `InvalidConfiguration` Event per object and reason, each once (this
//! container remembers what it already said).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use super::Provisioner;
use crate::ids::PodUid;
use crate::kube::{Cluster, EventType, ObjectRef, PodRef};
use crate::telemetry;

/// What a warning already given was about: a pending pod (by uid, forgotten once the pod is
/// no longer pending) or a configuration object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Warned {
    Pod { uid: PodUid },
    Object(ObjectRef),
}

impl<K: Cluster, A> Provisioner<K, A> {
    /// A `FailedScheduling` warning per (pod, reason), once while the pod stays pending.
    pub(super) async fn warn_unschedulable(
        &mut self,
        by_key: &HashMap<String, &Pod>,
        unschedulable: Vec<(String, String)>,
    ) {
        for (key, reason) in unschedulable {
            let Some(pod) = by_key.get(&key) else {
                continue;
            };
            let uid = PodUid::of(pod);
            if self.warned.insert((Warned::Pod { uid }, reason.clone())) {
                tracing::warn!(pod = key, reason, "pod cannot be provisioned for");
                telemetry::pod_not_provisioned();
                self.kube
                    .pod_event(
                        &PodRef::of(pod),
                        "FailedScheduling",
                        &reason,
                        EventType::Warning,
                    )
                    .await;
            }
        }
    }

    /// Reports a configuration object left out (its Event and log line), once per reason.
    pub(super) async fn report_dropped(&mut self, object: &ObjectRef, why: &str) {
        if !self
            .warned
            .insert((Warned::Object(object.clone()), why.to_string()))
        {
            return;
        }
        tracing::warn!(%object, reason = why, "configuration skipped");
        self.kube
            .object_event(
                object.kind,
                &object.name,
                "InvalidConfiguration",
                why,
                EventType::Warning,
            )
            .await;
    }
}
