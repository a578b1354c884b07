//! The day's report: `report.json` (one entry per invariant: its name, figure, bound and
//! breaches), `summary.md`, and `plot.svg` (pending pods, nodes and $/h through the day).
//! The plot is three polylines written out directly: a plotting crate (plotters) would
//! add a font and image stack to the test build for one chart.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

use super::observe::{Sample, names};
use super::stage::Stage;
use super::{PENDING_BOUND, Plan, TAINT_BOUND};
use crate::lambda::{EventFate, Lambda, Outcome};
use crate::sqs::model::Fate;
use crate::world::World;

#[derive(Debug, Clone, Serialize)]
pub struct Price {
    pub at: Timestamp,
    pub fleet: f64,
    pub scratch: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Invariant {
    pub name: &'static str,
    pub figure: String,
    pub bound: String,
    pub breaches: usize,
    /// The first breaches, as the checker described them.
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub cluster: String,
    pub simulated_seconds: u64,
    pub wall_seconds: f64,
    pub world_seconds_per_wall_second: f64,
    pub invariants: Vec<Invariant>,
    pub pending_wait_seconds: BTreeMap<&'static str, f64>,
    pub spot_warning_to_first_eviction_seconds: BTreeMap<&'static str, f64>,
    pub invocations: BTreeMap<String, BTreeMap<&'static str, usize>>,
    pub scheduled_events: BTreeMap<String, BTreeMap<&'static str, usize>>,
    pub messages: BTreeMap<&'static str, usize>,
    /// Every CloudWatch metric series the functions' EMF logs created (name and dimension
    /// values): CloudWatch bills each a month.
    pub metric_series: Vec<String>,
    /// Bytes each function logged (CloudWatch Logs bills ingestion by the GB).
    pub log_bytes: BTreeMap<String, usize>,
    /// The `counted` log lines of every function, by what they count
    /// (`nodewright::telemetry::counted`).
    pub counted: BTreeMap<String, usize>,
    pub prices: Vec<Price>,
    pub incidents: Vec<(Timestamp, String)>,
    pub samples: Vec<Sample>,
}

fn outcome_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Response(_) => "succeeded",
        Outcome::Error(_) => "error",
        Outcome::TimedOut => "timed-out",
        Outcome::Died => "killed",
        Outcome::Throttled => "throttled",
    }
}

/// The distinct metric series in every function's logs, as `Name{Dim=value,...}`; a line
/// CloudWatch would refuse (one cut short by a killed environment) creates none.
fn metric_series(lambda: &Lambda) -> Vec<String> {
    let mut series = std::collections::BTreeSet::new();
    for f in lambda.functions.values() {
        let logs = f.logs();
        let data = logs
            .lines()
            .flat_map(|line| crate::emf::read(line).unwrap_or_default());
        for d in data {
            let dims: Vec<String> = d
                .dimensions
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            series.insert(format!("{}{{{}}}", d.name, dims.join(",")));
        }
    }
    series.into_iter().collect()
}

/// How many `counted` lines each count has in every function's logs.
fn counted_lines(lambda: &Lambda) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for f in lambda.functions.values() {
        let logs = f.logs();
        for name in nodewright::telemetry::counted::ALL {
            let n = crate::emf::counted(&logs, name).len();
            if n > 0 {
                *counts.entry(name.to_string()).or_default() += n;
            }
        }
    }
    counts
}

