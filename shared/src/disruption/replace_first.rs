//! Replacement first: a node going for a reason that is not "nobody needs it" (expiration,
//! drift, a consolidation's `replace`) whose pods need capacity elsewhere is drained only
//! once that capacity is a Ready node, so its pods are never pending for a launch's minutes.
//! An expired or drifted node asks for its replacement once tainted; a consolidation's
//! replace asks ONCE for the pods of all its nodes before any is tainted
//! ([`launches_first`]), so several nodes become the one cheaper node the simulation
//! found, not one node each, and records the answer on every one of them. Karpenter does the
//! same (`pkg/controllers/disruption/`: launch the replacement NodeClaims, wait for them
//! to initialize, then taint and drain).
//!
//! The sweeper runs every minute and keeps no memory: what it asked for is written on the
//! node (`nodewright.io/replacement`, the instance ids launched, `none` when the pods fit
//! on existing capacity), and [`replace_first`] decides from that, the Ready nodes and
//! the time the removal began what the next step is.

use std::time::Duration;

use jiff::Timestamp;

use super::Reason;
use super::plan::{Action, Command};

/// On a node being removed: the instances launched to replace it, comma-separated
/// (`none`: nothing needed launching). Absent: not asked yet. The interruption function
/// writes the same annotation in the same shape (`functions/interruption/src/steps.rs`).
pub const REPLACEMENT_ANNOTATION: &str = "nodewright.io/replacement";

/// How long a removal waits for its replacement before draining anyway. The interruption
/// function waits 10 minutes for a rebalance replacement; an expired or drifted node has no
/// AWS deadline, so it waits as long as a launch may take to join at all (Karpenter's
/// `registrationTTL`, [`super::JOIN_TIMEOUT`]), after which the replacement is taken
/// for lost and the node goes: its pods are then the provisioner's, as pending pods.
pub const REPLACEMENT_TIMEOUT: Duration = super::hygiene::JOIN_TIMEOUT;

/// The next step of a removal whose node may need a replacement first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplaceFirst {
    /// No replacement is needed (nothing moves, or the reason is that nobody needs the
    /// node), or it is Ready, or nothing had to be launched: drain.
    Drain,
    /// Ask the provisioning core for one (again, after a failure: the launch is
    /// idempotent by its pods' uids).
    Ask,
    /// Launched, not Ready yet.
    Wait { remaining: Duration },
    /// Not Ready within [`REPLACEMENT_TIMEOUT`] of the removal's start: drain anyway.
    GiveUp,
}

/// Whether a node removed for `reason` waits for a replacement, given what it records
/// (`None`: nothing). An empty node's pods are DaemonSets. An underutilized node is a
/// consolidation's delete unless it records a replacement: a replace records its
/// replacement before its nodes are tainted ([`launches_first`]).
pub fn needs_replacement(reason: Reason, recorded: Option<&[String]>) -> bool {
    match reason {
        Reason::Expired | Reason::Drifted => true,
        Reason::Underutilized => recorded.is_some(),
        Reason::Empty => false,
    }
}

/// Whether the executor asks for `command`'s replacement before tainting any of its nodes,
/// once for the pods of all of them: a consolidation's replace (its nodes go together or
/// not at all, and only for something cheaper).
pub fn launches_first(command: &Command) -> bool {
    command.action == Action::Replace && command.reason == Reason::Underutilized
}

/// `recorded`: the annotation's instance ids (`None`: absent). `ready(id)`: a Ready Node
/// runs on that instance.
pub fn replace_first(
    reason: Reason,
    pods_move: bool,
    recorded: Option<&[String]>,
    ready: impl Fn(&str) -> bool,
    started: Timestamp,
    now: Timestamp,
) -> ReplaceFirst {
    if !needs_replacement(reason, recorded) || !pods_move {
        return ReplaceFirst::Drain;
    }
    let waited = now.duration_since(started);
    let waited = if waited.is_negative() {
        Duration::ZERO
    } else {
        waited.unsigned_abs()
    };
    let Some(remaining) = REPLACEMENT_TIMEOUT
        .checked_sub(waited)
        .filter(|r| !r.is_zero())
    else {
        return match recorded {
            Some(ids) if ids.iter().all(|id| ready(id)) => ReplaceFirst::Drain,
            _ => ReplaceFirst::GiveUp,
        };
    };
    match recorded {
        None => ReplaceFirst::Ask,
        Some(ids) if ids.iter().all(|id| ready(id)) => ReplaceFirst::Drain,
        Some(_) => ReplaceFirst::Wait { remaining },
    }
}

/// The annotation's value for `ids`.
pub fn replacement_value(ids: &[String]) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.join(",")
}

