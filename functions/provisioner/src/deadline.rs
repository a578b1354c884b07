//! When an invocation stops starting work: a margin before the Lambda deadline (and never
//! past `INVOCATION_BUDGET`), so what it starts ends before Lambda kills it. Times are the
//! invocation's clock's (`nodewright::clock`): Lambda's deadline is milliseconds since the
//! epoch, compared with the clock's now.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// `DEADLINE_MARGIN`: no poll starts, and no launch is sent, within this of the
/// invocation's deadline. It must exceed the AWS SDK's operation timeout
/// ([`sdk_timeouts`]), so a CreateFleet sent just before the margin gets its answer
/// (or gives up) before the deadline; 15 s is the 10 s operation timeout plus room to
/// log, release the Lease and answer the Runtime API.
pub const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_secs(15);

/// The AWS SDK's timeouts for a given margin: one operation (all its retries) two thirds
/// of it, one attempt a third (so a stuck attempt leaves time for one retry). With the
/// default margin: 10 s and 5 s, far above what EC2 takes to answer a CreateFleet of the
/// `instant` type (about 1–3 s) and the other calls of a poll.
pub fn sdk_timeouts(margin: Duration) -> (Duration, Duration) {
    (margin * 2 / 3, margin / 3)
}

/// The Lambda context's deadline; `None` when the runtime gave none (0, as in-process
/// tests build their context): then only the budget bounds the invocation.
pub fn deadline_of(deadline_ms: u64) -> Option<Timestamp> {
    let ms = i64::try_from(deadline_ms).ok().filter(|ms| *ms > 0)?;
    Timestamp::from_millisecond(ms).ok()
}

/// The moment work (a poll, a launch) stops starting: `margin` before the deadline; `None`
/// without a deadline.
pub fn launch_by(deadline: Option<Timestamp>, margin: Duration) -> Option<Timestamp> {
    let margin = SignedDuration::try_from(margin).ok()?;
    Some(deadline?.checked_sub(margin).unwrap_or(Timestamp::MIN))
}

/// May work (a poll, a launch) start now? Only while more than `margin` is left before
/// the deadline; always when there is none.
pub fn may_start(now: Timestamp, deadline: Option<Timestamp>, margin: Duration) -> bool {
    match launch_by(deadline, margin) {
        None => deadline.is_none(),
        Some(by) => now < by,
    }
}

/// How long from `now` the invocation keeps working: until its budget is spent or the
/// margin before its deadline begins, whichever comes first.
pub fn working_time(
    now: Timestamp,
    budget: Duration,
    deadline: Option<Timestamp>,
    margin: Duration,
) -> Duration {
    let before_deadline =
        launch_by(deadline, margin).map_or(budget, |stop| nodewright::clock::until(now, stop));
    budget.min(before_deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_700_000_000_000 + ms).unwrap()
    }

    const MARGIN: Duration = Duration::from_secs(15);

    #[test]
    fn work_starts_only_while_more_than_the_margin_is_left() {
        let cases = [
            (
                "no deadline given: the budget alone bounds it",
                0,
                None,
                true,
            ),
            ("a minute left", 0, Some(at(60_000)), true),
            ("just over the margin left", 44_999, Some(at(60_000)), true),
            ("exactly the margin left", 45_000, Some(at(60_000)), false),
            ("inside the margin", 50_000, Some(at(60_000)), false),
            ("past the deadline", 61_000, Some(at(60_000)), false),
        ];
        for (case, now, deadline, want) in cases {
            assert_eq!(may_start(at(now), deadline, MARGIN), want, "{case}");
        }
    }

    #[test]
    fn an_invocation_works_until_its_budget_or_the_margin_before_its_deadline() {
        let secs = Duration::from_secs;
        let cases = [
            ("no deadline: the budget", None, secs(50), secs(50)),
            (
                "a far deadline: the budget caps it",
                Some(at(900_000)),
                secs(50),
                secs(50),
            ),
            (
                "a 75 s timeout: up to 15 s before it",
                Some(at(75_000)),
                secs(840),
                secs(60),
            ),
            (
                "a deadline inside the margin: nothing",
                Some(at(10_000)),
                secs(50),
                secs(0),
            ),
            (
                "a deadline already past: nothing",
                Some(at(0)),
                secs(50),
                secs(0),
            ),
        ];
        for (case, deadline, budget, want) in cases {
            assert_eq!(
                working_time(at(0), budget, deadline, MARGIN),
                want,
                "{case}"
            );
        }
    }

    #[test]
    fn the_runtimes_deadline_header_is_read_and_zero_means_none() {
        assert_eq!(deadline_of(0), None);
        assert_eq!(
            deadline_of(1_700_000_060_000),
            Some(at(60_000)),
            "milliseconds since the epoch"
        );
    }

    #[test]
    fn the_sdk_gives_up_on_an_operation_well_inside_the_margin() {
        let (operation, attempt) = sdk_timeouts(DEFAULT_DEADLINE_MARGIN);
        assert_eq!(operation, Duration::from_secs(10));
        assert_eq!(attempt, Duration::from_secs(5));
        assert!(operation < DEFAULT_DEADLINE_MARGIN);
    }
}