/// p50, p99 and max of `sorted` in seconds (zeros when empty), and how many under `count`.
fn spread(sorted: &[Duration], count: &'static str) -> BTreeMap<&'static str, f64> {
    let at = |p: f64| {
        if sorted.is_empty() {
            0.0
        } else {
            crate::kit::percentile(sorted, p).as_secs_f64()
        }
    };
    BTreeMap::from([
        ("p50", at(0.5)),
        ("p99", at(0.99)),
        ("max", at(1.0)),
        (count, sorted.len() as f64),
    ])
}

impl Report {
    pub fn new(
        stage: Stage,
        world: &World,
        lambda: &Lambda,
        plan: &Plan,
        wall: Duration,
        fates: &[(String, Fate)],
    ) -> Report {
        let (observer, incidents, prices) = stage.into_parts();
        let waits = observer.waits();
        let pending_wait_seconds = spread(&waits, "pods");
        let spot_warning_to_first_eviction_seconds =
            spread(&observer.warning_to_first_eviction(), "nodes");
        let mut messages: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (_, f) in fates {
            let k = match f {
                Fate::Deleted { .. } => "handled",
                Fate::DeadLettered { .. } => "dead-lettered",
                Fate::Expired { .. } => "lost",
            };
            *messages.entry(k).or_default() += 1;
        }
        messages.insert(
            "in-flight-at-end",
            world.queue.with(|q, _| q.queued().count()),
        );
        let invocations = lambda
            .functions
            .iter()
            .map(|(id, f)| {
                let mut m: BTreeMap<&'static str, usize> = BTreeMap::new();
                for r in f.records() {
                    *m.entry(outcome_name(&r.outcome)).or_default() += 1;
                }
                (id.clone(), m)
            })
            .collect();
        let metric_series = metric_series(lambda);
        let log_bytes = lambda
            .functions
            .iter()
            .map(|(id, f)| (id.clone(), f.logs().len()))
            .collect();
        let counted = counted_lines(lambda);
        let scheduled_events = lambda
            .invokers
            .iter()
            .map(|(id, inv)| {
                let mut m: BTreeMap<&'static str, usize> = BTreeMap::new();
                for (_, f) in inv.fates() {
                    let k = match f {
                        EventFate::Succeeded { attempts: 1 } => "succeeded-first-time",
                        EventFate::Succeeded { .. } => "succeeded-on-retry",
                        EventFate::RetriesExhausted { .. } => "retries-exhausted",
                        EventFate::TooOld { .. } => "too-old",
                    };
                    *m.entry(k).or_default() += 1;
                }
                (id.clone(), m)
            })
            .collect();
        let figure = |name: &str| -> (String, String) {
            match name {
                names::POD_REMOVALS => (
                    format!("{} evictions and deletions judged", observer.removals),
                    "no delete past a forbidding PDB before deadline − grace; grace ≥ min(own, time to deadline); full grace when voluntary".into(),
                ),
                names::SPOT_EVICTIONS => (
                    format!("{} spot warnings", observer.warnings()),
                    "every pod's eviction asked for by deadline − 30 s (a PDB may refuse it: the pod is then deleted at deadline − its grace)".into(),
                ),
                names::ONE_INSTANCE_PER_CLAIM => (
                    format!("{} launch decisions", observer.claims()),
                    "one instance each".into(),
                ),
                names::FOREIGN_KEPT => (
                    "1 instance without the ownership tag, warned".into(),
                    "never terminated".into(),
                ),
                names::NO_STUCK_TAINT => (
                    "nodes tainted nodewright.io/disrupted".into(),
                    format!("progress at least every {} s", TAINT_BOUND.as_secs()),
                ),
                names::BUDGETS => (
                    "voluntary removals per pool, sampled".into(),
                    "spot-amd64 ≤ 2, on-demand-arm64 ≤ 1".into(),
                ),
                names::LEAST_PRIVILEGE => (
                    "each function signed in as its role, judged by its own RBAC".into(),
                    "no request refused".into(),
                ),
                names::NO_MESSAGE_LOST => (
                    format!("{messages:?}"),
                    "every message handled, retried, or dead-lettered (DeadLetterAlarm)".into(),
                ),
                _ => (
                    format!(
                        "wait p50 {:.0} s, p99 {:.0} s, max {:.0} s over {} pods",
                        pending_wait_seconds["p50"],
                        pending_wait_seconds["p99"],
                        pending_wait_seconds["max"],
                        waits.len()
                    ),
                    format!("no pod pending longer than {} s", PENDING_BOUND.as_secs()),
                ),
            }
        };
        let invariants = observer
            .breaches
            .iter()
            .map(|(name, breaches)| {
                let (figure, bound) = figure(name);
                Invariant {
                    name,
                    figure,
                    bound,
                    breaches: breaches.len(),
                    examples: breaches.iter().take(10).cloned().collect(),
                }
            })
            .collect();
        let wall_seconds = wall.as_secs_f64();
        Report {
            cluster: plan.cluster.clone(),
            simulated_seconds: plan.length.as_secs(),
            wall_seconds,
            world_seconds_per_wall_second: plan.length.as_secs_f64() / wall_seconds.max(1e-9),
            invariants,
            pending_wait_seconds,
            spot_warning_to_first_eviction_seconds,
            invocations,
            scheduled_events,
            messages,
            metric_series,
            log_bytes,
            counted,
            prices,
            incidents,
            samples: observer.samples,
        }
    }

    pub fn breaches(&self) -> usize {
        self.invariants.iter().map(|i| i.breaches).sum()
    }

    /// The invariants' lines, as printed at the end of a soak.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "# Soak: {} simulated seconds in {:.0} s of wall clock ({:.1}× on average)\n\n| invariant | figure | bound | breaches |\n|---|---|---|---|\n",
            self.simulated_seconds, self.wall_seconds, self.world_seconds_per_wall_second
        );
        for i in &self.invariants {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                i.name, i.figure, i.bound, i.breaches
            );
        }
        let e = &self.spot_warning_to_first_eviction_seconds;
        let _ = writeln!(
            out,
            "\nSpot warning to the first eviction asked, over {} warned nodes: p50 {:.1} s, p99 {:.1} s, max {:.1} s (world time).",
            e["nodes"], e["p50"], e["p99"], e["max"]
        );
        for i in self.invariants.iter().filter(|i| i.breaches > 0) {
            let _ = writeln!(out, "\n## {} ({} breaches)\n", i.name, i.breaches);
            for e in &i.examples {
                let _ = writeln!(out, "- {e}");
            }
        }
        let _ = writeln!(
            out,
            "\nCloudWatch metric series created: {} (each billed by the hours it receives data). \
             Bytes logged: {:?}.",
            self.metric_series.len(),
            self.log_bytes
        );
        let _ = writeln!(out, "\n## Invocations\n");
        for (f, m) in &self.invocations {
            let _ = writeln!(
                out,
                "- {f}: {m:?}; scheduled events {:?}",
                self.scheduled_events.get(f)
            );
        }
        let _ = writeln!(
            out,
            "\n## Fleet price against the same pods planned from scratch ($/h)\n\n| at | fleet | from scratch |\n|---|---|---|"
        );
        for p in &self.prices {
            let _ = writeln!(out, "| {} | {:.3} | {:.3} |", p.at, p.fleet, p.scratch);
        }
        let _ = writeln!(out, "\n## Incidents\n");
        for (at, what) in &self.incidents {
            let _ = writeln!(out, "- {at} {what}");
        }
        out
    }

    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(self)?)?;
        std::fs::write(dir.join("summary.md"), self.summary())?;
        std::fs::write(dir.join("plot.svg"), plot(&self.samples, &self.prices))?;
        Ok(())
    }
}

