//! The sweeper's view of the cluster, reduced to what its decisions read: the NodePools it
//! serves with their disruption settings, the nodes with their pods, and (in the function,
//! not offline) the instances EC2 lists as this cluster's.

use std::time::Duration;

use jiff::Timestamp;

use super::budget::BudgetRule;
use super::capacity::CapacityWindow;
use super::simulation::Simulation;
use crate::api::ConsolidationPolicy;
use crate::resources::Resources;

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The NodePools nodewright serves; a node of any other pool is never a candidate.
    pub pools: Vec<PoolPolicy>,
    pub nodes: Vec<NodeView>,
    /// Instances carrying this cluster's ownership tag and not terminated. `None` offline:
    /// then no hygiene decision is made, since absence would prove nothing.
    pub instances: Option<Vec<InstanceView>>,
    /// What consolidation simulates with; `None`: no node is consolidated for being
    /// underutilized (emptiness and expiration still apply).
    pub simulation: Option<Simulation>,
}

/// A NodePool's disruption settings, read once.
#[derive(Debug, Clone)]
pub struct PoolPolicy {
    pub name: String,
    pub consolidation: ConsolidationPolicy,
    /// `None` is `Never`: the pool's nodes are never removed for being empty.
    pub consolidate_after: Option<Duration>,
    /// `None` is `Never`.
    pub expire_after: Option<Duration>,
    /// An error (naming the budget and field) means the pool's nodes are not disrupted
    /// voluntarily at all: a budget we cannot read must not become no budget.
    pub budgets: Result<Vec<BudgetRule>, String>,
    /// The NodePool's `terminationGracePeriod`: the drain's hard limit.
    pub termination_grace: Option<Duration>,
    /// Its capacity windows (`nodewright.io/capacity-windows`): the floor emptiness and
    /// consolidation never go below. One that cannot be read is a `budgets` error.
    pub capacity: Vec<CapacityWindow>,
    /// A static NodePool's `replicas`: its node count, kept by launching the shortfall and
    /// removing the surplus; never emptied nor consolidated.
    pub replicas: Option<usize>,
}

/// One Node as the decisions see it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub name: String,
    /// `karpenter.sh/nodepool` (or the legacy `karpenter.sh/provisioner-name`).
    pub pool: Option<String>,
    /// From `spec.providerID`.
    pub instance_id: Option<String>,
    /// Carries `nodewright.io/nodeclaim`: nodewright launched it (the user data sets it).
    pub launched_by_nodewright: bool,
    /// Its instance carries this cluster's ownership tag (always true offline, where only
    /// the labels are known). A node whose instance is not owned is never a candidate.
    pub owned_instance: bool,
    pub created: Timestamp,
    pub ready: bool,
    /// Not one of ours still starting (its kubelet has not reported Ready yet): a starting
    /// node is not in the base of a budget's percentage, as Karpenter leaves out nodes not
    /// initialized; one that was and is no longer Ready uses the budget up.
    pub initialized: bool,
    /// Already tainted `nodewright.io/disrupted` or being deleted: counts against budgets.
    pub disrupting: bool,
    /// `spec.unschedulable` (cordoned): no new pod, nor a floor's placeholder, lands on it.
    pub cordoned: bool,
    /// The reason of the sweeper's removal under way (its removal record), if it began
    /// one: expirations under way count against the pool's cap.
    pub removing: Option<super::Reason>,
    /// A condition matching a repair policy (`repair.rs`), toleration past or not: such a
    /// node is left to repair, never a candidate for the other methods.
    pub unhealthy: Option<super::Unhealthy>,
    /// A removal of it was given up lately: not taken again before the back-off ends.
    pub backoff: Option<crate::removal::Backoff>,
    /// `karpenter.sh/do-not-disrupt: "true"` on the node.
    pub do_not_disrupt: bool,
    /// When the sweeper first saw it empty (its `nodewright.io/empty-since` annotation).
    pub empty_since: Option<Timestamp>,
    pub instance_type: String,
    pub capacity_type: String,
    /// On-demand or spot price, when the catalog knows the type.
    pub price_per_hour: Option<f64>,
    pub pods: Vec<PodView>,
    /// When the newest pod that would move was created: a node that just gained work is
    /// not consolidated before `consolidateAfter`.
    pub last_pod_arrival: Option<Timestamp>,
    /// Why its instance no longer matches what a launch of its pool and class would use
    /// ([`super::drift`]); set by the sweeper, which knows both, never offline.
    pub drifted: Option<String>,
    /// Allocatable less the requests of the pods on it that still run; `None` when the
    /// Node reports no allocatable. What a capacity window's headroom counts as free.
    pub free: Option<Resources>,
    /// The requests of its pods that would move (they take other nodes' free room).
    pub moving_requests: Resources,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodKind {
    /// Would have to move elsewhere if the node went.
    Workload,
    /// Owned by a DaemonSet: goes with the node, never counts against emptiness.
    DaemonSet,
    /// A static pod mirrored by the kubelet.
    Mirror,
    /// Succeeded or Failed.
    Finished,
    /// Being deleted already: it is leaving whatever happens to the node, so it neither
    /// keeps the node from being empty nor holds it with `do-not-disrupt` (as Karpenter's
    /// reschedulable pods leave out terminating ones). Its requests still take room.
    Terminating,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub kind: PodKind,
    pub do_not_disrupt: bool,
    /// Karpenter's eviction cost of this pod (priority, `pod-deletion-cost`).
    pub eviction_cost: f64,
    /// The PodDisruptionBudget that allows no disruption of it now, if any.
    pub blocked_by_pdb: Option<String>,
}

impl PodView {
    pub fn moves(&self) -> bool {
        self.kind == PodKind::Workload
    }

    /// `do-not-disrupt` on a pod still running on the node, of any kind (`drain::holds_node`).
    pub fn holds_node(&self) -> bool {
        self.do_not_disrupt
            && matches!(
                self.kind,
                PodKind::Workload | PodKind::DaemonSet | PodKind::Mirror
            )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct InstanceView {
    pub id: String,
    pub launched: Option<Timestamp>,
}
