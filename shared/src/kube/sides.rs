//! One name per use of the cluster side, so a bound is written once. A step that uses one
//! port still asks for that port alone.

use super::drain_ports::{NodeRemoval, PodEviction};
use super::karpenter_leader::KarpenterLeader;
use super::ports::{ConfigSource, EventSink, NodeOps, NodeSource, PodSource};
use super::removal_marks::RemovalMarks;

/// Everything the provisioner reads from and writes to the cluster: pending and bound pods,
/// nodes and DaemonSets, the NodePools in force, events, and node labels.
pub trait Cluster: PodSource + NodeSource + ConfigSource + EventSink + NodeOps {}

impl<T> Cluster for T where T: PodSource + NodeSource + ConfigSource + EventSink + NodeOps {}

/// What taking nodes away asks of the cluster (the interruption and sweeper functions):
/// nodes, taints and cordons, the removal record, evictions, node deletion, events, and
/// whether Karpenter still runs (before adopting its nodes).
pub trait NodeDisruption:
    NodeSource + NodeOps + RemovalMarks + PodEviction + NodeRemoval + EventSink + KarpenterLeader
{
}

impl<T> NodeDisruption for T where
    T: NodeSource
        + NodeOps
        + RemovalMarks
        + PodEviction
        + NodeRemoval
        + EventSink
        + KarpenterLeader
{
}
