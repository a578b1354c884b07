//! `nodewright handback`: the rollback's step that gives Karpenter its nodes back clean. A
//! node Karpenter launched that nodewright adopted may be in the middle of a removal when
//! the stack is deleted; nothing would then ever take nodewright's taint off it, and no pod
//! could schedule there. This takes off what a removal writes (the record, both disruption
//! taints, the load-balancer exclusion nodewright set), as a removal that is given up
//! does, and names nodewright's own nodes, which the rollback drains and terminates next.
//! Run it after the stack is deleted, so no function takes a node again.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use nodewright::api::labels::{DISRUPTED_TAINT, NODECLAIM};
use nodewright::kube::{EXCLUDED_BY_REMOVAL, Marks, removal_patch};
use nodewright::removal::{REMOVAL_ANNOTATION, disrupted_taints};

/// The label Karpenter's registration writes on every node it launched.
const KARPENTER_REGISTERED: &str = "karpenter.sh/registered";
const ATTEMPTS: usize = 3;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: crate::status::Target,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    nodewright::eks::install_crypto_provider();
    let client = args.target.client().await?;
    let api: Api<Node> = Api::all(client);
    let karpenters = api
        .list(&ListParams::default().labels(KARPENTER_REGISTERED))
        .await
        .context("listing Karpenter's nodes")?;
    let mut released = 0;
    for node in karpenters.items {
        let name = node.metadata.name.clone().unwrap_or_default();
        if release(&api, node).await? {
            println!("released {name}: nodewright's removal marks are off");
            released += 1;
        }
    }
    println!("{released} of Karpenter's nodes released");
    let ours = api
        .list(&ListParams::default().labels(&format!("{NODECLAIM},!{KARPENTER_REGISTERED}")))
        .await
        .context("listing nodewright's nodes")?;
    for node in ours.items {
        let name = node.metadata.name.unwrap_or_default();
        println!("nodewright's own node {name}: drain it, then terminate its instance");
    }
    Ok(())
}

/// Whether nodewright was removing `node`: its record, its own taint or its load-balancer
/// mark. Karpenter's `karpenter.sh/disrupted` alone is Karpenter's and stays.
fn being_removed_by_nodewright(node: &Node) -> bool {
    let annotations = node.metadata.annotations.as_ref();
    let annotated = |key: &str| annotations.is_some_and(|a| a.contains_key(key));
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == DISRUPTED_TAINT));
    annotated(REMOVAL_ANNOTATION) || annotated(EXCLUDED_BY_REMOVAL) || tainted
}

/// Takes nodewright's removal marks off `node`, as a removal given up does, guarded by its
/// resourceVersion (read again on a conflict); `false` when nodewright was not removing it.
async fn release(api: &Api<Node>, mut node: Node) -> anyhow::Result<bool> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let taints = disrupted_taints();
    for _ in 0..ATTEMPTS {
        if !being_removed_by_nodewright(&node) {
            return Ok(false);
        }
        let Some(patch) = removal_patch(&node, REMOVAL_ANNOTATION, None, &taints, Marks::NONE)
        else {
            return Ok(false);
        };
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                node = api
                    .get(&name)
                    .await
                    .with_context(|| format!("reading node {name}"))?;
            }
            Err(e) => return Err(e).with_context(|| format!("releasing node {name}")),
        }
    }
    anyhow::bail!("node {name} changed {ATTEMPTS} times while being released; run it again")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(annotations: serde_json::Value, taints: &[&str]) -> Node {
        let taints: Vec<_> = taints
            .iter()
            .map(|k| serde_json::json!({"key": k, "effect": "NoSchedule"}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "annotations": annotations},
            "spec": {"taints": taints},
        }))
        .unwrap()
    }

    #[test]
    fn only_a_node_nodewright_was_removing_is_released() {
        let none = serde_json::json!({});
        let cases = [
            (node(none.clone(), &[]), false),
            (node(none.clone(), &["karpenter.sh/disrupted"]), false),
            (
                node(
                    none.clone(),
                    &["nodewright.io/disrupted", "karpenter.sh/disrupted"],
                ),
                true,
            ),
            (
                node(serde_json::json!({"nodewright.io/removal": "{}"}), &[]),
                true,
            ),
            (
                node(serde_json::json!({EXCLUDED_BY_REMOVAL: "true"}), &[]),
                true,
            ),
        ];
        for (n, want) in cases {
            assert_eq!(being_removed_by_nodewright(&n), want, "{n:?}");
        }
    }
}
