//! This cluster's instances as the acting provisioner last listed them, so that a poll
//! with pods pending need not wait for DescribeInstances.
//!
//! A launching poll needs the instances on their way (launched, no Node yet) to count them
//! as capacity. Listing every owned instance on every such poll puts DescribeInstances on
//! each pending pod's path, and its time grows with the fleet (EC2 pages 1,000 instances at
//! a time; in the local world moto takes about a second at 200). So the holder lists
//! between polls and a poll uses that listing while it is young and certain to hold every
//! launch that could have happened without this container knowing:
//! - its own launches since the listing are in [`super::unseen_launches`]' memory, merged
//!   in as EC2 not listing them yet;
//! - the previous holder's launches all came before this container took the Lease (each
//!   is checked against the Lease right before CreateFleet), so a listing asked for after
//!   that holds them;
//! - a replacement the interruption function or the sweeper launched is recorded on the
//!   node it replaces (`nodewright.io/replacement`) before that node's pods move; a
//!   recorded id the listing lacks is described by id before the poll plans.
//!
//! What the listing can miss is bounded by [`MAX_AGE`]: an instance terminated since (it
//! counts as on its way until the next listing, so pods may wait on it that long) and the
//! sweeper's capacity-window launches (pods pending then may get a node of their own that
//! consolidation takes back later). Outside a Lease turn (the interruption function's and
//! the sweeper's replacements, a provisioner without a Lease) every read lists anew.

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
            // Asked for before this turn began: the previous holder's last launches may
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
