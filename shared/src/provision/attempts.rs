//! Launch attempts of a node claim and the CreateFleet ClientToken each one sends.
//!
//! EC2 answers a reused ClientToken with its first answer for a long time, even after that
//! launch's instance terminated, and answers the same token with other parameters with
//! `IdempotentParameterMismatch` (EC2 API reference, "Ensuring idempotency"). So the token
//! must be (DESIGN.md, "Idempotency"): stable for one launch attempt of one decision across
//! retries and crashes, and new for a new attempt once the previous one is known to have
//! failed or died.
//!
//! The token is `<node claim id>-<attempt>`. The node claim id comes from the decision (the
//! NodePool and its pods), not from what is asked of EC2: inputs that drift between a crash
//! and its retry (the subnet with most free addresses, the order of spot prices, an
//! `@latest` AMI, the lost memory of unavailable offerings) leave it unchanged. The attempt
//! number lives in this container's memory and starts at 0; a new container walks up from
//! 0, and each step it takes is decided from what EC2 answers:
//! - instances that are alive (or not known dead): the attempt stands (a crashed
//!   container's retry is given its original instance back);
//! - instances all known terminated: that attempt died (a spot instance reclaimed before
//!   joining): the next attempt, now;
//! - nothing launched (insufficient capacity, an unsupported offering): the next attempt,
//!   whose request differs, gets its own token;
//! - `IdempotentParameterMismatch`: the token was used, with parameters that have drifted
//!   since. A live instance of the claim means the attempt stands (it is in flight); with
//!   none, it may still be invisible (DescribeInstances is eventually consistent), so the
//!   next attempt comes only once the mismatch has lasted [`MISMATCH_SETTLE`].

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::ids::NodeClaimId;

/// How long a token mismatch without any live instance of the claim must last before the
/// earlier attempt counts as failed: well past the seconds EC2 takes to list a new instance
/// in DescribeInstances, and short against the pods' wait.
pub const MISMATCH_SETTLE: Duration = Duration::from_secs(30);
/// A claim not launched for this long is forgotten (its pods were placed or deleted).
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// The ClientToken of `attempt` of the node claim `nodeclaim` (at most 15 + 11 characters,
/// within CreateFleet's 64).
pub fn client_token(nodeclaim: &str, attempt: u32) -> String {
    format!("{nodeclaim}-{attempt}")
}

/// What EC2 answered to an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Instances, of which `all_dead` says whether every one is known terminated or
    /// shutting down.
    Instances { all_dead: bool },
    /// No instance and an error EC2 would repeat for this token.
    NothingLaunched,
    /// `IdempotentParameterMismatch`; `live_instance`: an owned, live instance carries the
    /// claim's tag.
    TokenMismatch { live_instance: bool },
}

/// What to do next for the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The attempt stands: its instance is launched or on its way.
    Stands,
    /// The attempt failed or died: the next one may be sent now, with a new token.
    NextAttempt,
    /// Not known yet: send nothing for this claim in this poll.
    Wait,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    attempt: u32,
    mismatch_since: Option<SystemTime>,
    touched: SystemTime,
}

/// Per node claim, the attempt this container is at.
#[derive(Debug, Default, Clone)]
pub struct LaunchAttempts {
    claims: HashMap<NodeClaimId, Entry>,
}

impl LaunchAttempts {
    /// The token of the claim's current attempt.
    pub fn token(&self, nodeclaim: &str) -> String {
        client_token(nodeclaim, self.attempt(nodeclaim))
    }

    pub fn attempt(&self, nodeclaim: &str) -> u32 {
        self.claims.get(nodeclaim).map_or(0, |e| e.attempt)
    }

