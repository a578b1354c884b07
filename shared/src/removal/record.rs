//! The one record of a removal in progress, on the node it removes: the annotation
//! `nodewright.io/removal`, JSON, written and read only here. It is written together with
//! the disruption taint (one guarded write: `NodeOps::mark_removal`), so a node is never
//! tainted by nodewright without saying why, and the taint goes with it when a removal is
//! given up. Whatever function looks at the node next (the interruption function's next
//! follow-up, the next sweep) continues from it; nothing else is remembered.
//!
//! After a voluntary removal is given up the node carries `nodewright.io/removal-backoff`
//! for a while, so the sweeper does not take it again at once.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::cause::Cause;

pub const REMOVAL_ANNOTATION: &str = "nodewright.io/removal";
pub const BACKOFF_ANNOTATION: &str = "nodewright.io/removal-backoff";

/// What became of the capacity a removal asked for its pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Replacement {
    #[default]
    NotAsked,
    /// Asked; nothing had to be launched (the pods fit on capacity the cluster has).
    NotNeeded,
    Launched {
        instances: Vec<String>,
        at: Timestamp,
    },
    /// Some pods have nowhere to go (unschedulable, or a launch that failed).
    Failed { why: String, at: Timestamp },
}

/// The offering a replacement must avoid: the one AWS is reclaiming (a spot or capacity
/// reservation interruption) or warned about (a rebalance recommendation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Avoid {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub cause: Cause,
    /// When nodewright took the node (tainted it and wrote this).
    pub started: Timestamp,
    /// When AWS takes the instance (involuntary removals): the warning's deadline, a
    /// scheduled change's start or end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// When the drain began: a voluntary drain's `terminationGracePeriod` counts from here,
    /// not from the taint (waiting for a replacement spends no pod's grace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_started: Option<Timestamp>,
    #[serde(default)]
    pub replacement: Replacement,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avoid: Option<Avoid>,
    /// The last time the removal moved on (the node taken, capacity launched or Ready, a
    /// pod asked to leave or gone): a removal with none for too long is finished or given
    /// up, never left tainted.
    pub progress: Timestamp,
    /// When the function that took the node looks at it next (its follow-up's delay): the
    /// sweeper takes over a removal whose look is long overdue (a lost follow-up chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_look: Option<Timestamp>,
    /// The event that began it (EventBridge's id, or the sweeper's command), for logs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub origin: String,
}

#[derive(Debug, thiserror::Error)]
#[error("node {node}: annotation {REMOVAL_ANNOTATION} is not a removal record: {source}")]
pub struct RecordError {
    node: String,
    #[source]
    source: serde_json::Error,
}

impl Record {
    pub fn new(cause: Cause, now: Timestamp, deadline: Option<Timestamp>) -> Record {
        Record {
            cause,
            started: now,
            deadline,
            drain_started: None,
            replacement: Replacement::NotAsked,
            avoid: None,
            progress: now,
            next_look: None,
            origin: String::new(),
        }
    }

