//! The demo's consolidation scene: two half-empty nodes become one cheaper node. Staged as
//! the end-to-end test does: NodePool default is held to 2xlarge sizes while `inflate` and
//! a second Deployment get one node each (the first node cordoned while the second is
//! launched), then every size is allowed and the budget lets both go at once. The real
//! sweeper plans ONE replacement for both, launches it through the provisioning core, and
//! drains the two only once it is a Ready node. The scene checks each of those steps.
//!
//! The scene has a provisioner of its own for each shape of the pool (and a sweeper whose
//! replacements launch through the second): a provisioner reuses the NodePools it read for
//! `DEFAULT_CONFIG_TTL` (30 s of wall time, as in Lambda), and the scene changes the pool
//! twice within a few seconds.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use nodewright::provision::BatchWindow;
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{ProvisionerState, invoke, quick};
use serde_json::{Value, json};

use super::{Story, default_pool_nodes, node_exists, node_of_instance, sweep, text};

/// Pins a Deployment of the getting-started example to NodePool default, so its pods never
/// take room on the other pools' nodes.
const PIN: (&str, &str) = (
    "    spec:\n      terminationGracePeriodSeconds: 0",
    "    spec:\n      nodeSelector: {karpenter.sh/nodepool: default}\n      terminationGracePeriodSeconds: 0",
);
const ONLY_2XLARGE: (&str, &str) = (
    "      nodeClassRef:",
    "        - key: karpenter.k8s.aws/instance-size\n          operator: In\n          values: [\"2xlarge\"]\n      nodeClassRef:",
);
const BOTH_AT_ONCE: (&str, &str) = (
    "consolidateAfter: 1m",
    "consolidateAfter: 1m\n    budgets: [{nodes: \"100%\"}]",
);

/// The nodes the `inflate` and `second` pods run on, and how many of them are not Running.
fn placement(world: &World) -> (Vec<String>, usize) {
    let ours: Vec<Value> = world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .filter(|p| {
            matches!(
                p["metadata"]["labels"]["app"].as_str(),
                Some("inflate" | "second")
            )
        })
        .collect();
    let mut on: Vec<String> = ours
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
        .collect();
    on.sort();
    let waiting = ours
        .iter()
        .filter(|p| p["status"]["phase"] != "Running")
        .count();
    (on, waiting)
}

fn set_unschedulable(world: &World, node: &str, cordoned: bool) -> anyhow::Result<()> {
    let mut n = world
        .sim
        .get_json("v1", "Node", "", node)
        .with_context(|| format!("node {node}"))?;
    n["spec"]["unschedulable"] = json!(cordoned);
    world.sim.apply_json(n)?;
    Ok(())
}

/// Invokes the provisioner and steps the cluster until `want` pods run, a few times.
async fn run_until(world: &World, state: &ProvisionerState, want: usize) -> anyhow::Result<()> {
    for _ in 0..3 {
        invoke(state).await?;
        for _ in 0..8 {
            world.clock().advance(Duration::from_secs(10));
            world.sim.step().await;
        }
        if placement(world).0.len() == want {
            return Ok(());
        }
    }
    bail!(
        "scene 7: {want} pods should run on NodePool default, but {:?} do",
        placement(world).0
    )
}

/// A provisioner that reads the NodePools as they are now, as the demo's own does.
async fn fresh_provisioner(world: &World) -> anyhow::Result<ProvisionerState> {
    let batch = BatchWindow::fixed(Duration::from_millis(500), Duration::from_secs(3));
    world
        .provisioner(quick(Duration::from_secs(4)), batch)
        .await
}

