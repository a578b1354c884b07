//! Time, injected: every "now" a function asks for and every wait it makes go through a
//! [`Clock`], so tests move time instead of waiting for it and the local world's soak can
//! run a simulated day faster than a real one.
//!
//! In AWS the clock is [`SystemClock`]. The local world may set [`CLOCK_VARIABLE`] to run a
//! function binary on the world's time ([`WorldClock`]); nothing in a deployed stack sets
//! it. What stays on wall-clock time whatever the clock: the AWS SDK's and the Kubernetes
//! client's own timeouts and retry back-off, which bound one call, not the work.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// A wait on a [`Clock`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;

    /// Waits `d` of this clock's time.
    fn sleep(&self, d: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(d))
    }

    /// Waits until `at` on this clock (at once when it has passed).
    fn sleep_until(&self, at: Timestamp) -> Sleep {
        self.sleep(until(self.now(), at))
    }

    /// Waits until `at` with nothing to do meanwhile but watch for events (a handler
    /// between polls), as opposed to a wait that bounds work in progress. The same wait as
    /// [`Clock::sleep_until`] for every clock but [`SkippingClock`], which skips it.
    fn idle_until(&self, at: Timestamp) -> Sleep {
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
/// clock); `world <path>` in the local world (see [`WorldClock`]).
pub const CLOCK_VARIABLE: &str = "NODEWRIGHT_CLOCK";

/// A time that runs `speed` times as fast as the wall clock from an anchor: at wall-clock
/// time `wall`, it reads `at + speed × (wall − wall_anchor)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    pub wall: Timestamp,
    pub at: Timestamp,
    pub speed: f64,
}

#[derive(Debug, thiserror::Error)]
#[error("clock file {path}: {why} (expected `<wall anchor> <time at it> <speed>`)")]
pub struct PaceError {
    path: String,
    why: String,
}

impl Pace {
    /// From `at`, as fast as the wall clock from now on.
    pub fn real(at: Timestamp) -> Pace {
        Pace {
            wall: Timestamp::now(),
            at,
            speed: 1.0,
        }
    }

    /// The time at wall-clock time `wall`.
    pub fn time_at(&self, wall: Timestamp) -> Timestamp {
        let elapsed = wall.duration_since(self.wall).as_secs_f64() * self.speed;
        self.at
            .checked_add(SignedDuration::from_secs_f64(elapsed))
            .unwrap_or(self.at)
    }

    /// The same time from wall-clock time `wall` on, at `speed`.
    pub fn with_speed(&self, wall: Timestamp, speed: f64) -> Pace {
        Pace {
            wall,
            at: self.time_at(wall),
            speed,
        }
    }

    /// The file's text: `<wall anchor> <time at it> <speed>`.
    pub fn to_line(&self) -> String {
        format!("{} {} {}\n", self.wall, self.at, self.speed)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Pace, PaceError> {
        let err = |why: &str| PaceError {
            path: path.display().to_string(),
            why: why.to_string(),
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        let [wall, at, speed] = words[..] else {
            return Err(err("not three words"));
        };
        let speed: f64 = speed
            .parse()
            .map_err(|_| err("the speed is not a number"))?;
        if !(speed.is_finite() && speed > 0.0) {
            return Err(err("the speed must be a positive number"));
        }
        Ok(Pace {
            wall: wall
                .parse()
                .map_err(|_| err("the wall anchor is not RFC 3339"))?,
            at: at.parse().map_err(|_| err("the time is not RFC 3339"))?,
            speed,
        })
    }

    /// Writes the pace to `path` whole (a reader never sees half a line).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, self.to_line())?;
        std::fs::rename(tmp, path)
    }
}

/// How long one step of a wait on a [`WorldClock`] sleeps at most before looking at the pace
/// again: the world may change its speed at any moment.
const WAIT_STEP: Duration = Duration::from_millis(10);

/// The local world's time, read from the file the world writes its [`Pace`] to: the world
/// runs faster than the wall clock while nothing is working and at the wall clock's pace
/// while something is (`nodewright_world`'s clock), so a simulated day takes less than a day
/// and a function's own latency is not multiplied. A wait looks at the pace every
/// [`WAIT_STEP`] of wall-clock time.
#[derive(Debug, Clone)]
pub struct WorldClock {
    path: PathBuf,
    last: Arc<Mutex<Option<Pace>>>,
}

impl WorldClock {
    pub fn new(path: impl Into<PathBuf>) -> WorldClock {
        WorldClock {
            path: path.into(),
            last: Arc::default(),
        }
    }

