//! The simulation clock: tests advance it explicitly; the demo lets it follow real time,
//! optionally faster.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

#[derive(Debug)]
enum Mode {
    /// Time moves only through `advance`.
    Manual { now: Timestamp },
    /// Time follows the wall clock from `origin`, `speed` simulated seconds per real second,
    /// plus whatever `advance` added.
    RealTime {
        origin: Timestamp,
        started: Instant,
        speed: f64,
        extra: Duration,
    },
}

/// A shared clock (`Clone` shares it).
#[derive(Debug, Clone)]
pub struct SimClock(Arc<Mutex<Mode>>);

impl SimClock {
    /// A clock that stands still until `advance` moves it, starting at the current wall-clock
    /// second (so that instance launch times from moto, which are wall-clock, compare).
    pub fn manual() -> SimClock {
        let now =
            Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH);
        SimClock::manual_at(now)
    }

    /// A manual clock starting at a fixed instant (reproducible timestamps).
    pub fn manual_at(start: Timestamp) -> SimClock {
        SimClock(Arc::new(Mutex::new(Mode::Manual { now: start })))
    }

    /// A clock that follows real time from now, `speed` times as fast (1.0 = real time).
    pub fn real_time(speed: f64) -> SimClock {
        let speed = if speed.is_finite() && speed > 0.0 {
            speed
        } else {
            1.0
        };
        SimClock(Arc::new(Mutex::new(Mode::RealTime {
            origin: Timestamp::now(),
            started: Instant::now(),
            speed,
            extra: Duration::ZERO,
        })))
    }

    pub fn now(&self) -> Timestamp {
        let mode = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &*mode {
            Mode::Manual { now } => *now,
            Mode::RealTime {
                origin,
                started,
                speed,
                extra,
            } => {
                let elapsed = started.elapsed().mul_f64(*speed) + *extra;
                origin
                    .saturating_add(
                        SignedDuration::try_from(elapsed).unwrap_or(SignedDuration::MAX),
                    )
                    .unwrap_or(*origin)
            }
        }
    }

    /// Moves the clock forward (in real-time mode: on top of the time that passes anyway).
    pub fn advance(&self, by: Duration) {
        let mut mode = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *mode {
            Mode::Manual { now } => {
                let d = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
                *now = now.saturating_add(d).unwrap_or(*now);
            }
            Mode::RealTime { extra, .. } => *extra += by,
        }
    }

    /// `now` as the API server writes timestamps (RFC 3339, whole seconds, `Z`).
    pub fn rfc3339(&self) -> String {
        format_ts(self.now())
    }
}

/// RFC 3339 with whole seconds, like metav1.Time.
pub fn format_ts(t: Timestamp) -> String {
    let secs = Timestamp::from_second(t.as_second()).unwrap_or(t);
    secs.to_string()
}

/// Parses a stored timestamp; `None` when absent or malformed.
pub fn parse_ts(s: Option<&str>) -> Option<Timestamp> {
    s.and_then(|s| s.parse::<Timestamp>().ok())
}

/// Whether `at + delay <= now`.
pub fn elapsed(at: Timestamp, delay: Duration, now: Timestamp) -> bool {
    let d = SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX);
    at.saturating_add(d).map(|due| due <= now).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced_and_clones_share_it() {
        let c = SimClock::manual_at(
            Timestamp::from_second(1_735_689_600).unwrap_or(Timestamp::UNIX_EPOCH),
        );
        let other = c.clone();
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        other.advance(Duration::from_secs(90));
        assert_eq!(c.now().as_second() - t0.as_second(), 90);
        assert_eq!(c.rfc3339(), "2025-01-01T00:01:30Z");
    }
}
