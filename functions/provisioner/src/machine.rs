//! One invocation's loop as a state machine: [`next`] takes what the loop remembers, what
//! just happened and the time, and says what to do next. It does no I/O and reads no
//! clock, so each transition is a row of a table test; [`super::handler`] is the thin
//! executor that does what it says (checks the Lease, polls, refreshes, waits) and feeds
//! back what came of it.
//!
//! The rules, in the order a turn of the loop asks them:
//! - past the end of the working time, finish;
//! - with a Lease, check it first: a holder acts, another invocation stands by;
//! - the first time an invocation stands by, it warms its provisioner (once: later
//!   checks only keep its listing of instances fresh), so that taking over costs a
//!   pending pod nothing;
//! - the holder polls when woken by a pod or when the next poll is due (a batching window
//!   open brings it forward);
//! - after a poll with no window open, the holder refreshes what is due once, dropped the
//!   moment a pod wakes it;
//! - then it waits until the next poll, a renewal of the Lease or the end, whichever
//!   comes first (a standby invocation: until its next look at the Lease).

use std::time::Duration;

use jiff::Timestamp;
use nodewright::ids::InstanceId;

/// What does not change during one invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub poll_interval: Duration,
    /// With a Lease: how often the holder renews it. `None`: no Lease, every invocation
    /// acts.
    pub renew_every: Option<Duration>,
    /// How often an invocation standing by looks at the Lease again.
    pub standby_recheck: Duration,
    /// When the invocation stops starting work (its budget, or the margin before its
    /// deadline).
    pub until: Timestamp,
}

/// What the loop remembers between its steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// Acting in this turn of the loop: holding the Lease, or without one.
    pub acting: bool,
    /// This invocation's Lease turn (see [`LeaseCheck::Held`]); `None`: not holding.
    pub turn: Option<TurnStart>,
    /// The standby warm-up was started (it is done at most once per invocation).
    pub warmed: bool,
    /// On-demand prices were asked for, or were not due: not again in this invocation.
    pub prices_checked: bool,
    /// The last poll left the batching window open: its end is the next look.
    pub window_open: bool,
    pub next_poll: Timestamp,
    /// A pod event woke the loop: poll now.
    pub woken: bool,
    /// The holder refreshed after its last poll already.
    pub refreshed_since_poll: bool,
    /// When the wait after this turn's refresh ends.
    pub wake_at: Timestamp,
}

/// What a Lease turn knows of the earlier holders' launches from its start on: a listing
/// of instances asked for after `since` holds every one but `named` (see
/// `nodewright::lease::launches`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnStart {
    pub since: Timestamp,
    pub named: Vec<InstanceId>,
}

/// How a look at the Lease went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseCheck {
    /// This invocation holds it; the turn it begins, kept while the turn lasts.
    Held(TurnStart),
    /// Another invocation holds it.
    Waiting,
    /// The API server did not answer: treated as not holding.
    Failed,
}

/// What happened since the last action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Lease(LeaseCheck),
    /// The standby warm-up ended (done, or dropped because the Lease became this one's).
    WarmedUp,
    /// A poll ended; `waiting`: the batching window is open for this long still (`None`
    /// also after a failed poll).
    Polled {
        waiting: Option<Duration>,
    },
    /// A refresh ended: `ran` when it did anything (time has passed: look again before
    /// waiting), `prices_checked` when prices were asked for or not due, `woken` when a
    /// pod event came during it.
    Refreshed {
        ran: bool,
        prices_checked: bool,
        woken: bool,
    },
    /// A wait ended, `woken` early by a pod event.
    Waited {
        woken: bool,
    },
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Acquire, renew or read the Lease; answer with [`Event::Lease`].
    CheckLease,
    /// Warm the provisioner while standing by (and on-demand prices when `prices`), until
    /// done or until the Lease is this invocation's; answer with [`Event::WarmedUp`].
    WarmUp { prices: bool },
    /// Poll; answer with [`Event::Polled`].
    Poll,
    /// Refresh what is due, dropped when a pod wakes the loop (watched when `watch`) or
    /// at the end of the working time; the holder also asks for prices when `prices`. A
    /// standby invocation (`holder` false) only keeps its listing of instances fresh.
    /// Answer with [`Event::Refreshed`].
    Refresh {
        holder: bool,
        prices: bool,
        watch: bool,
    },
    /// Wait until `until`, or less when `watch` and a pod event comes; answer with
    /// [`Event::Waited`].
    Wait { until: Timestamp, watch: bool },
    /// The working time is over: release the Lease and report.
    Finish,
}

