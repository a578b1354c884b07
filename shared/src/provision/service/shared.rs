//! The provisioner's side of what the functions share ([`SharedState`]): exclusions and
//! launches made outside the Lease, adopted with every read of the capacity side,
//! published when this process excludes something or launches outside a Lease turn. A
//! store that cannot be reached degrades to this process's own memory (warned, never
//! fatal): a launch is worth more than the shared hint.

use std::sync::Arc;
use std::time::SystemTime;

use super::super::shared_launches::SharedLaunch;
use super::super::shared_unavailable::{SharedExclusion, SharedFacts, SharedState};
use super::super::unavailable::{Exclusion, UNAVAILABLE_TTL};
use super::Provisioner;
use crate::ids::InstanceId;

impl<K, A> Provisioner<K, A> {
    /// Where the functions share exclusions and launches; `None` (the default) keeps them
    /// in this process only. Each function's main sets the cluster's
    /// `kube::StateConfigMap`.
    pub fn set_shared_state(&mut self, store: Option<Arc<dyn SharedState>>) {
        self.shared = store;
    }

    /// What the functions share, at `now`; `None` without a store or when it cannot be
    /// read (warned).
    pub(super) async fn load_shared(&self, now: SystemTime) -> Option<SharedFacts> {
        let store = self.shared.as_ref()?;
        match store.load(now).await {
            Ok(found) => Some(found),
            Err(e) => {
                tracing::warn!(
                    error = crate::error_chain(&e),
                    "reading what the functions share failed; planning with this process's own"
                );
                None
            }
        }
    }

    /// Adds what other functions excluded (and have not seen expire) to this process's,
    /// and takes their launches for the fleet view.
    pub(super) fn adopt_shared(&mut self, facts: Option<SharedFacts>) {
        let Some(facts) = facts else {
            return;
        };
        for x in facts.exclusions {
            self.unavailable.exclude_until(x.exclusion, x.until);
        }
        self.fleet
            .adopt_published(facts.launches.into_iter().map(|l| (l.instance, l.at)));
    }

    /// Shares `exclusions`, each for [`UNAVAILABLE_TTL`] from `now`.
    pub(super) async fn share_exclusions(&self, exclusions: &[Exclusion], now: SystemTime) {
        if exclusions.is_empty() {
            return;
        }
        let add = exclusions
            .iter()
            .map(|x| SharedExclusion {
                exclusion: x.clone(),
                until: now + UNAVAILABLE_TTL,
            })
            .collect();
        self.publish(
            SharedFacts {
                exclusions: add,
                launches: vec![],
            },
            now,
        )
        .await;
    }

    /// Shares launches made outside a Lease turn (a replacement, a capacity window), so
    /// the holder counts them though its kept listing was asked for before them.
    pub(super) async fn share_launches(&self, instances: &[String], at: SystemTime) {
        if instances.is_empty() {
            return;
        }
        let launches = instances
            .iter()
            .map(|id| SharedLaunch {
                instance: InstanceId::new(id.clone()),
                at,
            })
            .collect();
        self.publish(
            SharedFacts {
                exclusions: vec![],
                launches,
            },
            at,
        )
        .await;
    }

    async fn publish(&self, add: SharedFacts, now: SystemTime) {
        let Some(store) = &self.shared else {
            return;
        };
        if let Err(e) = store.publish(add.clone(), now).await {
            tracing::warn!(
                error = crate::error_chain(&e),
                ?add,
                "sharing with the other functions failed; only this process knows"
            );
        }
    }
}
