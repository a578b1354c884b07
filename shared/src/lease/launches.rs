//! The launches a Lease carries from holder to holder, so that the next holder's first poll
//! can plan with the listing of instances it asked for while standing by instead of asking
//! EC2 with pods pending.
//!
//! What a holder writes is a bound and a list: every launch made before `since` is in any
//! listing of instances asked for after it (EC2 created it before the listing was asked
//! for); every launch made since is named, with when. A listing asked for after `since`
//! and the named launches it lacks (described by id) are then all the earlier holders'
//! launches. A holder names only what it launched in the last [`WINDOW`] before it writes:
//! older ones are left to the bound, which moves forward with it.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::decide::{LeaseRecord, Step};

/// How far back a holder names its launches: as old as the oldest listing a poll plans
/// with (`provision::owned_listing::MAX_AGE`), so a listing young enough to plan with is
/// asked for after the bound.
pub const WINDOW: Duration = crate::provision::owned_listing::MAX_AGE;

/// See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launches {
    #[serde(with = "as_timestamp")]
    pub since: SystemTime,
    pub named: Vec<Named>,
}

/// One launch a holder made: the instance, and when its CreateFleet was answered.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Named {
    pub id: String,
    #[serde(with = "as_timestamp")]
    pub at: SystemTime,
}

impl Launches {
    /// Nothing named, everything before `since` left to listings.
    pub fn bound(since: SystemTime) -> Launches {
        Launches {
            since,
            named: Vec::new(),
        }
    }

    /// What a holder writes at `now`: the launches it carries (`None` when it knows of
    /// none: then `fallback`, its own acquisition, bounds the earlier holders') with its
    /// own (`mine`) added, those answered before `now - WINDOW` left to the bound.
    pub fn carry(
        carried: Option<&Launches>,
        fallback: SystemTime,
        mine: &[Named],
        now: SystemTime,
    ) -> Launches {
        let carried_since = carried.map_or(fallback, |c| c.since);
        let since = now
            .checked_sub(WINDOW)
            .map_or(carried_since, |recent| recent.max(carried_since));
        let mut named: Vec<Named> = carried
            .into_iter()
            .flat_map(|c| c.named.iter().cloned())
            .chain(mine.iter().cloned())
            .filter(|n| n.at >= since)
            .collect();
        named.sort();
        named.dedup_by(|a, b| a.id == b.id);
        Launches { since, named }
    }

    /// The named instance ids.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.named.iter().map(|n| n.id.as_str())
    }
}

/// The earlier holders' launches for a contender that took the Lease (as read) with `step`
/// at `now`. A Lease its holder released carries them (with none recorded, its release
/// bounds them); a Lease taken over from a holder that stopped renewing may lack its last
/// launches, so only the takeover itself bounds them (the holder checked the Lease before
/// each launch, and it has expired).
pub fn earlier_launches(lease: Option<&LeaseRecord>, step: &Step, now: SystemTime) -> Launches {
    match (step, lease) {
        (Step::Acquire, Some(l)) => match &l.launches {
            Some(launches) if launches.since <= now => launches.clone(),
            Some(_) => Launches::bound(now),
            None => Launches::bound(l.renewed.unwrap_or(now).min(now)),
        },
        _ => Launches::bound(now),
    }
}

/// What a contender writes with `step` at `now`, having read `lease`: the carried launches
/// of a Lease it acquires or renews, none of one it takes over or creates (its own write
/// then bounds the earlier holders').
pub fn to_write(
    lease: Option<&LeaseRecord>,
    step: &Step,
    mine: &[Named],
    now: SystemTime,
) -> Launches {
    let (carried, fallback) = match (step, lease) {
        (Step::Acquire, Some(l)) => (l.launches.as_ref(), l.renewed.unwrap_or(now).min(now)),
        (Step::Renew, Some(l)) => (l.launches.as_ref(), l.acquired.unwrap_or(now)),
        _ => (None, now),
    };
    Launches::carry(carried, fallback, mine, now)
}

/// Times as RFC 3339 text in the annotation.
mod as_timestamp {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        let t = jiff::Timestamp::try_from(*t).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&t.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(d)?;
        let t: jiff::Timestamp = text.parse().map_err(serde::de::Error::custom)?;
        Ok(SystemTime::from(t))
    }
}

#[cfg(test)]
mod tests;
