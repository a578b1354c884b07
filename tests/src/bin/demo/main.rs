//! `make demo`: nodewright's real provisioner handler against moto (AWS) and the simulated
//! EKS cluster, told as a timeline. Nothing here is scripted output: every line reports
//! what the handler did, what moto holds and what the simulated cluster shows.
//!
//! The sweeper's scenes check what they tell (the emptied nodes went, two half-empty nodes
//! became one cheaper node, each expired node was replaced with its replacement Ready
//! first) and the demo exits non-zero, naming the scene and what did not happen, if not.
//!
//! The simulated cluster's kubeconfig is written into the target directory the demo was
//! built in (wherever `CARGO_TARGET_DIR` put it) and printed as a
//! `KUBECONFIG=` line; with `NODEWRIGHT_DEMO_KEEP=1` (`make demo KEEP=1`) the world keeps
//! running after the story — the control plane stepping in real time and the provisioner
//! invoked every [`KEEP_POLL`] — until Ctrl-C, so a person can explore it with kubectl and
//! `kubectl scale deployment inflate --replicas=20` to watch nodewright react.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use nodewright::aws::Ec2Adapter;
use nodewright::kube::KubeCluster;
use nodewright::provision::{BatchWindow, Replacement};
use nodewright_sweeper::{GroupReplacement, LaunchResolver, State};
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{invoke, quick};
use serde_json::{Value, json};

// The scenes too long to sit here live beside it, in their own files.
mod consolidation;
mod expiry;
mod scale_down;

const CLUSTER: &str = "demo-cluster";
/// How often the kept world invokes the provisioner (EventBridge Scheduler's minute is too
/// slow to watch; each invocation polls for a few seconds, as in the story).
const KEEP_POLL: Duration = Duration::from_secs(10);
/// How often the kept world's control plane steps (the simulated clock follows real time).
const KEEP_STEP: Duration = Duration::from_secs(1);

struct Story {
    started: Instant,
}

impl Story {
    fn say(&self, what: impl AsRef<str>) {
        println!(
            "[{:6.1}s] {}",
            self.started.elapsed().as_secs_f64(),
            what.as_ref()
        );
    }
    fn phase(&self, title: &str) {
        println!("\n== {title}");
    }
}