    /// Records EC2's answer to the current attempt and says what follows.
    pub fn judge(&mut self, nodeclaim: &str, answer: Answer, now: SystemTime) -> Next {
        let entry = self
            .claims
            .entry(NodeClaimId::new(nodeclaim))
            .or_insert(Entry {
                attempt: 0,
                mismatch_since: None,
                touched: now,
            });
        entry.touched = now;
        let next = match answer {
            Answer::Instances { all_dead: false }
            | Answer::TokenMismatch {
                live_instance: true,
            } => Next::Stands,
            Answer::Instances { all_dead: true } | Answer::NothingLaunched => Next::NextAttempt,
            Answer::TokenMismatch {
                live_instance: false,
            } => {
                let since = *entry.mismatch_since.get_or_insert(now);
                if now.duration_since(since).unwrap_or_default() >= MISMATCH_SETTLE {
                    Next::NextAttempt
                } else {
                    Next::Wait
                }
            }
        };
        match next {
            Next::NextAttempt => {
                entry.attempt += 1;
                entry.mismatch_since = None;
            }
            Next::Stands => entry.mismatch_since = None,
            Next::Wait => {}
        }
        next
    }

    /// Forgets claims untouched for [`FORGET_AFTER`].
    pub fn forget_old(&mut self, now: SystemTime) {
        self.claims
            .retain(|_, e| now.duration_since(e.touched).unwrap_or_default() < FORGET_AFTER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
    }

    #[test]
    fn a_new_container_starts_at_attempt_zero_so_a_crashed_launch_is_answered_again() {
        let a = LaunchAttempts::default();
        assert_eq!(a.token("nw-abc"), "nw-abc-0");
        assert_eq!(client_token("nw-abc", 0), a.token("nw-abc"));
    }

    #[test]
    fn answers_move_the_claim_to_its_next_attempt_only_when_the_last_one_failed_or_died() {
        // (answers in order with their second, the Next of the last, the attempt after)
        type Case = (&'static str, Vec<(Answer, u64)>, Next, u32);
        let live = Answer::Instances { all_dead: false };
        let dead = Answer::Instances { all_dead: true };
        let nothing = Answer::NothingLaunched;
        let mismatch = Answer::TokenMismatch {
            live_instance: false,
        };
        let mismatch_live = Answer::TokenMismatch {
            live_instance: true,
        };
        let cases: Vec<Case> = vec![
            ("a live instance stands", vec![(live, 0)], Next::Stands, 0),
            (
                "a spot instance reclaimed before joining is relaunched with a new token",
                vec![(dead, 0)],
                Next::NextAttempt,
                1,
            ),
            (
                "insufficient capacity leaves the retry after the exclusion a new token",
                vec![(nothing, 0)],
                Next::NextAttempt,
                1,
            ),
            (
                "a replayed failure after a crash moves on too",
                vec![(nothing, 0), (nothing, 5)],
                Next::NextAttempt,
                2,
            ),
            (
                "a mismatch with the instance in flight stands",
                vec![(mismatch_live, 0)],
                Next::Stands,
                0,
            ),
            (
                "a fresh mismatch without a visible instance waits",
                vec![(mismatch, 0), (mismatch, 29)],
                Next::Wait,
                0,
            ),
            (
                "a mismatch that lasts past the settle time is a failed attempt",
                vec![(mismatch, 0), (mismatch, 30)],
                Next::NextAttempt,
                1,
            ),
            (
                "an instance seen meanwhile resets the mismatch clock",
                vec![(mismatch, 0), (mismatch_live, 20), (mismatch, 40)],
                Next::Wait,
                0,
            ),
        ];
        for (name, answers, want_next, want_attempt) in cases {
            let mut a = LaunchAttempts::default();
            let mut last = Next::Wait;
            for (answer, s) in answers {
                last = a.judge("nw-1", answer, at(s));
            }
            assert_eq!(last, want_next, "{name}");
            assert_eq!(a.attempt("nw-1"), want_attempt, "{name}");
            assert_eq!(a.token("nw-1"), format!("nw-1-{want_attempt}"), "{name}");
        }
    }

    #[test]
    fn claims_are_counted_apart_and_forgotten_after_an_hour_untouched() {
        let mut a = LaunchAttempts::default();
        a.judge("nw-1", Answer::NothingLaunched, at(0));
        a.judge("nw-2", Answer::NothingLaunched, at(3000));
        assert_eq!((a.attempt("nw-1"), a.attempt("nw-2")), (1, 1));
        a.forget_old(at(3700));
        assert_eq!((a.attempt("nw-1"), a.attempt("nw-2")), (0, 1));
    }
}
