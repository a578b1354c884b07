//! The world's time when it runs faster than the wall clock (the soak, the Lambda tests):
//! one [`Pace`] written to a file every process reads (`nodewright::clock::WorldClock` in
//! the function binaries, moto's EC2 through `moto/launch.py`, the simulated cluster and the
//! world's queue and Lambda through [`crate::kube_sim::SimClock`]).
//!
//! Its speed follows what is happening: while anything is working the world runs at `busy`
//! speed, the wall clock's by default, so the latency of real work is not multiplied; while
//! everything waits on a timer it runs at `idle` speed, so a simulated day takes far less
//! than a day. Working is: a request being served by the AWS front or the simulated API
//! server (an injected delay excepted: that is latency in the world's time), a step of the
//! simulated control plane, and any watched process using the CPU (the function binaries
//! and moto, sampled from `/proc` every few milliseconds). What is still multiplied: work
//! shorter than the sampling can see (a few milliseconds), by at most the idle speed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use nodewright::clock::{Clock, Pace};

/// How fast the world runs while something works and while nothing does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speeds {
    pub busy: f64,
    pub idle: f64,
}

impl Speeds {
    /// The wall clock's pace while working, `idle` times as fast while waiting.
    pub fn idle_at(idle: f64) -> Speeds {
        Speeds { busy: 1.0, idle }
    }
}

struct State {
    pace: Pace,
    busy: usize,
    /// A watched process used the CPU in the last sampling window.
    computing: bool,
    /// Busy time so far (wall clock), for the report.
    busy_wall: Duration,
    busy_since: Option<std::time::Instant>,
}

/// The world's time and the governor of its speed.
pub struct WorldTime {
    path: PathBuf,
    speeds: Speeds,
    state: Mutex<State>,
    /// Watched processes and their CPU ticks at the last sample.
    watched: Mutex<std::collections::BTreeMap<u32, u64>>,
    sampling: std::sync::atomic::AtomicBool,
}

/// How often the watched processes' CPU time is sampled, and for how long after a process
/// used the CPU the world still counts it as working (the kernel counts CPU time in ticks
/// of 10 ms, so a sample may see no change while a process works).
const SAMPLE_EVERY: Duration = Duration::from_millis(4);
const COMPUTING_FOR: Duration = Duration::from_millis(25);

/// User and system CPU time of `pid` in clock ticks (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The sampler: runs on a thread of its own until the world's time is dropped.
fn sample(time: std::sync::Weak<WorldTime>) {
    let mut last_seen = std::time::Instant::now() - COMPUTING_FOR;
    loop {
        std::thread::sleep(SAMPLE_EVERY);
        let Some(time) = time.upgrade() else { return };
        let mut moved = false;
        {
            let mut watched = time.watched.lock().unwrap_or_else(|p| p.into_inner());
            watched.retain(|pid, ticks| match cpu_ticks(*pid) {
                Some(now) => {
                    moved |= now != *ticks;
                    *ticks = now;
                    true
                }
                None => false,
            });
        }
        if moved {
            last_seen = std::time::Instant::now();
        }
        time.set_computing(last_seen.elapsed() < COMPUTING_FOR);
    }
}

/// Marks the world busy while it lives.
pub struct Busy(Option<Arc<WorldTime>>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.leave();
        }
    }
}

impl Busy {
    /// A guard that marks nothing (a manual clock has no speed to govern).
    pub fn none() -> Busy {
        Busy(None)
    }
}

impl WorldTime {
    /// World time starting at `start`, its pace kept in `dir/pace`.
    pub fn start(dir: &Path, start: Timestamp, speeds: Speeds) -> anyhow::Result<Arc<WorldTime>> {
        std::fs::create_dir_all(dir)?;
        let pace = Pace {
            wall: Timestamp::now(),
            at: start,
            speed: speeds.idle,
        };
        let path = dir.join("pace");
        pace.write(&path)?;
        Ok(Arc::new(WorldTime {
            watched: Mutex::default(),
            sampling: std::sync::atomic::AtomicBool::new(false),
            path,
            speeds,
            state: Mutex::new(State {
                pace,
                busy: 0,
                computing: false,
                busy_wall: Duration::ZERO,
                busy_since: None,
            }),
        }))
    }

    /// The file the function binaries read (`NODEWRIGHT_CLOCK=world <path>`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn speeds(&self) -> Speeds {
        self.speeds
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn pace(&self) -> Pace {
        self.state().pace
    }

    pub fn now(&self) -> Timestamp {
        self.pace().time_at(Timestamp::now())
    }

    /// Wall-clock time spent busy so far.
    pub fn busy_wall(&self) -> Duration {
        let s = self.state();
        s.busy_wall + s.busy_since.map(|t| t.elapsed()).unwrap_or_default()
    }

