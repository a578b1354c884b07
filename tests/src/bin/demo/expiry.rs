//! The demo's expiry scene: the `default` NodePool gets a short `expireAfter`, `inflate`
//! runs on its nodes, the simulated clock passes the expiry, and the real sweeper handler
//! replaces each expired node replacement first: launched through the provisioning core,
//! the old node drained only once the replacement is a Ready node. The provisioner is not
//! invoked during the scene, and the line for each sweep says how many pods are waiting
//! for a node. The scene checks what it tells: each expired node is replaced and gone, no
//! node drains before the replacement it records is a Ready node, no pod waits for a node,
//! and `inflate` runs whole at the end.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{bail, ensure};
use nodewright::aws::Ec2Adapter;
use nodewright::kube::KubeCluster;
use nodewright::provision::Replacement;
use nodewright::removal::recorded_replacement;
use nodewright_sweeper::{GroupReplacement, LaunchResolver, State};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{ProvisionerState, invoke};

use super::{Story, default_pool_nodes, node_of_instance, pods, sweep, text};

const REPLICAS: usize = 3;

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

/// The instances `node` records as its replacement that are not Ready nodes yet.
fn replacement_not_ready(world: &World, node: &str) -> Vec<String> {
    let annotations: std::collections::BTreeMap<String, String> = world
        .sim
        .get_json("v1", "Node", "", node)
        .and_then(|n| serde_json::from_value(n["metadata"]["annotations"].clone()).ok())
        .unwrap_or_default();
    recorded_replacement(&annotations)
        .into_iter()
        .filter(|id| !node_of_instance(world, id).is_some_and(|(_, ready)| ready))
        .collect()
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
    ensure!(
        !expiring.is_empty() && inflate_running(world) == REPLICAS,
        "scene 8: {REPLICAS} inflate pods should run on NodePool default, {} run on {expiring:?}",
        inflate_running(world)
    );
    let mut before = None;
    let mut after = None;
    let mut replaced: BTreeSet<String> = BTreeSet::new();
    for _ in 0..16 {
        let report = sweep(sweeper).await?;
        before.get_or_insert(report["price_before"].as_f64().unwrap_or_default());
        for c in report["commands"].as_array().into_iter().flatten() {
            story.say(format!(
                "sweeper: {} {} ({})",
                text(&c["action"]),
                c["nodes"],
                text(&c["reason"]),
            ));
            if c["reason"] == "expired" {
                replaced.extend(c["nodes"].as_array().into_iter().flatten().map(text));
            }
        }
        // Replacement first: a node drains only once what it records is a Ready node.
        for node in report["draining"].as_array().into_iter().flatten() {
            let node = text(node);
            let not_ready = replacement_not_ready(world, &node);
            ensure!(
                not_ready.is_empty(),
                "scene 8: {node} drains before its replacement {not_ready:?} is a Ready node"
            );
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
                story.say(format!("  {}: {what}", text(node)));
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
        ensure!(
            unschedulable == 0,
            "scene 8: {unschedulable} pods wait for a node while expired nodes are replaced"
        );
    }
    let Some(after) = after else {
        bail!(
            "scene 8: expired nodes still present after the scene: {:?}",
            default_pool_nodes(world)
        );
    };
    // A node that emptied meanwhile goes as empty, which is no replacement to check.
    ensure!(
        expiring.iter().any(|n| replaced.contains(n)),
        "scene 8: none of the expired nodes {expiring:?} was replaced for expiry"
    );
    ensure!(
        inflate_running(world) == REPLICAS,
        "scene 8: {}/{REPLICAS} inflate pods Running after the replacements",
        inflate_running(world)
    );
    story.say(format!(
        "checked: every expired node replaced, its replacement Ready before it drained: nodewright's fleet ${:.4}/h before, ${after:.4}/h after; {}/{REPLICAS} inflate pods Running on {:?}",
        before.unwrap_or_default(),
        inflate_running(world),
        default_pool_nodes(world)
    ));
    Ok(())
}
