//! The soak's invariants, judged from what the world recorded: pure functions over
//! observations, each with its breaches named. The world's side (sampling the cluster, the
//! audit of pod removals, the instances EC2 has seen, the queue's fates) is in `observe.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::kube_sim::{PodRemoval, Via};

/// A removal record as the checker read it off a node (`nodewright.io/removal`).
#[derive(Debug, Clone, PartialEq)]
pub struct SeenRecord {
    pub cause: String,
    pub deadline: Option<Timestamp>,
    pub progress: Timestamp,
}

impl SeenRecord {
    /// The record an annotation holds; `None` when it is not one.
    pub fn parse(annotation: &str) -> Option<SeenRecord> {
        let v: serde_json::Value = serde_json::from_str(annotation).ok()?;
        let ts = |k: &str| v.get(k)?.as_str()?.parse::<Timestamp>().ok();
        Some(SeenRecord {
            cause: v.get("cause")?.as_str()?.to_string(),
            deadline: ts("deadline"),
            progress: ts("progress")?,
        })
    }

    /// AWS takes the node at the deadline whatever nodewright does.
    pub fn involuntary(&self) -> bool {
        matches!(
            self.cause.as_str(),
            "spot-interrupted"
                | "capacity-reservation-interrupted"
                | "capacity-block-expiring"
                | "scheduled-maintenance"
                | "instance-stopping"
        )
    }
}

/// Clock slack between the world's samples and the API server's own timestamps (whole
/// seconds in RFC 3339 there).
const SLACK: SignedDuration = SignedDuration::from_secs(2);

/// Why a pod's removal broke the removal guarantees, if it did. `record`: the removal
/// record its node carried (the last one seen before the removal).
/// `aws_took`: when AWS stopped or reclaimed the node's instance, if it did: its pods
/// were going with it, whatever grace they are given after that.
pub fn judge_removal(
    r: &PodRemoval,
    record: Option<&SeenRecord>,
    aws_took: Option<Timestamp>,
) -> Option<String> {
    if r.via == Via::RefusedEviction || aws_took.is_some_and(|t| t <= r.at + SLACK) {
        return None;
    }
    let who = format!(
        "{}/{} on {}",
        r.namespace,
        r.name,
        r.node.as_deref().unwrap_or("?")
    );
    // An involuntary removal without a deadline (the instance already stopping) is due
    // now: its pods are going with the instance whatever grace they are given.
    let deadline = record
        .filter(|rec| rec.involuntary())
        .map(|rec| rec.deadline.unwrap_or(r.at));
    match deadline {
        Some(deadline) => {
            let own = SignedDuration::from_secs(r.own_grace);
            if r.via == Via::Delete && r.budget_forbade && r.at + own + SLACK < deadline {
                return Some(format!(
                    "{who}: deleted past its PodDisruptionBudget at {}, before the deadline {deadline} less its grace {}s",
                    r.at, r.own_grace
                ));
            }
            let left = deadline.duration_since(r.at).as_secs().max(0);
            let owed = r.own_grace.min(left);
            (r.grace + SLACK.as_secs() < owed).then(|| {
                format!(
                    "{who}: given {}s of grace at {}, owed min(its {}s, {left}s to the deadline)",
                    r.grace, r.at, r.own_grace
                )
            })
        }
        None => {
            if r.via == Via::Delete && r.budget_forbade {
                return Some(format!(
                    "{who}: deleted past its PodDisruptionBudget at {} with no involuntary deadline",
                    r.at
                ));
            }
            (r.grace < r.own_grace && !r.was_terminating).then(|| {
                format!(
                    "{who}: given {}s of grace at {} by a voluntary removal, its own is {}s",
                    r.grace, r.at, r.own_grace
                )
            })
        }
    }
}

/// One spot warning the soak sent: the node, its pods then, and the two minutes' end.
#[derive(Debug, Clone, PartialEq)]
pub struct Warned {
    pub node: String,
    pub deadline: Timestamp,
    pub pods: Vec<String>,
}

/// The pods of a warned node neither asked to leave nor gone by `deadline - 30 s`.
/// `removed`: each pod's first removal; `gone`: when each pod was first seen gone; `end`:
/// the last sample (a warning whose time was not up by then is not judged).
pub fn late_evictions(
    w: &Warned,
    removed: &BTreeMap<String, Timestamp>,
    gone: &BTreeMap<String, Timestamp>,
    end: Timestamp,
) -> Vec<String> {
    let by = w.deadline - SignedDuration::from_secs(30);
    if by > end {
        return Vec::new();
    }
    w.pods
        .iter()
        .filter(|p| {
            let asked = removed.get(*p).is_some_and(|t| *t <= by + SLACK);
            let went = gone.get(*p).is_some_and(|t| *t <= by + SLACK);
            !asked && !went
        })
        .map(|p| format!("{p} on {} (deadline {})", w.node, w.deadline))
        .collect()
}

