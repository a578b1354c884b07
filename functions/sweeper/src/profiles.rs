//! Collecting leftover instance profiles (issue: hygiene): the profiles nodewright created
//! for EC2NodeClass roles that no class names and no instance runs with any more
//! ([`unused_profiles`] decides). At most once an hour per warm container, after the sweep
//! proper; a failure is logged and retried at the next sweep, never fails the sweep.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use jiff::Timestamp;
use nodewright::aws::InstanceProfileLeftovers;
use nodewright::disruption::unused_profiles;
use nodewright::kube::ConfigLoad;

/// How often a warm container collects: listing every profile and every instance-profile
/// association in the region each minute would spend IAM's and EC2's request budget on
/// something that changes only when a class is deleted or changes its role.
pub const PROFILE_SWEEP_EVERY: Duration = Duration::from_secs(60 * 60);

/// The collection as the sweeper's state holds it (object-safe, so [`crate::State`] keeps
/// its type parameters).
pub trait CollectProfiles: Send + Sync {
    /// Deletes the unused profiles when due; the names deleted.
    fn collect<'a>(&'a self, config: &'a ConfigLoad, now: Timestamp) -> BoxFuture<'a, Vec<String>>;
}

/// Collects this cluster's leftover profiles through `ports`.
pub struct ProfileCollection<P> {
    ports: P,
    cluster: String,
    /// The stack's node role (`NODE_ROLE`): the default EC2NodeClass's, never collected.
    default_role: String,
    last: Mutex<Option<Timestamp>>,
}

impl<P> ProfileCollection<P> {
    pub fn new(ports: P, cluster: impl Into<String>, default_role: impl Into<String>) -> Self {
        ProfileCollection {
            ports,
            cluster: cluster.into(),
            default_role: default_role.into(),
            last: Mutex::new(None),
        }
    }

    fn due(&self, now: Timestamp) -> bool {
        let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.is_none_or(|at| now.duration_since(at).unsigned_abs() >= PROFILE_SWEEP_EVERY)
    }
}

impl<P: InstanceProfileLeftovers + Send + Sync> CollectProfiles for ProfileCollection<P> {
    fn collect<'a>(&'a self, config: &'a ConfigLoad, now: Timestamp) -> BoxFuture<'a, Vec<String>> {
        async move {
            if !self.due(now) {
                return Vec::new();
            }
            // A class that failed to load may still name a role: never collect then.
            if let Some(p) = config.problems.iter().find(|p| p.is_error()) {
                tracing::info!(
                    problem = %p.message,
                    document = p.document,
                    "the configuration has errors; leftover instance profiles are not collected"
                );
                return Vec::new();
            }
            match self.collect_now(config, now).await {
                Ok(deleted) => {
                    *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
                    deleted
                }
                Err(e) => {
                    tracing::warn!(
                        error = %nodewright::error_chain(&e),
                        "collecting leftover instance profiles failed; the next sweep tries again"
                    );
                    Vec::new()
                }
            }
        }
        .boxed()
    }
}

impl<P: InstanceProfileLeftovers + Send + Sync> ProfileCollection<P> {
    async fn collect_now(
        &self,
        config: &ConfigLoad,
        now: Timestamp,
    ) -> Result<Vec<String>, nodewright::aws::AwsError> {
        let mut named: BTreeSet<String> = config
            .inputs
            .node_classes
            .iter()
            .filter_map(|c| c.spec.role.clone())
            .collect();
        named.insert(self.default_role.clone());
        let profiles = self.ports.own_instance_profiles().await?;
        if profiles.is_empty() {
            return Ok(Vec::new());
        }
        let in_use = self.ports.instance_profiles_in_use().await?;
        let unused = unused_profiles(&self.cluster, &profiles, &named, &in_use, now);
        if unused.is_empty() {
            return Ok(Vec::new());
        }
        // Re-check just before acting: an instance may have started with one meanwhile.
        let in_use = self.ports.instance_profiles_in_use().await?;
        let mut deleted = Vec::new();
        for profile in unused {
            if in_use.contains(&profile.name) {
                continue;
            }
            match self.ports.delete_instance_profile(&profile.name).await {
                Ok(()) => {
                    tracing::info!(
                        profile = profile.name,
                        roles = ?profile.roles,
                        "deleted an instance profile no EC2NodeClass names and no instance uses"
                    );
                    deleted.push(profile.name);
                }
                Err(e) => tracing::warn!(
                    profile = profile.name,
                    error = %nodewright::error_chain(&e),
                    "deleting a leftover instance profile failed"
                ),
            }
        }
        Ok(deleted)
    }
}