/// The ids an annotation value names (`none` or empty: none).
pub fn parse_replacement(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "none")
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minutes: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn step(
        reason: Reason,
        pods_move: bool,
        recorded: Option<&[&str]>,
        ready: &[&str],
        minutes: i64,
    ) -> ReplaceFirst {
        let recorded = recorded.map(ids);
        replace_first(
            reason,
            pods_move,
            recorded.as_deref(),
            |id| ready.contains(&id),
            at(0),
            at(minutes),
        )
    }

    #[test]
    fn an_expired_node_with_pods_asks_for_its_replacement_before_anything_else() {
        assert_eq!(step(Reason::Expired, true, None, &[], 0), ReplaceFirst::Ask);
        assert_eq!(step(Reason::Drifted, true, None, &[], 3), ReplaceFirst::Ask);
    }

    #[test]
    fn a_consolidation_replace_waits_for_the_replacement_it_recorded_and_gives_up_as_expiry_does() {
        let u = Reason::Underutilized;
        assert_eq!(
            step(u, true, Some(&["i-1"]), &[], 3),
            ReplaceFirst::Wait {
                remaining: Duration::from_secs(12 * 60)
            }
        );
        assert_eq!(
            step(u, true, Some(&["i-1"]), &["i-1"], 3),
            ReplaceFirst::Drain
        );
        assert_eq!(step(u, true, Some(&[]), &[], 0), ReplaceFirst::Drain);
        assert_eq!(step(u, true, Some(&["i-1"]), &[], 15), ReplaceFirst::GiveUp);
        // Never asked from a node: the command asked once for all its nodes.
        assert_eq!(step(u, true, None, &[], 0), ReplaceFirst::Drain);
    }

    #[test]
    fn only_a_consolidation_replace_launches_before_its_nodes_are_tainted() {
        let command = |action, reason| Command {
            action,
            reason,
            nodes: vec!["a".into(), "b".into()],
            savings_per_hour: 0.1,
            replacement: Vec::new(),
        };
        let cases = [
            (Action::Replace, Reason::Underutilized, true),
            (Action::Delete, Reason::Underutilized, false),
            (Action::Replace, Reason::Expired, false),
            (Action::Replace, Reason::Drifted, false),
            (Action::Delete, Reason::Empty, false),
        ];
        for (action, reason, want) in cases {
            assert_eq!(
                launches_first(&command(action, reason)),
                want,
                "{action:?} {reason:?}"
            );
        }
    }

    #[test]
    fn empty_and_underutilized_nodes_and_nodes_without_moving_pods_drain_at_once() {
        assert_eq!(step(Reason::Empty, true, None, &[], 0), ReplaceFirst::Drain);
        assert_eq!(
            step(Reason::Underutilized, true, None, &[], 0),
            ReplaceFirst::Drain
        );
        assert_eq!(
            step(Reason::Expired, false, None, &[], 0),
            ReplaceFirst::Drain
        );
    }

    #[test]
    fn a_launched_replacement_is_awaited_until_every_instance_is_a_ready_node() {
        assert_eq!(
            step(Reason::Expired, true, Some(&["i-1", "i-2"]), &["i-1"], 2),
            ReplaceFirst::Wait {
                remaining: Duration::from_secs(13 * 60)
            }
        );
        assert_eq!(
            step(
                Reason::Expired,
                true,
                Some(&["i-1", "i-2"]),
                &["i-1", "i-2"],
                2
            ),
            ReplaceFirst::Drain
        );
    }

    #[test]
    fn pods_that_fit_on_existing_capacity_need_no_launch_and_drain_at_once() {
        assert_eq!(
            step(Reason::Expired, true, Some(&[]), &[], 0),
            ReplaceFirst::Drain
        );
    }

    #[test]
    fn a_replacement_not_ready_in_fifteen_minutes_is_given_up_and_the_node_drains() {
        assert_eq!(
            step(Reason::Expired, true, Some(&["i-1"]), &[], 15),
            ReplaceFirst::GiveUp
        );
        // A launch that failed every time is given up the same way.
        assert_eq!(
            step(Reason::Expired, true, None, &[], 16),
            ReplaceFirst::GiveUp
        );
        // Ready at the last moment is still a plain drain.
        assert_eq!(
            step(Reason::Expired, true, Some(&["i-1"]), &["i-1"], 20),
            ReplaceFirst::Drain
        );
    }

    #[test]
    fn a_clock_behind_the_start_waits_the_whole_timeout() {
        assert_eq!(
            step(Reason::Expired, true, Some(&["i-1"]), &[], -1),
            ReplaceFirst::Wait {
                remaining: REPLACEMENT_TIMEOUT
            }
        );
    }

    #[test]
    fn the_annotation_round_trips_its_ids_and_reads_none_as_no_launch() {
        let v = replacement_value(&ids(&["i-1", "i-2"]));
        assert_eq!(v, "i-1,i-2");
        assert_eq!(parse_replacement(&v), ids(&["i-1", "i-2"]));
        assert_eq!(replacement_value(&[]), "none");
        assert_eq!(parse_replacement("none"), Vec::<String>::new());
        assert_eq!(parse_replacement(""), Vec::<String>::new());
        assert_eq!(parse_replacement(" i-1 ,, "), ids(&["i-1"]));
    }
}
