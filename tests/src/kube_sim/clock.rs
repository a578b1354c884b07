//! The simulation clock: tests advance it explicitly, or it is the world's time that runs
//! on by itself, faster than the wall clock while nothing works
//! ([`crate::world_time::WorldTime`], which the function binaries read too).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::world_time::{Busy, WorldTime};

enum Mode {
    /// Time moves only through `advance`.
    Manual { now: Timestamp },
    /// The world's own time.
    World(Arc<WorldTime>),
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Manual { now } => write!(f, "Manual({now})"),
            Mode::World(t) => write!(f, "World({})", t.now()),
        }
    }
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

    /// A clock that follows the wall clock from now, `speed` times as fast whatever
    /// happens (1.0 = real time): world time at one constant speed, its pace file in a
    /// directory of its own under the temporary directory.
    pub fn real_time(speed: f64) -> SimClock {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("nodewright-real-time-{}-{n}", std::process::id()));
        let speeds = crate::world_time::Speeds {
            busy: speed,
            idle: speed,
        };
        let time = WorldTime::start(&dir, Timestamp::now(), speeds)
            .unwrap_or_else(|e| panic!("writing a pace file under {}: {e}", dir.display()));
        SimClock::world(time)
    }

    /// The world's own time.
    pub fn world(time: Arc<WorldTime>) -> SimClock {
        SimClock(Arc::new(Mutex::new(Mode::World(time))))
    }

    /// The world's time this follows, if it is not manual.
    pub fn world_time(&self) -> Option<Arc<WorldTime>> {
        match &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            Mode::Manual { .. } => None,
            Mode::World(t) => Some(t.clone()),
        }
    }

    /// Marks the world busy while the guard lives (nothing on a manual clock).
    pub fn busy(&self) -> Busy {
        self.world_time().map_or_else(Busy::none, |t| t.busy())
    }

    /// Waits `d` of this clock's time. A manual clock moves only when a test moves it, so a
    /// wait on it is a short wall-clock pause (at most 20 ms) before the caller looks again.
    pub async fn sleep(&self, d: Duration) {
        match self.world_time() {
            Some(t) => t.sleep(d).await,
            None => tokio::time::sleep(d.min(Duration::from_millis(20))).await,
        }
    }

    pub fn now(&self) -> Timestamp {
        let mode = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &*mode {
            Mode::Manual { now } => *now,
            Mode::World(t) => t.now(),
        }
    }

    /// Moves a manual clock forward (the world's own time runs by itself).
    pub fn advance(&self, by: Duration) {
        let mut mode = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *mode {
            Mode::Manual { now } => {
                let d = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
                *now = now.saturating_add(d).unwrap_or(*now);
            }
            Mode::World(_) => panic!(
                "the world's own time cannot be advanced by hand: the function binaries read \
                 it from its pace file"
            ),
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
