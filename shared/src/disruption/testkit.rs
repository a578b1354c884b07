//! Builders for the disruption table tests: a Ready node of nodewright's, a pool with
//! Karpenter's defaults, pods of each kind.

use std::time::Duration;

use jiff::Timestamp;

use super::budget::{BudgetRule, NodesLimit};
use super::snapshot::{NodeView, PodKind, PodView, PoolPolicy, Snapshot};
use crate::api::ConsolidationPolicy;

/// A time on 2026-03-02 (a Monday), UTC: `t("10:00:00")`.
pub fn t(hms: &str) -> Timestamp {
    format!("2026-03-02T{hms}Z").parse().unwrap()
}

pub fn node(name: &str, pool: &str) -> NodeView {
    NodeView {
        name: name.into(),
        pool: Some(pool.into()),
        instance_id: Some(format!("i-{:0>8}", name.len())),
        launched_by_nodewright: true,
        owned_instance: true,
        created: "2026-03-01T00:00:00Z".parse().unwrap(),
        ready: true,
        initialized: true,
        disrupting: false,
        cordoned: false,
        removing: None,
        unhealthy: None,
        backoff: None,
        do_not_disrupt: false,
        empty_since: None,
        instance_type: "m5.large".into(),
        capacity_type: "on-demand".into(),
        price_per_hour: Some(0.096),
        pods: Vec::new(),
        last_pod_arrival: None,
        drifted: None,
        free: None,
        moving_requests: Default::default(),
    }
}

/// `pools` and `nodes` offline: no instances listed, no simulation.
pub fn snapshot(pools: Vec<PoolPolicy>, nodes: Vec<NodeView>) -> Snapshot {
    Snapshot {
        pools,
        nodes,
        instances: None,
        simulation: None,
    }
}

/// Karpenter v1's defaults, but `consolidateAfter: 30s` and no expiry.
pub fn pool(name: &str) -> PoolPolicy {
    PoolPolicy {
        name: name.into(),
        consolidation: ConsolidationPolicy::WhenEmpty,
        consolidate_after: Some(Duration::from_secs(30)),
        expire_after: None,
        budgets: Ok(vec![count_budget(NodesLimit::Percent(10))]),
        termination_grace: None,
        capacity: Vec::new(),
        replicas: None,
    }
}

pub fn count_budget(nodes: NodesLimit) -> BudgetRule {
    BudgetRule {
        nodes,
        reasons: Vec::new(),
        window: None,
    }
}

pub fn pod(name: &str, kind: PodKind) -> PodView {
    PodView {
        namespace: "default".into(),
        name: name.into(),
        kind,
        do_not_disrupt: false,
        eviction_cost: 1.0,
        blocked_by_pdb: None,
    }
}

/// Empty (DaemonSet pod only) since `since`.
pub fn empty_node(name: &str, pool: &str, since: &str) -> NodeView {
    let mut n = node(name, pool);
    n.empty_since = Some(t(since));
    n.pods.push(pod(&format!("ds-{name}"), PodKind::DaemonSet));
    n
}
