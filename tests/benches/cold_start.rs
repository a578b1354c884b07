//! Cold start and package size of the three functions' release binaries (`make bench`):
//!
//! 1. the time from starting the process to its first Runtime API request
//!    (`GET /2018-06-01/runtime/invocation/next`), median over `STARTS` starts (target:
//!    at most 50 ms). Each start is a new process against a new emulated Runtime API
//!    (`nodewright_world::lambda_api`), with the environment the deployed stack gives the
//!    function. What a function does before that request is its init: reading its
//!    configuration, DescribeCluster (here against moto, through the world's AWS front, on
//!    loopback, so EKS's own latency is not in the figure) and building its clients;
//! 2. the size of a Lambda package holding the binary as `bootstrap`, zipped with Python's
//!    `zipfile` (deflate, level 9), as `sam build` or `cargo lambda build --output-format
//!    zip` would ship it.
//!
//! The binaries are `$NODEWRIGHT_<FUNCTION>_BIN` (`NODEWRIGHT_SWEEPER_BIN`, ...), else
//! `<target>/release/<function>`.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use nodewright_world::kit::release_binary;
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::lambda_api::{FunctionProcess, RuntimeApi};
use nodewright_world::template::Template;
use nodewright_world::world::World;

const STARTS: usize = 25;
/// (binary, logical id in `template.yaml`).
const FUNCTIONS: [(&str, &str); 3] = [
    ("provisioner", "ProvisionerFunction"),
    ("interruption", "InterruptionFunction"),
    ("sweeper", "SweeperFunction"),
];

/// The zipped size of a package holding `binary` as `bootstrap` (mode 0755).
fn zipped_size(binary: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<u64> {
    let zip = dir.join("package.zip");
    let script = "import sys, zipfile\n\
        info = zipfile.ZipInfo('bootstrap')\n\
        info.external_attr = 0o100755 << 16\n\
        info.compress_type = zipfile.ZIP_DEFLATED\n\
        with zipfile.ZipFile(sys.argv[2], 'w') as z, open(sys.argv[1], 'rb') as f:\n\
        \x20   z.writestr(info, f.read(), compresslevel=9)\n";
    let status = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(binary)
        .arg(&zip)
        .status()
        .context("running python3 to zip the package")?;
    anyhow::ensure!(status.success(), "python3 zipfile failed: {status}");
    let size = std::fs::metadata(&zip)?.len();
    std::fs::remove_file(&zip)?;
    Ok(size)
}

/// One start: process spawned → first `GET .../invocation/next`.
async fn start_once(
    world: &World,
    bin: &std::path::Path,
    function: &str,
    memory_mb: u32,
    dir: &std::path::Path,
) -> anyhow::Result<Duration> {
    let api = RuntimeApi::start().await?;
    let env = world.deployed_env(function, dir)?;
    let log = dir.join(format!("{function}.log"));
    let started = Instant::now();
    let mut process = FunctionProcess::spawn(bin, &api, memory_mb, &env, &log)?;
    let until = started + Duration::from_secs(10);
    loop {
        if let Some(at) = api.first_next() {
            return Ok(at.saturating_duration_since(started));
        }
        if let Some(status) = process.exited() {
            anyhow::bail!(
                "{function} exited ({status}) before asking for an invocation; init error {:?}; log {}",
                api.init_error(),
                log.display()
            );
        }
        anyhow::ensure!(
            Instant::now() < until,
            "{function} did not ask for an invocation within 10 s; log {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let template = Template::load()?;
    let config = SimConfig {
        clock: SimClock::manual(),
        crds_installed: true,
        ..SimConfig::default()
    };
    let world = World::start("bench-cold-start", config).await?;
    let dir = std::env::temp_dir().join(format!("nodewright-cold-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    println!(
        "| function | binary (MB) | zipped package (MB) | cold start median | p90 | min | max |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, function) in FUNCTIONS {
        let bin = release_binary(name);
        let size = std::fs::metadata(&bin)
            .with_context(|| format!("{} (build it with `make release`)", bin.display()))?
            .len();
        let zipped = zipped_size(&bin, &dir)?;
        let memory_mb = template.function_settings(function)?.memory_mb;
        // One start first, not counted: it pages the binary into the file cache, as a
        // Lambda worker that has the package already does.
        start_once(&world, &bin, function, memory_mb, &dir).await?;
        let mut times = vec![];
        for _ in 0..STARTS {
            times.push(start_once(&world, &bin, function, memory_mb, &dir).await?);
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| {name} | {:.2} | {:.2} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
            size as f64 / 1e6,
            zipped as f64 / 1e6,
            ms(times[times.len() / 2]),
            ms(times[times.len() * 9 / 10]),
            ms(times[0]),
            ms(times[times.len() - 1]),
        );
    }
    println!("({STARTS} starts each; target <= 50 ms)");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
