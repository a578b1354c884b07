//! Wall-clock time, injected so tests can move it: the configuration cache, the EKS token
//! source and the sweeper all ask "now" of a [`Clock`] (one trait for all of them).

use jiff::Timestamp;

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}