    /// The pace now: read from the file, else the last one read (the world rewrites it by
    /// renaming, so a read rarely fails), else the wall clock's.
    pub fn pace(&self) -> Pace {
        let read = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| Pace::parse(&self.path, &t).ok());
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = read {
            *last = Some(p);
        }
        last.unwrap_or_else(|| Pace::real(Timestamp::now()))
    }
}

impl Clock for WorldClock {
    fn now(&self) -> Timestamp {
        self.pace().time_at(Timestamp::now())
    }

    fn sleep(&self, d: Duration) -> Sleep {
        let me = self.clone();
        Box::pin(async move {
            let target = me.now() + d;
            loop {
                let pace = me.pace();
                let left = until(pace.time_at(Timestamp::now()), target);
                if left.is_zero() {
                    return;
                }
                tokio::time::sleep(left.div_f64(pace.speed).min(WAIT_STEP)).await;
            }
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{CLOCK_VARIABLE}={value:?}: expected `world <path of the pace file>`")]
pub struct ClockSettingError {
    value: String,
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
    skipped: Arc<Mutex<Duration>>,
    /// Idle waits run on the system clock until [`SkippingClock::arm`].
    disarmed: Arc<std::sync::atomic::AtomicBool>,
    armed: Arc<tokio::sync::Notify>,
}

impl SkippingClock {
    /// A clock whose idle waits are real until [`SkippingClock::arm`]: for a test where
    /// something must happen while the handler waits (a watch event), and nothing after.
    pub fn disarmed() -> Self {
        let clock = SkippingClock::default();
        clock
            .disarmed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        clock
    }

    /// Skips every idle wait from now on, the rest of one under way included.
    pub fn arm(&self) {
        self.disarmed
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.armed.notify_waiters();
    }

    fn skipped(&self) -> Duration {
        self.skipped.lock().map(|s| *s).unwrap_or_default()
    }

    fn skip(skipped: &Mutex<Duration>, wait: Duration) {
        if let Ok(mut s) = skipped.lock() {
            *s += wait;
        }
    }
}

impl Clock for SkippingClock {
    fn now(&self) -> Timestamp {
        let skipped = SignedDuration::try_from(self.skipped()).unwrap_or(SignedDuration::MAX);
        let now = Timestamp::now();
        now.checked_add(skipped).unwrap_or(now)
    }

    fn idle_until(&self, at: Timestamp) -> Sleep {
        let wait = until(self.now(), at);
        if !self.disarmed.load(std::sync::atomic::Ordering::SeqCst) {
            SkippingClock::skip(&self.skipped, wait);
            return Box::pin(std::future::ready(()));
        }
        let (skipped, armed) = (self.skipped.clone(), self.armed.clone());
        Box::pin(async move {
            let started = std::time::Instant::now();
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = armed.notified() => {
                    SkippingClock::skip(&skipped, wait.saturating_sub(started.elapsed()));
                }
            }
        })
    }
}

/// The clock [`CLOCK_VARIABLE`] selects (`None`: unset, the system clock).
pub fn from_setting(value: Option<&str>) -> Result<Arc<dyn Clock>, ClockSettingError> {
    let Some(value) = value else {
        return Ok(Arc::new(SystemClock));
    };
    match value.split_once(' ') {
        Some(("world", path)) if !path.trim().is_empty() => {
            Ok(Arc::new(WorldClock::new(path.trim())))
        }
        _ => Err(ClockSettingError {
            value: value.to_string(),
        }),
    }
}

/// The value of [`CLOCK_VARIABLE`] that selects the [`WorldClock`] of `path`.
pub fn world_setting(path: &Path) -> String {
    format!("world {}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn pace(speed: f64) -> Pace {
        Pace {
            wall: t("2026-11-27T00:00:00Z"),
            at: t("2026-11-28T00:00:00Z"),
            speed,
        }
    }

    #[test]
    fn a_pace_runs_speed_times_as_fast_as_the_wall_from_its_anchor() {
        let p = pace(20.0);
        let cases = [
            ("2026-11-27T00:00:00Z", "2026-11-28T00:00:00Z"),
            ("2026-11-27T00:00:03Z", "2026-11-28T00:01:00Z"),
            ("2026-11-27T01:12:00Z", "2026-11-29T00:00:00Z"),
        ];
        for (wall, at) in cases {
            assert_eq!(p.time_at(t(wall)), t(at), "wall {wall}");
        }
    }

    #[test]
    fn a_change_of_speed_keeps_the_time_continuous() {
        let p = pace(20.0);
        let switch = t("2026-11-27T00:00:03Z");
        let q = p.with_speed(switch, 1.0);
        assert_eq!(q.time_at(switch), p.time_at(switch));
        assert_eq!(
            q.time_at(t("2026-11-27T00:00:13Z")),
            t("2026-11-28T00:01:10Z")
        );
    }

    #[test]
    fn a_pace_reads_back_the_line_it_writes_and_a_bad_line_says_what_is_wrong() {
        let path = Path::new("/tmp/pace");
        let p = pace(2.5);
        assert_eq!(Pace::parse(path, &p.to_line()).unwrap(), p);
        let cases = [
            ("", "three words"),
            ("a b", "three words"),
            (
                "2026-11-27T00:00:00Z 2026-11-27T00:00:00Z fast",
                "not a number",
            ),
            ("2026-11-27T00:00:00Z 2026-11-27T00:00:00Z 0", "positive"),
            ("yesterday 2026-11-27T00:00:00Z 1", "wall anchor"),
            ("2026-11-27T00:00:00Z today 1", "the time"),
        ];
        for (line, says) in cases {
            let e = Pace::parse(path, line).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("/tmp/pace"), "{line:?}: {e}");
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
    fn the_setting_selects_the_system_clock_or_a_world_clock_and_nothing_else() {
        let before = Timestamp::now();
        assert!(from_setting(None).unwrap().now() >= before);
        assert!(from_setting(Some("world /tmp/x")).is_ok());
        for bad in ["world", "world ", "scaled 20 2026-11-27T00:00:00Z", ""] {
            let e = from_setting(Some(bad)).err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains(CLOCK_VARIABLE)),
                "{bad:?}: {e:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_world_clock_follows_its_file_and_a_wait_follows_a_change_of_speed() {
        let dir = std::env::temp_dir().join(format!("nw-clock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pace");
        let start = t("2030-01-01T00:00:00Z");
        Pace {
            wall: Timestamp::now(),
            at: start,
            speed: 1.0,
        }
        .write(&path)
        .unwrap();
        let clock = WorldClock::new(&path);
        let read = clock.now();
        assert!(read >= start && read < start + SignedDuration::from_secs(5));
        // A wait of an hour at the wall clock's pace, sped up to 36,000x after it began:
        // it ends a tenth of a second or so later, not an hour later.
        let waited = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep(Duration::from_secs(3600)).await }
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        clock
            .pace()
            .with_speed(Timestamp::now(), 36_000.0)
            .write(&path)
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), waited)
            .await
            .expect("the wait followed the new speed")
            .unwrap();
        assert!(clock.now() >= start + SignedDuration::from_secs(3600));
        std::fs::remove_dir_all(&dir).ok();
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

    #[tokio::test]
    async fn a_disarmed_skipping_clock_waits_for_real_until_armed() {
        let clock = SkippingClock::disarmed();
        let waiting = std::time::Instant::now();
        clock
            .idle_until(clock.now() + Duration::from_millis(50))
            .await;
        assert!(
            waiting.elapsed() >= Duration::from_millis(50),
            "a real wait"
        );
        let before = clock.now();
        let long = clock.idle_until(before + Duration::from_secs(3600));
        let armed = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            clock.arm();
        };
        tokio::join!(long, armed);
        assert!(
            clock.now() >= before + Duration::from_secs(3600),
            "the wait under way ends when armed, the clock at its end"
        );
        let before = clock.now();
        clock.idle_until(before + Duration::from_secs(3600)).await;
        assert!(clock.now() >= before + Duration::from_secs(3600), "skipped");
    }
}
