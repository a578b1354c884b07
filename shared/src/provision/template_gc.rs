//! Which of this cluster's launch templates to delete, and when to look.
//!
//! Templates are content-addressed (AMI, user data, security groups, ...): launches of one
//! NodePool share one, and every new AMI release, edited EC2NodeClass or NodePool label
//! makes a new one. Without collection the old ones pile up towards EC2's quota (5,000
//! launch templates per Region by default, EC2 User Guide "Restrictions for Amazon EC2
//! launch templates").
//!
//! Deleting a template is always safe for what already runs: "Deleting a launch template
//! or launch template version doesn't affect any instances that you've launched from the
//! launch template" (EC2 User Guide, "Delete a launch template or a launch template
//! version"). It can only hurt a launch that has ensured the template and not yet sent
//! CreateFleet. Two rules keep those:
//!
//! - **Grace.** A template whose `CreateTime` is less than [`TEMPLATE_GRACE`] ago is kept:
//!   another invocation or another function may be between ensure and CreateFleet with it,
//!   and EC2's eventual consistency may not show it to that caller yet.
//! - **In use.** A template this container ensured less than [`TEMPLATE_GRACE`] ago is kept,
//!   however old: its claim may be retried on the next poll (insufficient capacity, a
//!   throttled or not-yet-visible launch), and the retry ensures the same name.
//!
//! "In use" is deliberately what this container knows, nothing more: it does not compute
//! the current configuration's templates (that needs every class's AMIs resolved for every
//! NodePool, work a poll does only for the claims it launches), and a cold container knows
//! nothing, so a template still current but unused for a while may be deleted and is then
//! re-created by the next launch that needs it. Erring towards deleting is safe: a
//! template deleted but needed again is re-created by the next ensure (same spec, same
//! name). The one race left — another container ensured an old template (it existed, so
//! its `CreateTime` is old) and this one deletes it before that CreateFleet — costs that
//! claim one failed CreateFleet, retried on the next poll with a re-created template.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use crate::aws::{OwnedLaunchTemplate, launch_template_prefix};

/// How often a warm container looks for templates to delete. Templates cost nothing while
/// they exist; the quota is what matters, and ten minutes of launches is far below it.
pub const TEMPLATE_GC_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// Templates younger than this, or ensured by this container within it, are kept. Twice the
/// longest function timeout in `template.yaml` (the sweeper's 300 s), so no invocation that
/// ensured a template can still be running when it is deleted.
pub const TEMPLATE_GRACE: Duration = Duration::from_secs(10 * 60);

/// At most this many deletions per run, oldest first, so one run cannot hold up the next
/// poll for long; what is left waits for the next run: 300 an hour, far more than
/// configuration and AMI changes create.
pub const MAX_TEMPLATE_DELETES_PER_RUN: usize = 50;

/// The names of `templates` to delete now, oldest first, at most `max`. Only templates
/// named with this cluster's prefix are candidates (the adapter lists by ownership tag and
/// prefix already; this is the second lock on the door). Kept: names in `in_use`, templates
/// created less than `grace` before `now` (or after it: clocks differ), and templates whose
/// creation time is unknown.
pub fn templates_to_delete(
    cluster: &str,
    templates: &[OwnedLaunchTemplate],
    in_use: &HashSet<String>,
    now: SystemTime,
    grace: Duration,
    max: usize,
) -> Vec<String> {
    let prefix = launch_template_prefix(cluster);
    let mut stale: Vec<(SystemTime, &str)> = templates
        .iter()
        .filter(|t| t.name.starts_with(&prefix) && !in_use.contains(&t.name))
        .filter_map(|t| {
            let created = t.created?;
            let age = now.duration_since(created).ok()?;
            (age >= grace).then_some((created, t.name.as_str()))
        })
        .collect();
    stale.sort();
    stale.dedup_by(|a, b| a.1 == b.1);
    stale
        .into_iter()
        .take(max)
        .map(|(_, name)| name.to_string())
        .collect()
}

/// A warm container's memory for collection: when it last ran, and which templates it
/// ensured lately.
#[derive(Debug, Default)]
pub struct TemplateGc {
    last_run: Option<SystemTime>,
    ensured: HashMap<String, SystemTime>,
}

impl TemplateGc {
    /// Records that a launch ensured `name` at `now`.
    pub fn ensured(&mut self, name: &str, now: SystemTime) {
        self.ensured.insert(name.to_string(), now);
    }

    /// True on a container's first look and then once per [`TEMPLATE_GC_INTERVAL`].
    pub fn due(&self, now: SystemTime) -> bool {
        self.last_run.is_none_or(|last| {
            now.duration_since(last)
                .is_ok_and(|d| d >= TEMPLATE_GC_INTERVAL)
        })
    }

