//! The demo's scale-down scene: `inflate` scaled to 4, then to 0, with the real sweeper
//! handler every (simulated) 30 s and the provisioner after it. The scene checks what it
//! tells: every node a command named went (instance terminated, Node deleted), the fleet
//! costs less, nothing is left pending, and every node seen empty went.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, ensure};
use nodewright::aws::Ec2Adapter;
use nodewright::kube::KubeCluster;
use nodewright::provision::Replacement;
use nodewright_sweeper::{GroupReplacement, LaunchResolver, State};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{ProvisionerState, invoke};
use serde_json::json;

use super::{Story, default_pool_nodes, node_exists, pods, sweep, text};

/// What one phase of the scene saw.
#[derive(Default)]
struct Seen {
    /// Nodes a command named.
    commanded: BTreeSet<String>,
    /// Nodes seen empty (marked) and not unmarked since.
    emptied: BTreeSet<String>,
    removed: BTreeSet<String>,
    price_first: Option<f64>,
    price_last: f64,
}

pub async fn scene<R>(
    world: &World,
    state: &ProvisionerState,
    sweeper: &State<KubeCluster, Ec2Adapter, R>,
    story: &Story,
) -> anyhow::Result<()>
where
    R: Replacement + nodewright::removal::Capacity + LaunchResolver + GroupReplacement,
{
    let shrink = phase(world, state, sweeper, story, 4, 10).await?;
    ensure!(
        !shrink.commanded.is_empty(),
        "scene 6: inflate went from 10 replicas to 4, yet the sweeper planned no removal"
    );
    let still: Vec<&String> = shrink
        .commanded
        .iter()
        .filter(|n| node_exists(world, n))
        .collect();
    ensure!(
        still.is_empty(),
        "scene 6: the sweeper planned these nodes away, but they are still there: {still:?}"
    );
    ensure!(
        shrink.price_last < shrink.price_first.unwrap_or_default(),
        "scene 6: the fleet does not cost less after the removals (${:.4}/h before, ${:.4}/h after)",
        shrink.price_first.unwrap_or_default(),
        shrink.price_last
    );

    let empty = phase(world, state, sweeper, story, 0, 12).await?;
    ensure!(
        !empty.emptied.is_empty() || !empty.removed.is_empty(),
        "scene 6: inflate went to 0 replicas, yet no node was seen empty or removed"
    );
    let still: Vec<&String> = empty
        .emptied
        .iter()
        .filter(|n| node_exists(world, n))
        .collect();
    ensure!(
        still.is_empty(),
        "scene 6: these nodes were seen empty but did not go within the scene: {still:?}"
    );
    let left = default_pool_nodes(world);
    ensure!(
        left.is_empty(),
        "scene 6: with inflate at 0 replicas, NodePool default still has nodes: {left:?}"
    );
    story.say("checked: every emptied node went, and NodePool default has no node left");
    Ok(())
}

/// Scales `inflate` to `replicas` and runs `rounds` sweeps; fails if a pod is left not
/// Running at the end.
async fn phase<R>(
    world: &World,
    state: &ProvisionerState,
    sweeper: &State<KubeCluster, Ec2Adapter, R>,
    story: &Story,
    replicas: u32,
    rounds: usize,
) -> anyhow::Result<Seen>
where
    R: Replacement + nodewright::removal::Capacity + LaunchResolver + GroupReplacement,
{
    let mut deployment = world
        .sim
        .get_json("apps/v1", "Deployment", "default", "inflate")
        .context("the inflate Deployment")?;
    deployment["spec"]["replicas"] = json!(replicas);
    world.sim.apply_json(deployment)?;
    story.say(format!(
        "inflate scaled to {replicas} replicas; the real sweeper handler runs every (simulated) 30 s, the provisioner after it"
    ));
    let mut seen = Seen::default();
    for _ in 0..rounds {
        world.clock().advance(Duration::from_secs(30));
        world.sim.step().await;
        let report = sweep(sweeper).await?;
        seen.price_first
            .get_or_insert(report["price_before"].as_f64().unwrap_or_default());
        seen.price_last = report["price_after"].as_f64().unwrap_or_default();
        for c in report["commands"].as_array().into_iter().flatten() {
            story.say(format!(
                "sweeper: {} {} ({}), saving ${:.4}/h",
                text(&c["action"]),
                c["nodes"],
                text(&c["reason"]),
                c["savings_per_hour"].as_f64().unwrap_or_default()
            ));
            seen.commanded
                .extend(c["nodes"].as_array().into_iter().flatten().map(text));
        }
        for (key, what) in [
            ("marked_empty", "seen empty; goes after consolidateAfter"),
            (
                "replacements_launched",
                "replacement launched before the drain",
            ),
            ("removed", "instance terminated, Node deleted"),
        ] {
            for node in report[key].as_array().into_iter().flatten() {
                story.say(format!("  {}: {what}", text(node)));
            }
        }
        seen.emptied.extend(
            report["marked_empty"]
                .as_array()
                .into_iter()
                .flatten()
                .map(text),
        );
        for n in report["unmarked"].as_array().into_iter().flatten() {
            seen.emptied.remove(&text(n));
        }
        seen.removed
            .extend(report["removed"].as_array().into_iter().flatten().map(text));
        // Pods a drain moved that fit nowhere are the provisioner's.
        let summary = invoke(state).await?;
        let launched = summary["launchedInstances"].as_array().map_or(0, Vec::len);
        if launched > 0 {
            story.say(format!(
                "  provisioner: {launched} instances for pods the drains moved"
            ));
        }
    }
    // A removal's last sweep prices the fleet before it: one more prices it after.
    let last = sweep(sweeper).await?;
    seen.price_last = last["price_before"].as_f64().unwrap_or_default();
    let (total, running, _) = pods(world);
    story.say(format!(
        "nodewright's fleet: ${:.4}/h before, ${:.4}/h after; {running}/{total} pods Running",
        seen.price_first.unwrap_or_default(),
        seen.price_last
    ));
    ensure!(
        running == total,
        "scene 6: after inflate went to {replicas} replicas, {} of {total} pods are not Running",
        total - running
    );
    Ok(seen)
}
