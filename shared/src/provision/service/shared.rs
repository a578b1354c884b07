//! The provisioner's side of the exclusions shared across functions
//! ([`SharedExclusions`]): adopted before every plan, published when this process
//! excludes something. A store that cannot be reached degrades to this process's own
//! memory (warned, never fatal): a launch is worth more than the shared hint.

use std::sync::Arc;
use std::time::SystemTime;

use super::super::shared_unavailable::{SharedExclusion, SharedExclusions};
use super::super::unavailable::{Exclusion, UNAVAILABLE_TTL};
use super::Provisioner;

impl<K, A> Provisioner<K, A> {
    /// Where exclusions are shared with the other functions; `None` (the default) keeps
    /// them in this process only. Each function's main sets the cluster's
    /// `kube::StateConfigMap`.
    pub fn set_shared_exclusions(&mut self, store: Option<Arc<dyn SharedExclusions>>) {
        self.shared_unavailable = store;
    }

    /// Adds what other functions excluded (and have not seen expire) to this process's.
    pub(super) async fn adopt_shared_exclusions(&mut self, now: SystemTime) {
        let Some(store) = self.shared_unavailable.clone() else {
            return;
        };
        match store.load(now).await {
            Ok(found) => {
                for x in found {
                    self.unavailable.exclude_until(x.exclusion, x.until);
                }
            }
            Err(e) => {
                tracing::warn!(
                    error = e,
                    "reading the shared unavailable offerings failed; planning with this process's own"
                );
            }
        }
    }

    /// Shares `exclusions`, each for [`UNAVAILABLE_TTL`] from `now`.
    pub(super) async fn share_exclusions(&self, exclusions: &[Exclusion], now: SystemTime) {
        let Some(store) = &self.shared_unavailable else {
            return;
        };
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
        if let Err(e) = store.publish(add, now).await {
            tracing::warn!(
                error = e,
                ?exclusions,
                "sharing unavailable offerings failed; only this process keeps them out"
            );
        }
    }
}
