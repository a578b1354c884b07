//! A NodePool's `status` as Karpenter's counter controller writes it: `resources` (the sum
//! of its nodes' capacity, `nodes` one each) and `nodes` (the count, the scale
//! subresource's `statuspath` for a static pool). Counted over the pool's nodes whose
//! instance carries this cluster's ownership tag; launches without a Node yet are not.
//! Conditions are not written: Karpenter's CRD requires a transition time nodewright does
//! not keep per condition.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use crate::api::Quantity;
use crate::api::labels::NODEPOOL;

/// The capacity Karpenter sums, besides `nodes`.
const SUMMED: [&str; 4] = ["cpu", "memory", "pods", "ephemeral-storage"];

/// Each of `pools`' status, from `nodes` of which `owned` says which are nodewright's.
pub fn pool_statuses(
    pools: &[String],
    nodes: &[Node],
    owned: &dyn Fn(&Node) -> bool,
) -> BTreeMap<String, Value> {
    let mut totals: BTreeMap<&str, (BTreeMap<&str, i64>, i64)> = pools
        .iter()
        .map(|p| (p.as_str(), (BTreeMap::new(), 0)))
        .collect();
    for node in nodes.iter().filter(|n| owned(n)) {
        let pool = node.metadata.labels.as_ref().and_then(|l| l.get(NODEPOOL));
        let Some((sums, count)) = pool.and_then(|p| totals.get_mut(p.as_str())) else {
            continue;
        };
        *count += 1;
        let capacity = node.status.as_ref().and_then(|s| s.capacity.as_ref());
        for name in SUMMED {
            let milli = capacity
                .and_then(|c| c.get(name))
                .and_then(|q| Quantity(q.0.clone()).milli().ok())
                .unwrap_or(0);
            *sums.entry(name).or_default() += milli;
        }
    }
    totals
        .into_iter()
        .map(|(pool, (sums, count))| {
            let mut resources: serde_json::Map<String, Value> = SUMMED
                .iter()
                .map(|r| {
                    (
                        r.to_string(),
                        json!(quantity(sums.get(r).copied().unwrap_or(0))),
                    )
                })
                .collect();
            resources.insert("nodes".into(), json!(count.to_string()));
            (
                pool.to_string(),
                json!({"resources": resources, "nodes": count}),
            )
        })
        .collect()
}

/// A milli-unit amount as Kubernetes writes a quantity: whole units when it has no
/// fraction, else millis.
fn quantity(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, pool: Option<&str>, cpu: &str, memory: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": pool.map(|p| json!({NODEPOOL: p})).unwrap_or(json!({}))},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "29", "ephemeral-storage": "20Gi"}}
        }))
        .unwrap()
    }

    #[test]
    fn a_pool_s_status_sums_its_owned_nodes_capacity_and_counts_them() {
        let nodes = [
            node("a", Some("web"), "2", "8Gi"),
            node("b", Some("web"), "3500m", "4Gi"),
            node("foreign", Some("web"), "64", "256Gi"),
            node("other", Some("batch"), "4", "16Gi"),
            node("unpooled", None, "4", "16Gi"),
        ];
        let owned = |n: &Node| n.metadata.name.as_deref() != Some("foreign");
        let statuses = pool_statuses(&["web".into(), "idle".into()], &nodes, &owned);
        let gib = 1024 * 1024 * 1024_i64;
        assert_eq!(
            statuses["web"],
            json!({"nodes": 2, "resources": {
                "cpu": "5500m", "memory": (12 * gib).to_string(), "pods": "58",
                "ephemeral-storage": (40 * gib).to_string(), "nodes": "2"}})
        );
        // A pool with no node says so; one not asked for is not written.
        assert_eq!(statuses["idle"]["nodes"], 0);
        assert_eq!(statuses["idle"]["resources"]["cpu"], "0");
        assert!(!statuses.contains_key("batch"));
    }
}
