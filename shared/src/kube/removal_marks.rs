//! A node's removal record and the disruption taints, written together: one guarded
//! read-modify-write (the node's `resourceVersion`; a 409 reads again), so a node never
//! carries one without the other and a taint another controller added meanwhile is kept.
//! The same write takes a node whose drain has begun out of external load balancers (the
//! service controller and the AWS Load Balancer Controller read the label), as Karpenter's
//! and NTH's drains do, so their targets drain with its pods; a node only waiting for its
//! replacement still serves, and a removal given up puts the label back off unless it was
//! there before.

use k8s_openapi::api::core::v1::{Node, Taint as NodeTaint};
use serde_json::{Value, json};

use super::cluster::KubeCluster;
use super::error::KubeError;
use crate::api::{Taint, TaintEffect};

/// What a node under removal carries besides its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marks {
    /// The disruption taint.
    pub tainted: bool,
    /// Its drain has begun: out of external load balancers.
    pub draining: bool,
}

impl Marks {
    /// Neither: the removal is over or given up.
    pub const NONE: Marks = Marks {
        tainted: false,
        draining: false,
    };
}

pub trait RemovalMarks: Send + Sync {
    /// Sets annotation `key` to `value` (`None` removes it) and makes the node carry
    /// `taints` and the load-balancer label as `marks` say, in one write; writes nothing
    /// when all are already so.
    fn mark_removal(
        &self,
        node: &str,
        key: &str,
        value: Option<&str>,
        taints: &[Taint],
        marks: Marks,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;
}

/// The well-known label that keeps a node out of external load balancers' targets.
pub const EXCLUDE_FROM_LOAD_BALANCERS: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";
/// On a node: nodewright set [`EXCLUDE_FROM_LOAD_BALANCERS`], so it takes it off again.
pub const EXCLUDED_BY_REMOVAL: &str = "nodewright.io/excluded-from-load-balancers";

fn effect(t: &Taint) -> &'static str {
    match t.effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// The patch that brings `current` to the wanted marks, or `None` when it is already so.
pub fn removal_patch(
    current: &Node,
    key: &str,
    value: Option<&str>,
    wanted: &[Taint],
    marks: Marks,
) -> Option<Value> {
    let tainted = marks.tainted;
    let taints = current
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let carries = |w: &Taint| taints.iter().any(|t| t.key == w.key);
    let as_wanted = match tainted {
        true => wanted.iter().all(carries),
        false => !wanted.iter().any(carries),
    };
    let annotations = current.metadata.annotations.as_ref();
    let annotation = annotations.and_then(|a| a.get(key)).map(String::as_str);
    let labelled = current
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(EXCLUDE_FROM_LOAD_BALANCERS));
    let ours = annotations.is_some_and(|a| a.contains_key(EXCLUDED_BY_REMOVAL));
    let exclude = marks.draining && !labelled;
    let include = !marks.draining && ours;
    if as_wanted && annotation == value && !exclude && !include {
        return None;
    }
    let mut patch = json!({
        "metadata": {
            "resourceVersion": current.metadata.resource_version,
            "annotations": {key: value},
        },
    });
    if exclude || include {
        let mark = exclude.then_some("true");
        patch["metadata"]["labels"] = json!({ EXCLUDE_FROM_LOAD_BALANCERS: mark });
        patch["metadata"]["annotations"][EXCLUDED_BY_REMOVAL] = json!(mark);
    }
    if !as_wanted {
        let kept = taints
            .iter()
            .filter(|t| !wanted.iter().any(|w| w.key == t.key))
            .cloned();
        let added = wanted.iter().filter(|_| tainted).map(|w| NodeTaint {
            key: w.key.clone(),
            value: w.value.clone(),
            effect: effect(w).into(),
            time_added: None,
        });
        let all: Vec<NodeTaint> = kept.chain(added).collect();
        patch["spec"] = json!({ "taints": all });
    }
    Some(patch)
}

