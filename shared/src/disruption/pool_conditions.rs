//! A NodePool's `status.conditions` as Karpenter writes them (its `NodePool.StatusConditions`
//! over awslabs/operatorpkg's condition set): the dependents `ValidationSucceeded` and
//! `NodeClassReady`, and the root `Ready` computed from them, so `kubectl get nodepools`
//! and dashboards built for Karpenter read the same READY column. The CRD requires every
//! field of a condition, `lastTransitionTime` included; the time a condition last changed
//! is the one the object already carries, so nothing is remembered here.

use jiff::Timestamp;
use serde_json::{Value, json};

/// The root condition.
pub const READY: &str = "Ready";
pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
pub const NODE_CLASS_READY: &str = "NodeClassReady";

/// One dependent condition as it should be now; its time comes from [`conditions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub kind: &'static str,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

impl Wanted {
    /// True, with the type as its reason and no message, as operatorpkg's `SetTrue`.
    fn ok(kind: &'static str) -> Self {
        Wanted {
            kind,
            status: "True",
            reason: kind.to_string(),
            message: String::new(),
        }
    }

    fn failed(kind: &'static str, reason: &str, message: &str) -> Self {
        Wanted {
            kind,
            status: "False",
            reason: reason.to_string(),
            message: message.to_string(),
        }
    }
}

/// What is known of the EC2NodeClass a NodePool names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassReadiness {
    Ready,
    NotFound,
    /// It exists but cannot be used: why.
    NotReady(String),
}

/// A NodePool's dependent conditions: `validation` is why the NodePool itself is invalid
/// (`None`: it is valid); `class` what its EC2NodeClass is.
pub fn node_pool_dependents(validation: Option<&str>, class: &ClassReadiness) -> Vec<Wanted> {
    let validated = match validation {
        None => Wanted::ok(VALIDATION_SUCCEEDED),
        Some(why) => Wanted::failed(VALIDATION_SUCCEEDED, "NodePoolValidationFailed", why),
    };
    let class = match class {
        ClassReadiness::Ready => Wanted::ok(NODE_CLASS_READY),
        ClassReadiness::NotFound => Wanted::failed(
            NODE_CLASS_READY,
            "NodeClassNotFound",
            "NodeClass not found on cluster",
        ),
        ClassReadiness::NotReady(why) => Wanted::failed(NODE_CLASS_READY, "NodeClassNotReady", why),
    };
    vec![validated, class]
}

/// The conditions to write: `dependents` and the root `Ready` from them, each keeping the
/// `lastTransitionTime` of `current` (the object's conditions now) while its status stays,
/// `now` when it changes, and the object's creation when it was never set (operatorpkg's
/// rule for dependent conditions); sorted by that time with `Ready` last. `generation` is
/// the object's, observed.
pub fn conditions(
    dependents: &[Wanted],
    current: &[Value],
    created: Timestamp,
    generation: i64,
    now: Timestamp,
) -> Vec<Value> {
    let unhealthy: Vec<&Wanted> = dependents.iter().filter(|d| d.status != "True").collect();
    let root = if unhealthy.is_empty() {
        Wanted::ok(READY)
    } else {
        let any_false = unhealthy.iter().any(|d| d.status == "False");
        Wanted {
            kind: READY,
            status: if any_false { "False" } else { "Unknown" },
            reason: if any_false {
                "UnhealthyDependents"
            } else {
                "ReconcilingDependents"
            }
            .to_string(),
            message: unhealthy
                .iter()
                .map(|d| format!("{}={}", d.kind, d.status))
                .collect::<Vec<_>>()
                .join(", "),
        }
    };
    let mut out: Vec<(Timestamp, bool, Value)> = dependents
        .iter()
        .chain(std::iter::once(&root))
        .map(|w| {
            let since = transition(w, current, created, now);
            let value = json!({
                "type": w.kind,
                "status": w.status,
                "reason": w.reason,
                "message": w.message,
                "lastTransitionTime": since.to_string(),
                "observedGeneration": generation,
            });
            (since, w.kind == READY, value)
        })
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(_, _, v)| v).collect()
}

