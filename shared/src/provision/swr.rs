//! Stale-while-revalidate: one cached answer from AWS (the instance catalog, a class's
//! subnets, security groups or AMIs, the on-demand prices) with when it was fetched and how
//! its refreshes have been failing. How it ages is data, a [`Policy`] per kind of answer;
//! the decisions ([`Swr::step`], [`Swr::refresh_due`]) are the same for every kind.
//!
//! A poll with pods pending never waits for AWS while a last good answer exists (it uses
//! it stale, up to the policy's bound); a warm-up, off any pod's path, asks again ahead of
//! the TTL. A refresh that fails keeps the last good answer and backs off, so an endpoint
//! that times out is not asked again by every poll.

use std::time::{Duration, SystemTime};

/// Who asks for the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A poll with pods pending: latency first.
    Poll,
    /// A refresh ahead of need, off any pod's path.
    WarmUp,
}

/// What to do with the answer at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Fresh enough: use it.
    Use,
    /// Use it past its TTL; `warn` when older than the policy's `warn_after`.
    UseStale { warn: bool },
    /// Ask AWS now (and keep the last good answer if that fails).
    Fetch,
}

/// How long after failures the next refresh may be tried: `first`, doubling with each
/// failure in a row, never more than `max` (equal to `first` for a fixed wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackOff {
    pub first: Duration,
    pub max: Duration,
}

impl BackOff {
    /// The wait after `consecutive` failures in a row (1 = the first).
    pub fn after(&self, consecutive: u32) -> Duration {
        let doublings = consecutive.saturating_sub(1).min(16);
        self.first
            .saturating_mul(1 << doublings)
            .min(self.max.max(self.first))
    }

    /// The longest wait: a retry time further away than this means the clock went back.
    fn longest(&self) -> Duration {
        self.max.max(self.first)
    }
}

/// How one kind of answer ages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// A poll uses an answer younger than this as it is.
    pub ttl: Duration,
    /// A warm-up asks again for an answer this old (before the TTL, so the polls after it
    /// find it fresh).
    pub refresh_after: Duration,
    /// A poll uses an answer past its TTL up to this age; past it, a poll asks again
    /// unless a failure is backing off.
    pub max_staleness: Duration,
    /// A stale answer this old is used with a warning; `None`: never warned about.
    pub warn_after: Option<Duration>,
    pub back_off: BackOff,
}

impl Policy {
    /// The step for `purpose` given the answer's age (`None`: there is none) and whether
    /// a failed refresh is backing off.
    pub fn step(&self, purpose: Purpose, age: Option<Duration>, backing_off: bool) -> Step {
        let Some(age) = age else {
            // Nothing to use: whoever asks fetches, back-off or not.
            return Step::Fetch;
        };
        let stale = Step::UseStale {
            warn: self.warn_after.is_some_and(|w| age >= w),
        };
        match purpose {
            Purpose::Poll if age < self.ttl => Step::Use,
            Purpose::Poll if age >= self.max_staleness && !backing_off => Step::Fetch,
            Purpose::Poll => stale,
            Purpose::WarmUp if age < self.refresh_after => Step::Use,
            Purpose::WarmUp if backing_off => {
                if age < self.ttl {
                    Step::Use
                } else {
                    stale
                }
            }
            Purpose::WarmUp => Step::Fetch,
        }
    }
}

/// The refreshes that failed in a row, and when the next may be tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Failures {
    consecutive: u32,
    retry_at: SystemTime,
}

/// One cached answer, kept for a `key` (what it answers: a class's selector terms; an
/// answer for another key is no answer).
#[derive(Debug, Clone)]
pub struct Swr<V> {
    policy: Policy,
    answer: Option<Answer<V>>,
    failures: Option<Failures>,
}

#[derive(Debug, Clone)]
struct Answer<V> {
    key: String,
    at: SystemTime,
    value: V,
}

impl<V> Swr<V> {
    pub fn new(policy: Policy) -> Self {
        Swr {
            policy,
            answer: None,
            failures: None,
        }
    }

