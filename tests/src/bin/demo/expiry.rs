//! The demo's expiry scene: the `default` NodePool gets a short `expireAfter`, `inflate`
//! runs on its nodes, the simulated clock passes the expiry, and the real sweeper handler
//! replaces each expired node replacement first: launched through the provisioning core,
//! the old node drained only once the replacement is a Ready node. The provisioner is not
//! invoked during the scene, and the line for each sweep says how many pods are waiting
//! for a node (none should be).

use std::time::Duration;

use nodewright::aws::Ec2Adapter;
use nodewright::kube::KubeCluster;
use nodewright::provision::Replacement;
use nodewright_sweeper::{GroupReplacement, LaunchResolver, State};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{ProvisionerState, invoke};
use serde_json::{Value, json};

use super::{Story, pods};

const REPLICAS: usize = 3;

fn default_pool_nodes(world: &World) -> Vec<String> {
    world
        .sim
        .list_json("v1", "Node")
        .iter()
        .filter(|n| n["metadata"]["labels"]["karpenter.sh/nodepool"] == "default")
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

fn inflate_running(world: &World) -> usize {
    world
        .sim
        .list_json("v1", "Pod")
        .iter()
        .filter(|p| {
            p["metadata"]["labels"]["app"] == "inflate" && p["status"]["phase"] == "Running"
        })
        .count()
}

async fn sweep<R>(sweeper: &State<KubeCluster, Ec2Adapter, R>) -> anyhow::Result<Value>
where
    R: Replacement + LaunchResolver + GroupReplacement,
{
    nodewright_sweeper::handler(
        lambda_runtime::LambdaEvent::new(json!({}), lambda_runtime::Context::default()),
        sweeper,
    )
    .await
    .map_err(|e| anyhow::anyhow!("sweeper: {e}"))
}

pub async fn scene<R>(
    world: &World,
    state: &ProvisionerState,
    sweeper: &State<KubeCluster, Ec2Adapter, R>,
    story: &Story,
) -> anyhow::Result<()>
where
    R: Replacement + LaunchResolver + GroupReplacement,
{
    let edited = world.example_edited(
        "getting-started.yaml",
        &[
            ("replicas: 10", &format!("replicas: {REPLICAS}")),
            ("expireAfter: 720h", "expireAfter: 10m"),
        ],
    )?;
    world.apply_yaml(&edited)?;
    world.sim.step().await;
    story.say(format!(
        "NodePool default now has expireAfter: 10m; inflate scaled to {REPLICAS} replicas"
    ));
    for _ in 0..3 {
        invoke(state).await?;
        for _ in 0..6 {
            world.clock().advance(Duration::from_secs(10));
            world.sim.step().await;
        }
        if inflate_running(world) == REPLICAS {
            break;
        }
    }
    let expiring = default_pool_nodes(world);
    story.say(format!(
        "{}/{REPLICAS} inflate pods Running on {expiring:?}",
        inflate_running(world)
    ));
    world.clock().advance(Duration::from_secs(11 * 60));
    world.sim.step().await;
    story.say("11 (simulated) minutes later: those nodes are past expireAfter");
    let mut before = None;
    let mut after = None;
    for _ in 0..16 {
        let report = sweep(sweeper).await?;
        before.get_or_insert(report["price_before"].as_f64().unwrap_or_default());
        for c in report["commands"].as_array().into_iter().flatten() {
            story.say(format!(
                "sweeper: {} {} ({})",
                c["action"].as_str().unwrap_or_default(),
                c["nodes"],
                c["reason"].as_str().unwrap_or_default(),
            ));
        }
        for (key, what) in [
            (
                "replacements_launched",
                "replacement launched before the drain",
            ),
            (
                "awaiting_replacement",
                "not drained: its replacement is not a Ready node yet",
            ),
            ("draining", "draining: its replacement is Ready"),
            ("removed", "instance terminated, Node deleted"),
        ] {
            for node in report[key].as_array().into_iter().flatten() {
                story.say(format!("  {}: {what}", node.as_str().unwrap_or_default()));
            }
        }
        let left = default_pool_nodes(world);
        if expiring.iter().all(|n| !left.contains(n)) {
            // This report priced the fleet before its removals: the next sweep prices it after.
            let next = sweep(sweeper).await?;
            after = Some(next["price_before"].as_f64().unwrap_or_default());
            break;
        }
        world.clock().advance(Duration::from_secs(30));
        world.sim.step().await;
        let (_, _, unschedulable) = pods(world);
        story.say(format!(
            "  30 s later: {}/{REPLICAS} inflate pods Running, {unschedulable} pods Unschedulable, default nodes {:?}",
            inflate_running(world),
            default_pool_nodes(world)
        ));
    }
    match after {
        Some(after) => story.say(format!(
            "every expired node replaced: nodewright's fleet ${:.4}/h before, ${after:.4}/h after; {}/{REPLICAS} inflate pods Running on {:?}",
            before.unwrap_or_default(),
            inflate_running(world),
            default_pool_nodes(world)
        )),
        None => anyhow::bail!(
            "expired nodes still present after the scene: {:?}",
            default_pool_nodes(world)
        ),
    }
    Ok(())
}
