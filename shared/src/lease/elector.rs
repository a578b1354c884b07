//! One contender for one Lease: read it, decide, write; a write that conflicts means
//! another contender won the race, so read again and decide again.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::decide::{LeaseRecord, Step, decide};
use super::launches::{Launches, Named, earlier_launches, to_write};
use super::store::{LeaseError, LeaseStore};

/// Reads and writes per call to [`Elector::hold`]: a conflict is followed by one more read,
/// which then sees the winner's write; a third conflict in a row means the Lease keeps
/// changing under us, an error rather than a loop.
const WRITE_ATTEMPTS: u32 = 3;

/// Where this contender stands after [`Elector::hold`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// I hold the Lease until `until` (as written, measured from the `now` passed in);
    /// `earlier`: the earlier holders' launches as far as a listing of instances needs them
    /// (see [`super::launches`]).
    Held {
        until: SystemTime,
        how: Step,
        earlier: Launches,
    },
    /// `holder` does, until `until` unless it renews or releases first.
    Waiting { holder: String, until: SystemTime },
}

impl Hold {
    pub fn is_held(&self) -> bool {
        matches!(self, Hold::Held { .. })
    }
}

pub struct Elector<S> {
    store: S,
    name: String,
    identity: String,
    duration: Duration,
    /// The launches this contender made while holding, written with its next renewal or
    /// release (see [`LeaseRecord::launches`]).
    launched: Mutex<Vec<Named>>,
}

impl<S: LeaseStore> Elector<S> {
    /// A contender named `identity` for the Lease `name`, claiming it for `duration` at
    /// each renewal.
    pub fn new(store: S, name: &str, identity: &str, duration: Duration) -> Self {
        Elector {
            store,
            name: name.to_string(),
            identity: identity.to_string(),
            duration,
            launched: Mutex::new(Vec::new()),
        }
    }

    /// Notes that this holder launched `instances`, answered by `at`: the Lease carries
    /// them from the next write on, so whoever takes it next knows of them.
    pub fn note_launches(&self, instances: &[String], at: SystemTime) {
        if let Ok(mut l) = self.launched.lock() {
            l.extend(instances.iter().map(|id| Named { id: id.clone(), at }));
        }
    }

    fn mine(&self) -> Vec<Named> {
        self.launched.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// Acquires, renews or takes over the Lease if it is mine to have, else says who holds
    /// it. Always reads first, so a holder that was frozen learns here that it lost.
    pub async fn hold(&self, now: SystemTime) -> Result<Hold, LeaseError> {
        for _ in 0..WRITE_ATTEMPTS {
            let read = self.store.read(&self.name).await?;
            let current = read.as_ref().map(|v| &v.record);
            let step = decide(current, &self.identity, now);
            let launches = to_write(current, &step, &self.mine(), now);
            let mine = |acquired: Option<SystemTime>, transitions: i32| LeaseRecord {
                holder: Some(self.identity.clone()),
                renewed: Some(now),
                acquired,
                duration: Some(self.duration),
                transitions,
                launches: Some(launches.clone()),
            };
            let written = match (&step, &read) {
                (Step::Wait { holder, until }, _) => {
                    return Ok(Hold::Waiting {
                        holder: holder.clone(),
                        until: *until,
                    });
                }
                (Step::Create, _) | (_, None) => {
                    self.store.create(&self.name, &mine(Some(now), 0)).await
                }
                (Step::Renew, Some(v)) => {
                    let record = mine(v.record.acquired, v.record.transitions);
                    self.store.replace(&self.name, &record, &v.version).await
                }
                (Step::Acquire | Step::TakeOver { .. }, Some(v)) => {
                    let record = mine(Some(now), v.record.transitions.saturating_add(1));
                    self.store.replace(&self.name, &record, &v.version).await
                }
            };
            match written {
                Ok(()) => {
                    let earlier = earlier_launches(current, &step, now);
                    return Ok(Hold::Held {
                        until: now + self.duration,
                        how: step,
                        earlier,
                    });
                }
                Err(LeaseError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(LeaseError::Contended {
            name: self.name.clone(),
            attempts: WRITE_ATTEMPTS,
        })
    }

    /// Gives the Lease up if I still hold it, so the next contender takes it at once
    /// instead of waiting for it to expire. True when it was mine and is now released;
    /// false when someone else holds it (nothing to release).
    pub async fn release(&self, now: SystemTime) -> Result<bool, LeaseError> {
        let Some(read) = self.store.read(&self.name).await? else {
            return Ok(false);
        };
        if read.record.holder.as_deref() != Some(self.identity.as_str()) {
            return Ok(false);
        }
        let released = LeaseRecord {
            holder: None,
            renewed: Some(now),
            launches: Some(to_write(
                Some(&read.record),
                &Step::Renew,
                &self.mine(),
                now,
            )),
            ..read.record
        };
        match self
            .store
            .replace(&self.name, &released, &read.version)
            .await
        {
            Ok(()) => Ok(true),
            // Taken over since the read: it is no longer mine to release.
            Err(LeaseError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
