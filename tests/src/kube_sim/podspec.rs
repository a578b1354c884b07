//! What a pod asks of a node: resource requests, tolerations and node selection, read the
//! way kube-scheduler reads them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};
use nodewright::resources::parse_milli;

/// Amounts per resource name, in milli-units (`cpu: 1` is 1000, `memory: 1Ki` is 1_024_000).
pub type Resources = BTreeMap<String, i64>;

fn add(into: &mut Resources, from: &Resources) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn quantities(
    q: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Resources {
    // A quantity the server would have rejected is counted as zero rather than failing the round.
    q.into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), parse_milli(&v.0).unwrap_or(0)))
        .collect()
}

/// The pod's effective request: max(sum of app containers (plus restartable init
/// "sidecars"), largest init container) + overhead, as `resourcehelper.PodRequests`.
pub fn pod_requests(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::new();
    };
    let mut apps = Resources::new();
    for c in &spec.containers {
        add(
            &mut apps,
            &quantities(c.resources.as_ref().and_then(|r| r.requests.as_ref())),
        );
    }
    let mut init_peak = Resources::new();
    let mut sidecars = Resources::new();
    for c in spec.init_containers.iter().flatten() {
        let req = quantities(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut sidecars, &req);
            continue;
        }
        let mut during = sidecars.clone();
        add(&mut during, &req);
        for (k, v) in during {
            let e = init_peak.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    add(&mut apps, &sidecars);
    for (k, v) in init_peak {
        let e = apps.entry(k).or_default();
        *e = (*e).max(v);
    }
    add(&mut apps, &quantities(spec.overhead.as_ref()));
    apps
}

/// The node's allocatable (capacity when allocatable is absent).
pub fn allocatable(node: &Node) -> Resources {
    let st = node.status.as_ref();
    quantities(
        st.and_then(|s| s.allocatable.as_ref())
            .or_else(|| st.and_then(|s| s.capacity.as_ref())),
    )
}

pub fn node_labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

/// Whether one toleration tolerates one taint (`v1.Toleration.ToleratesTaint`).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
                && !key.is_empty()
        }
        _ => false,
    }
}

/// Taints that keep new pods away: the node's NoSchedule/NoExecute taints, plus the
/// `node.kubernetes.io/not-ready` taint the node lifecycle controller puts on a node whose
/// Ready condition is not True (added here when the stored node lacks it).
pub fn scheduling_taints(node: &Node) -> Vec<Taint> {
    let mut taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .collect();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if !ready
        && !taints
            .iter()
            .any(|t| t.key.starts_with("node.kubernetes.io/not-ready") || t.key == UNREACHABLE)
    {
        taints.push(Taint {
            key: NOT_READY.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    }
    taints
}

pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The first taint none of the tolerations tolerate.
pub fn untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

pub fn tolerations(pod: &Pod) -> Vec<Toleration> {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default()
}

/// nodeSelector and required node affinity (`NodeAffinity` filter plugin).
pub fn matches_node_selection(pod: &Pod, node: &Node) -> bool {
    let labels = node_labels(node);
    let name = node.metadata.name.as_deref().unwrap_or("");
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    if !spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(sel) => sel
            .node_selector_terms
            .iter()
            .any(|term| term_matches(term, &labels, name)),
    }
}

/// One NodeSelectorTerm: all its expressions and fields hold (an empty term matches nothing).
pub fn term_matches(
    term: &NodeSelectorTerm,
    labels: &BTreeMap<String, String>,
    node_name: &str,
) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(node_name)))
}

pub fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let as_int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => match (
            value.and_then(as_int),
            values.first().and_then(|x| as_int(x)),
        ) {
            (Some(v), Some(bound)) => v > bound,
            _ => false,
        },
        "Lt" => match (
            value.and_then(as_int),
            values.first().and_then(|x| as_int(x)),
        ) {
            (Some(v), Some(bound)) => v < bound,
            _ => false,
        },
        _ => false,
    }
}

/// Whether the pod still occupies its node (not finished).
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    phase != "Succeeded" && phase != "Failed"
}

pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": v})).unwrap_or_default()
    }

    #[test]
    fn init_containers_count_as_the_max_of_init_and_app_sum_plus_overhead() {
        let p = pod(json!({
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "200m", "memory": "1Gi"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "300m"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}}],
            "overhead": {"cpu": "50m"}
        }));
        let r = pod_requests(&p);
        assert_eq!(r.get("cpu"), Some(&1050));
        assert_eq!(r.get("memory"), Some(&(1024 * 1024 * 1024 * 1000)));
    }

    #[test]
    fn node_affinity_operators_behave_as_upstream() {
        let labels: BTreeMap<String, String> = [
            ("zone".to_string(), "a".to_string()),
            ("gen".to_string(), "5".to_string()),
        ]
        .into();
        let req = |key: &str, op: &str, values: &[&str]| NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        };
        let cases = [
            (req("zone", "In", &["a", "b"]), true),
            (req("zone", "NotIn", &["a"]), false),
            (req("missing", "NotIn", &["a"]), true),
            (req("zone", "Exists", &[]), true),
            (req("zone", "DoesNotExist", &[]), false),
            (req("gen", "Gt", &["4"]), true),
            (req("gen", "Gt", &["5"]), false),
            (req("gen", "Lt", &["6"]), true),
            (req("zone", "Lt", &["6"]), false),
        ];
        for (r, want) in cases {
            assert_eq!(
                requirement_matches(&r, labels.get(&r.key).map(String::as_str)),
                want,
                "{r:?}"
            );
        }
    }

    #[test]
    fn tolerations_match_taints_by_key_value_and_effect() {
        let taint = Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let tol =
            |v: serde_json::Value| serde_json::from_value::<Toleration>(v).unwrap_or_default();
        assert!(tolerates(
            &tol(json!({"key": "k", "value": "v", "effect": "NoSchedule"})),
            &taint
        ));
        assert!(tolerates(
            &tol(json!({"key": "k", "operator": "Exists"})),
            &taint
        ));
        assert!(tolerates(&tol(json!({"operator": "Exists"})), &taint));
        assert!(!tolerates(&tol(json!({"key": "k", "value": "w"})), &taint));
        assert!(!tolerates(
            &tol(json!({"key": "k", "operator": "Exists", "effect": "NoExecute"})),
            &taint
        ));
    }
}