fn pods(world: &World) -> (usize, usize, usize) {
    let all = world.sim.list_json("v1", "Pod");
    let running = all
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .count();
    let unschedulable = all
        .iter()
        .filter(|p| {
            p["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["reason"] == "Unschedulable"))
        })
        .count();
    (all.len(), running, unschedulable)
}

fn ready_nodes(world: &World) -> usize {
    world
        .sim
        .list_json("v1", "Node")
        .iter()
        .filter(|n| {
            n["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .count()
}

/// A JSON string's text (empty for anything else).
fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn node_exists(world: &World, node: &str) -> bool {
    world.sim.get_json("v1", "Node", "", node).is_some()
}

/// The nodes of NodePool `default`.
fn default_pool_nodes(world: &World) -> Vec<String> {
    world
        .sim
        .list_json("v1", "Node")
        .iter()
        .filter(|n| n["metadata"]["labels"]["karpenter.sh/nodepool"] == "default")
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The Node of instance `id` (by `spec.providerID`), and whether it is Ready.
fn node_of_instance(world: &World, id: &str) -> Option<(String, bool)> {
    world
        .sim
        .list_json("v1", "Node")
        .into_iter()
        .find(|n| {
            n["spec"]["providerID"]
                .as_str()
                .is_some_and(|p| p.ends_with(&format!("/{id}")))
        })
        .map(|n| {
            let ready = n["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            (text(&n["metadata"]["name"]), ready)
        })
}

/// One invocation of the real sweeper handler, as the schedule makes it.
async fn sweep<R>(sweeper: &State<KubeCluster, Ec2Adapter, R>) -> anyhow::Result<Value>
where
    R: Replacement + nodewright::removal::Capacity + LaunchResolver + GroupReplacement,
{
    nodewright_sweeper::handler(
        lambda_runtime::LambdaEvent::new(json!({}), lambda_runtime::Context::default()),
        sweeper,
    )
    .await
    .map_err(|e| anyhow::anyhow!("sweeper: {e}"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // The handlers' own logs, for whoever wants them beside the story:
    // `RUST_LOG=info make demo`. Silent by default: the story is the output.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let story = Story {
        started: Instant::now(),
    };
    let prices: BTreeMap<String, f64> = nodewright::catalog::bundled_instance_types()?
        .into_iter()
        .map(|(t, p)| (t.name, p))
        .collect();

    story.phase("1. The local world: sam deploy of template.yaml into moto");
    let config = SimConfig {
        clock: SimClock::manual(),
        crds_installed: true,
        ..SimConfig::default()
    };
    let world = World::start(CLUSTER, config).await?;
    story.say(format!(
        "moto (AWS) on {}; seeded VPC {} with subnets in {}",
        world.moto.url(),
        world.seeded.vpc_id,
        world
            .seeded
            .subnets
            .iter()
            .map(|s| s.zone.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let deployed = &world.stack.deployed;
    let modelled = deployed.modelled();
    story.say(format!(
        "stack {}: {} in {:.1} s (SAM transform {:.1} s{}), {} resources created, {} recorded \
         but not modelled by moto",
        deployed.stack,
        deployed.status,
        deployed.seconds,
        deployed.translate_seconds,
        if deployed.translation_cached {
            ", cached"
        } else {
            ""
        },
        modelled.len(),
        deployed.resources.len() - modelled.len(),
    ));
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, kind) in &modelled {
        *by_type.entry(*kind).or_default() += 1;
    }
    story.say(
        by_type
            .iter()
            .map(|(kind, n)| format!("{n} {}", kind.trim_start_matches("AWS::")))
            .collect::<Vec<_>>()
            .join(", "),
    );
    story.say(format!(
        "functions run as their stack roles (STS AssumeRole, IAM enforced); queue {}",
        world.stack.queue_url
    ));
    story.say(format!(
        "simulated EKS cluster {CLUSTER} on {} (Karpenter CRDs installed)",
        world.sim.url()
    ));
    let kubeconfig = kubeconfig_path();
    std::fs::write(&kubeconfig, world.sim.kubeconfig_yaml())
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    let keep = std::env::var("NODEWRIGHT_DEMO_KEEP").is_ok_and(|v| v == "1");
    println!(
        "KUBECONFIG={} {}",
        kubeconfig.display(),
        if keep {
            "(kubectl from .venv/bin works against it until Ctrl-C)"
        } else {
            "(valid while the demo runs; `make demo KEEP=1` keeps the world up)"
        }
    );

    story.phase("2. NodePools from the seed write-ups");
    let getting_started = world.example("getting-started.yaml")?;
    // The seed's provisioner2 pins ap-northeast-1a; the local account lives in us-east-1.
    let provisioner2 = world.example_edited(
        "seed-provisioner2-cpu.yaml",
        &[("ap-northeast-1a", "us-east-1a")],
    )?;
    let provisioner1 = world.example("seed-provisioner1-spot.yaml")?;
    for (name, text) in [
        (
            "getting-started.yaml (NodePool default, 10 x 1 CPU inflate)",
            &getting_started,
        ),
        (
            "seed-provisioner1-spot.yaml (Provisioner provisioner1 on spot, 5 x 1 CPU inflate1)",
            &provisioner1,
        ),
        (
            "seed-provisioner2-cpu.yaml (Provisioner provisioner2, 5 x 1 CPU inflate2)",
            &provisioner2,
        ),
    ] {
        let n = world.apply_yaml(text)?;
        story.say(format!("applied {name}: {n} objects"));
    }
    world.sim.step().await;
    let (total, _, unschedulable) = pods(&world);
    story.say(format!("{total} pods created by the Deployments, {unschedulable} marked Unschedulable by the scheduler: no node exists"));

    story.phase(
        "3. The provisioner (the real Lambda handler, invoked as EventBridge Scheduler would)",
    );
    let batch = BatchWindow::fixed(Duration::from_millis(500), Duration::from_secs(3));
    let state = world
        .provisioner(quick(Duration::from_secs(4)), batch)
        .await?;
    let t0 = Instant::now();
    let summary = invoke(&state).await?;
    story.say(format!(
        "handler returned in {:.1}s: {summary}",
        t0.elapsed().as_secs_f64()
    ));
    let fleet = world.instances().await?;
    let mut hourly = 0.0;
    let mut unpriced = 0;
    for i in &fleet {
        // A type the bundled table lacks has no price to show: "unpriced", never $0.
        let price = match prices.get(&i.instance_type) {
            Some(od) if i.lifecycle == "spot" => {
                let spot = od * (1.0 - nodewright::catalog::DEFAULT_SPOT_DISCOUNT);
                hourly += spot;
                format!("~${spot:.4}/h (spot estimated)")
            }
            Some(od) => {
                hourly += od;
                format!("${od:.4}/h")
            }
            None => {
                unpriced += 1;
                "unpriced (not in the bundled price table)".to_string()
            }
        };
        story.say(format!(
            "  {} {:<12} {:<9} {:<11} NodePool {:<13} {price}",
            i.id,
            i.instance_type,
            i.lifecycle,
            i.zone,
            i.tags
                .get("nodewright.io/nodepool")
                .map(String::as_str)
                .unwrap_or("")
        ));
    }
    let latencies: Vec<u64> = summary["pendingToFleetMs"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    story.say(format!(
        "{} instances launched, ${hourly:.4}/h from the bundled us-east-1 table (spot estimated{}); pending -> CreateFleet: {:?} ms",
        fleet.len(),
        if unpriced > 0 {
            format!(", {unpriced} unpriced")
        } else {
            String::new()
        },
        latencies
    ));

    story.phase("4. Nodes join (simulated kubelet: boot 40 s, Ready 10 s later; simulated clock)");
    world.catch_up_clock();
    for step in 1..=7 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
        let (total, running, _) = pods(&world);
        story.say(format!(
            "sim t+{:>3}s: {} nodes Ready, {running}/{total} pods Running",
            step * 10,
            ready_nodes(&world)
        ));
    }
    let asked = world.front.calls("CreateFleet").len();
    let again = invoke(&state).await?;
    story.say(format!(
        "the next invocation: {} instances launched, {} CreateFleet calls",
        again["launchedInstances"].as_array().map_or(0, Vec::len),
        world.front.calls("CreateFleet").len() - asked
    ));

    story.phase(
        "5. A spot interruption warning (EventBridge -> queue -> the real interruption handler)",
    );
    let victim = fleet
        .iter()
        .find(|i| i.lifecycle == "spot")
        .or(fleet.first())
        .context("no instance to interrupt")?;
    let victim_node = world
        .sim
        .list_json("v1", "Node")
        .into_iter()
        .find(|n| {
            n["spec"]["providerID"]
                .as_str()
                .is_some_and(|p| p.ends_with(&victim.id))
        })
        .and_then(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .context("the victim has no node")?;
    let on_victim = |world: &World| {
        world
            .sim
            .list_json("v1", "Pod")
            .iter()
            .filter(|p| p["spec"]["nodeName"] == victim_node.as_str())
            .count()
    };
    // Emitted 75 s ago, as if EventBridge and the queue had been slow: 45 s are left,
    // so the demo shows the whole two minutes' story without waiting them out.
    let emitted = world.clock().now() - jiff::SignedDuration::from_secs(75);
    let deadline = emitted + jiff::SignedDuration::from_secs(120);
    world
        .put_event(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": victim.id, "instance-action": "terminate"}),
            emitted,
        )
        .await?;
    story.say(format!(
        "PutEvents: spot interruption warning for {} ({} {}, node {victim_node}, {} pods), deadline {deadline}",
        victim.id,
        victim.instance_type,
        victim.zone,
        on_victim(&world)
    ));
    let interruption = world.interruption(&state).await?;
    let before: Vec<String> = world.instances().await?.into_iter().map(|i| i.id).collect();
    let first = world.deliver(&interruption, Duration::from_secs(5)).await?;
    let node = world.sim.get_json("v1", "Node", "", &victim_node);
    let tainted = node.as_ref().is_some_and(|n| {
        n["spec"]["taints"]
            .as_array()
            .is_some_and(|ts| ts.iter().any(|t| t["key"] == "nodewright.io/disrupted"))
    });
    story.say(format!(
        "handler took {} message(s), {} failed; node tainted nodewright.io/disrupted: {tainted}",
        first.received,
        first.failed.len()
    ));
    let replacements: Vec<_> = world
        .instances()
        .await?
        .into_iter()
        .filter(|i| !before.contains(&i.id))
        .collect();
    if replacements.is_empty() {
        story.say(
            "  no replacement launched: the node's pods fit on capacity the cluster already has",
        );
    }
    for i in replacements {
        {
            story.say(format!(
                "  replacement {} {:<12} {:<9} {} (tags: nodepool {})",
                i.id,
                i.instance_type,
                i.lifecycle,
                i.zone,
                i.tags
                    .get("nodewright.io/nodepool")
                    .map(String::as_str)
                    .unwrap_or("")
            ));
        }
    }
    let mut deleted = false;
    let mut last = None;
    let mut handled = 0;
    for _ in 1..=60 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
        handled += world
            .deliver(&interruption, Duration::from_secs(1))
            .await?
            .received;
        let (total, running, _) = pods(&world);
        let exists = world.sim.get_json("v1", "Node", "", &victim_node).is_some();
        let left = if exists { on_victim(&world) } else { 0 };
        // A line when something changed, with the time left before the instance goes (on
        // the world's clock, which the handler and the kubelets share).
        let now = (left, running, ready_nodes(&world), handled);
        if last != Some(now) || !exists {
            last = Some(now);
            story.say(format!(
                "{:>4.0}s to the deadline: {handled} follow-up(s) handled, {left} pods left on {victim_node}, {running}/{total} pods Running, {} nodes Ready",
                deadline.duration_since(world.clock().now()).as_secs_f64(),
                now.2
            ));
        }
        if !exists {
            deleted = true;
            story.say(format!(
                "node {victim_node} deleted and {} terminated at {} (deadline {deadline})",
                victim.id,
                world.clock().now()
            ));
            break;
        }
    }
    if !deleted {
        story.say(format!("node {victim_node} still exists after the loop"));
    }

    story.phase("6. Scale down and the sweeper");
    // The sweeper's replacements (consolidation, expiry) launch through the same core.
    let sweeper = nodewright_world::kit::sweeper_state(&world)
        .await?
        .with_replacer(state.provisioner());
    scale_down::scene(&world, &state, &sweeper, &story).await?;

    story.phase("7. Two half-empty nodes become one cheaper node");
    consolidation::scene(&world, &story).await?;

    story.phase("8. An expired node is replaced, replacement first");
    expiry::scene(&world, &state, &sweeper, &story).await?;

    story.phase("Summary");
    let (total, running, _) = pods(&world);
    story.say(format!("{} instances launched for {} NodePools, {} nodes Ready, {running}/{total} pods Running, ${hourly:.4}/h", fleet.len(), fleet.iter().map(|i| i.tags.get("nodewright.io/nodepool").map(String::as_str).unwrap_or("")).collect::<std::collections::BTreeSet<_>>().len(), ready_nodes(&world)));
    story.say(format!(
        "wall time {:.1}s",
        story.started.elapsed().as_secs_f64()
    ));
    if !keep {
        return Ok(());
    }

    // The world after the story, live until Ctrl-C: the control plane steps with the clock
    // following real time, and the provisioner runs every KEEP_POLL.
    story.phase("The world keeps running (Ctrl-C ends it)");
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  .venv/bin/kubectl get nodes,nodepools -o wide");
    println!("  .venv/bin/kubectl scale deployment inflate --replicas=20");
    println!("  .venv/bin/kubectl get pods -w");
    let mut step = tokio::time::interval(KEEP_STEP);
    let mut poll = tokio::time::interval(KEEP_POLL);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            _ = &mut ctrl_c => break,
            _ = step.tick() => {
                world.clock().advance(KEEP_STEP);
                world.sim.step().await;
            }
            _ = poll.tick() => {
                let summary = invoke(&state).await?;
                let launched = summary["launchedInstances"].as_array().map_or(0, Vec::len);
                if launched > 0 {
                    story.say(format!("provisioner launched {launched} instances"));
                }
            }
        }
    }
    story.say("Ctrl-C: stopping the world");
    Ok(())
}

/// `<target dir>/nodewright-demo.kubeconfig`: the demo runs from `<target dir>/debug/`, so
/// its own path finds the target directory wherever `CARGO_TARGET_DIR` put it (a fixed
/// `./target` need not exist); the temp directory when the binary was moved elsewhere.
fn kubeconfig_path() -> std::path::PathBuf {
    const NAME: &str = "nodewright-demo.kubeconfig";
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join(NAME)))
        .filter(|p| p.parent().is_some_and(std::path::Path::is_dir))
        .unwrap_or_else(|| std::env::temp_dir().join(NAME))
}
