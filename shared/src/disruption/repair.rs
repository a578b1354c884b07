//! Node repair, as Karpenter's node health controller: a node whose kubelet or EKS node
//! monitoring agent has reported a problem for longer than the condition's toleration, or
//! whose instance fails an EC2 status check for [`STATUS_CHECK_TOLERATION`], is replaced, forcefully (its drain's deadline is now: PodDisruptionBudgets and
//! `do-not-disrupt` no longer hold its pods, which a broken node cannot run anyway). No
//! pool is repaired while more than a fifth of its nodes are unhealthy at once: that is a
//! broken AMI, subnet or dependency, which new nodes would share, not a broken node.

use std::collections::HashSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::Reason;
use super::kept::{Kept, KeptWhy};
use super::plan::{Command, action_for};
use super::snapshot::{NodeView, Snapshot};
use crate::aws::Impaired;

/// A node condition that makes a node unhealthy once it has held for `toleration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairPolicy {
    pub condition: &'static str,
    pub status: &'static str,
    pub toleration: Duration,
}

const fn minutes(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

/// Karpenter's AWS provider's policies: the kubelet's `Ready` and the EKS node monitoring
/// agent's conditions.
pub const REPAIR_POLICIES: &[RepairPolicy] = &[
    RepairPolicy {
        condition: "Ready",
        status: "False",
        toleration: minutes(30),
    },
    RepairPolicy {
        condition: "Ready",
        status: "Unknown",
        toleration: minutes(30),
    },
    RepairPolicy {
        condition: "AcceleratedHardwareReady",
        status: "False",
        toleration: minutes(10),
    },
    RepairPolicy {
        condition: "StorageReady",
        status: "False",
        toleration: minutes(30),
    },
    RepairPolicy {
        condition: "NetworkingReady",
        status: "False",
        toleration: minutes(30),
    },
    RepairPolicy {
        condition: "KernelReady",
        status: "False",
        toleration: minutes(30),
    },
    RepairPolicy {
        condition: "ContainerRuntimeReady",
        status: "False",
        toleration: minutes(30),
    },
];

/// How long an EC2 status check may be impaired before the node is repaired: as long as
/// the shortest node condition's, since an impaired check is AWS's own word that the
/// machine is broken (Karpenter does not read status checks).
pub const STATUS_CHECK_TOLERATION: Duration = minutes(10);

/// The share of a pool's nodes that may be unhealthy at once (rounded up) for any of them
/// to be repaired: Karpenter's 20%.
pub const UNHEALTHY_AT_ONCE_PERCENT: usize = 20;

/// A condition of a node that matches a [`RepairPolicy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    pub condition: String,
    pub status: String,
    /// The condition's `lastTransitionTime`.
    pub since: Timestamp,
    pub toleration: Duration,
}

impl Unhealthy {
    /// When the node is repaired if the condition still holds.
    pub fn due(&self) -> Timestamp {
        self.since + SignedDuration::try_from(self.toleration).unwrap_or(SignedDuration::MAX)
    }
}

/// Of a node's conditions (type, status, last transition), the one matching a policy that
/// is due first; a matching condition without a transition time counts from `now`.
pub fn unhealthy<'a>(
    conditions: impl IntoIterator<Item = (&'a str, &'a str, Option<Timestamp>)>,
    now: Timestamp,
) -> Option<Unhealthy> {
    conditions
        .into_iter()
        .filter_map(|(kind, status, since)| {
            let policy = REPAIR_POLICIES
                .iter()
                .find(|p| p.condition == kind && p.status == status)?;
            Some(Unhealthy {
                condition: kind.to_string(),
                status: status.to_string(),
                since: since.unwrap_or(now),
                toleration: policy.toleration,
            })
        })
        .min_by_key(Unhealthy::due)
}

/// Adds EC2's impaired status checks to the nodes of their instances: a node is unhealthy by
/// whichever of its conditions and checks is due first. A check without an impaired-since
/// time counts from `now`.
pub fn mark_impaired(snapshot: &mut Snapshot, impaired: &[Impaired], now: Timestamp) {
    for node in &mut snapshot.nodes {
        let Some(id) = node.instance_id.as_deref() else {
            continue;
        };
        let checks = impaired
            .iter()
            .filter(|i| i.instance_id == id)
            .map(|i| Unhealthy {
                condition: i.check.as_str().to_string(),
                status: "impaired".to_string(),
                since: i.since.unwrap_or(now),
                toleration: STATUS_CHECK_TOLERATION,
            });
        node.unhealthy = node
            .unhealthy
            .take()
            .into_iter()
            .chain(checks)
            .min_by_key(Unhealthy::due);
    }
}

/// How many of `nodes` may be unhealthy at once for repair to go on.
pub fn unhealthy_allowed(nodes: usize) -> usize {
    (nodes * UNHEALTHY_AT_ONCE_PERCENT).div_ceil(100)
}

/// The repairs due now, the due nodes a pool's health keeps, and the pools being repaired.
#[derive(Debug, Default)]
pub(super) struct Repairs<'a> {
    pub commands: Vec<Command>,
    pub kept: Vec<Kept>,
    pub pools: HashSet<&'a str>,
}

pub(super) fn repairs(snapshot: &Snapshot, now: Timestamp) -> Repairs<'_> {
    let mut out = Repairs::default();
    for pool in &snapshot.pools {
        let nodes: Vec<&NodeView> = snapshot
            .nodes
            .iter()
            .filter(|n| n.owned_instance && n.pool.as_deref() == Some(pool.name.as_str()))
            .collect();
        let unhealthy = nodes.iter().filter(|n| n.unhealthy.is_some()).count();
        let allowed = unhealthy_allowed(nodes.len());
        // A node already being removed is left to that removal.
        let due = nodes
            .iter()
            .filter(|n| !n.disrupting && n.unhealthy.as_ref().is_some_and(|u| u.due() <= now));
        for node in due {
            if unhealthy > allowed {
                out.kept.push(Kept {
                    node: node.name.clone(),
                    reason: Reason::Unhealthy,
                    why: KeptWhy::PoolUnhealthy {
                        pool: pool.name.clone(),
                        unhealthy,
                        nodes: nodes.len(),
                    },
                });
                continue;
            }
            let (action, savings) = action_for(node, true);
            out.pools.insert(pool.name.as_str());
            out.commands.push(Command {
                action,
                reason: Reason::Unhealthy,
                nodes: vec![node.name.clone()],
                savings_per_hour: savings,
                replacement: Vec::new(),
            });
        }
    }
    out
}