/// Launch decisions (the `nodewright.io/nodeclaim` tag) that EC2 ran more than one
/// instance for.
pub fn launched_twice(claims: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    claims
        .iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(claim, ids)| format!("node claim {claim}: instances {ids:?}"))
        .collect()
}

/// A node tainted by nodewright whose removal has not moved for longer than `bound` at
/// `now` (a taint with no record counts from when it was first seen).
pub fn stuck(
    node: &str,
    tainted_since: Timestamp,
    record: Option<&SeenRecord>,
    now: Timestamp,
    bound: Duration,
) -> Option<String> {
    let since = record.map_or(tainted_since, |r| r.progress.max(tainted_since));
    let bound = SignedDuration::try_from(bound).unwrap_or(SignedDuration::MAX);
    (now.duration_since(since) > bound).then(|| {
        format!(
            "{node}: tainted with no progress since {since} ({} at {now})",
            record.map_or("no record", |r| r.cause.as_str())
        )
    })
}

/// Voluntary removals of one pool in progress at once against its budget.
pub fn over_budget(pool: &str, voluntary: usize, allowed: usize, now: Timestamp) -> Option<String> {
    (voluntary > allowed).then(|| {
        format!("{pool}: {voluntary} voluntary removals at once at {now}, budget {allowed}")
    })
}