/// The first step of an invocation that starts at `now`.
pub fn start(settings: &Settings, now: Timestamp) -> (State, Action) {
    let state = State {
        acting: false,
        turn: None,
        warmed: false,
        prices_checked: false,
        window_open: false,
        next_poll: now,
        woken: false,
        refreshed_since_poll: false,
        wake_at: now,
    };
    top(settings, state, now)
}

/// The step after `event`, at `now`.
pub fn next(settings: &Settings, state: State, event: Event, now: Timestamp) -> (State, Action) {
    match event {
        Event::Lease(check) => lease_checked(settings, state, check, now),
        Event::WarmedUp => top(settings, state, now),
        Event::Polled { waiting } => polled(settings, state, waiting, now),
        Event::Refreshed {
            ran,
            prices_checked,
            woken,
        } => refreshed(settings, state, ran, prices_checked, woken, now),
        Event::Waited { woken } => top(settings, State { woken, ..state }, now),
    }
}

/// A turn of the loop begins: finish, look at the Lease, or act.
fn top(settings: &Settings, mut state: State, now: Timestamp) -> (State, Action) {
    if now >= settings.until {
        return (state, Action::Finish);
    }
    if settings.renew_every.is_some() {
        return (state, Action::CheckLease);
    }
    state.acting = true;
    act(settings, state, now)
}

fn lease_checked(
    settings: &Settings,
    mut state: State,
    check: LeaseCheck,
    now: Timestamp,
) -> (State, Action) {
    match check {
        LeaseCheck::Held(start) => {
            state.acting = true;
            state.turn.get_or_insert(start);
        }
        LeaseCheck::Waiting | LeaseCheck::Failed => {
            state.acting = false;
            state.turn = None;
        }
    }
    if !state.acting && !state.warmed {
        state.warmed = true;
        let prices = !state.prices_checked;
        // Prices interrupted here wait for the next invocation's standby rather than for
        // a holder's poll: they are due every twelve hours.
        state.prices_checked = true;
        return (state, Action::WarmUp { prices });
    }
    act(settings, state, now)
}

fn act(settings: &Settings, mut state: State, now: Timestamp) -> (State, Action) {
    if state.acting && (state.woken || now >= state.next_poll) {
        state.woken = false;
        return (state, Action::Poll);
    }
    after_poll(settings, state, now)
}

fn polled(
    settings: &Settings,
    mut state: State,
    waiting: Option<Duration>,
    now: Timestamp,
) -> (State, Action) {
    state.window_open = waiting.is_some();
    let next = waiting.map_or(settings.poll_interval, |w| w.min(settings.poll_interval));
    state.next_poll = later(now, next);
    state.refreshed_since_poll = false;
    after_poll(settings, state, now)
}

/// Refresh when due, else wait for the next thing to do.
fn after_poll(settings: &Settings, mut state: State, now: Timestamp) -> (State, Action) {
    state.wake_at = match (settings.renew_every, state.acting) {
        (None, _) => state.next_poll,
        (Some(renew), true) => state.next_poll.min(later(now, renew)),
        (Some(_), false) => later(now, settings.standby_recheck.min(settings.poll_interval)),
    }
    .min(settings.until);
    // While the batching window is open its end is the next look anyway.
    let watch = !state.window_open;
    if state.acting && !state.window_open && !state.refreshed_since_poll {
        state.refreshed_since_poll = true;
        let prices = !state.prices_checked;
        return (
            state,
            Action::Refresh {
                holder: true,
                prices,
                watch,
            },
        );
    }
    if !state.acting && state.warmed && settings.renew_every.is_some() {
        // Standing by: the listing of instances a first poll as holder plans with.
        return (
            state,
            Action::Refresh {
                holder: false,
                prices: false,
                watch: false,
            },
        );
    }
    let until = state.wake_at;
    (state, Action::Wait { until, watch })
}

fn refreshed(
    settings: &Settings,
    mut state: State,
    ran: bool,
    prices_checked: bool,
    woken: bool,
    now: Timestamp,
) -> (State, Action) {
    state.prices_checked |= prices_checked;
    if state.acting && (ran || woken) {
        state.woken = woken;
        return top(settings, state, now);
    }
    let (until, watch) = (state.wake_at, !state.window_open);
    (State { woken, ..state }, Action::Wait { until, watch })
}

/// `at + d`, saturating.
fn later(at: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| at.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests;
