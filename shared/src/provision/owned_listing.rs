//! This cluster's instances as a listing kept between polls, so that a poll with pods
//! pending need not wait for DescribeInstances; the pure rules of when a poll may plan with
//! it and when to list again. [`super::fleet_view`] owns the listing and completes it.
//!
//! A launching poll needs the instances on their way (launched, no Node yet) to count them
//! as capacity. Listing every owned instance on every such poll puts DescribeInstances on
//! each pending pod's path, and its time grows with the fleet (EC2 pages 1,000 instances at
//! a time; in the local world moto takes about a second at 200). So the holder lists
//! between polls (and an invocation standing by, for the turn it may take) and a poll uses
//! that listing while it is young and certain to hold every launch that could have
//! happened without this container knowing:
//! - its own launches since the listing are in [`super::unseen_launches`]' memory, merged
//!   in as EC2 not listing them yet;
//! - the earlier holders' launches were made before the turn's bound (`Turn::since`, which
//!   the Lease carries when its holder released it, else the moment the turn began; each
//!   holder checks the Lease before CreateFleet), so a listing asked for after it holds
//!   them, or they are among the launches the Lease names (`Turn::named`);
//! - the launches of the interruption function and the sweeper (replacements, capacity
//!   windows) are published in the `nodewright-state` ConfigMap, and a replacement is also
//!   recorded on the node it replaces (`nodewright.io/replacement`) before that node's pods
//!   move; an id the listing lacks is described by id before the poll plans.
//!
//! What the listing can be behind on is bounded by [`MAX_AGE`]: an instance terminated
//! since counts as on its way until the next listing, so pods may wait on it that long.
//! Outside a Lease turn (the interruption function's and the sweeper's replacements, a
//! provisioner without a Lease) every read lists anew.

use std::time::{Duration, SystemTime};

use crate::aws::OwnedInstance;

/// How often the holder lists again between polls: with polls every five seconds, a
/// listing is at most about fifteen seconds old when a poll plans with it.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// The oldest listing a poll plans with; an older one is listed again on the poll's path.
pub const MAX_AGE: Duration = Duration::from_secs(20);

/// One DescribeInstances of this cluster's live instances, and when it was asked for (a
/// launch before that moment is in it, EC2's eventual consistency aside).
#[derive(Debug, Clone)]
pub struct OwnedListing {
    pub instances: Vec<OwnedInstance>,
    pub asked_at: SystemTime,
}

impl OwnedListing {
    /// How old it is at `now` (a clock that went backwards: new).
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.asked_at).unwrap_or_default()
    }
}

/// Whether a poll at `now` may plan with `listing`, this container acting since
/// `acting_since` (`None`: not in a Lease turn, so never).
pub fn usable(listing: &OwnedListing, acting_since: Option<SystemTime>, now: SystemTime) -> bool {
    let Some(since) = acting_since else {
        return false;
    };
    listing.asked_at >= since && listing.age(now) <= MAX_AGE
}

/// Whether the holder should list again between polls at `now`.
pub fn refresh_due(
    listing: Option<&OwnedListing>,
    acting_since: Option<SystemTime>,
    now: SystemTime,
) -> bool {
    match (listing, acting_since) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(l), Some(since)) => l.asked_at < since || l.age(now) >= REFRESH_EVERY,
    }
}

/// Whether an invocation standing by should list again at `now`: the listing it keeps is
/// the one its first poll as holder plans with, when asked for after the bound the Lease
/// carries (see `lease::launches`).
pub fn standby_refresh_due(listing: Option<&OwnedListing>, now: SystemTime) -> bool {
    listing.is_none_or(|l| l.age(now) >= REFRESH_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn listing(asked: u64) -> OwnedListing {
        OwnedListing {
            instances: vec![],
            asked_at: at(asked),
        }
    }

    #[test]
    fn a_poll_plans_with_a_listing_only_if_it_is_young_and_asked_for_in_this_turn() {
        // (asked at, acting since, now, usable)
        let cases = [
            (100, Some(90), 105, true),
            (100, Some(90), 120, true),
            // Older than MAX_AGE.
            (100, Some(90), 121, false),
            // Asked for before this turn's bound: the previous holder's last launches may
            // be missing.
            (100, Some(101), 102, false),
            (100, Some(100), 102, true),
            // Not in a Lease turn: every read lists.
            (100, None, 101, false),
        ];
        for (asked, since, now, want) in cases {
            assert_eq!(
                usable(&listing(asked), since.map(at), at(now)),
                want,
                "asked {asked}, since {since:?}, now {now}"
            );
        }
    }

    #[test]
    fn an_invocation_standing_by_lists_as_often_as_a_holder_whatever_the_turn() {
        // (listing asked at, now, due)
        let cases = [
            (None, 100, true),
            (Some(100), 109, false),
            (Some(100), 110, true),
        ];
        for (asked, now, want) in cases {
            let l = asked.map(listing);
            assert_eq!(
                standby_refresh_due(l.as_ref(), at(now)),
                want,
                "asked {asked:?}, now {now}"
            );
        }
    }

    #[test]
    fn the_holder_lists_again_every_few_seconds_and_at_once_when_its_turn_begins() {
        // (listing asked at, acting since, now, due)
        let cases = [
            (None, Some(100), 100, true),
            (Some(100), Some(90), 109, false),
            (Some(100), Some(90), 110, true),
            (Some(100), Some(101), 101, true),
            (None, None, 100, false),
            (Some(100), None, 200, false),
        ];
        for (asked, since, now, want) in cases {
            let l = asked.map(listing);
            assert_eq!(
                refresh_due(l.as_ref(), since.map(at), at(now)),
                want,
                "asked {asked:?}, since {since:?}, now {now}"
            );
        }
    }
}