impl RemovalMarks for KubeCluster {
    async fn mark_removal(
        &self,
        node: &str,
        key: &str,
        value: Option<&str>,
        taints: &[Taint],
        marks: Marks,
    ) -> Result<(), KubeError> {
        self.rewrite_node(node, None, |current| {
            removal_patch(current, key, value, taints, marks)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(annotation: Option<&str>, taints: &[&str]) -> Node {
        let mut v = json!({"metadata": {"name": "n", "resourceVersion": "7"}, "spec": {}});
        if let Some(a) = annotation {
            v["metadata"]["annotations"] = json!({"k": a});
        }
        let taints: Vec<Value> = taints
            .iter()
            .map(|k| json!({"key": k, "effect": "NoSchedule"}))
            .collect();
        v["spec"]["taints"] = json!(taints);
        serde_json::from_value(v).unwrap()
    }

    fn disrupted() -> Taint {
        Taint {
            key: "nodewright.io/disrupted".into(),
            value: None,
            effect: TaintEffect::NoSchedule,
        }
    }

    const TAKEN: Marks = Marks {
        tainted: true,
        draining: false,
    };
    const DRAINING: Marks = Marks {
        tainted: true,
        draining: true,
    };

    #[test]
    fn taking_a_node_writes_the_record_and_the_taint_in_one_guarded_patch_keeping_other_taints() {
        let taken = removal_patch(
            &node(None, &["other"]),
            "k",
            Some("r"),
            &[disrupted()],
            TAKEN,
        );
        let taken = taken.unwrap();
        assert!(
            taken["metadata"].get("labels").is_none(),
            "a node waiting for its replacement still serves: {taken}"
        );
        let p = removal_patch(
            &node(None, &["other"]),
            "k",
            Some("r"),
            &[disrupted()],
            DRAINING,
        )
        .unwrap();
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(p["metadata"]["annotations"]["k"], "r");
        let keys: Vec<&str> = p["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["other", "nodewright.io/disrupted"]);
        assert_eq!(p["metadata"]["labels"][EXCLUDE_FROM_LOAD_BALANCERS], "true");
        assert_eq!(p["metadata"]["annotations"][EXCLUDED_BY_REMOVAL], "true");
    }

    #[test]
    fn karpenter_s_taint_is_written_and_taken_off_with_nodewright_s() {
        let both = crate::removal::disrupted_taints();
        let keys = |p: &Value| -> Vec<String> {
            p["spec"]["taints"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["key"].as_str().unwrap().to_string())
                .collect()
        };
        let taken = removal_patch(&node(None, &["other"]), "k", Some("r"), &both, TAKEN).unwrap();
        assert_eq!(
            keys(&taken),
            ["other", "nodewright.io/disrupted", "karpenter.sh/disrupted"]
        );
        // A node taken before Karpenter's taint was written gets it with the next write.
        let older = node(Some("r"), &["nodewright.io/disrupted"]);
        let added = removal_patch(&older, "k", Some("r"), &both, TAKEN).unwrap();
        assert_eq!(
            keys(&added),
            ["nodewright.io/disrupted", "karpenter.sh/disrupted"]
        );
        let done = node(
            Some("r"),
            &["nodewright.io/disrupted", "other", "karpenter.sh/disrupted"],
        );
        assert!(removal_patch(&done, "k", Some("r"), &both, TAKEN).is_none());
        let cleared = removal_patch(&done, "k", None, &both, Marks::NONE).unwrap();
        assert_eq!(keys(&cleared), ["other"]);
    }

    #[test]
    fn a_node_already_out_of_load_balancers_keeps_its_label_when_a_removal_is_given_up() {
        let mut theirs = node(None, &[]);
        theirs.metadata.labels =
            Some([(EXCLUDE_FROM_LOAD_BALANCERS.to_string(), "true".to_string())].into());
        let taken = removal_patch(&theirs, "k", Some("r"), &[disrupted()], DRAINING).unwrap();
        assert!(taken["metadata"].get("labels").is_none(), "{taken}");
        assert!(
            taken["metadata"]["annotations"]
                .get(EXCLUDED_BY_REMOVAL)
                .is_none(),
            "{taken}"
        );
        // Taken and given up: the taint and record go, the user's label stays.
        let mut given_up = theirs.clone();
        given_up.metadata.annotations = Some([("k".to_string(), "r".to_string())].into());
        given_up.spec.as_mut().unwrap().taints = Some(vec![NodeTaint {
            key: "nodewright.io/disrupted".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        let p = removal_patch(&given_up, "k", None, &[disrupted()], Marks::NONE).unwrap();
        assert!(p["metadata"].get("labels").is_none(), "{p}");
    }

    #[test]
    fn giving_a_removal_up_removes_both_and_a_node_already_so_needs_no_write() {
        let mut taken = node(Some("r"), &["nodewright.io/disrupted", "other"]);
        taken.metadata.labels =
            Some([(EXCLUDE_FROM_LOAD_BALANCERS.to_string(), "true".to_string())].into());
        taken
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(EXCLUDED_BY_REMOVAL.to_string(), "true".to_string());
        let p = removal_patch(&taken, "k", None, &[disrupted()], Marks::NONE).unwrap();
        assert_eq!(p["metadata"]["annotations"]["k"], Value::Null);
        assert_eq!(p["spec"]["taints"].as_array().unwrap().len(), 1);
        assert_eq!(
            p["metadata"]["labels"][EXCLUDE_FROM_LOAD_BALANCERS],
            Value::Null
        );
        assert_eq!(
            p["metadata"]["annotations"][EXCLUDED_BY_REMOVAL],
            Value::Null
        );
        assert_eq!(
            removal_patch(&taken, "k", Some("r"), &[disrupted()], DRAINING),
            None
        );
        // A record changed on a node already tainted: the taints are left alone.
        let p = removal_patch(&taken, "k", Some("r2"), &[disrupted()], DRAINING).unwrap();
        assert!(p.get("spec").is_none(), "{p}");
    }
}