/// When `wanted` last changed: the current condition's time while the status is the same.
fn transition(wanted: &Wanted, current: &[Value], created: Timestamp, now: Timestamp) -> Timestamp {
    let Some(existing) = current.iter().find(|c| c["type"] == wanted.kind) else {
        return created;
    };
    let kept = existing["lastTransitionTime"]
        .as_str()
        .and_then(|t| t.parse::<Timestamp>().ok());
    match kept {
        Some(t) if existing["status"] == wanted.status => t,
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// (type, status, reason, lastTransitionTime) of each condition, in order.
    fn summary(conditions: &[Value]) -> Vec<(String, String, String, String)> {
        conditions
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (s("type"), s("status"), s("reason"), s("lastTransitionTime"))
            })
            .collect()
    }

    #[test]
    fn a_nodepool_s_dependents_say_what_is_wrong_with_it_or_its_class() {
        let cases = [
            (None, ClassReadiness::Ready, ("True", "True")),
            (
                Some("spec.limits.cpu: bad"),
                ClassReadiness::Ready,
                ("False", "True"),
            ),
            (None, ClassReadiness::NotFound, ("True", "False")),
            (
                None,
                ClassReadiness::NotReady("subnets".into()),
                ("True", "False"),
            ),
        ];
        for (validation, class, (validated, ready)) in cases {
            let d = node_pool_dependents(validation, &class);
            assert_eq!(
                (d[0].kind, d[0].status, d[1].kind, d[1].status),
                (VALIDATION_SUCCEEDED, validated, NODE_CLASS_READY, ready),
                "{validation:?} {class:?}"
            );
        }
        let missing = node_pool_dependents(None, &ClassReadiness::NotFound);
        assert_eq!(missing[1].reason, "NodeClassNotFound");
        let invalid = node_pool_dependents(Some("spec.weight: 0"), &ClassReadiness::Ready);
        assert_eq!(
            (invalid[0].reason.as_str(), invalid[0].message.as_str()),
            ("NodePoolValidationFailed", "spec.weight: 0")
        );
    }

    #[test]
    fn ready_follows_the_dependents_and_each_time_moves_only_when_its_status_does() {
        let created = t("2026-11-01T00:00:00Z");
        let now = t("2026-11-28T03:00:00Z");
        let healthy = node_pool_dependents(None, &ClassReadiness::Ready);
        // Never written: every condition dates from the object's creation, Ready last.
        let first = conditions(&healthy, &[], created, 1, now);
        let c = created.to_string();
        assert_eq!(
            summary(&first),
            [
                (
                    "ValidationSucceeded".into(),
                    "True".into(),
                    "ValidationSucceeded".into(),
                    c.clone()
                ),
                (
                    "NodeClassReady".into(),
                    "True".into(),
                    "NodeClassReady".into(),
                    c.clone()
                ),
                ("Ready".into(), "True".into(), "Ready".into(), c.clone()),
            ]
        );
        assert_eq!(first[0]["observedGeneration"], 1);
        // Written again unchanged: the same times.
        assert_eq!(conditions(&healthy, &first, created, 1, now), first);
        // The class goes: NodeClassReady and Ready move to now, ValidationSucceeded stays.
        let broken = node_pool_dependents(None, &ClassReadiness::NotFound);
        let later = conditions(&broken, &first, created, 2, now);
        let n = now.to_string();
        assert_eq!(
            summary(&later),
            [
                (
                    "ValidationSucceeded".into(),
                    "True".into(),
                    "ValidationSucceeded".into(),
                    c
                ),
                (
                    "NodeClassReady".into(),
                    "False".into(),
                    "NodeClassNotFound".into(),
                    n.clone()
                ),
                (
                    "Ready".into(),
                    "False".into(),
                    "UnhealthyDependents".into(),
                    n
                ),
            ]
        );
        assert_eq!(later[2]["message"], "NodeClassReady=False");
        // Unknown without any False: Ready is Unknown, reconciling.
        let unknown = [Wanted {
            kind: NODE_CLASS_READY,
            status: "Unknown",
            reason: "AwaitingReconciliation".into(),
            message: String::new(),
        }];
        let root = &conditions(&unknown, &[], created, 1, now)[1];
        assert_eq!(
            (root["status"].as_str(), root["reason"].as_str()),
            (Some("Unknown"), Some("ReconcilingDependents"))
        );
    }
}
