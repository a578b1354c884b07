//! One row per transition: the state before, what happened, the time; the action and the
//! state after.

use super::*;

const POLL: Duration = Duration::from_secs(5);
const RENEW: Duration = Duration::from_secs(2);
const RECHECK: Duration = Duration::from_secs(1);

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

fn settings(lease: bool) -> Settings {
    Settings {
        poll_interval: POLL,
        renew_every: lease.then_some(RENEW),
        standby_recheck: RECHECK,
        until: t(50),
    }
}

/// A turn bounded at `since` with one earlier launch named.
fn start_at(since: i64) -> TurnStart {
    TurnStart {
        since: t(since),
        named: vec![InstanceId::new("i-0earlier")],
    }
}

/// A loop that has just started at 0.
fn fresh() -> State {
    start(&settings(true), t(0)).0
}

/// The holder, after a poll at `polled` whose refresh has run: waiting for the next poll.
fn holder(polled: i64) -> State {
    State {
        acting: true,
        turn: Some(start_at(0)),
        next_poll: t(polled) + POLL,
        refreshed_since_poll: true,
        prices_checked: true,
        wake_at: t(polled) + RENEW,
        ..fresh()
    }
}

/// Standing by, warmed up already.
fn standby() -> State {
    State {
        warmed: true,
        prices_checked: true,
        ..fresh()
    }
}

type Row = (
    &'static str,
    bool,
    State,
    Event,
    i64,
    Action,
    fn(&State) -> bool,
);

#[test]
fn each_step_of_an_invocation_follows_from_its_state_what_happened_and_the_time() {
    let held = |since| Event::Lease(LeaseCheck::Held(start_at(since)));
    let rows: Vec<Row> = vec![
        (
            "a woken standby looks at the Lease first",
            true,
            standby(),
            Event::Waited { woken: true },
            3,
            Action::CheckLease,
            |s| s.woken,
        ),
        (
            "without a Lease the first step is a poll",
            false,
            fresh(),
            Event::Waited { woken: false },
            0,
            Action::Poll,
            |s| s.acting && s.turn.is_none(),
        ),
        (
            "the Lease held for the first time begins a turn bounded by the earlier launches, and polls",
            true,
            fresh(),
            held(-7),
            0,
            Action::Poll,
            |s| s.acting && s.turn == Some(start_at(-7)),
        ),
        (
            "a renewal keeps the turn's bound",
            true,
            holder(0),
            held(4),
            4,
            Action::Wait {
                until: t(5),
                watch: true,
            },
            |s| s.turn == Some(start_at(0)),
        ),
        (
            "another holder the first time: warm up, with prices",
            true,
            fresh(),
            Event::Lease(LeaseCheck::Waiting),
            0,
            Action::WarmUp { prices: true },
            |s| s.warmed && s.prices_checked && !s.acting,
        ),
        (
            "a failed check stands by like another holder, and ends the turn",
            true,
            holder(0),
            Event::Lease(LeaseCheck::Failed),
            3,
            Action::WarmUp { prices: false },
            |s| s.turn.is_none() && !s.acting,
        ),
        (
            "warmed up already: a standby keeps its listing of instances fresh",
            true,
            standby(),
            Event::Lease(LeaseCheck::Waiting),
            3,
            Action::Refresh {
                holder: false,
                prices: false,
                watch: false,
            },
            |s| s.wake_at == t(4),
        ),
        (
            "after its refresh a standby waits for its next look at the Lease",
            true,
            State {
                wake_at: t(4),
                ..standby()
            },
            Event::Refreshed {
                ran: true,
                prices_checked: false,
                woken: false,
            },
            3,
            Action::Wait {
                until: t(4),
                watch: true,
            },
            |_| true,
        ),
        (
            "the warm-up over, the Lease again",
            true,
            standby(),
            Event::WarmedUp,
            2,
            Action::CheckLease,
            |_| true,
        ),
        (
            "a poll that left the batching window open looks again when it closes, without refreshing",
            true,
            State {
                refreshed_since_poll: false,
                ..holder(0)
            },
            Event::Polled {
                waiting: Some(Duration::from_millis(300)),
            },
            0,
            Action::Wait {
                until: t(0) + Duration::from_millis(300),
                watch: false,
            },
            |s| s.window_open,
        ),
        (
            "after a poll the holder refreshes once, watching pods, with prices when unchecked",
            true,
            State {
                prices_checked: false,
                ..holder(0)
            },
            Event::Polled { waiting: None },
            10,
            Action::Refresh {
                holder: true,
                prices: true,
                watch: true,
            },
            |s| s.next_poll == t(15) && s.wake_at == t(12) && s.refreshed_since_poll,
        ),
        (
            "a refresh that ran: look again before waiting",
            true,
            holder(10),
            Event::Refreshed {
                ran: true,
                prices_checked: true,
                woken: false,
            },
            11,
            Action::CheckLease,
            |s| s.prices_checked,
        ),
        (
            "a refresh cut short by a pod: look again, woken",
            true,
            holder(10),
            Event::Refreshed {
                ran: false,
                prices_checked: false,
                woken: true,
            },
            11,
            Action::CheckLease,
            |s| s.woken,
        ),
        (
            "a refresh with nothing due: wait as planned",
            true,
            holder(10),
            Event::Refreshed {
                ran: false,
                prices_checked: true,
                woken: false,
            },
            10,
            Action::Wait {
                until: t(12),
                watch: true,
            },
            |_| true,
        ),
        (
            "a holder woken by a pod polls at once",
            true,
            State {
                woken: true,
                ..holder(10)
            },
            held(0),
            11,
            Action::Poll,
            |s| !s.woken,
        ),
        (
            "a holder not yet due waits until the next poll or renewal, whichever first",
            true,
            holder(10),
            held(0),
            14,
            Action::Wait {
                until: t(15),
                watch: true,
            },
            |_| true,
        ),
        (
            "without a Lease the wait is until the next poll",
            false,
            State {
                acting: true,
                turn: None,
                ..holder(10)
            },
            Event::Waited { woken: false },
            11,
            Action::Wait {
                until: t(15),
                watch: true,
            },
            |_| true,
        ),
        (
            "no wait goes past the end of the working time",
            false,
            State {
                acting: true,
                turn: None,
                ..holder(48)
            },
            Event::Waited { woken: false },
            49,
            Action::Wait {
                until: t(50),
                watch: true,
            },
            |_| true,
        ),
        (
            "at the end of the working time, finish",
            true,
            holder(45),
            Event::Waited { woken: true },
            50,
            Action::Finish,
            |_| true,
        ),
    ];
    for (case, lease, before, event, now, want, after) in rows {
        let (state, action) = next(&settings(lease), before, event, t(now));
        assert_eq!(action, want, "{case}");
        assert!(after(&state), "{case}: {state:?}");
    }
}

#[test]
fn an_invocation_with_a_lease_starts_by_looking_at_it_and_one_past_its_time_finishes() {
    assert_eq!(start(&settings(true), t(0)).1, Action::CheckLease);
    assert_eq!(start(&settings(false), t(0)).1, Action::Poll);
    assert_eq!(start(&settings(true), t(50)).1, Action::Finish);
}
