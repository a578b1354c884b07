//! Collecting this cluster's old launch templates after a poll's launches. The decision is
//! [`templates_to_delete`]; this only lists, deletes and logs. A failure is logged and ends
//! the run; the poll it follows has already done its work.

use std::time::SystemTime;

use super::super::template_gc::{
    MAX_TEMPLATE_DELETES_PER_RUN, TEMPLATE_GRACE, templates_to_delete,
};
use super::Provisioner;
use crate::aws::{Cloud, ErrorClass};
use crate::kube::Cluster;

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// Deletes the templates [`templates_to_delete`] names; returns the deleted names.
    pub(super) async fn collect_launch_templates(&mut self, now: SystemTime) -> Vec<String> {
        let in_use = self.template_gc.start(now);
        let templates = match self.aws.list_launch_templates().await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "listing launch templates for collection failed; next try in one interval");
                return vec![];
            }
        };
        let doomed = templates_to_delete(
            &self.settings.cluster.name,
            &templates,
            &in_use,
            now,
            TEMPLATE_GRACE,
            MAX_TEMPLATE_DELETES_PER_RUN,
        );
        let mut deleted = Vec::new();
        for name in doomed {
            match self.aws.delete_launch_template(&name).await {
                Ok(()) => deleted.push(name),
                Err(e) => {
                    tracing::warn!(
                        template = name,
                        error = %e,
                        throttled = e.class() == ErrorClass::Throttled,
                        "deleting a launch template failed; the rest wait for the next run"
                    );
                    break;
                }
            }
        }
        if !deleted.is_empty() {
            tracing::info!(
                deleted = deleted.len(),
                listed = templates.len(),
                "collected old launch templates"
            );
        }
        deleted
    }
}
