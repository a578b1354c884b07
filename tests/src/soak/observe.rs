//! What the soak watches through the day: the cluster's nodes and pods sampled on the
//! world's clock, the API server's audit of pod removals, the instances EC2 ran for each
//! launch decision, and the spot warnings sent. Each sample feeds the pure judgements of
//! `checker.rs`; breaches are kept per invariant.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use super::checker::{self, SeenRecord, Warned};
use super::objects::{daemon, instance_of, pod_key, tainted, text as s};
use crate::kube_sim::PodRemoval;

/// Invariant names, as the report lists them.
pub mod names {
    pub const POD_REMOVALS: &str = "pod-removals-respect-budgets-and-grace";
    pub const SPOT_EVICTIONS: &str = "spot-warned-pods-asked-to-leave-by-deadline-minus-30s";
    pub const ONE_INSTANCE_PER_CLAIM: &str = "one-instance-per-launch-decision";
    pub const FOREIGN_KEPT: &str = "no-foreign-instance-terminated";
    pub const NO_STUCK_TAINT: &str = "no-taint-without-progress";
    pub const BUDGETS: &str = "disruption-budgets-kept";
    pub const NO_MESSAGE_LOST: &str = "no-queue-message-lost";
    pub const PENDING_BOUND: &str = "no-pod-pending-past-bound";
    pub const LEAST_PRIVILEGE: &str = "no-request-refused-by-rbac";
}

/// One pod's life as sampled.
#[derive(Debug, Clone, Default)]
struct PodLife {
    created: Option<Timestamp>,
    running: Option<Timestamp>,
    gone: Option<Timestamp>,
    reported_pending: bool,
}

/// One point of the day's plot.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    pub at: Timestamp,
    pub pending: usize,
    pub nodes: usize,
}

pub struct Observer {
    pub taint_bound: Duration,
    pub pending_bound: Duration,
    /// Each pool's disruption budget (`nodes`), as the soak's cluster sets it.
    pub budgets: BTreeMap<String, String>,
    records: BTreeMap<String, SeenRecord>,
    tainted_since: BTreeMap<String, Timestamp>,
    stuck_reported: BTreeSet<String>,
    first_removal: BTreeMap<String, Timestamp>,
    pods: BTreeMap<String, PodLife>,
    claims: BTreeMap<String, BTreeSet<String>>,
    warned: Vec<Warned>,
    /// Each node's instance, as sampled, and when AWS took instances (stopped, reclaimed).
    instance_of: BTreeMap<String, String>,
    aws_took: BTreeMap<String, Timestamp>,
    pub removals: usize,
    pub breaches: BTreeMap<&'static str, Vec<String>>,
    pub samples: Vec<Sample>,
}

const RECORD: &str = "/metadata/annotations/nodewright.io~1removal";

impl Observer {
    pub fn new(
        taint_bound: Duration,
        pending_bound: Duration,
        budgets: BTreeMap<String, String>,
    ) -> Observer {
        Observer {
            taint_bound,
            pending_bound,
            budgets,
            records: BTreeMap::new(),
            tainted_since: BTreeMap::new(),
            stuck_reported: BTreeSet::new(),
            first_removal: BTreeMap::new(),
            pods: BTreeMap::new(),
            claims: BTreeMap::new(),
            warned: Vec::new(),
            instance_of: BTreeMap::new(),
            aws_took: BTreeMap::new(),
            removals: 0,
            breaches: names_all().map(|n| (n, Vec::new())).collect(),
            samples: Vec::new(),
        }
    }

    fn breach(&mut self, invariant: &'static str, what: String) {
        self.breaches.entry(invariant).or_default().push(what);
    }