    /// Whether the look the record promises is overdue by more than `margin` (or, with no
    /// look promised, nothing moved for that long).
    pub fn overdue(&self, now: Timestamp, margin: Duration) -> bool {
        let since = self.next_look.unwrap_or(self.progress);
        now > since + SignedDuration::try_from(margin).unwrap_or(SignedDuration::MAX)
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The record `annotations` hold, if any; an unreadable one is an error naming the
    /// node (the caller reports it and treats the node as taken, never as free). A node an
    /// earlier release began removing carries its two annotations instead
    /// (`nodewright.io/disruption` and `nodewright.io/replacement`): read as a record.
    pub fn read(
        node: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Option<Record>, RecordError> {
        match annotations.get(REMOVAL_ANNOTATION).map(String::as_str) {
            None | Some("") => Ok(legacy(annotations)),
            Some(v) => serde_json::from_str(v)
                .map(Some)
                .map_err(|source| RecordError {
                    node: node.to_string(),
                    source,
                }),
        }
    }

    /// The replacement instances recorded, if any were launched.
    pub fn launched(&self) -> &[String] {
        match &self.replacement {
            Replacement::Launched { instances, .. } => instances,
            _ => &[],
        }
    }

    /// The record of a removal the sweeper begins for `reason`. Repair is forceful, as
    /// Karpenter sets a repaired NodeClaim's termination time to now: its drain's deadline
    /// is when it begins.
    pub fn sweep(reason: crate::disruption::Reason, now: Timestamp) -> Record {
        let deadline = (reason == crate::disruption::Reason::Unhealthy).then_some(now);
        let mut record = Record::new(reason.into(), now, deadline);
        record.origin = format!("sweep {}", reason.as_str());
        record
    }

    pub fn moved_on(mut self, now: Timestamp) -> Record {
        self.progress = now;
        self
    }
}

/// The earlier release's sweeper removal marker (`<reason> <RFC 3339 start>`) and recorded
/// replacement (instance ids, comma-separated, or `none`).
fn legacy(annotations: &BTreeMap<String, String>) -> Option<Record> {
    let marker = annotations.get(crate::disruption::DISRUPTION_ANNOTATION)?;
    let (reason, started) = crate::disruption::parse_removal(marker)?;
    let mut record = Record::new(reason.into(), started, None);
    if let Some(ids) = annotations.get(crate::api::labels::REPLACEMENT_ANNOTATION) {
        let ids = crate::disruption::parse_replacement(ids);
        record.replacement = if ids.is_empty() {
            Replacement::NotNeeded
        } else {
            Replacement::Launched {
                instances: ids,
                at: started,
            }
        };
    }
    Some(record)
}

/// What a node's removal did about capacity for its pods, as the provisioning core reads
/// it: `None` while nothing was asked (its pods still need room); from an earlier release's
/// node, its `nodewright.io/replacement` annotation.
pub fn replacement_on(annotations: &BTreeMap<String, String>) -> Option<Replacement> {
    if let Some(r) = Record::read("", annotations).ok().flatten() {
        return match r.replacement {
            Replacement::NotAsked | Replacement::Failed { .. } => None,
            other => Some(other),
        };
    }
    let ids = annotations.get(crate::api::labels::REPLACEMENT_ANNOTATION)?;
    let ids = crate::disruption::parse_replacement(ids);
    Some(if ids.is_empty() {
        Replacement::NotNeeded
    } else {
        Replacement::Launched {
            instances: ids,
            at: Timestamp::UNIX_EPOCH,
        }
    })
}

/// The replacement instances a node's removal launched (their room is that node's pods',
/// not free capacity).
pub fn recorded_replacement(annotations: &BTreeMap<String, String>) -> Vec<String> {
    match replacement_on(annotations) {
        Some(Replacement::Launched { instances, .. }) => instances,
        _ => Vec::new(),
    }
}

/// A voluntary removal given up: the node is not taken again for that cause before `until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Backoff {
    pub cause: Cause,
    pub until: Timestamp,
    /// How many removals of the node were given up in a row.
    pub attempts: u32,
    pub why: String,
}

/// The first back-off after a removal is given up, doubled each time, to at most
/// [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(10 * 60);
pub const MAX_BACKOFF: Duration = Duration::from_secs(4 * 3600);

impl Backoff {
    /// The back-off after giving up a removal of `cause` at `now`, following `previous`.
    pub fn after(cause: Cause, why: String, previous: Option<&Backoff>, now: Timestamp) -> Backoff {
        let attempts = previous.map_or(1, |p| p.attempts + 1);
        let wait = FIRST_BACKOFF
            .saturating_mul(1u32 << (attempts - 1).min(10))
            .min(MAX_BACKOFF);
        Backoff {
            cause,
            until: now + SignedDuration::try_from(wait).unwrap_or(SignedDuration::MAX),
            attempts,
            why,
        }
    }

    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The back-off `annotations` hold; an unreadable one counts as none (it only delays).
    pub fn read(annotations: &BTreeMap<String, String>) -> Option<Backoff> {
        serde_json::from_str(annotations.get(BACKOFF_ANNOTATION)?).ok()
    }

