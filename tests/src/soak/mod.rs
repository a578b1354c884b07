//! A day in the life of a cluster: the three real function binaries, run by the world's
//! Lambda (schedules, the queue's event source mapping, timeouts, concurrency) on the
//! world's accelerated time, against a cluster shaped like the seed write-ups' (`cluster`),
//! through the day's incidents (`incidents`), watched by an invariant checker (`observe`,
//! `checker`) that fails the day on any breach; the report goes to `target/soak/`
//! (`report`).
//!
//! Emulated, and named as such: AWS (moto, behind the AWS front that throttles and answers
//! CreateFleet's capacity errors), Kubernetes (the simulated cluster), SQS and Lambda (the
//! world's own), EventBridge's delivery (moto's rules). AWS's own reclaiming of a warned
//! spot instance two minutes later, and a retired instance at its scheduled change, are
//! played by the soak with TerminateInstances. Real: the function binaries, their AWS SDK
//! and kube clients, and the `nodewright` CLI that prices the fleet.

mod aws;
pub mod checker;
pub mod cluster;
pub mod incidents;
mod objects;
pub mod observe;
mod price;
pub mod report;
mod stage;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use jiff::SignedDuration;

use crate::kit;
use crate::lambda::Lambda;
pub use report::Report;

/// How long a day the soak plays, how fast, and where it reports.
#[derive(Debug, Clone)]
pub struct Plan {
    pub cluster: String,
    pub length: Duration,
    /// How many world seconds pass per wall-clock second while nothing works.
    pub idle_speed: f64,
    /// How often the checker samples the cluster (world time).
    pub tick: Duration,
    pub out: PathBuf,
    /// Adds the rogue client's grace-0 deletion past a budget, which the checker must catch.
    pub rogue: bool,
}

impl Plan {
    pub fn new(cluster: &str, length: Duration, out: PathBuf) -> Plan {
        Plan {
            cluster: cluster.to_string(),
            length,
            idle_speed: 40.0,
            tick: Duration::from_secs(5),
            out,
            rogue: false,
        }
    }
}

/// Bounds the checker holds the day to. A taint: the removal path's own promise (a drain
/// with no progress for `STUCK_AFTER` is given up), plus two minutes for the next look.
pub const TAINT_BOUND: Duration =
    Duration::from_secs(nodewright::removal::decide::STUCK_AFTER.as_secs() + 120);
pub const PENDING_BOUND: Duration = Duration::from_secs(5 * 60);

const FUNCTIONS: [(&str, &str); 3] = [
    ("ProvisionerFunction", "provisioner"),
    ("InterruptionFunction", "interruption"),
    ("SweeperFunction", "sweeper"),
];

/// Plays the day and writes its report; the report says whether it held.
pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let wall = Instant::now();
    std::fs::create_dir_all(&plan.out)
        .with_context(|| format!("creating {}", plan.out.display()))?;
    let world = kit::timed_world(&plan.cluster, plan.idle_speed, Duration::from_secs(2)).await?;
    world.sim.audit_pod_removals();
    world.apply_yaml(&kit::with_world_names(&world, cluster::BASE))?;
    for app in &cluster::APPS {
        world.apply_yaml(&cluster::deployment(app, cluster::replicas_at(app, 0.0)))?;
    }
    let binaries: Vec<(&str, PathBuf)> = FUNCTIONS
        .iter()
        .map(|(id, bin)| Ok((*id, kit::debug_binary(bin)?)))
        .collect::<anyhow::Result<_>>()?;
    let mut lambda = Lambda::deploy(&world, &binaries, &plan.out.join("lambda"), |_| {})?;
    lambda.start_triggers(&world);
    let mut stage = stage::Stage::new(&world, plan).await?;
    let clock = world.clock();
    let start = clock.now();
    let length = SignedDuration::try_from(plan.length)?;
    let mut timeline = incidents::timeline(plan.rogue).into_iter().peekable();
    let mut next_hour = start;
    while clock.now() < start + length {
        let now = clock.now();
        let fraction = now.duration_since(start).as_secs_f64() / length.as_secs_f64();
        stage.follow_load(&world, fraction)?;
        while let Some((at, incident)) = timeline.peek().copied()
            && at <= fraction
        {
            let note = stage.act(&world, &lambda, incident).await;
            tracing::info!(target: "nodewright_soak", ?incident, "{note}");
            stage.log(now, format!("{incident:?}: {note}"));
            timeline.next();
        }
        stage.tick(&world, &lambda, now).await?;
        if now >= next_hour {
            stage.price(&world, now).await;
            next_hour = now + length / 24;
        }
        clock.sleep(plan.tick).await;
    }
    lambda.stop();
    let report = stage.finish(&world, &lambda, plan, wall.elapsed()).await?;
    report.write(&plan.out)?;
    Ok(report)
}
