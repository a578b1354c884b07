//! Capacity blocks about to end: their nodes' removal begins 40 minutes before the end,
//! with EC2's reclaim as the deadline (`nodewright::disruption::expiring_blocks`). The
//! blocks are read only when a node runs in one; a failed read is logged and the next
//! sweep tries again.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use nodewright::api::CapacityReservationSelectorTerm;
use nodewright::aws::{NetworkDiscovery, OwnedInstances};
use nodewright::disruption::{Snapshot, capacity_block_ids, expiring_blocks};
use nodewright::kube::NodeDisruption;
use nodewright::removal::{Capacity, Cause, Record, record_of};

use super::{Report, State, act};

pub(crate) async fn give_up_expiring<K, E, R>(
    state: &State<K, E, R>,
    snapshot: &Snapshot,
    nodes: &[Node],
    now: Timestamp,
    report: &mut Report,
) where
    K: NodeDisruption,
    E: OwnedInstances + NetworkDiscovery,
    R: Capacity,
{
    let ids = capacity_block_ids(nodes);
    if ids.is_empty() {
        return;
    }
    let terms: Vec<CapacityReservationSelectorTerm> = ids
        .into_iter()
        .map(|id| CapacityReservationSelectorTerm::new(Some(&id), None, &[]))
        .collect();
    let blocks = match state.ec2.capacity_reservations(&terms).await {
        Ok(blocks) => blocks,
        Err(e) => {
            tracing::warn!(
                error = nodewright::error_chain(&e),
                "reading the capacity blocks nodes run in failed; the next sweep tries again"
            );
            return;
        }
    };
    for expiring in expiring_blocks(nodes, &blocks, now) {
        let Some(node) = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(expiring.node.as_str()))
        else {
            continue;
        };
        if matches!(record_of(node), Ok(Some(r)) if r.cause == Cause::CapacityBlockExpiring) {
            continue;
        }
        tracing::info!(
            node = expiring.node,
            capacity_reservation_id = expiring.reservation,
            deadline = %expiring.deadline,
            "the node's capacity block ends soon; removing it before EC2 reclaims it"
        );
        let record = Record::new(Cause::CapacityBlockExpiring, now, Some(expiring.deadline));
        act::step(state, snapshot, node, nodes, Some(record), now, report).await;
    }
}
