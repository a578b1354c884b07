//! The drain executor: sends what the plan says, one pod at a time, and reports what
//! happened. It decides nothing; the caller plans again later for what is left.

use super::plan::DrainPlan;
use crate::kube::{EventSink, EventType, Eviction, PodEviction};

/// What one pass of [`execute`] did, by `namespace/name`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainProgress {
    pub evicted: Vec<String>,
    pub deleted: Vec<String>,
    /// A PodDisruptionBudget said not now (429).
    pub blocked: Vec<String>,
    pub gone: Vec<String>,
    pub failed: Vec<(String, String)>,
}

/// Evicts and deletes as `plan` says, and leaves an Event on each pod moved, with
/// `reason` (`SpotInterrupted`, ...) and `note` (the node and the deadline).
pub async fn execute<K>(kube: &K, plan: &DrainPlan, reason: &str, note: &str) -> DrainProgress
where
    K: PodEviction + EventSink,
{
    let mut progress = DrainProgress::default();
    for step in &plan.evict {
        let key = format!("{}/{}", step.pod.namespace, step.pod.name);
        match kube.evict(&step.pod, step.grace_seconds).await {
            Ok(Eviction::Evicted) => {
                let message = format!("Evicted ({note}), grace period {}s", step.grace_seconds);
                kube.pod_event(&step.pod, reason, &message, EventType::Warning)
                    .await;
                progress.evicted.push(key);
            }
            Ok(Eviction::Blocked) => progress.blocked.push(key),
            Ok(Eviction::Gone) => progress.gone.push(key),
            Err(e) => progress.failed.push((key, crate::error_chain(&e))),
        }
    }
    for step in &plan.delete {
        let key = format!("{}/{}", step.pod.namespace, step.pod.name);
        match kube.delete_pod(&step.pod, step.grace_seconds).await {
            Ok(()) => {
                let message = format!(
                    "Deleted before the deadline ({note}), grace period {}s",
                    step.grace_seconds
                );
                kube.pod_event(&step.pod, reason, &message, EventType::Warning)
                    .await;
                progress.deleted.push(key);
            }
            Err(e) => progress.failed.push((key, crate::error_chain(&e))),
        }
    }
    progress
}
