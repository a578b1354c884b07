//! The fleet's price, as `nodewright status` reads it from the cluster, against the same
//! pods planned from scratch by `nodewright plan`: the real CLI, run as a user runs it.

use anyhow::Context as _;
use serde_json::{Value, json};

use super::objects::daemon;
use crate::kit;
use crate::world::World;

fn nodewright_cli() -> anyhow::Result<std::path::PathBuf> {
    kit::debug_binary("nodewright")
}

/// (the fleet's $/h, the same pods' $/h planned from scratch). The CLI runs as a child
/// process awaited on the runtime: a blocking wait would hold a worker thread the
/// simulated API server needs to answer it.
pub async fn price(world: &World, dir: &std::path::Path) -> anyhow::Result<(f64, f64)> {
    let cli = nodewright_cli()?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, world.sim.kubeconfig_yaml())?;
    let status = tokio::process::Command::new(&cli)
        .args(["status", "-o", "json", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .await?;
    let status: Value = serde_json::from_slice(&status.stdout).with_context(|| {
        format!(
            "nodewright status: {}",
            String::from_utf8_lossy(&status.stderr)
        )
    })?;
    let fleet = status["price_per_hour"]
        .as_f64()
        .context("status has no price_per_hour")?;
    let mut items = Vec::new();
    for (version, kind) in [
        ("karpenter.sh/v1", "NodePool"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass"),
        ("apps/v1", "DaemonSet"),
    ] {
        items.extend(world.sim.list_json(version, kind));
    }
    for mut p in world.sim.list_json("v1", "Pod") {
        if daemon(&p) || p.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        if let Some(spec) = p["spec"].as_object_mut() {
            spec.remove("nodeName");
        }
        p.as_object_mut().map(|o| o.remove("status"));
        items.push(p);
    }
    let file = dir.join("pods-from-scratch.json");
    std::fs::write(
        &file,
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )?;
    let plan = tokio::process::Command::new(&cli)
        .args(["plan", "-o", "json", "-f"])
        .arg(&file)
        .output()
        .await?;
    let plan: Value = serde_json::from_slice(&plan.stdout)
        .with_context(|| format!("nodewright plan: {}", String::from_utf8_lossy(&plan.stderr)))?;
    let scratch = plan["total_price_per_hour"]
        .as_f64()
        .context("plan has no total_price_per_hour")?;
    Ok((fleet, scratch))
}
