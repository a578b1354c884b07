//! Time, injected: every "now" a function asks for and every wait it makes go through a
//! [`Clock`], so tests move time instead of waiting for it and the local world's soak can
//! run a simulated day faster than a real one.
//!
//! In AWS the clock is [`SystemClock`]. The local world may set [`CLOCK_VARIABLE`] to run a
//! function binary on its accelerated time ([`ScaledClock`]); nothing in a deployed stack
//! sets it. What stays on real time whatever the clock: the AWS SDK's and the Kubernetes
//! client's own timeouts and retry back-off, which bound one call, not the work.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;

    /// Waits `d` of this clock's time.
    fn sleep(&self, d: Duration) -> tokio::time::Sleep {
        tokio::time::sleep(d)
    }

    /// Waits until `at` on this clock (at once when it has passed).
    fn sleep_until(&self, at: Timestamp) -> tokio::time::Sleep {
        self.sleep(until(self.now(), at))
    }

    /// Waits until `at` with nothing to do meanwhile but watch for events (a handler
    /// between polls), as opposed to a wait that bounds work in progress. The same wait as
    /// [`Clock::sleep_until`] for every clock but [`SkippingClock`], which skips it.
    fn idle_until(&self, at: Timestamp) -> tokio::time::Sleep {
        self.sleep_until(at)
    }
}

/// The time from `now` to `at`, zero when `at` has passed.
pub fn until(now: Timestamp, at: Timestamp) -> Duration {
    Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO)
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The environment variable that selects a function's clock: unset in AWS (the system
/// clock); `scaled <speed> <origin>` in the local world (see [`ScaledClock`]).
pub const CLOCK_VARIABLE: &str = "NODEWRIGHT_CLOCK";

/// The local world's accelerated time: from `origin` on, `speed` seconds pass for each
/// wall-clock second (`now = origin + speed × (wall − origin)`), and a wait of `d` takes
/// `d / speed` of wall-clock time. Every process given the same origin and speed reads the
/// same time without talking to the others, so the world's control plane, its queue and
/// each function binary agree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaledClock {
    pub origin: Timestamp,
    pub speed: f64,
}

#[derive(Debug, thiserror::Error)]
#[error("{CLOCK_VARIABLE}={value:?}: {why} (expected `scaled <speed> <RFC 3339 origin>`)")]
pub struct ClockSettingError {
    value: String,
    why: &'static str,
}

impl ScaledClock {
    /// Reads `scaled <speed> <origin>`, the value [`ScaledClock::setting`] writes.
    pub fn parse(value: &str) -> Result<ScaledClock, ClockSettingError> {
        let err = |why| ClockSettingError {
            value: value.to_string(),
            why,
        };
        let mut words = value.split_whitespace();
        if words.next() != Some("scaled") {
            return Err(err("the only clock that can be chosen is `scaled`"));
        }
        let speed: f64 = words
            .next()
            .ok_or_else(|| err("no speed"))?
            .parse()
            .map_err(|_| err("the speed is not a number"))?;
        if !(speed.is_finite() && speed > 0.0) {
            return Err(err("the speed must be a positive number"));
        }
        let origin = words
            .next()
            .ok_or_else(|| err("no origin"))?
            .parse()
            .map_err(|_| err("the origin is not an RFC 3339 timestamp"))?;
        if words.next().is_some() {
            return Err(err("more than a speed and an origin"));
        }
        Ok(ScaledClock { origin, speed })
    }

    /// The value of [`CLOCK_VARIABLE`] that selects this clock.
    pub fn setting(&self) -> String {
        format!("scaled {} {}", self.speed, self.origin)
    }

    /// This clock's time at wall-clock time `wall`.
    pub fn at(&self, wall: Timestamp) -> Timestamp {
        let elapsed = wall.duration_since(self.origin).as_secs_f64() * self.speed;
        self.origin
            .checked_add(SignedDuration::from_secs_f64(elapsed))
            .unwrap_or(wall)
    }

    /// The wall-clock time at which this clock reads `at`.
    pub fn wall(&self, at: Timestamp) -> Timestamp {
        let elapsed = at.duration_since(self.origin).as_secs_f64() / self.speed;
        self.origin
            .checked_add(SignedDuration::from_secs_f64(elapsed))
            .unwrap_or(at)
    }
}

impl Clock for ScaledClock {
    fn now(&self) -> Timestamp {
        self.at(Timestamp::now())
    }

    fn sleep(&self, d: Duration) -> tokio::time::Sleep {
        tokio::time::sleep(d.div_f64(self.speed))
    }
}

/// For tests of a handler against a real world (moto, the simulated cluster): the system
/// clock, except that an idle wait ([`Clock::idle_until`]) returns at once with this
/// clock moved on to its end. Work takes the time it takes and counts as it does on the
/// system clock (the AWS SDK's and the Kubernetes client's own timeouts stay real); only
/// waiting for nothing is skipped, so a handler's budget passes as fast as its work.
/// Events that would have come during a skipped wait (a pod turning pending) are seen by
/// the next poll instead.
#[derive(Debug, Default)]
pub struct SkippingClock {
    skipped: std::sync::Mutex<Duration>,
}

