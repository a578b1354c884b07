//! State shared by the HTTP server and the simulations.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::clock::SimClock;
use super::faults::Faults;
use super::request_log::LoggedRequest;
use super::store::Store;

#[derive(Debug)]
pub struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Faults>,
    crds: AtomicBool,
    /// Bumped to end every open watch (the "dropped watch" fault).
    watch_generation: AtomicU64,
    open_watches: AtomicUsize,
    /// `METHOD plural` (or `METHOD path` outside resources) of every request served, in
    /// order, so tests and benchmarks can count the API calls a client makes.
    requests: Mutex<Vec<String>>,
    /// RBAC's refusals, in order (`authz.rs`).
    refusals: Mutex<Vec<String>>,
    /// Whole requests, once a test asked for them (see `request_log.rs`).
    request_log: Mutex<Option<Vec<LoggedRequest>>>,
    pub clock: SimClock,
}

impl Shared {
    pub fn new(clock: SimClock, crds: bool) -> Shared {
        Shared {
            store: Mutex::new(Store::new()),
            faults: Mutex::new(Faults::default()),
            crds: AtomicBool::new(crds),
            watch_generation: AtomicU64::new(0),
            open_watches: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            refusals: Mutex::new(Vec::new()),
            request_log: Mutex::new(None),
            clock,
        }
    }

    /// The store; never held across an await. A panic while holding it cannot leave it
    /// half-written (every write is one map insert), so a poisoned lock is taken over.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn record_request(&self, request: String) {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request);
    }

    pub fn record_refusal(&self, message: String) {
        tracing::warn!(message, "RBAC refused a request");
        self.refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(message);
    }

    pub fn refusals(&self) -> Vec<String> {
        self.refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn start_request_log(&self) {
        self.request_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(Vec::new);
    }

    /// Logs the request `build` describes if the log is on (built only then).
    pub fn log_request(&self, build: impl FnOnce() -> LoggedRequest) {
        if let Some(log) = self
            .request_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            log.push(build());
        }
    }

    pub fn logged_requests(&self) -> Vec<LoggedRequest> {
        self.request_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default()
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn crds_installed(&self) -> bool {
        self.crds.load(Ordering::SeqCst)
    }

    pub fn set_crds_installed(&self, on: bool) {
        self.crds.store(on, Ordering::SeqCst);
    }

    pub fn watch_generation(&self) -> u64 {
        self.watch_generation.load(Ordering::SeqCst)
    }

    pub fn drop_watches(&self) {
        self.watch_generation.fetch_add(1, Ordering::SeqCst);
    }

    pub fn open_watches(&self) -> usize {
        self.open_watches.load(Ordering::SeqCst)
    }

    /// Counts a watch as open until the returned guard is dropped.
    pub fn watch_opened(self: &Arc<Self>) -> WatchGuard {
        self.open_watches.fetch_add(1, Ordering::SeqCst);
        WatchGuard(self.clone())
    }
}

pub struct WatchGuard(Arc<Shared>);

impl WatchGuard {
    pub fn shared(&self) -> &Shared {
        &self.0
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.open_watches.fetch_sub(1, Ordering::SeqCst);
    }
}
