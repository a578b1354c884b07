//! Why a pod cannot be placed, per NodePool, and the one sentence a person reads.

use std::collections::BTreeMap;

use super::requirements::{Conflict, Requirements};
use super::taints::format_taint;
use crate::api::Taint;
use crate::resources::{Resources, format_milli, is_byte_resource};

#[derive(Debug, Clone, PartialEq)]
pub enum Why {
    Unusable {
        pool: String,
        why: String,
    },
    Taint {
        pool: String,
        taint: Taint,
    },
    Requirement {
        pool: String,
        conflict: Conflict,
    },
    NoType {
        pool: String,
        reqs: String,
    },
    TooBig {
        pool: String,
        requests: Box<Resources>,
        largest_free: Box<Resources>,
    },
    Limit {
        pool: String,
        limits: BTreeMap<String, i64>,
        used: Box<Resources>,
    },
    Topology {
        pool: String,
        what: String,
    },
    MinValues {
        pool: String,
        what: String,
    },
}

impl Why {
    pub fn no_type<T>(pool: &str, reqs: &Requirements) -> Result<T, Why> {
        Err(Why::NoType {
            pool: pool.to_string(),
            reqs: reqs.to_string(),
        })
    }

    fn pool(&self) -> &str {
        match self {
            Why::Unusable { pool, .. }
            | Why::Taint { pool, .. }
            | Why::Requirement { pool, .. }
            | Why::NoType { pool, .. }
            | Why::TooBig { pool, .. }
            | Why::Limit { pool, .. }
            | Why::Topology { pool, .. }
            | Why::MinValues { pool, .. } => pool,
        }
    }

    fn sentence(&self) -> String {
        match self {
            Why::Unusable { pool, why } => format!("NodePool {pool} cannot be used: {why}"),
            Why::Taint { pool, taint } => {
                format!(
                    "NodePool {pool} has taint {} that the pod does not tolerate",
                    format_taint(taint)
                )
            }
            Why::Requirement { pool, conflict } => format!(
                "requirement {} {} conflicts with NodePool {pool} ({} {})",
                conflict.key, conflict.theirs, conflict.key, conflict.ours
            ),
            Why::NoType { pool, reqs } => {
                format!("no instance type in NodePool {pool} satisfies {reqs}")
            }
            Why::TooBig {
                pool,
                requests,
                largest_free,
            } => {
                let name = requests.first_exceeding(largest_free).unwrap_or("cpu");
                let amount = |v: i64| format_milli(v, is_byte_resource(name));
                format!(
                    "no instance type in NodePool {pool} has {} {name} free after overhead (the largest has {})",
                    amount(requests.get(name)),
                    amount(largest_free.get(name).max(0)),
                )
            }
            Why::Limit { pool, limits, used } => {
                let shown: Vec<String> = limits
                    .iter()
                    .map(|(k, v)| {
                        let bytes = is_byte_resource(k);
                        format!(
                            "{k} {} of {}",
                            format_milli(used.get(k), bytes),
                            format_milli(*v, bytes)
                        )
                    })
                    .collect();
                format!(
                    "NodePool {pool} would exceed its limits ({} in use or launching)",
                    shown.join(", ")
                )
            }
            Why::Topology { pool, what } => format!("NodePool {pool}: {what}"),
            Why::MinValues { pool, what } => format!("NodePool {pool}: {what}"),
        }
    }
}

/// One line for a pod: a single cause when every NodePool fails for the same requirement
/// ("node selector nodeType=gpu matches no NodePool"), otherwise each NodePool's reason.
pub fn explain(whys: &[Why]) -> String {
    if whys.is_empty() {
        return "no NodePool exists".into();
    }
    let conflicts: Vec<&Conflict> = whys
        .iter()
        .filter_map(|w| match w {
            Why::Requirement { conflict, .. } => Some(conflict),
            _ => None,
        })
        .collect();
    if conflicts.len() == whys.len() && conflicts.iter().all(|c| c.key == conflicts[0].key) {
        let c = conflicts[0];
        let wanted = match c
            .theirs
            .strip_prefix("In [")
            .and_then(|s| s.strip_suffix(']'))
        {
            Some(v) if !v.contains(',') => format!("{}={v}", c.key),
            _ => format!("{} {}", c.key, c.theirs),
        };
        return format!("node selector {wanted} matches no NodePool");
    }
    let mut seen = vec![];
    let mut parts = vec![];
    for w in whys {
        // Several affinity alternatives can fail on one NodePool; the first says enough.
        if seen.contains(&w.pool()) {
            continue;
        }
        seen.push(w.pool());
        parts.push(w.sentence());
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TaintEffect;

    #[test]
    fn a_selector_no_pool_offers_is_one_sentence() {
        let conflict = |pool: &str| Why::Requirement {
            pool: pool.into(),
            conflict: Conflict {
                key: "nodeType".into(),
                ours: "DoesNotExist".into(),
                theirs: "In [gpu]".into(),
            },
        };
        assert_eq!(
            explain(&[conflict("a"), conflict("b")]),
            "node selector nodeType=gpu matches no NodePool"
        );
    }

    #[test]
    fn a_pod_too_big_for_every_type_names_the_resource_and_the_largest_room() {
        let gib = |n: i64| n * (1 << 30) * 1000;
        let why = Why::TooBig {
            pool: "default".into(),
            requests: Box::new(Resources {
                cpu: 1000,
                memory: gib(96),
                pods: 1000,
                ..Default::default()
            }),
            largest_free: Box::new(Resources {
                cpu: 3920,
                memory: gib(92),
                pods: 58_000,
                ..Default::default()
            }),
        };
        assert_eq!(
            explain(&[why]),
            "no instance type in NodePool default has 96Gi memory free after overhead (the largest has 92Gi)"
        );
    }

    #[test]
    fn different_causes_are_listed_per_nodepool() {
        let whys = [
            Why::Taint {
                pool: "gpu".into(),
                taint: Taint {
                    key: "nvidia.com/gpu".into(),
                    value: None,
                    effect: TaintEffect::NoSchedule,
                },
            },
            Why::Limit {
                pool: "default".into(),
                limits: [("cpu".to_string(), 1_000_000)].into(),
                used: Box::new(Resources {
                    cpu: 999_000,
                    ..Default::default()
                }),
            },
        ];
        assert_eq!(
            explain(&whys),
            "NodePool gpu has taint nvidia.com/gpu:NoSchedule that the pod does not tolerate; \
             NodePool default would exceed its limits (cpu 999 of 1000 in use or launching)"
        );
    }
}