    /// Starts from `value` as if fetched at `at` (a bundled table: an old answer).
    pub fn seeded(policy: Policy, value: V, at: SystemTime) -> Self {
        let mut swr = Swr::new(policy);
        swr.store(String::new(), value, at);
        swr
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The answer for `key`, whatever its age.
    pub fn value(&self, key: &str) -> Option<&V> {
        self.answer
            .as_ref()
            .filter(|a| a.key == key)
            .map(|a| &a.value)
    }

    /// The answer kept, whatever its key and age, to correct in place (what this
    /// container did since it was fetched).
    pub fn value_mut(&mut self) -> Option<&mut V> {
        self.answer.as_mut().map(|a| &mut a.value)
    }

    /// When the answer for `key` was fetched.
    pub fn fetched_at(&self, key: &str) -> Option<SystemTime> {
        self.answer.as_ref().filter(|a| a.key == key).map(|a| a.at)
    }

    /// How old the answer for `key` is at `now` (a clock that went back: just expired,
    /// an age that cannot be trusted).
    pub fn age(&self, key: &str, now: SystemTime) -> Option<Duration> {
        let at = self.fetched_at(key)?;
        Some(now.duration_since(at).unwrap_or(self.policy.ttl))
    }

    /// When the next refresh may be tried, while a failure's back-off runs.
    pub fn backing_off(&self, now: SystemTime) -> Option<SystemTime> {
        let f = self.failures?;
        let left = f.retry_at.duration_since(now).ok()?;
        (!left.is_zero() && left <= self.policy.back_off.longest()).then_some(f.retry_at)
    }

    /// What `purpose` does at `now` with the answer for `key`.
    pub fn step(&self, purpose: Purpose, key: &str, now: SystemTime) -> Step {
        self.policy
            .step(purpose, self.age(key, now), self.backing_off(now).is_some())
    }

    /// The answer for `key` when `purpose` may use it at `now` without asking AWS.
    pub fn usable(&self, purpose: Purpose, key: &str, now: SystemTime) -> Option<&V> {
        match self.step(purpose, key, now) {
            Step::Fetch => None,
            Step::Use | Step::UseStale { .. } => self.value(key),
        }
    }

    /// Whether a warm-up at `now` would ask AWS again for an answer it has: past
    /// `refresh_after` and no failure backing off. Nothing kept, nothing to refresh.
    pub fn refresh_due(&self, now: SystemTime) -> bool {
        let Some(a) = &self.answer else {
            return false;
        };
        self.step(Purpose::WarmUp, &a.key.clone(), now) == Step::Fetch
    }

    /// Keeps `value`, fetched at `at` for `key`; failures are forgotten.
    pub fn store(&mut self, key: String, value: V, at: SystemTime) {
        self.answer = Some(Answer { key, at, value });
        self.failures = None;
    }

    /// A refresh failed at `now`: the answer kept stays, and the next refresh waits.
    pub fn failed(&mut self, now: SystemTime) {
        let consecutive = self.failures.map_or(0, |f| f.consecutive) + 1;
        self.failures = Some(Failures {
            consecutive,
            retry_at: now + self.policy.back_off.after(consecutive),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy {
        ttl: Duration::from_secs(60),
        refresh_after: Duration::from_secs(30),
        max_staleness: Duration::from_secs(600),
        warn_after: Some(Duration::from_secs(180)),
        back_off: BackOff {
            first: Duration::from_secs(10),
            max: Duration::from_secs(40),
        },
    };

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
    }

    #[test]
    fn an_answer_ages_from_fresh_to_stale_to_asked_again_as_its_policy_says() {
        use Purpose::{Poll, WarmUp};
        let mut swr = Swr::new(POLICY);
        swr.store("terms".into(), 7, at(0));
        // (case, purpose, seconds after the fetch, step)
        let cases = [
            ("fresh for a poll", Poll, 59, Step::Use),
            (
                "stale for a poll past the TTL",
                Poll,
                60,
                Step::UseStale { warn: false },
            ),
            (
                "stale with a warning",
                Poll,
                180,
                Step::UseStale { warn: true },
            ),
            ("past the bound a poll asks again", Poll, 600, Step::Fetch),
            ("a warm-up keeps a young answer", WarmUp, 29, Step::Use),
            ("a warm-up asks ahead of the TTL", WarmUp, 30, Step::Fetch),
        ];
        for (case, purpose, after, want) in cases {
            assert_eq!(swr.step(purpose, "terms", at(after)), want, "{case}");
        }
        assert_eq!(
            swr.step(Poll, "other terms", at(1)),
            Step::Fetch,
            "another key misses"
        );
        assert_eq!(swr.usable(Poll, "terms", at(599)), Some(&7));
        assert_eq!(swr.usable(Poll, "terms", at(600)), None);
    }

    #[test]
    fn failures_back_off_doubling_to_the_most_and_a_success_forgets_them() {
        let mut swr = Swr::new(POLICY);
        swr.store(String::new(), (), at(0));
        // (failure at, not due before, due at)
        let cases = [(30, 39, 40), (40, 59, 60), (60, 99, 100), (100, 139, 140)];
        for (failed, before, due) in cases {
            swr.failed(at(failed));
            assert!(
                !swr.refresh_due(at(before)),
                "failed at {failed}, +{before}"
            );
            assert!(swr.refresh_due(at(due)), "failed at {failed}, due at {due}");
        }
        assert_eq!(
            swr.step(Purpose::Poll, "", at(700)),
            Step::Fetch,
            "past the bound and not backing off: asked again"
        );
        swr.failed(at(700));
        assert_eq!(
            swr.step(Purpose::Poll, "", at(701)),
            Step::UseStale { warn: true },
            "backing off: the last good answer"
        );
        swr.store(String::new(), (), at(702));
        assert_eq!(swr.backing_off(at(703)), None);
    }

    #[test]
    fn nothing_kept_is_fetched_by_whoever_asks_but_is_nothing_to_refresh() {
        let mut swr: Swr<()> = Swr::new(POLICY);
        assert_eq!(swr.step(Purpose::Poll, "", at(0)), Step::Fetch);
        assert_eq!(swr.step(Purpose::WarmUp, "", at(0)), Step::Fetch);
        assert!(!swr.refresh_due(at(0)));
        swr.failed(at(0));
        assert_eq!(swr.step(Purpose::Poll, "", at(1)), Step::Fetch);
    }

    #[test]
    fn a_clock_that_went_back_makes_the_answer_just_expired_and_ends_the_back_off() {
        let mut swr = Swr::new(POLICY);
        swr.store(String::new(), (), at(100));
        assert_eq!(
            swr.step(Purpose::Poll, "", at(50)),
            Step::UseStale { warn: false }
        );
        swr.failed(at(100));
        assert!(
            swr.backing_off(at(0)).is_none(),
            "a retry further than the longest wait"
        );
    }
}
