//! A warm container's memory of the instance profiles it ensured for EC2NodeClass roles.
//!
//! A profile, once ensured, stays: its name follows from cluster and role, so the cache
//! only saves IAM calls and is forgotten when EC2 refuses the profile (deleted by hand, or
//! not visible yet), which makes the next launch ensure it again. A failure is remembered
//! for [`PROFILE_RETRY_AFTER`] so a class naming a missing role does not cost IAM calls on
//! every poll (Karpenter keeps a role-not-found cache for the same reason).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// How long a failed ensure for a role is answered from memory: a few polls, short enough
/// that a role created after the class was written is picked up within a minute.
pub const PROFILE_RETRY_AFTER: Duration = Duration::from_secs(60);

/// What the container knows about a role's profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    Ready(String),
    /// Ensuring failed lately, for this reason.
    Failed(String),
    Unknown,
}

#[derive(Debug, Default)]
pub struct ProfileCache {
    ready: HashMap<String, String>,
    failed: HashMap<String, (SystemTime, String)>,
}

impl ProfileCache {
    pub fn lookup(&self, role: &str, now: SystemTime) -> Cached {
        if let Some(profile) = self.ready.get(role) {
            return Cached::Ready(profile.clone());
        }
        match self.failed.get(role) {
            Some((at, why))
                if now
                    .duration_since(*at)
                    .is_ok_and(|d| d < PROFILE_RETRY_AFTER) =>
            {
                Cached::Failed(why.clone())
            }
            _ => Cached::Unknown,
        }
    }

    pub fn ready(&mut self, role: &str, profile: &str) {
        self.failed.remove(role);
        self.ready.insert(role.to_string(), profile.to_string());
    }

    pub fn failed(&mut self, role: &str, why: &str, now: SystemTime) {
        self.ready.remove(role);
        self.failed.insert(role.to_string(), (now, why.to_string()));
    }

    /// Forgets the role's profile, so the next launch ensures it again.
    pub fn forget(&mut self, role: &str) {
        self.ready.remove(role);
        self.failed.remove(role);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_profile_is_kept_and_a_failure_only_for_a_minute() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut cache = ProfileCache::default();
        assert_eq!(cache.lookup("nodes", t0), Cached::Unknown);

        cache.failed("nodes", "NoSuchEntity", t0);
        assert_eq!(
            cache.lookup("nodes", t0 + Duration::from_secs(59)),
            Cached::Failed("NoSuchEntity".into())
        );
        assert_eq!(
            cache.lookup("nodes", t0 + PROFILE_RETRY_AFTER),
            Cached::Unknown
        );

        cache.ready("nodes", "nodewright_demo_1");
        assert_eq!(
            cache.lookup("nodes", t0 + Duration::from_secs(86_400)),
            Cached::Ready("nodewright_demo_1".into())
        );
        assert_eq!(cache.lookup("other", t0), Cached::Unknown);

        cache.forget("nodes");
        assert_eq!(cache.lookup("nodes", t0), Cached::Unknown);
    }
}
