//! `make soak`: one simulated day of the three functions against the local world, judged by
//! the soak's invariant checker (`nodewright_world::soak`). Prints the invariants' figures,
//! writes `target/soak/{report.json,summary.md,plot.svg}`, and exits 1 on any breach.
//!
//! `--hours H` plays a shorter or longer day; `--speed S` is the world's pace while nothing
//! works (world seconds per wall second); `--out DIR` moves the report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nodewright_world::soak::{Plan, run};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let hours: f64 = match arg(&args, "--hours").map(|h| h.parse()) {
        None => 24.0,
        Some(Ok(h)) if h > 0.0 => h,
        Some(_) => {
            eprintln!("error: --hours takes a positive number of simulated hours");
            return ExitCode::from(2);
        }
    };
    let out = arg(&args, "--out").map_or_else(
        || nodewright_world::moto::workspace_root().join("target/soak"),
        PathBuf::from,
    );
    let mut plan = Plan::new("soak", Duration::from_secs_f64(hours * 3600.0), out.clone());
    if let Some(speed) = arg(&args, "--speed").and_then(|s| s.parse().ok()) {
        plan.idle_speed = speed;
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("DBG_LOG").unwrap_or_else(|_| "nodewright_soak=info".into()))
        .try_init();
    match run(&plan).await {
        Ok(report) => {
            print!("{}", report.summary());
            println!("\nreport: {}", out.display());
            if report.breaches() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("error: the soak could not run: {e:#}");
            ExitCode::from(2)
        }
    }
}
