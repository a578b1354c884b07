//! Disruption budgets: how many of a pool's nodes may be disrupted at once, for which
//! reasons, and when. As Karpenter's (`pkg/apis/v1/nodepool.go`, `GetAllowedDisruptions`):
//! a percentage of the pool's nodes rounded up, an inactive scheduled budget allows
//! anything, the most restrictive active budget wins, and nodes already being disrupted
//! count against it. Unlike Karpenter's, a schedule is read in the time zone the NodePool
//! names through [`TIME_ZONE_ANNOTATION`] (Karpenter's are UTC only).

use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::Reason;
use super::cron::Cron;
use crate::api::{Budget, NodePool};

/// On a NodePool: the IANA time zone its budgets' schedules are read in (default UTC).
pub const TIME_ZONE_ANNOTATION: &str = "nodewright.io/budget-time-zone";

/// A NodePool's disruption setting that cannot be read (a budget, the budgets' time zone,
/// a capacity window): the field, from the NodePool's root, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SettingError {
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct BudgetRule {
    pub nodes: NodesLimit,
    /// Empty: every reason.
    pub reasons: Vec<Reason>,
    pub window: Option<Window>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodesLimit {
    Count(usize),
    Percent(u32),
}

#[derive(Debug, Clone)]
pub struct Window {
    pub schedule: Cron,
    pub duration: Duration,
    pub time_zone: TimeZone,
}

impl BudgetRule {
    /// Active at `now`: always without a schedule, else from a firing for `duration`.
    pub fn active(&self, now: Timestamp) -> bool {
        match &self.window {
            None => true,
            // A firing exactly `duration` ago has just ended: the window is half-open.
            Some(w) => w
                .schedule
                .last_fire(now, w.duration, &w.time_zone)
                .is_some_and(|t| now.duration_since(t).unsigned_abs() < w.duration),
        }
    }

    pub fn applies_to(&self, reason: Reason) -> bool {
        self.reasons.is_empty() || self.reasons.contains(&reason)
    }

    /// The node count this budget allows for a pool of `pool_nodes` nodes.
    pub fn limit(&self, pool_nodes: usize) -> usize {
        match self.nodes {
            NodesLimit::Count(n) => n,
            NodesLimit::Percent(p) => (pool_nodes * p as usize).div_ceil(100),
        }
    }
}

/// How many more of a pool's nodes may be disrupted for `reason` now.
pub fn allowed(
    budgets: &[BudgetRule],
    reason: Reason,
    pool_nodes: usize,
    disrupting: usize,
    now: Timestamp,
) -> usize {
    budgets
        .iter()
        .filter(|b| b.applies_to(reason) && b.active(now))
        .map(|b| b.limit(pool_nodes))
        .min()
        .unwrap_or(usize::MAX)
        .saturating_sub(disrupting)
}

/// The share of a pool's nodes (in percent, rounded up, at least one node) that may be
/// expiring at once whatever its budgets say. Budgets alone would let a pool with
/// `nodes: "100%"`, or with budgets only for other reasons (which leave expiration
/// unlimited, as in Karpenter), replace every expired node at once; nodes launched together
/// expire together. A tenth is the default budget's share.
pub const EXPIRING_AT_ONCE_PERCENT: usize = 10;

/// The most of a pool of `pool_nodes` nodes that may be expiring at once:
/// [`EXPIRING_AT_ONCE_PERCENT`] of them rounded up, and at least one.
pub fn expiration_cap(pool_nodes: usize) -> usize {
    (pool_nodes.saturating_mul(EXPIRING_AT_ONCE_PERCENT))
        .div_ceil(100)
        .max(1)
}

/// How many more of a pool's nodes may begin expiring now: what its budgets allow for
/// expiration, and never more than [`expiration_cap`] less the `expiring` ones already
/// being replaced.
pub fn expirations_allowed(
    budgets: &[BudgetRule],
    pool_nodes: usize,
    disrupting: usize,
    expiring: usize,
    now: Timestamp,
) -> usize {
    allowed(budgets, Reason::Expired, pool_nodes, disrupting, now)
        .min(expiration_cap(pool_nodes).saturating_sub(expiring))
}

/// A NodePool's budgets, or the first one that cannot be read, named by its field.
pub fn pool_budgets(np: &NodePool) -> Result<Vec<BudgetRule>, SettingError> {
    let time_zone = match np.metadata.annotations.get(TIME_ZONE_ANNOTATION) {
        None => TimeZone::UTC,
        Some(name) => TimeZone::get(name.trim()).map_err(|e| SettingError {
            field: format!("metadata.annotations[{TIME_ZONE_ANNOTATION}]"),
            message: format!("{name:?} is not a known time zone ({e})"),
        })?,
    };
    np.spec
        .disruption
        .budgets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            budget_rule(b, &time_zone).map_err(|(field, message)| SettingError {
                field: format!("spec.disruption.budgets[{i}].{field}"),
                message,
            })
        })
        .collect()
}

fn budget_rule(b: &Budget, time_zone: &TimeZone) -> Result<BudgetRule, (&'static str, String)> {
    let bad_nodes = || {
        (
            "nodes",
            format!("{:?} is neither a node count nor a percentage", b.nodes),
        )
    };
    let nodes = match b.nodes.trim().strip_suffix('%') {
        Some(p) => NodesLimit::Percent(p.parse().ok().filter(|p| *p <= 100).ok_or_else(bad_nodes)?),
        None => NodesLimit::Count(b.nodes.trim().parse().map_err(|_| bad_nodes())?),
    };
    let reasons = b
        .reasons
        .iter()
        .map(|r| Reason::from_budget(r).ok_or(("reasons", format!("unknown reason {r:?}"))))
        .collect::<Result<_, _>>()?;
    let window = match (&b.schedule, &b.duration) {
        (None, None) => None,
        (Some(s), Some(d)) => Some(Window {
            schedule: Cron::parse(s).map_err(|e| ("schedule", e))?,
            duration: d.0,
            time_zone: time_zone.clone(),
        }),
        (Some(_), None) => return Err(("duration", "required when schedule is set".into())),
        (None, Some(_)) => return Err(("schedule", "required when duration is set".into())),
    };
    Ok(BudgetRule {
        nodes,
        reasons,
        window,
    })
}
