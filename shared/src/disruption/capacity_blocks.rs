//! Nodes in capacity blocks about to end. EC2 terminates a block's instances from 30
//! minutes before its end and warns 40 minutes before; Karpenter deletes their NodeClaims
//! at the warning (`capacityreservation.expiration`). Here the sweeper begins their removal
//! then, with the termination as its deadline: the node drains at once and each pod is
//! deleted in time for its own grace period.

use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;

use crate::api::labels::{CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE};
use crate::catalog::{Reservation, ReservationKind};

/// How long before a capacity block's end EC2 starts terminating its instances.
pub const BLOCK_RECLAIM_BEFORE_END: Duration = Duration::from_secs(30 * 60);

/// A node whose capacity block ends soon, and when EC2 starts taking its instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiringBlock {
    pub node: String,
    pub reservation: String,
    pub deadline: Timestamp,
}

/// The capacity blocks `nodes` run in (by their labels), each once.
pub fn capacity_block_ids(nodes: &[Node]) -> Vec<String> {
    let mut ids: Vec<String> = nodes.iter().filter_map(block_of).collect();
    ids.sort();
    ids.dedup();
    ids
}

fn block_of(node: &Node) -> Option<String> {
    let labels = node.metadata.labels.as_ref()?;
    (labels.get(CAPACITY_RESERVATION_TYPE).map(String::as_str)
        == Some(ReservationKind::CapacityBlock.as_str()))
    .then(|| labels.get(CAPACITY_RESERVATION_ID).cloned())
    .flatten()
}

/// The nodes whose block (among `blocks`, as EC2 describes them now) ends within
/// [`crate::catalog::CAPACITY_BLOCK_NOTICE`] of `now`. A block EC2 no longer lists as active is not
/// judged here: its instances are being taken already, and their state changes say so.
pub fn expiring_blocks(
    nodes: &[Node],
    blocks: &[Reservation],
    now: Timestamp,
) -> Vec<ExpiringBlock> {
    let now_sys = SystemTime::from(now);
    nodes
        .iter()
        .filter_map(|node| {
            let id = block_of(node)?;
            let block = blocks.iter().find(|b| b.id == id)?;
            let end = block.end?;
            if !block.expiring(now_sys) {
                return None;
            }
            let deadline = end.checked_sub(BLOCK_RECLAIM_BEFORE_END).unwrap_or(end);
            Some(ExpiringBlock {
                node: node.metadata.name.clone().unwrap_or_default(),
                reservation: id,
                deadline: Timestamp::try_from(deadline).unwrap_or(now),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n
    }

    fn in_block(name: &str, id: &str) -> Node {
        node(
            name,
            &[
                (CAPACITY_RESERVATION_ID, id),
                (CAPACITY_RESERVATION_TYPE, "capacity-block"),
            ],
        )
    }

    fn block(id: &str, ends_in_minutes: u64, now: Timestamp) -> Reservation {
        Reservation {
            id: id.into(),
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            owner_id: "111122223333".into(),
            available: 0,
            kind: ReservationKind::CapacityBlock,
            end: Some(SystemTime::from(now) + Duration::from_secs(ends_in_minutes * 60)),
        }
    }

    #[test]
    fn nodes_of_a_block_within_forty_minutes_of_its_end_go_with_the_reclaim_as_deadline() {
        let now: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
        let nodes = [
            in_block("gpu-1", "cr-0end"),
            in_block("gpu-2", "cr-0end"),
            in_block("gpu-3", "cr-0late"),
            in_block("gpu-4", "cr-0gone"),
            // An ODCR has no end to expire at; a node without the labels is not in a block.
            node(
                "odcr",
                &[
                    (CAPACITY_RESERVATION_ID, "cr-0odcr"),
                    (CAPACITY_RESERVATION_TYPE, "default"),
                ],
            ),
            node("plain", &[]),
        ];
        assert_eq!(
            capacity_block_ids(&nodes),
            ["cr-0end", "cr-0gone", "cr-0late"]
        );
        let blocks = [block("cr-0end", 40, now), block("cr-0late", 41, now)];
        let got = expiring_blocks(&nodes, &blocks, now);
        let deadline: Timestamp = "2026-11-28T10:10:00Z".parse().unwrap();
        assert_eq!(
            got,
            ["gpu-1", "gpu-2"]
                .iter()
                .map(|n| ExpiringBlock {
                    node: n.to_string(),
                    reservation: "cr-0end".into(),
                    deadline,
                })
                .collect::<Vec<_>>()
        );
        // Past the reclaim: the deadline is now's past, drained at once.
        let late = expiring_blocks(&nodes[..1], &[block("cr-0end", 5, now)], now);
        assert!(late[0].deadline < now);
    }
}
