//! Why a candidate stays: the reasons `plan_disruption` gives, in words for the node's
//! Event (`kubectl describe node` answers "why isn't this node going away?").

use std::fmt;

use super::Reason;
use super::capacity::CAPACITY_WINDOWS_ANNOTATION;
use super::snapshot::NodeView;

/// Why a candidate stays.
#[derive(Debug, Clone, PartialEq)]
pub enum KeptWhy {
    DoNotDisruptNode,
    DoNotDisruptPod {
        pod: String,
    },
    PodDisruptionBudget {
        pod: String,
        pdb: String,
    },
    Budget {
        pool: String,
        reason: Reason,
        /// For a node past the budget that was simulated alone and cannot go alone: why
        /// (it could have gone only with others, which the budget does not allow at once).
        alone: Option<String>,
    },
    /// The pool already has as many expiring nodes as [`super::expiration_cap`] allows.
    ExpirationCap {
        pool: String,
        cap: usize,
    },
    /// Empty, but not yet for `consolidateAfter`.
    EmptyTooRecently {
        remaining: std::time::Duration,
    },
    PoolSettings {
        pool: String,
        error: String,
    },
    /// Launched or gained pods within `consolidateAfter`.
    TooRecent {
        remaining: std::time::Duration,
    },
    /// Consolidation waits while another removal is planned or under way: its simulation
    /// would count room that the drained pods are about to take.
    RemovalUnderWay,
    /// The consolidation simulation found no way for it to go (fits nowhere, not cheaper,
    /// spot choice too narrow...).
    NotConsolidatable {
        why: String,
    },
    /// A removal of it was given up (nowhere for its pods to go, no progress): not tried
    /// again before `until`.
    BackedOff {
        until: jiff::Timestamp,
        why: String,
    },
    /// Its pool is at the floor of its capacity windows.
    CapacityFloor {
        pool: String,
        nodes: usize,
    },
    /// Removing it would leave its pool less free room than its capacity windows' headroom.
    CapacityHeadroom {
        pool: String,
        headroom: String,
    },
    /// Its pool does not consolidate nodes with pods: `consolidateAfter: Never`, or
    /// (`non_empty`) `consolidationPolicy: WhenEmpty`.
    ConsolidationDisabled {
        pool: String,
        non_empty: bool,
    },
    /// Pending pods are about to land on it: the solver places them there (Karpenter's
    /// nominated node).
    Nominated {
        pods: usize,
    },
    /// Due for repair, but more of its pool's nodes are unhealthy than repair may take on.
    PoolUnhealthy {
        pool: String,
        unhealthy: usize,
        nodes: usize,
    },
}

impl KeptWhy {
    /// The reason without what changes by itself from one sweep to the next (the time
    /// left), so one reason told twice compares equal: what the kept node's Event is
    /// rate-limited by, while its message keeps the countdown.
    pub fn stable(&self) -> KeptWhy {
        match self {
            KeptWhy::EmptyTooRecently { .. } => KeptWhy::EmptyTooRecently {
                remaining: std::time::Duration::ZERO,
            },
            KeptWhy::TooRecent { .. } => KeptWhy::TooRecent {
                remaining: std::time::Duration::ZERO,
            },
            other => other.clone(),
        }
    }
}

impl fmt::Display for KeptWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeptWhy::DoNotDisruptNode => f.write_str("the node has karpenter.sh/do-not-disrupt"),
            KeptWhy::DoNotDisruptPod { pod } => {
                write!(f, "a pod has karpenter.sh/do-not-disrupt ({pod})")
            }
            // Names hold no spaces: `a and b` is a pod under more than one budget.
            KeptWhy::PodDisruptionBudget { pod, pdb } if pdb.contains(' ') => write!(
                f,
                "PodDisruptionBudgets {pdb} both cover pod {pod}: the Eviction API refuses to evict it"
            ),
            KeptWhy::PodDisruptionBudget { pod, pdb } => {
                write!(
                    f,
                    "PodDisruptionBudget {pdb} allows no disruption of pod {pod}"
                )
            }
            KeptWhy::Budget {
                pool,
                reason,
                alone,
            } => {
                write!(
                    f,
                    "NodePool {pool}'s disruption budget allows no more {} nodes now",
                    reason.as_str()
                )?;
                match alone {
                    Some(why) => write!(f, ", and alone it is not consolidated: {why}"),
                    None => Ok(()),
                }
            }
            KeptWhy::ExpirationCap { pool, cap } => write!(
                f,
                "NodePool {pool} replaces at most {cap} expired nodes at once ({}% of its nodes, at least one)",
                super::EXPIRING_AT_ONCE_PERCENT
            ),
            KeptWhy::EmptyTooRecently { remaining } => write!(
                f,
                "empty, but not yet for consolidateAfter ({}s to go)",
                remaining.as_secs()
            ),
            KeptWhy::TooRecent { remaining } => write!(
                f,
                "launched or gained pods within consolidateAfter ({}s to go)",
                remaining.as_secs()
            ),
            KeptWhy::NotConsolidatable { why } => write!(f, "not consolidated: {why}"),
            // Karpenter's Unconsolidatable messages, word for word.
            KeptWhy::ConsolidationDisabled { pool, non_empty } => write!(
                f,
                "NodePool {pool:?} has {}consolidation disabled",
                if *non_empty { "non-empty " } else { "" }
            ),
            KeptWhy::Nominated { pods } => write!(
                f,
                "{pods} pending pod(s) are about to land on it: the scheduler has room for them there"
            ),
            KeptWhy::BackedOff { until, why } => write!(
                f,
                "its last removal was given up ({why}); not tried again before {until}"
            ),
            KeptWhy::RemovalUnderWay => {
                f.write_str("consolidation waits while another removal is under way")
            }
            KeptWhy::CapacityFloor { pool, nodes } => write!(
                f,
                "NodePool {pool} keeps at least {nodes} nodes now ({CAPACITY_WINDOWS_ANNOTATION})"
            ),
            KeptWhy::CapacityHeadroom { pool, headroom } => write!(
                f,
                "NodePool {pool} keeps {headroom} free now ({CAPACITY_WINDOWS_ANNOTATION})"
            ),
            KeptWhy::PoolUnhealthy {
                pool,
                unhealthy,
                nodes,
            } => write!(
                f,
                "not repaired: {unhealthy} of NodePool {pool}'s {nodes} nodes are unhealthy, more than {}% (a shared cause new nodes would have too)",
                super::UNHEALTHY_AT_ONCE_PERCENT
            ),
            KeptWhy::PoolSettings { pool, error } => {
                write!(
                    f,
                    "NodePool {pool}'s disruption settings cannot be read: {error}"
                )
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    pub node: String,
    pub reason: Reason,
    pub why: KeptWhy,
}

pub(super) fn kept(node: &NodeView, reason: Reason, why: KeptWhy) -> Kept {
    Kept {
        node: node.name.clone(),
        reason,
        why,
    }
}