    pub fn holds(&self, now: Timestamp) -> bool {
        now < self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_record_reads_back_what_was_written() {
        let mut r = Record::new(Cause::SpotInterrupted, at(0), Some(at(120)));
        r.replacement = Replacement::Launched {
            instances: vec!["i-1".into()],
            at: at(3),
        };
        r.avoid = Some(Avoid {
            instance_type: "c5.xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: "spot".into(),
        });
        let annotations = BTreeMap::from([(REMOVAL_ANNOTATION.to_string(), r.to_annotation())]);
        assert_eq!(Record::read("n", &annotations).unwrap(), Some(r.clone()));
        assert_eq!(r.launched(), ["i-1".to_string()]);
    }

    #[test]
    fn no_annotation_or_an_empty_one_is_no_removal_and_garbage_is_an_error_naming_the_node() {
        assert_eq!(Record::read("n", &BTreeMap::new()).unwrap(), None);
        let empty = BTreeMap::from([(REMOVAL_ANNOTATION.to_string(), String::new())]);
        assert_eq!(Record::read("n", &empty).unwrap(), None);
        let bad = BTreeMap::from([(REMOVAL_ANNOTATION.to_string(), "expired".to_string())]);
        let e = Record::read("node-7", &bad).unwrap_err().to_string();
        assert!(
            e.contains("node-7") && e.contains(REMOVAL_ANNOTATION),
            "{e}"
        );
    }

    #[test]
    fn a_removal_an_earlier_release_began_reads_as_a_record() {
        let annotations = BTreeMap::from([
            (
                "nodewright.io/disruption".to_string(),
                "expired 2027-01-15T08:00:00Z".to_string(),
            ),
            (
                "nodewright.io/replacement".to_string(),
                "i-1,i-2".to_string(),
            ),
        ]);
        let r = Record::read("n", &annotations).unwrap().unwrap();
        assert_eq!(r.cause, Cause::Expired);
        assert_eq!(r.started, at(0));
        assert_eq!(r.launched(), ["i-1".to_string(), "i-2".to_string()]);
        assert_eq!(recorded_replacement(&annotations), ["i-1", "i-2"]);
        let current = BTreeMap::from([(REMOVAL_ANNOTATION.to_string(), r.to_annotation())]);
        assert_eq!(recorded_replacement(&current), ["i-1", "i-2"]);
        assert!(recorded_replacement(&BTreeMap::new()).is_empty());
        // The earlier interruption function wrote the replacement alone.
        let alone = BTreeMap::from([("nodewright.io/replacement".to_string(), "none".to_string())]);
        assert_eq!(replacement_on(&alone), Some(Replacement::NotNeeded));
        assert_eq!(replacement_on(&BTreeMap::new()), None);
    }

    #[test]
    fn the_back_off_doubles_from_ten_minutes_to_four_hours() {
        let now = at(0);
        let mut previous: Option<Backoff> = None;
        let mut waits = Vec::new();
        for _ in 0..7 {
            let b = Backoff::after(Cause::Expired, "why".into(), previous.as_ref(), now);
            waits.push(b.until.duration_since(now).as_secs() / 60);
            previous = Some(b);
        }
        assert_eq!(waits, [10, 20, 40, 80, 160, 240, 240]);
        let b = previous.unwrap();
        assert!(b.holds(at(60)) && !b.holds(b.until));
        let annotations = BTreeMap::from([(BACKOFF_ANNOTATION.to_string(), b.to_annotation())]);
        assert_eq!(Backoff::read(&annotations), Some(b));
    }
}
