//! The one decision read without touching anything, for `nodewright explain-event` and
//! `sweep-plan`: what comes next for a node as its exported objects show it (its record and
//! taint, its pods, the replacement's nodes). EC2 is not asked: the instance is taken to be
//! running.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::decide::{Act, Budget, Instance, Next, Situation, merge, next};
use super::execute::{instance_of, record_of};
use super::record::{Record, RecordError};
use crate::kube::{Readiness, readiness};

/// What comes next for `node` (its pods among `pods`, the other nodes in `nodes`), with the
/// removal `wanted` begun on it if one is.
pub fn next_for(
    node: &Node,
    nodes: &[Node],
    pods: &[Pod],
    wanted: Option<Record>,
    grace: Option<Duration>,
    now: Timestamp,
) -> Result<Next, RecordError> {
    let existing = record_of(node)?;
    let record = merge(existing.clone(), wanted);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let on_node: Vec<Pod> = pods
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name))
        .cloned()
        .collect();
    let ready: Vec<String> = record
        .iter()
        .flat_map(|r| r.launched().iter())
        .filter(|id| {
            nodes.iter().any(|n| {
                instance_of(n).as_deref() == Some(id.as_str()) && readiness(n) == Readiness::Ready
            })
        })
        .cloned()
        .collect();
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| {
            ts.iter()
                .any(|t| t.key == crate::api::labels::DISRUPTED_TAINT)
        });
    let situation = Situation {
        tainted,
        written: existing.is_some() && existing == record,
        record,
        instance: Instance::Running,
        pods: &on_node,
        ready: &ready,
        lost: &[],
        grace,
        budget: Budget::Allows,
    };
    Ok(next(&situation, now))
}

/// The acts of `next` in a few words: `take, drain (evict 2, delete 1), replace`.
pub fn summary(next: &Next) -> String {
    if next.acts.is_empty() {
        return "wait".into();
    }
    next.acts
        .iter()
        .map(|a| match a {
            Act::Take => "take".to_string(),
            Act::Untaint => "untaint".to_string(),
            Act::DeleteNode => "delete node".to_string(),
            Act::Drain(p) => format!("drain (evict {}, delete {})", p.evict.len(), p.delete.len()),
            Act::Replace => "replace".to_string(),
            Act::Terminate => "terminate".to_string(),
            Act::Restore(_) => "give up".to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::removal::Cause;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_node_s_next_step_is_read_from_its_exported_objects() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"providerID": "aws:///us-east-1a/i-0b662ef9931388ba0"},
        }))
        .unwrap();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        }))
        .unwrap();
        let warning = Record::new(Cause::SpotInterrupted, at(0), Some(at(120)));
        let n = next_for(&node, &[], &[pod], Some(warning), None, at(0)).unwrap();
        assert_eq!(summary(&n), "take, drain (evict 1, delete 0), replace");
        assert_eq!(n.state, "draining");
        let idle = next_for(&node, &[], &[], None, None, at(0)).unwrap();
        assert_eq!(
            (summary(&idle), idle.state),
            ("wait".to_string(), "not being removed")
        );
    }
}
