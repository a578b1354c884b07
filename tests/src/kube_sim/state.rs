//! State shared by the HTTP server and the simulations.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::clock::SimClock;
use super::faults::Faults;
use super::store::Store;

#[derive(Debug)]
pub struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Faults>,
    crds: AtomicBool,
    pub clock: SimClock,
}

impl Shared {
    pub fn new(clock: SimClock, crds: bool) -> Shared {
        Shared {
            store: Mutex::new(Store::new()),
            faults: Mutex::new(Faults::default()),
            crds: AtomicBool::new(crds),
            clock,
        }
    }

    /// The store; never held across an await. A panic while holding it cannot leave it
    /// half-written (every write is one map insert), so a poisoned lock is taken over.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
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
}