    /// One sample of the cluster at `now`: its nodes and pods, and the pod removals the
    /// API server audited since the last one (judged against the records seen before).
    pub fn observe(
        &mut self,
        now: Timestamp,
        nodes: &[Value],
        pods: &[Value],
        removals: Vec<PodRemoval>,
    ) {
        for r in removals {
            let key = format!("{}/{}", r.namespace, r.name);
            // The record on the node at that instant; else the last one sampled.
            let at_removal = r.node_annotations.get("nodewright.io/removal");
            let record = at_removal
                .and_then(|a| SeenRecord::parse(a))
                .or_else(|| r.node.as_ref().and_then(|n| self.records.get(n)).cloned());
            let took = r
                .node
                .as_ref()
                .and_then(|n| self.instance_of.get(n))
                .and_then(|i| self.aws_took.get(i))
                .copied();
            if let Some(b) = checker::judge_removal(&r, record.as_ref(), took) {
                self.breach(names::POD_REMOVALS, b);
            }
            self.first_removal.entry(key).or_insert(r.at);
            self.removals += usize::from(r.via != crate::kube_sim::Via::RefusedEviction);
        }
        self.observe_nodes(now, nodes);
        self.observe_pods(now, pods);
        let pending = pods
            .iter()
            .filter(|p| s(p, "/spec/nodeName").is_none())
            .count();
        self.samples.push(Sample {
            at: now,
            pending,
            nodes: nodes.len(),
        });
    }

    fn observe_nodes(&mut self, now: Timestamp, nodes: &[Value]) {
        let mut voluntary: BTreeMap<String, usize> = BTreeMap::new();
        let mut totals: BTreeMap<String, usize> = BTreeMap::new();
        let mut present = BTreeSet::new();
        for n in nodes {
            let Some(name) = s(n, "/metadata/name") else {
                continue;
            };
            present.insert(name.to_string());
            if let Some(id) = instance_of(n) {
                self.instance_of.insert(name.to_string(), id);
            }
            let pool = s(n, "/metadata/labels/karpenter.sh~1nodepool")
                .unwrap_or("")
                .to_string();
            *totals.entry(pool.clone()).or_default() += 1;
            let record = s(n, RECORD).and_then(SeenRecord::parse);
            if let Some(r) = &record {
                if !r.involuntary() {
                    *voluntary.entry(pool).or_default() += 1;
                }
                self.records.insert(name.to_string(), r.clone());
            }
            if !tainted(n) {
                self.tainted_since.remove(name);
                continue;
            }
            let since = *self.tainted_since.entry(name.to_string()).or_insert(now);
            if !self.stuck_reported.contains(name)
                && let Some(b) = checker::stuck(name, since, record.as_ref(), now, self.taint_bound)
            {
                self.stuck_reported.insert(name.to_string());
                self.breach(names::NO_STUCK_TAINT, b);
            }
        }
        self.tainted_since.retain(|n, _| present.contains(n));
        for (pool, count) in voluntary {
            let total = totals.get(&pool).copied().unwrap_or(0);
            let allowed = self
                .budgets
                .get(&pool)
                .and_then(|b| checker::budget_allows(b, total))
                .unwrap_or(usize::MAX);
            if let Some(b) = checker::over_budget(&pool, count, allowed, now) {
                self.breach(names::BUDGETS, b);
            }
        }
    }

    fn observe_pods(&mut self, now: Timestamp, pods: &[Value]) {
        let mut present = BTreeSet::new();
        for p in pods.iter().filter(|p| !daemon(p)) {
            let key = pod_key(p);
            present.insert(key.clone());
            let life = self.pods.entry(key.clone()).or_default();
            if life.created.is_none() {
                life.created = s(p, "/metadata/creationTimestamp")
                    .and_then(|t| t.parse().ok())
                    .or(Some(now));
            }
            if life.running.is_none() && s(p, "/status/phase") == Some("Running") {
                life.running = Some(now);
            }
            let waiting = life.running.is_none() && s(p, "/metadata/deletionTimestamp").is_none();
            let created = life.created.unwrap_or(now);
            let over = now.duration_since(created).unsigned_abs() > self.pending_bound;
            if waiting && over && !life.reported_pending {
                life.reported_pending = true;
                let what = format!("{key}: pending since {created}, still at {now}");
                self.breach(names::PENDING_BOUND, what);
            }
        }
        for (key, life) in &mut self.pods {
            if life.gone.is_none() && !present.contains(key) {
                life.gone = Some(now);
            }
        }
    }

