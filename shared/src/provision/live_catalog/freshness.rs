//! When the catalog asks EC2 again, and who waits for it: stale-while-revalidate.
//!
//! A poll with pods pending never waits for DescribeInstanceTypes while a last good
//! catalog exists: it solves with that catalog, however old (up to [`MAX_STALENESS`]), and
//! the refresh happens off the pod's path (a standby invocation's warm-up, a holder's idle
//! moments between polls). Only a container with no catalog at all builds one inline.
//!
//! A refresh that fails is remembered: the next attempt waits [`retry_after`] (30 s,
//! doubling per consecutive failure, up to [`CATALOG_TTL`]). Without it, an EC2 endpoint
//! that times out (10 s per attempt) would be asked again by every poll once the catalog
//! expired, and each pending pod would pay the timeout.
//!
//! The catalog is one [`crate::provision::swr::Swr`] with [`policy`]; the rules below are
//! that policy's.
//!
//! The bound: a catalog older than [`STALE_WARN_AFTER`] is used with a warning (spot
//! prices and offerings age: a removed offering costs a launch that fails over to the next
//! type, see `unavailable`), and past [`MAX_STALENESS`] a poll refreshes inline again
//! whenever it is not backing off, since by then refreshing off the path has failed for
//! an hour and a catalog that old is no longer worth a launch's lower latency.

use std::time::Duration;

use super::CATALOG_TTL;
use crate::provision::swr::{BackOff, Policy};
pub use crate::provision::swr::{Purpose, Step};

/// Past this age a stale catalog is used with a warning.
pub const STALE_WARN_AFTER: Duration = Duration::from_secs(3 * CATALOG_TTL.as_secs());
/// Past this age a poll refreshes inline (when not backing off) instead of using it.
pub const MAX_STALENESS: Duration = Duration::from_secs(12 * CATALOG_TTL.as_secs());
/// The wait after the first failed refresh; it doubles with each consecutive failure.
pub const FIRST_RETRY_AFTER: Duration = Duration::from_secs(30);

/// How a catalog whose data is fresh for `ttl` ages: a warm-up refreshes it past half its
/// TTL, a poll uses it stale (warned past [`STALE_WARN_AFTER`]) up to [`MAX_STALENESS`],
/// and a failed refresh waits from [`FIRST_RETRY_AFTER`] doubling up to the TTL.
pub fn policy(ttl: Duration) -> Policy {
    Policy {
        ttl,
        refresh_after: ttl / 2,
        max_staleness: MAX_STALENESS,
        warn_after: Some(STALE_WARN_AFTER),
        back_off: BackOff {
            first: FIRST_RETRY_AFTER,
            max: ttl.max(FIRST_RETRY_AFTER),
        },
    }
}

/// The step for `purpose`, given the age of the last good data (`None`: there is none)
/// and whether a failed refresh's back-off is still running.
pub fn step(purpose: Purpose, age: Option<Duration>, backing_off: bool, ttl: Duration) -> Step {
    policy(ttl).step(purpose, age, backing_off)
}

/// How long to wait before the next refresh after `consecutive` failed ones (1 = the
/// first): 30 s, 60 s, 120 s, ... up to `ttl`.
pub fn retry_after(consecutive: u32, ttl: Duration) -> Duration {
    policy(ttl).back_off.after(consecutive)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = CATALOG_TTL;

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    #[test]
    fn a_poll_never_waits_for_ec2_while_a_last_good_catalog_exists_and_is_under_the_bound() {
        use Purpose::Poll;
        let cases: [(&str, Option<Duration>, bool, Step); 9] = [
            ("no catalog: built inline", None, false, Step::Fetch),
            (
                "no catalog while backing off: still built",
                None,
                true,
                Step::Fetch,
            ),
            ("fresh", secs(0), false, Step::Use),
            ("one second short of the TTL", secs(299), false, Step::Use),
            (
                "at the TTL: stale, no EC2 call",
                secs(300),
                false,
                Step::UseStale { warn: false },
            ),
            (
                "past 3 TTLs: stale, with a warning",
                secs(900),
                false,
                Step::UseStale { warn: true },
            ),
            (
                "just short of the bound",
                secs(3599),
                false,
                Step::UseStale { warn: true },
            ),
            (
                "past the bound: refreshed inline",
                secs(3600),
                false,
                Step::Fetch,
            ),
            (
                "past the bound while backing off: stale",
                secs(3600),
                true,
                Step::UseStale { warn: true },
            ),
        ];
        for (what, age, backing_off, want) in cases {
            assert_eq!(step(Poll, age, backing_off, TTL), want, "{what}");
        }
    }

    #[test]
    fn a_warm_up_refreshes_past_half_the_ttl_unless_a_failure_is_backing_off() {
        use Purpose::WarmUp;
        let cases: [(&str, Option<Duration>, bool, Step); 7] = [
            (
                "no catalog: a cold container's first load",
                None,
                false,
                Step::Fetch,
            ),
            (
                "no catalog while backing off: still loaded",
                None,
                true,
                Step::Fetch,
            ),
            ("younger than half the TTL", secs(149), false, Step::Use),
            (
                "half the TTL: refreshed ahead of the polls",
                secs(150),
                false,
                Step::Fetch,
            ),
            (
                "half the TTL, backing off: kept",
                secs(150),
                true,
                Step::Use,
            ),
            (
                "past the TTL, backing off: kept stale",
                secs(300),
                true,
                Step::UseStale { warn: false },
            ),
            (
                "long past the TTL, not backing off",
                secs(3600),
                false,
                Step::Fetch,
            ),
        ];
        for (what, age, backing_off, want) in cases {
            assert_eq!(step(WarmUp, age, backing_off, TTL), want, "{what}");
        }
    }

    #[test]
    fn the_back_off_doubles_from_thirty_seconds_up_to_the_ttl() {
        let cases: [(u32, u64); 6] = [(0, 30), (1, 30), (2, 60), (3, 120), (4, 240), (5, 300)];
        for (consecutive, want) in cases {
            assert_eq!(
                retry_after(consecutive, TTL),
                Duration::from_secs(want),
                "after {consecutive} failures"
            );
        }
        assert_eq!(retry_after(u32::MAX, TTL), TTL, "no overflow");
    }
}
