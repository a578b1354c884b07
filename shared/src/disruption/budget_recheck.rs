//! A voluntary command's budget once more, just before it acts, on the pool's nodes as
//! they are now. The sweep decided on the nodes it read at its start; since then another
//! function may have begun a voluntary removal in the same pool (the interruption function
//! following a rebalance recommendation, under the same budgets). A node is disrupting when
//! tainted `nodewright.io/disrupted` or being deleted, as the plan counts it; unlike the
//! plan, starting and not-yet-owned nodes stay in the pool's size, which can only make a
//! percentage budget a node more lenient here than in the plan.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;

use super::{PROVISIONER_NAME, PoolPolicy, Reason, allowed};
use crate::api::labels::NODEPOOL;
use crate::kube::tainted_for_disruption;

/// Why `taking` (the command's nodes, of `pool`) may not all begin now, if so. Forceful
/// reasons (repair, a static pool's scale-down) are outside the budgets.
pub fn budget_recheck(
    pool: &PoolPolicy,
    reason: Reason,
    nodes: &[Node],
    taking: &[String],
    now: Timestamp,
) -> Option<String> {
    if matches!(reason, Reason::Unhealthy | Reason::ScaleDown) {
        return None;
    }
    let budgets = match &pool.budgets {
        Ok(b) => b,
        Err(why) => return Some(format!("NodePool {}: {why}", pool.name)),
    };
    let (mut total, mut others, mut new) = (0, 0, 0);
    for n in nodes {
        let labels = n.metadata.labels.as_ref();
        let of_pool = labels
            .and_then(|l| l.get(NODEPOOL).or_else(|| l.get(PROVISIONER_NAME)))
            .is_some_and(|p| p == &pool.name);
        if !of_pool {
            continue;
        }
        total += 1;
        let disrupting = tainted_for_disruption(n) || n.metadata.deletion_timestamp.is_some();
        let name = n.metadata.name.as_deref().unwrap_or_default();
        // A node of the command already disrupting was taken by another removal since
        // the sweep read it (the plan never picks one): it holds budget like any other.
        match (disrupting, taking.iter().any(|t| t == name)) {
            (true, _) => others += 1,
            (false, true) => new += 1,
            (false, false) => {}
        }
    }
    let left = allowed(budgets, reason, total, others, now);
    (left < new).then(|| {
        format!(
            "NodePool {}: its disruption budget allows {left} more now, {new} asked \
             ({others} of {total} nodes disrupted since the sweep began)",
            pool.name
        )
    })
}
