//! The soak's short variant: one simulated hour of the day `make soak` plays (the same
//! cluster, incidents and checker; see `nodewright_world::soak`), with a rogue client that
//! deletes a do-not-disrupt pod with grace 0 past its PodDisruptionBudget near the end. The
//! checker must name that deletion and nothing else: every other invariant holds.
//!
//! Emulated: AWS (moto), Kubernetes (the simulated cluster), SQS, Lambda and EventBridge's
//! delivery (the world's); the function binaries and the CLI are the real ones.

use std::time::Duration;

use nodewright_world::soak::observe::names;
use nodewright_world::soak::{Plan, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_hour_holds_every_invariant_but_the_rogue_deletion_the_checker_catches() {
    let out = std::env::temp_dir().join(format!("nodewright-soak-{}", std::process::id()));
    let mut plan = Plan::new("soak-hour", Duration::from_secs(3600), out.clone());
    plan.rogue = true;
    let report = run(&plan).await.expect("the soak runs");
    let summary = report.summary();
    for file in ["report.json", "summary.md", "plot.svg"] {
        assert!(out.join(file).is_file(), "{file} missing\n{summary}");
    }
    for i in &report.invariants {
        let expected = usize::from(i.name == names::POD_REMOVALS);
        assert_eq!(i.breaches, expected, "{}\n{summary}", i.name);
    }
    let rogue = &report
        .invariants
        .iter()
        .find(|i| i.name == names::POD_REMOVALS)
        .unwrap()
        .examples[0];
    assert!(
        rogue.contains("default/critical-") && rogue.contains("PodDisruptionBudget"),
        "{rogue}"
    );
    // Lambda as the template configures it: an environment killed mid-invocation, and the
    // sweeper's extra events throttled at its reserved concurrency of 1 and retried.
    let count = |function: &str, outcome: &str| {
        report.invocations[function]
            .get(outcome)
            .copied()
            .unwrap_or(0)
    };
    let killed: usize = report.invocations.keys().map(|f| count(f, "killed")).sum();
    assert!(killed >= 1, "{summary}");
    assert!(count("SweeperFunction", "throttled") >= 1, "{summary}");
    assert!(report.samples.len() > 100, "{summary}");
    // The series CloudWatch bills: every one nodewright's telemetry names, with the cluster.
    let series = &report.metric_series;
    println!("{} metric series: {series:#?}", series.len());
    println!("bytes logged: {:?}", report.log_bytes);
    assert!(
        series.iter().any(|s| s.starts_with("Launches{"))
            && series.iter().all(|s| s.contains("Cluster=soak-hour")),
        "{series:#?}"
    );
    // Every breakdown is in the logs: one series per metric, two for the decision latency.
    let decisions = ["provision", "interruption"];
    use nodewright::telemetry::names as metrics;
    let allowed: Vec<String> = metrics::ALL
        .iter()
        .flat_map(|name| match *name {
            metrics::DECISION_LATENCY => decisions
                .iter()
                .map(|d| format!("{name}{{Cluster=soak-hour,Decision={d}}}"))
                .collect(),
            _ => vec![format!("{name}{{Cluster=soak-hour}}")],
        })
        .collect();
    assert!(
        series.iter().all(|s| allowed.contains(s)),
        "{series:#?} beyond {allowed:#?}"
    );
    // The breakdowns are in the logs instead: a day's launches, interruptions, removals and
    // the sweeps' decisions (the drift and expiry waves) each counted there.
    use nodewright::telemetry::counted;
    println!("counted lines: {:?}", report.counted);
    for name in [
        counted::LAUNCH,
        counted::INTERRUPTION_MESSAGE,
        counted::NODE_TERMINATED,
        counted::REMOVAL,
        counted::COLD_START,
        counted::FLEET,
        counted::ELIGIBLE_NODES,
        counted::DISRUPTION_DECISION,
    ] {
        assert!(
            report.counted.get(name).is_some_and(|n| *n > 0),
            "no {name} line: {:?}",
            report.counted
        );
    }
    assert!(!report.prices.is_empty(), "{summary}");
}