pub async fn scene(world: &World, story: &Story) -> anyhow::Result<()> {
    let inflate = world.example_edited(
        "getting-started.yaml",
        &[("replicas: 10", "replicas: 1"), PIN, ONLY_2XLARGE],
    )?;
    world.apply_yaml(&inflate)?;
    world.sim.step().await;
    let state = &fresh_provisioner(world).await?;
    run_until(world, state, 1).await?;
    let first = default_pool_nodes(world);
    ensure!(
        first.len() == 1,
        "scene 7: one node for inflate, got {first:?}"
    );
    set_unschedulable(world, &first[0], true)?;
    let second = world.example_edited(
        "getting-started.yaml",
        &[("replicas: 10", "replicas: 1"), PIN, ("inflate", "second")],
    )?;
    // Only the Deployment: the NodePool keeps its 2xlarge requirement for now.
    let deployment = second.split("---").last().unwrap_or_default().to_string();
    world.apply_yaml(&deployment)?;
    world.sim.step().await;
    run_until(world, state, 2).await?;
    set_unschedulable(world, &first[0], false)?;
    let halves: BTreeSet<String> = default_pool_nodes(world).into_iter().collect();
    let (on, _) = placement(world);
    ensure!(
        halves.len() == 2 && on.iter().collect::<BTreeSet<_>>().len() == 2,
        "scene 7: two nodes with one pod each, got nodes {halves:?} and pods on {on:?}"
    );
    for node in &halves {
        let n = world
            .sim
            .get_json("v1", "Node", "", node)
            .unwrap_or_default();
        let size = text(&n["metadata"]["labels"]["node.kubernetes.io/instance-type"]);
        ensure!(
            size.ends_with(".2xlarge"),
            "scene 7: NodePool default is held to 2xlarge, yet {node} is a {size}"
        );
    }
    story.say(format!(
        "two 2xlarge nodes of NodePool default, one 1-CPU pod on each: {halves:?}"
    ));
    // Older than consolidateAfter (1m), pods included; then every size is allowed again.
    world.clock().advance(Duration::from_secs(70));
    world.sim.step().await;
    let widened = world.example_edited(
        "getting-started.yaml",
        &[("replicas: 10", "replicas: 1"), PIN, BOTH_AT_ONCE],
    )?;
    world.apply_yaml(&widened)?;
    world.sim.step().await;
    story.say("NodePool default allows every size again, and both nodes to go at once");
    // The sweeper's replacements launch through the provisioning core, as in its main.rs.
    let replacer = fresh_provisioner(world).await?;
    let sweeper = &nodewright_world::kit::sweeper_state(world)
        .await?
        .with_replacer(replacer.provisioner());

    let plan = sweep(sweeper).await?;
    let commands = plan["commands"].as_array().cloned().unwrap_or_default();
    let command = match commands.as_slice() {
        [c] if c["action"] == "replace" => c.clone(),
        _ => bail!(
            "scene 7: the sweeper should plan one replace of both nodes, planned {commands:?}; kept {}",
            plan["kept"]
        ),
    };
    let going: BTreeSet<String> = command["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    ensure!(
        going == halves,
        "scene 7: the replace should take both half-empty nodes {halves:?}, took {going:?}"
    );
    let before = plan["price_before"].as_f64().unwrap_or_default();
    let after = plan["price_after"].as_f64().unwrap_or_default();
    let launched: Vec<String> = plan["replacements_launched"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    ensure!(
        launched.len() == 1,
        "scene 7: ONE replacement for both nodes should be launched, got {launched:?}"
    );
    story.say(format!(
        "sweeper: replace {going:?} (underutilized) by one node, saving ${:.4}/h; replacement {} launched before either drains",
        command["savings_per_hour"].as_f64().unwrap_or_default(),
        launched[0]
    ));
    ensure!(
        after < before,
        "scene 7: the plan should make the fleet cheaper (${before:.4}/h -> ${after:.4}/h)"
    );
    let ready_now = node_of_instance(world, &launched[0]).is_some_and(|(_, ready)| ready);
    let draining_now = plan["draining"].as_array().is_some_and(|d| !d.is_empty());
    ensure!(
        ready_now || !draining_now,
        "scene 7: {going:?} began draining in the sweep that launched their replacement, before it was a Ready node"
    );

    let mut replacement_node = None;
    for _ in 0..12 {
        world.clock().advance(Duration::from_secs(10));
        world.sim.step().await;
        let ready = node_of_instance(world, &launched[0]).filter(|(_, ready)| *ready);
        let report = sweep(sweeper).await?;
        let draining: Vec<String> = report["draining"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        if !draining.is_empty() {
            let Some((name, _)) = &ready else {
                bail!(
                    "scene 7: {draining:?} began draining before their replacement {} was a Ready node",
                    launched[0]
                );
            };
            if replacement_node.is_none() {
                story.say(format!("  replacement {name} is Ready: {draining:?} drain"));
            }
            replacement_node = Some(name.clone());
        }
        let (on, waiting) = placement(world);
        ensure!(
            waiting == 0,
            "scene 7: {waiting} pods are waiting for a node during the replacement"
        );
        if replacement_node.is_none() {
            ensure!(
                on.iter().all(|n| halves.contains(n)),
                "scene 7: a pod left its node before the replacement was Ready: {on:?}"
            );
        }
        for n in report["removed"].as_array().into_iter().flatten() {
            story.say(format!("  {}: instance terminated, Node deleted", text(n)));
        }
        if halves.iter().all(|n| !node_exists(world, n)) {
            break;
        }
    }
    let Some(replacement) = replacement_node else {
        bail!("scene 7: the two nodes never drained onto their replacement");
    };
    let left: Vec<&String> = halves.iter().filter(|n| node_exists(world, n)).collect();
    ensure!(
        left.is_empty(),
        "scene 7: the replaced nodes are still there: {left:?}"
    );
    for _ in 0..3 {
        world.clock().advance(Duration::from_secs(5));
        world.sim.step().await;
    }
    let (on, waiting) = placement(world);
    ensure!(
        waiting == 0 && on == [replacement.clone(), replacement.clone()],
        "scene 7: both pods should run on the replacement {replacement}, they run on {on:?} ({waiting} waiting)"
    );
    let fleet = sweep(sweeper).await?["price_before"]
        .as_f64()
        .unwrap_or_default();
    ensure!(
        fleet < before,
        "scene 7: the fleet should cost less (${before:.4}/h before, ${fleet:.4}/h after)"
    );
    story.say(format!(
        "checked: two half-empty nodes became one cheaper node ({replacement}), Ready before they drained; nodewright's fleet ${before:.4}/h -> ${fleet:.4}/h"
    ));
    Ok(())
}