/// Pending pods, nodes and $/h over the day, each scaled to its own maximum.
fn plot(samples: &[Sample], prices: &[Price]) -> String {
    let (w, h) = (960.0, 320.0);
    let Some(first) = samples.first().map(|s| s.at) else {
        return String::from("<svg xmlns=\"http://www.w3.org/2000/svg\"/>");
    };
    let last = samples.last().map_or(first, |s| s.at);
    let span = last.duration_since(first).as_secs_f64().max(1.0);
    let x = |t: Timestamp| 40.0 + (w - 60.0) * t.duration_since(first).as_secs_f64() / span;
    let line = |points: Vec<(Timestamp, f64)>, colour: &str| -> String {
        let top = points.iter().map(|p| p.1).fold(1e-9, f64::max);
        let pts: Vec<String> = points
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), h - 30.0 - (h - 60.0) * v / top))
            .collect();
        format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/><text x=\"{}\" y=\"20\" fill=\"{colour}\">max {top:.2}</text>",
            pts.join(" "),
            match colour {
                "crimson" => 40,
                "steelblue" => 300,
                _ => 560,
            }
        )
    };
    let pending = line(
        samples.iter().map(|s| (s.at, s.pending as f64)).collect(),
        "crimson",
    );
    let nodes = line(
        samples.iter().map(|s| (s.at, s.nodes as f64)).collect(),
        "steelblue",
    );
    let dollars = line(
        prices.iter().map(|p| (p.at, p.fleet)).collect(),
        "darkgreen",
    );
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\
<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\
<text x=\"40\" y=\"{}\">pending pods (red), nodes (blue), fleet $/h (green), each scaled to its maximum; {first} to {last}</text>\
{pending}{nodes}{dollars}</svg>\n",
        h - 8.0
    )
}