impl SkippingClock {
    fn skipped(&self) -> Duration {
        self.skipped.lock().map(|s| *s).unwrap_or_default()
    }
}

impl Clock for SkippingClock {
    fn now(&self) -> Timestamp {
        let skipped = SignedDuration::try_from(self.skipped()).unwrap_or(SignedDuration::MAX);
        let now = Timestamp::now();
        now.checked_add(skipped).unwrap_or(now)
    }

    fn idle_until(&self, at: Timestamp) -> tokio::time::Sleep {
        let wait = until(self.now(), at);
        if let Ok(mut skipped) = self.skipped.lock() {
            *skipped += wait;
        }
        tokio::time::sleep(Duration::ZERO)
    }
}

/// The clock [`CLOCK_VARIABLE`] selects (`None`: unset, the system clock).
pub fn from_setting(value: Option<&str>) -> Result<Arc<dyn Clock>, ClockSettingError> {
    match value {
        None => Ok(Arc::new(SystemClock)),
        Some(v) => Ok(Arc::new(ScaledClock::parse(v)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_scaled_clock_reads_back_the_setting_it_writes() {
        let clock = ScaledClock {
            origin: t("2026-11-27T00:00:00Z"),
            speed: 20.0,
        };
        assert_eq!(ScaledClock::parse(&clock.setting()).unwrap(), clock);
        assert_eq!(
            ScaledClock::parse("scaled 2.5 2026-11-27T00:00:00Z").unwrap(),
            ScaledClock {
                origin: t("2026-11-27T00:00:00Z"),
                speed: 2.5
            }
        );
    }

    #[test]
    fn a_scaled_clock_runs_speed_times_as_fast_as_the_wall_from_its_origin() {
        let clock = ScaledClock {
            origin: t("2026-11-27T00:00:00Z"),
            speed: 20.0,
        };
        let cases = [
            ("2026-11-27T00:00:00Z", "2026-11-27T00:00:00Z"),
            ("2026-11-27T00:00:03Z", "2026-11-27T00:01:00Z"),
            ("2026-11-27T01:12:00Z", "2026-11-28T00:00:00Z"),
        ];
        for (wall, scaled) in cases {
            assert_eq!(clock.at(t(wall)), t(scaled), "wall {wall}");
            assert_eq!(clock.wall(t(scaled)), t(wall), "scaled {scaled}");
        }
    }

    #[test]
    fn an_unreadable_clock_setting_says_what_is_wrong_with_it() {
        let cases = [
            ("fast 20 2026-11-27T00:00:00Z", "only clock"),
            ("scaled", "no speed"),
            ("scaled quick 2026-11-27T00:00:00Z", "not a number"),
            ("scaled -1 2026-11-27T00:00:00Z", "positive"),
            ("scaled 0 2026-11-27T00:00:00Z", "positive"),
            ("scaled 20", "no origin"),
            ("scaled 20 yesterday", "RFC 3339"),
            ("scaled 20 2026-11-27T00:00:00Z extra", "more than"),
        ];
        for (value, says) in cases {
            let e = ScaledClock::parse(value).unwrap_err().to_string();
            assert!(e.contains(says), "{value:?}: {e}");
            assert!(e.contains(CLOCK_VARIABLE), "{value:?}: {e}");
        }
    }

    #[test]
    fn time_left_until_a_passed_instant_is_zero() {
        let now = t("2026-11-27T00:00:10Z");
        assert_eq!(
            until(now, t("2026-11-27T00:00:15Z")),
            Duration::from_secs(5)
        );
        assert_eq!(until(now, t("2026-11-27T00:00:05Z")), Duration::ZERO);
    }

    #[test]
    fn no_setting_is_the_system_clock() {
        let before = Timestamp::now();
        let now = from_setting(None).unwrap().now();
        assert!(now >= before);
        assert!(from_setting(Some("scaled 0 x")).is_err());
    }

    #[tokio::test]
    async fn a_skipping_clock_skips_idle_waits_and_only_those() {
        let clock = SkippingClock::default();
        let started = std::time::Instant::now();
        let before = clock.now();
        clock.idle_until(before + Duration::from_secs(3600)).await;
        assert!(
            clock.now() >= before + Duration::from_secs(3600),
            "moved on"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "without waiting"
        );
        let idle_at = clock.now();
        clock.idle_until(idle_at - Duration::from_secs(10)).await;
        assert!(
            clock.now() >= idle_at,
            "a wait already over moves nothing back"
        );
        let sleeping = std::time::Instant::now();
        clock.sleep(Duration::from_millis(50)).await;
        assert!(
            sleeping.elapsed() >= Duration::from_millis(50),
            "a wait that bounds work is not skipped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_scaled_wait_takes_its_share_of_wall_clock_time() {
        let clock = ScaledClock {
            origin: Timestamp::now(),
            speed: 20.0,
        };
        let started = tokio::time::Instant::now();
        clock.sleep(Duration::from_secs(60)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}