    fn set_speed(&self, state: &mut State, speed: f64) {
        if state.pace.speed == speed {
            return;
        }
        state.pace = state.pace.with_speed(Timestamp::now(), speed);
        if let Err(e) = state.pace.write(&self.path) {
            tracing::warn!(error = %e, path = %self.path.display(), "writing the world's pace");
        }
    }

    /// Sets the speed the state calls for, keeping the busy time's account.
    fn govern(&self, s: &mut State) {
        let working = s.busy > 0 || s.computing;
        match (working, s.busy_since) {
            (true, None) => s.busy_since = Some(std::time::Instant::now()),
            (false, Some(t)) => {
                s.busy_wall += t.elapsed();
                s.busy_since = None;
            }
            _ => {}
        }
        let speed = if working {
            self.speeds.busy
        } else {
            self.speeds.idle
        };
        self.set_speed(s, speed);
    }

    /// Marks the world busy until the guard is dropped.
    pub fn busy(self: &Arc<Self>) -> Busy {
        let mut s = self.state();
        s.busy += 1;
        self.govern(&mut s);
        Busy(Some(self.clone()))
    }

    fn leave(&self) {
        let mut s = self.state();
        s.busy = s.busy.saturating_sub(1);
        self.govern(&mut s);
    }

    fn set_computing(&self, computing: bool) {
        let mut s = self.state();
        if s.computing != computing {
            s.computing = computing;
            self.govern(&mut s);
        }
    }

    /// Counts process `pid` as working whenever it uses the CPU, until it exits.
    pub fn watch_process(self: &Arc<Self>, pid: u32) {
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        watched.insert(pid, cpu_ticks(pid).unwrap_or(0));
        if !self
            .sampling
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let weak = Arc::downgrade(self);
            std::thread::spawn(move || sample(weak));
        }
    }

    /// Waits `d` of world time, following changes of speed.
    pub async fn sleep(&self, d: Duration) {
        let target = self.now() + d;
        loop {
            let pace = self.pace();
            let left = nodewright::clock::until(pace.time_at(Timestamp::now()), target);
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.div_f64(pace.speed).min(Duration::from_millis(10))).await;
        }
    }
}

impl Clock for WorldTime {
    fn now(&self) -> Timestamp {
        WorldTime::now(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("nw-world-time-{name}-{}", std::process::id()))
    }

    #[test]
    fn the_world_runs_at_the_busy_speed_while_anything_works_and_idle_speed_otherwise() {
        let t = WorldTime::start(&dir("speeds"), Timestamp::now(), Speeds::idle_at(50.0)).unwrap();
        assert_eq!(t.pace().speed, 50.0);
        let a = t.busy();
        let b = t.busy();
        assert_eq!(t.pace().speed, 1.0);
        drop(a);
        assert_eq!(t.pace().speed, 1.0, "one thing still works");
        drop(b);
        assert_eq!(t.pace().speed, 50.0);
        let on_disk = std::fs::read_to_string(t.path()).unwrap();
        assert_eq!(Pace::parse(t.path(), &on_disk).unwrap(), t.pace());
    }

    #[test]
    fn a_process_s_cpu_time_is_read_from_proc() {
        let me = std::process::id();
        let before = cpu_ticks(me).unwrap();
        let mut x = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(
            cpu_ticks(me).unwrap() > before,
            "50 ms of work is several ticks"
        );
        assert_eq!(cpu_ticks(u32::MAX), None);
    }

    #[test]
    fn a_watched_process_using_the_cpu_slows_the_world_to_the_busy_speed() {
        let t = WorldTime::start(&dir("cpu"), Timestamp::now(), Speeds::idle_at(50.0)).unwrap();
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "sleep 0.3; i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done",
            ])
            .spawn()
            .unwrap();
        t.watch_process(child.id());
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(t.pace().speed, 50.0, "a sleeping process is not working");
        let mut seen_busy = false;
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(10));
            seen_busy |= t.pace().speed == 1.0;
            if child.try_wait().unwrap().is_some() {
                break;
            }
        }
        let _ = child.kill();
        assert!(
            seen_busy,
            "the world never slowed while the process computed"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(t.pace().speed, 50.0, "idle again once it exited");
    }

    #[test]
    fn the_time_goes_on_without_a_jump_when_the_speed_changes() {
        let t = WorldTime::start(&dir("jump"), Timestamp::now(), Speeds::idle_at(1000.0)).unwrap();
        let before = t.now();
        let guard = t.busy();
        let after = t.now();
        assert!(after >= before);
        assert!(after.duration_since(before) < jiff::SignedDuration::from_secs(5));
        drop(guard);
    }
}