    /// Instances EC2 ran for nodewright (id, `nodewright.io/nodeclaim` tag), sampled.
    pub fn observe_instances(&mut self, instances: &[(String, String)]) {
        for (id, claim) in instances {
            self.claims
                .entry(claim.clone())
                .or_default()
                .insert(id.clone());
        }
    }

    /// AWS stopped or reclaimed `instance` at `at`.
    pub fn aws_took(&mut self, instance: &str, at: Timestamp) {
        self.aws_took.entry(instance.to_string()).or_insert(at);
    }

    /// A spot warning sent for `node`, with the pods it ran then.
    pub fn warned(&mut self, node: &str, deadline: Timestamp, pods: &[Value]) {
        let pods = pods
            .iter()
            .filter(|p| !daemon(p) && s(p, "/spec/nodeName") == Some(node))
            .filter(|p| s(p, "/metadata/deletionTimestamp").is_none())
            .map(pod_key)
            .collect();
        self.warned.push(Warned {
            node: node.to_string(),
            deadline,
            pods,
        });
    }

    /// The judgements made at the end of the day.
    /// The day's end: what only the whole day shows, and `refused`, the requests the
    /// functions made that their RBAC (`nodewright rbac`) does not allow.
    pub fn finish(
        &mut self,
        foreign_terminated: Option<String>,
        lost: Vec<String>,
        refused: Vec<String>,
    ) {
        let end = self.samples.last().map_or(Timestamp::MAX, |s| s.at);
        let gone: BTreeMap<String, Timestamp> = self
            .pods
            .iter()
            .filter_map(|(k, l)| Some((k.clone(), l.gone?)))
            .collect();
        let late: Vec<String> = self
            .warned
            .iter()
            .flat_map(|w| checker::late_evictions(w, &self.first_removal, &gone, end))
            .collect();
        for b in late {
            self.breach(names::SPOT_EVICTIONS, b);
        }
        for b in checker::launched_twice(&self.claims) {
            self.breach(names::ONE_INSTANCE_PER_CLAIM, b);
        }
        if let Some(b) = foreign_terminated {
            self.breach(names::FOREIGN_KEPT, b);
        }
        for b in lost {
            self.breach(names::NO_MESSAGE_LOST, b);
        }
        for b in refused {
            self.breach(names::LEAST_PRIVILEGE, b);
        }
    }

    /// Each pod's wait from creation to Running, sorted.
    pub fn waits(&self) -> Vec<Duration> {
        let mut w: Vec<Duration> = self
            .pods
            .values()
            .filter_map(|l| Some(l.running?.duration_since(l.created?).unsigned_abs()))
            .collect();
        w.sort();
        w
    }

    /// For each warned node with pods, the time from the warning to the first of its pods'
    /// evictions asked for, sorted.
    pub fn warning_to_first_eviction(&self) -> Vec<Duration> {
        let mut v: Vec<Duration> = self
            .warned
            .iter()
            .filter_map(|w| {
                let warned = w.deadline - jiff::SignedDuration::from_secs(120);
                let first = w
                    .pods
                    .iter()
                    .filter_map(|p| self.first_removal.get(p))
                    .min()?;
                Some(first.duration_since(warned).unsigned_abs())
            })
            .collect();
        v.sort();
        v
    }

    pub fn warnings(&self) -> usize {
        self.warned.len()
    }

    pub fn claims(&self) -> usize {
        self.claims.len()
    }
}

fn names_all() -> impl Iterator<Item = &'static str> {
    [
        names::POD_REMOVALS,
        names::SPOT_EVICTIONS,
        names::ONE_INSTANCE_PER_CLAIM,
        names::FOREIGN_KEPT,
        names::NO_STUCK_TAINT,
        names::BUDGETS,
        names::NO_MESSAGE_LOST,
        names::PENDING_BOUND,
        names::LEAST_PRIVILEGE,
    ]
    .into_iter()
}
