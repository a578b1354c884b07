//! A briefly cached configuration for a warm Lambda container: the provisioner polls every
//! few seconds, and NodePools change far less often than that.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

pub use crate::clock::{Clock, SystemClock};

use super::config::ConfigLoad;
use super::error::KubeError;
use super::ports::ConfigSource;

/// How long a loaded configuration is reused: short enough that an edited NodePool takes
/// effect within a couple of polls.
pub const DEFAULT_CONFIG_TTL: Duration = Duration::from_secs(30);

/// The last successful load and when, reused for `ttl`; a zero `ttl` reuses nothing.
/// Failures are not kept, so the next call tries again. [`CachedConfig`] puts one in front
/// of any [`ConfigSource`]; [`super::KubeCluster`] keeps one for its own loads.
pub struct ConfigMemo {
    clock: Arc<dyn Clock>,
    ttl: Duration,
    last: Mutex<Option<(Timestamp, ConfigLoad)>>,
}

impl ConfigMemo {
    pub fn new(clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        ConfigMemo {
            clock,
            ttl,
            last: Mutex::new(None),
        }
    }

    /// The remembered load while it is fresh, else `load`'s answer (remembered if it is
    /// one).
    pub async fn get_or_load<F>(&self, load: F) -> Result<ConfigLoad, KubeError>
    where
        F: Future<Output = Result<ConfigLoad, KubeError>>,
    {
        if self.ttl.is_zero() {
            return load.await;
        }
        if let Some(load) = self.fresh() {
            return Ok(load);
        }
        let loaded = load.await?;
        if let Ok(mut last) = self.last.lock() {
            *last = Some((self.clock.now(), loaded.clone()));
        }
        Ok(loaded)
    }

    /// Forgets the remembered load (after a change nodewright itself made, for example).
    pub fn invalidate(&self) {
        if let Ok(mut last) = self.last.lock() {
            *last = None;
        }
    }

    fn fresh(&self) -> Option<ConfigLoad> {
        let last = self.last.lock().ok()?;
        fresh(last.as_ref(), self.clock.now(), self.ttl)
    }
}

/// The cached load when it is younger than `ttl` at `now`.
fn fresh(
    last: Option<&(Timestamp, ConfigLoad)>,
    now: Timestamp,
    ttl: Duration,
) -> Option<ConfigLoad> {
    let (at, load) = last?;
    // A clock that went backwards makes the age negative: treat that as stale too.
    let age = now.duration_since(*at);
    (age >= jiff::SignedDuration::ZERO && age.unsigned_abs() < ttl).then(|| load.clone())
}

/// Reuses the last successful load of `inner` for `ttl` (see [`ConfigMemo`]).
pub struct CachedConfig<S> {
    inner: S,
    memo: ConfigMemo,
}

impl<S: ConfigSource> CachedConfig<S> {
    pub fn new(inner: S) -> Self {
        Self::with_clock(inner, Arc::new(SystemClock), DEFAULT_CONFIG_TTL)
    }

    pub fn with_clock(inner: S, clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        CachedConfig {
            inner,
            memo: ConfigMemo::new(clock, ttl),
        }
    }

    /// Forgets the cached load (after a change nodewright itself made, for example).
    pub fn invalidate(&self) {
        self.memo.invalidate();
    }
}

impl<S: ConfigSource> ConfigSource for CachedConfig<S> {
    async fn load(&self) -> Result<ConfigLoad, KubeError> {
        self.memo.get_or_load(self.inner.load()).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::api::Inputs;
    use crate::kube::config::ConfigOrigin;

    struct ManualClock(Mutex<Timestamp>);

    impl ManualClock {
        fn advance(&self, secs: i64) {
            if let Ok(mut t) = self.0.lock() {
                *t += jiff::SignedDuration::from_secs(secs);
            }
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> Timestamp {
            self.0.lock().map(|t| *t).unwrap_or(Timestamp::UNIX_EPOCH)
        }
    }

    /// Counts loads; fails while `failing` is set.
    struct Counting {
        loads: AtomicU32,
        failing: std::sync::atomic::AtomicBool,
    }

    impl ConfigSource for Arc<Counting> {
        async fn load(&self) -> Result<ConfigLoad, KubeError> {
            let n = self.loads.fetch_add(1, Ordering::SeqCst) + 1;
            if self.failing.load(Ordering::SeqCst) {
                return Err(KubeError::Conflict {
                    node: "n/a".into(),
                    attempts: n,
                });
            }
            Ok(ConfigLoad {
                inputs: Inputs {
                    documents: n as usize,
                    ..Inputs::default()
                },
                problems: vec![],
                source: ConfigOrigin::Default,
            })
        }
    }

    fn setup() -> (Arc<Counting>, Arc<ManualClock>, CachedConfig<Arc<Counting>>) {
        let inner = Arc::new(Counting {
            loads: AtomicU32::new(0),
            failing: false.into(),
        });
        let clock = Arc::new(ManualClock(Mutex::new(Timestamp::UNIX_EPOCH)));
        let cached = CachedConfig::with_clock(inner.clone(), clock.clone(), DEFAULT_CONFIG_TTL);
        (inner, clock, cached)
    }

    #[tokio::test]
    async fn a_load_is_reused_within_the_ttl_and_refreshed_after_it() {
        let (inner, clock, cached) = setup();
        let docs = |r: Result<ConfigLoad, KubeError>| r.map(|l| l.inputs.documents).ok();
        assert_eq!(docs(cached.load().await), Some(1));
        clock.advance(29);
        assert_eq!(
            docs(cached.load().await),
            Some(1),
            "29 s later the first load is reused"
        );
        clock.advance(1);
        assert_eq!(
            docs(cached.load().await),
            Some(2),
            "at 30 s it is loaded again"
        );
        assert_eq!(inner.loads.load(Ordering::SeqCst), 2);
        clock.advance(-60);
        assert_eq!(
            docs(cached.load().await),
            Some(3),
            "a clock that went back does not keep a load forever"
        );
        cached.invalidate();
        assert_eq!(
            docs(cached.load().await),
            Some(4),
            "invalidate forces a load"
        );
    }

    #[tokio::test]
    async fn failures_are_not_cached() {
        let (inner, _clock, cached) = setup();
        inner.failing.store(true, Ordering::SeqCst);
        assert!(cached.load().await.is_err());
        inner.failing.store(false, Ordering::SeqCst);
        assert!(cached.load().await.is_ok(), "the next call tries again");
        assert_eq!(inner.loads.load(Ordering::SeqCst), 2);
    }
}