    /// Starts a run at `now`: marks it (a failed run also waits a full interval, so a
    /// failing API is not asked every poll) and returns the names in use, forgetting
    /// those ensured longer than [`TEMPLATE_GRACE`] ago.
    pub fn start(&mut self, now: SystemTime) -> HashSet<String> {
        self.last_run = Some(now);
        self.ensured
            .retain(|_, at| now.duration_since(*at).map_or(true, |d| d < TEMPLATE_GRACE));
        self.ensured.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = Duration::from_secs(1_000_000);

    fn at(secs_after_t0: i64) -> SystemTime {
        let t0 = SystemTime::UNIX_EPOCH + T0;
        if secs_after_t0 >= 0 {
            t0 + Duration::from_secs(secs_after_t0.unsigned_abs())
        } else {
            t0 - Duration::from_secs(secs_after_t0.unsigned_abs())
        }
    }

    fn template(name: &str, created: Option<i64>) -> OwnedLaunchTemplate {
        OwnedLaunchTemplate {
            name: name.to_string(),
            id: format!("lt-{name}"),
            created: created.map(at),
        }
    }

    const GRACE: i64 = 600;

    #[test]
    fn only_old_unused_templates_of_this_cluster_are_deleted() {
        // (templates, in use, expected deletions); `now` is t0, grace 600 s.
        let old = -(GRACE + 1);
        /// (why, templates, in use, expected deletions)
        type Case = (
            &'static str,
            Vec<OwnedLaunchTemplate>,
            Vec<&'static str>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "an old unused template goes",
                vec![template("nodewright/demo/a", Some(old))],
                vec![],
                vec!["nodewright/demo/a"],
            ),
            (
                "exactly as old as the grace goes",
                vec![template("nodewright/demo/a", Some(-GRACE))],
                vec![],
                vec!["nodewright/demo/a"],
            ),
            (
                "created within the grace stays",
                vec![template("nodewright/demo/a", Some(-GRACE + 1))],
                vec![],
                vec![],
            ),
            (
                "created 'in the future' (clock skew) stays",
                vec![template("nodewright/demo/a", Some(30))],
                vec![],
                vec![],
            ),
            (
                "unknown creation time stays",
                vec![template("nodewright/demo/a", None)],
                vec![],
                vec![],
            ),
            (
                "in use stays however old",
                vec![
                    template("nodewright/demo/a", Some(-86_400)),
                    template("nodewright/demo/b", Some(-86_400)),
                ],
                vec!["nodewright/demo/a"],
                vec!["nodewright/demo/b"],
            ),
            (
                "another cluster's template stays even if listed",
                vec![
                    template("nodewright/demo-2/a", Some(old)),
                    template("nodewright/dem/a", Some(old)),
                    template("someone/demo/a", Some(old)),
                    template("nodewright/demo", Some(old)),
                ],
                vec![],
                vec![],
            ),
            (
                "oldest first",
                vec![
                    template("nodewright/demo/new", Some(old)),
                    template("nodewright/demo/oldest", Some(old - 100)),
                    template("nodewright/demo/older", Some(old - 50)),
                ],
                vec![],
                vec![
                    "nodewright/demo/oldest",
                    "nodewright/demo/older",
                    "nodewright/demo/new",
                ],
            ),
            (
                "a name listed twice is deleted once",
                vec![
                    template("nodewright/demo/a", Some(old)),
                    template("nodewright/demo/a", Some(old)),
                ],
                vec![],
                vec!["nodewright/demo/a"],
            ),
        ];
        for (why, templates, in_use, want) in cases {
            let in_use: HashSet<String> = in_use.into_iter().map(String::from).collect();
            let got = templates_to_delete(
                "demo",
                &templates,
                &in_use,
                at(0),
                Duration::from_secs(GRACE.unsigned_abs()),
                MAX_TEMPLATE_DELETES_PER_RUN,
            );
            assert_eq!(got, want, "{why}");
        }
    }

    #[test]
    fn one_run_deletes_at_most_the_cap_oldest_first() {
        let templates: Vec<OwnedLaunchTemplate> = (0..5)
            .map(|i| template(&format!("nodewright/demo/{i}"), Some(-10_000 + i)))
            .collect();
        let got = templates_to_delete(
            "demo",
            &templates,
            &HashSet::new(),
            at(0),
            TEMPLATE_GRACE,
            2,
        );
        assert_eq!(got, ["nodewright/demo/0", "nodewright/demo/1"]);
    }

    #[test]
    fn collection_is_due_at_first_and_then_once_per_interval() {
        let interval = TEMPLATE_GC_INTERVAL.as_secs() as i64;
        let mut gc = TemplateGc::default();
        assert!(gc.due(at(0)), "a new container looks once");
        gc.start(at(0));
        assert!(!gc.due(at(1)));
        assert!(!gc.due(at(interval - 1)));
        assert!(gc.due(at(interval)));
        // A clock that went back does not make it due.
        assert!(!gc.due(at(-5)));
    }

    #[test]
    fn templates_ensured_lately_are_in_use_until_the_grace_has_passed() {
        let grace = TEMPLATE_GRACE.as_secs() as i64;
        let mut gc = TemplateGc::default();
        gc.ensured("nodewright/demo/early", at(0));
        gc.ensured("nodewright/demo/late", at(grace - 10));
        let in_use = gc.start(at(grace - 1));
        assert_eq!(in_use.len(), 2, "{in_use:?}");
        let in_use = gc.start(at(grace));
        assert_eq!(
            in_use,
            HashSet::from(["nodewright/demo/late".to_string()]),
            "ensured exactly a grace ago is no longer in use"
        );
    }
}