/// The nodes a pool's budget (`nodes`: a count or a percentage, rounded up as Karpenter
/// rounds it) allows disrupting among `total`.
pub fn budget_allows(nodes: &str, total: usize) -> Option<usize> {
    match nodes.strip_suffix('%') {
        Some(p) => {
            let p: usize = p.parse().ok()?;
            Some((total * p).div_ceil(100))
        }
        None => nodes.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn removal(at: &str, via: Via, grace: i64, own: i64, forbade: bool) -> PodRemoval {
        PodRemoval {
            at: ts(at),
            namespace: "default".into(),
            name: "web-1".into(),
            node: Some("n1".into()),
            via,
            grace,
            own_grace: own,
            budget_forbade: forbade,
            was_terminating: false,
            node_annotations: BTreeMap::new(),
        }
    }

    fn record(cause: &str, deadline: Option<&str>) -> SeenRecord {
        SeenRecord {
            cause: cause.into(),
            deadline: deadline.map(ts),
            progress: ts("2026-11-27T10:00:00Z"),
        }
    }

    #[test]
    fn removals_are_judged_by_budget_grace_and_deadline() {
        let spot = record("spot-interrupted", Some("2026-11-27T10:02:00Z"));
        let drift = record("drifted", None);
        let stopping = record("instance-stopping", None);
        let cases: [(&str, PodRemoval, Option<&SeenRecord>, bool); 10] = [
            (
                "a stopping instance's pod deleted at once",
                removal("2026-11-27T10:01:00Z", Via::Delete, 0, 30, true),
                Some(&stopping),
                false,
            ),
            (
                "an eviction with full grace",
                removal("2026-11-27T10:00:10Z", Via::Eviction, 30, 30, false),
                Some(&spot),
                false,
            ),
            (
                "a delete past a PDB at deadline less grace",
                removal("2026-11-27T10:01:30Z", Via::Delete, 30, 30, true),
                Some(&spot),
                false,
            ),
            (
                "a delete past a PDB too early",
                removal("2026-11-27T10:00:30Z", Via::Delete, 30, 30, true),
                Some(&spot),
                true,
            ),
            (
                "grace cut to what is left",
                removal("2026-11-27T10:01:50Z", Via::Delete, 10, 30, false),
                Some(&spot),
                false,
            ),
            (
                "grace cut below what is left",
                removal("2026-11-27T10:01:00Z", Via::Delete, 0, 30, false),
                Some(&spot),
                true,
            ),
            (
                "a voluntary delete past a PDB",
                removal("2026-11-27T10:01:00Z", Via::Delete, 30, 30, true),
                Some(&drift),
                true,
            ),
            (
                "a voluntary eviction with less grace",
                removal("2026-11-27T10:01:00Z", Via::Eviction, 5, 30, false),
                Some(&drift),
                true,
            ),
            (
                "a delete with no record past a PDB",
                removal("2026-11-27T10:01:00Z", Via::Delete, 30, 30, true),
                None,
                true,
            ),
            (
                "a voluntary eviction with full grace",
                removal("2026-11-27T10:01:00Z", Via::Eviction, 30, 30, false),
                Some(&drift),
                false,
            ),
        ];
        for (what, r, rec, breach) in cases {
            let judged = judge_removal(&r, rec, None);
            assert_eq!(judged.is_some(), breach, "{what}: {judged:?}");
        }
        // A pod of an instance AWS already took goes with grace 0; a refused eviction is a
        // request, not a removal.
        let late = removal("2026-11-27T10:01:00Z", Via::Delete, 0, 30, true);
        assert!(judge_removal(&late, None, Some(ts("2026-11-27T10:00:50Z"))).is_none());
        assert!(judge_removal(&late, None, Some(ts("2026-11-27T10:05:00Z"))).is_some());
        let refused = removal("2026-11-27T10:01:00Z", Via::RefusedEviction, 0, 30, true);
        assert!(judge_removal(&refused, None, None).is_none());
    }

    #[test]
    fn a_warned_nodes_pods_must_be_asked_to_leave_thirty_seconds_before_the_deadline() {
        let w = Warned {
            node: "n1".into(),
            deadline: ts("2026-11-27T10:02:00Z"),
            pods: vec!["a".into(), "b".into(), "c".into(), "d".into()],
        };
        let removed = BTreeMap::from([
            ("a".to_string(), ts("2026-11-27T10:00:20Z")),
            ("b".to_string(), ts("2026-11-27T10:01:50Z")),
        ]);
        let gone = BTreeMap::from([("c".to_string(), ts("2026-11-27T10:00:40Z"))]);
        let late = late_evictions(&w, &removed, &gone, ts("2026-11-27T10:05:00Z"));
        assert_eq!(late.len(), 2, "{late:?}");
        assert!(
            late[0].starts_with("b ") && late[1].starts_with("d "),
            "{late:?}"
        );
        let early_end = ts("2026-11-27T10:01:00Z");
        assert!(
            late_evictions(&w, &removed, &gone, early_end).is_empty(),
            "not judged yet"
        );
    }

    #[test]
    fn a_claim_with_two_instances_a_stuck_taint_and_an_exceeded_budget_are_breaches() {
        let claims = BTreeMap::from([
            ("c1".to_string(), BTreeSet::from(["i-1".to_string()])),
            (
                "c2".to_string(),
                BTreeSet::from(["i-2".to_string(), "i-3".to_string()]),
            ),
        ]);
        assert_eq!(launched_twice(&claims).len(), 1);

        let now = ts("2026-11-27T10:20:00Z");
        let bound = Duration::from_secs(600);
        let moving = SeenRecord {
            progress: ts("2026-11-27T10:15:00Z"),
            ..record("drifted", None)
        };
        assert!(stuck("n1", ts("2026-11-27T10:00:00Z"), Some(&moving), now, bound).is_none());
        assert!(
            stuck(
                "n1",
                ts("2026-11-27T10:00:00Z"),
                Some(&record("drifted", None)),
                now,
                bound
            )
            .is_some()
        );
        assert!(stuck("n1", ts("2026-11-27T10:00:00Z"), None, now, bound).is_some());
        assert!(stuck("n1", ts("2026-11-27T10:15:00Z"), None, now, bound).is_none());

        assert!(over_budget("p", 2, 2, now).is_none());
        assert!(over_budget("p", 3, 2, now).is_some());
        assert_eq!(budget_allows("10%", 11), Some(2));
        assert_eq!(budget_allows("10%", 0), Some(0));
        assert_eq!(budget_allows("2", 40), Some(2));
        assert_eq!(budget_allows("x", 4), None);
    }

    #[test]
    fn a_record_is_read_off_its_annotation_and_its_cause_tells_involuntary() {
        let r = SeenRecord::parse(
            r#"{"cause":"spot-interrupted","started":"2026-11-27T10:00:00Z","deadline":"2026-11-27T10:02:00Z","progress":"2026-11-27T10:00:05Z"}"#,
        )
        .unwrap();
        assert!(r.involuntary());
        assert_eq!(r.deadline, Some(ts("2026-11-27T10:02:00Z")));
        assert!(!record("expired", None).involuntary());
        assert!(SeenRecord::parse("not json").is_none());
    }
}
