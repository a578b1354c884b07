//! The solver's view of a pod: what it requests and every hard constraint on where it may
//! run, extracted once from the Kubernetes object so packing never touches k8s types.
//!
//! Past ~450 lines on purpose: each Kubernetes constraint (selectors, affinity, tolerations,
//! spread) is converted next to the others so their shared rules stay in one place.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, NodeSelectorTerm, Pod, PodAffinityTerm, PodSpec};
use thiserror::Error;

use super::namespaces::{NamespaceLabels, covers};
use super::requirements::{Requirement, Requirements, normalized};
use super::selector::Selector;
use super::taints::Toleration;
use crate::api::{Operator, labels};
use crate::resources::{PODS, Resources};

#[derive(Debug, Error, PartialEq, Eq)]
#[error("pod {pod}: {field}: {message}")]
pub struct PodError {
    pub pod: String,
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopologyKey {
    Zone,
    Hostname,
    /// Any other node label (`karpenter.sh/capacity-type`, `kubernetes.io/arch`, a custom
    /// label a NodePool sets): its domains are the values NodePools and nodes can carry.
    Label(String),
}

impl TopologyKey {
    pub fn parse(key: &str) -> Self {
        match normalized(key) {
            labels::ZONE => TopologyKey::Zone,
            labels::HOSTNAME => TopologyKey::Hostname,
            other => TopologyKey::Label(other.to_string()),
        }
    }

    /// The node label the key names.
    pub fn label(&self) -> &str {
        match self {
            TopologyKey::Zone => labels::ZONE,
            TopologyKey::Hostname => labels::HOSTNAME,
            TopologyKey::Label(k) => k,
        }
    }
}

/// A topology spread constraint. `whenUnsatisfiable: ScheduleAnyway` ones are kept apart
/// (`PodDemand::soft_spread`): held as if required, dropped when the pod cannot schedule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Spread {
    pub key: TopologyKey,
    pub max_skew: u32,
    /// The constraint's `labelSelector`, ANDed with the pod's own value of each
    /// `matchLabelKeys` key.
    pub selector: Selector,
    /// `minDomains`: while fewer domains are eligible, the global minimum counts as 0.
    pub min_domains: u32,
    /// `nodeAffinityPolicy: Honor` (the default): only domains the pod's node affinity
    /// allows are eligible.
    pub honor_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default `Ignore`): only domains of nodes and NodePools
    /// whose taints the pod tolerates are eligible.
    pub honor_taints: bool,
}

impl Spread {
    /// A spread with Kubernetes' defaults for everything but key, skew and selector.
    pub fn new(key: TopologyKey, max_skew: u32, selector: Selector) -> Self {
        Spread {
            key,
            max_skew,
            selector,
            min_domains: 1,
            honor_affinity: true,
            honor_taints: false,
        }
    }
}

/// A pod (anti-)affinity term: pods matching `selector` in its namespaces. Those are, as in
/// kube-scheduler, the union of `namespaces` (listed, or the pod's own when neither a list
/// nor a selector is given) and the namespaces whose labels `namespace_selector` matches;
/// `namespaceSelector: {}` is every namespace (an empty `namespaces` and no selector).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    pub key: TopologyKey,
    pub selector: Selector,
    pub namespaces: Vec<String>,
    /// A `namespaceSelector` with terms; matched against the Namespaces' labels
    /// ([`super::Snapshot::namespace_labels`]).
    pub namespace_selector: Option<Selector>,
}

impl AffinityTerm {
    /// Whether a pod in `namespace` is in this term's scope, `labels` being the Namespace
    /// objects' labels by name.
    pub fn covers(&self, namespace: &str, labels: &NamespaceLabels) -> bool {
        covers(
            &self.namespaces,
            self.namespace_selector.as_ref(),
            namespace,
            labels,
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodDemand {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Effective requests: max(largest init container, sum of containers) + overhead, and
    /// one `pods` slot.
    pub requests: Resources,
    /// Alternatives (node affinity terms are ORed), each already ANDed with nodeSelector
    /// and with where the pod's volumes allow ([`PodDemand::narrow_to_volumes`]).
    pub requirements: Vec<Requirements>,
    /// The pod's own node affinity and nodeSelector, kept when its volumes narrowed
    /// `requirements`: spread constraints honouring node affinity count their domains by
    /// these alone, as kube-scheduler does.
    pub own_requirements: Option<Vec<Requirements>>,
    /// Preferred node affinity terms, heaviest first (equal weights keep the pod's order).
    /// The solver holds the pod to the first as if required and drops them one at a time
    /// when it cannot schedule, as Karpenter does.
    pub preferred: Vec<Requirements>,
    pub tolerations: Vec<Toleration>,
    pub spread: Vec<Spread>,
    /// `ScheduleAnyway` spread constraints, in the pod's order: the solver holds them as if
    /// required and drops them one at a time, first first, as Karpenter does.
    pub soft_spread: Vec<Spread>,
    pub affinity: Vec<AffinityTerm>,
    pub anti_affinity: Vec<AffinityTerm>,
    /// Preferred pod affinity and anti-affinity terms, heaviest first: held as if required,
    /// dropped one at a time, heaviest first, as Karpenter does. A held preferred
    /// anti-affinity binds only this pod, never the pods it names (Karpenter tracks only
    /// required anti-affinity both ways).
    pub soft_affinity: Vec<AffinityTerm>,
    pub soft_anti_affinity: Vec<AffinityTerm>,
}

impl PodDemand {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The alternatives spread domains are counted by (`nodeAffinityPolicy: Honor`).
    pub fn affinity_requirements(&self) -> &[Requirements] {
        self.own_requirements
            .as_deref()
            .unwrap_or(&self.requirements)
    }

    /// Holds the pod to where its volumes allow (`volumes`, alternatives; none: anywhere).
    /// An error when no alternative of its own node affinity meets any of theirs.
    pub fn narrow_to_volumes(&mut self, volumes: &[Requirements]) -> Result<(), String> {
        if volumes.is_empty() {
            return Ok(());
        }
        let narrowed = super::volumes::combined(&self.requirements, volumes).ok_or_else(|| {
            "its volumes' topology and its node affinity allow no node in common".to_string()
        })?;
        let own = std::mem::replace(&mut self.requirements, narrowed);
        self.own_requirements.get_or_insert(own);
        Ok(())
    }

    /// A pod with only requests, for tests and benchmarks.
    pub fn simple(namespace: &str, name: &str, requests: Resources) -> Self {
        let mut requests = requests;
        requests.pods = 1000;
        PodDemand {
            namespace: namespace.into(),
            name: name.into(),
            labels: BTreeMap::new(),
            requests,
            requirements: vec![Requirements::new()],
            own_requirements: None,
            preferred: vec![],
            tolerations: vec![],
            spread: vec![],
            soft_spread: vec![],
            affinity: vec![],
            anti_affinity: vec![],
            soft_affinity: vec![],
            soft_anti_affinity: vec![],
        }
    }

    pub fn from_pod(pod: &Pod) -> Result<Self, PodError> {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let id = format!("{namespace}/{name}");
        let err = |field: &str, message: String| PodError {
            pod: id.clone(),
            field: field.into(),
            message,
        };
        let spec = pod
            .spec
            .as_ref()
            .ok_or_else(|| err("spec", "missing".into()))?;
        let mut pod_labels = pod.metadata.labels.clone().unwrap_or_default();
        // Only the sweeper's placeholders may open claims on a static NodePool: a real pod
        // carrying the label is planned as any other.
        if !is_floor_placeholder(pod) {
            pod_labels.remove(crate::api::labels::CAPACITY_FLOOR);
        }
        Ok(PodDemand {
            requests: effective_requests(spec).map_err(|(f, m)| err(&f, m))?,
            requirements: node_requirements(spec).map_err(|(f, m)| err(&f, m))?,
            own_requirements: None,
            preferred: preferred_node_terms(spec).map_err(|(f, m)| err(&f, m))?,
            tolerations: spec
                .tolerations
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| {
                    Toleration::from_k8s(t).map_err(|m| err(&format!("spec.tolerations[{i}]"), m))
                })
                .collect::<Result<_, _>>()?,
            spread: spread_constraints(spec, &pod_labels, false).map_err(|(f, m)| err(&f, m))?,
            soft_spread: spread_constraints(spec, &pod_labels, true)
                .map_err(|(f, m)| err(&f, m))?,
            affinity: affinity_terms(spec, &namespace, false).map_err(|(f, m)| err(&f, m))?,
            anti_affinity: affinity_terms(spec, &namespace, true).map_err(|(f, m)| err(&f, m))?,
            soft_affinity: preferred_affinity_terms(spec, &namespace, false)
                .map_err(|(f, m)| err(&f, m))?,
            soft_anti_affinity: preferred_affinity_terms(spec, &namespace, true)
                .map_err(|(f, m)| err(&f, m))?,
            labels: pod_labels,
            namespace,
            name,
        })
    }
}

/// The required pod anti-affinity terms of a pod bound to a node: pending pods they select
/// must keep out of its domain too (kube-scheduler checks them both ways).
pub fn bound_anti_affinity(pod: &Pod) -> Result<Vec<AffinityTerm>, PodError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(vec![]);
    };
    affinity_terms(spec, namespace, true).map_err(|(field, message)| PodError {
        pod: format!(
            "{namespace}/{}",
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
        field,
        message,
    })
}

pub(super) type FieldError = (String, String);

fn container_requests(c: &Container, field: &str) -> Result<Resources, FieldError> {
    let Some(res) = &c.resources else {
        return Ok(Resources::default());
    };
    // A limit without a request defaults the request to the limit, as the API server does.
    let mut pairs: BTreeMap<&str, &str> = BTreeMap::new();
    for (k, v) in res.limits.iter().flatten() {
        pairs.insert(k, &v.0);
    }
    for (k, v) in res.requests.iter().flatten() {
        pairs.insert(k, &v.0);
    }
    Resources::parse(pairs)
        .map_err(|(name, e)| (format!("{field}.resources.requests.{name}"), e.to_string()))
}

/// max(each init container, sum of app containers) + pod overhead, plus one pod slot.
/// Restartable init containers (sidecars) keep running, so they add to the sum instead.
pub fn effective_requests(spec: &PodSpec) -> Result<Resources, FieldError> {
    let mut app = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        app.add(&container_requests(c, &format!("spec.containers[{i}]"))?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = container_requests(c, &format!("spec.initContainers[{i}]"))?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
        } else {
            let mut during = sidecars.clone();
            during.add(&r);
            init_peak.max(&during);
        }
    }
    app.add(&sidecars);
    app.max(&init_peak);
    if let Some(overhead) = &spec.overhead {
        let pairs = overhead.iter().map(|(k, v)| (k.as_str(), v.0.as_str()));
        app.add(
            &Resources::parse(pairs)
                .map_err(|(n, e)| (format!("spec.overhead.{n}"), e.to_string()))?,
        );
    }
    app.set(PODS, 1000);
    Ok(app)
}

pub(super) fn term_requirements(
    term: &NodeSelectorTerm,
    field: &str,
) -> Result<Requirements, FieldError> {
    let mut out = Requirements::new();
    for (i, e) in term.match_expressions.iter().flatten().enumerate() {
        let op = match e.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            other => {
                return Err((
                    format!("{field}.matchExpressions[{i}].operator"),
                    format!(
                        "unknown operator {other:?}; allowed: In, NotIn, Exists, DoesNotExist, Gt, Lt"
                    ),
                ));
            }
        };
        out.add(
            &e.key,
            Requirement::from_api(op, e.values.as_deref().unwrap_or_default(), None),
        );
    }
    Ok(out)
}

fn node_requirements(spec: &PodSpec) -> Result<Vec<Requirements>, FieldError> {
    let mut base = Requirements::new();
    for (k, v) in spec.node_selector.iter().flatten() {
        base.add(k, Requirement::in_values([v.clone()]));
    }
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    if terms.is_empty() {
        return Ok(vec![base]);
    }
    let field = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    terms
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut r = base.clone();
            r.merge(&term_requirements(t, &format!("{field}[{i}]"))?);
            Ok(r)
        })
        .collect()
}

/// `preferredDuringSchedulingIgnoredDuringExecution`, heaviest first. A weight outside
/// 1..=100 is what the API server rejects, so it is an error here too.
fn preferred_node_terms(spec: &PodSpec) -> Result<Vec<Requirements>, FieldError> {
    let field = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let mut weighted = vec![];
    for (i, t) in terms.into_iter().flatten().enumerate() {
        if !(1..=100).contains(&t.weight) {
            return Err((
                format!("{field}[{i}].weight"),
                format!("{} is outside 1..=100", t.weight),
            ));
        }
        let reqs = term_requirements(&t.preference, &format!("{field}[{i}].preference"))?;
        weighted.push((t.weight, reqs));
    }
    // Stable: equal weights keep the pod's order, as Karpenter's sort.SliceStable does.
    weighted.sort_by_key(|w| std::cmp::Reverse(w.0));
    Ok(weighted.into_iter().map(|(_, r)| r).collect())
}

/// The `DoNotSchedule` constraints, or with `soft` the `ScheduleAnyway` ones.
fn spread_constraints(
    spec: &PodSpec,
    labels: &BTreeMap<String, String>,
    soft: bool,
) -> Result<Vec<Spread>, FieldError> {
    let mut out = vec![];
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        if (c.when_unsatisfiable == "ScheduleAnyway") != soft {
            continue;
        }
        let field = format!("spec.topologySpreadConstraints[{i}]");
        let mut selector = match &c.label_selector {
            Some(s) => Selector::from_k8s(s).map_err(|m| (format!("{field}.labelSelector"), m))?,
            // No selector matches no pods: the constraint is vacuous.
            None => continue,
        };
        if c.max_skew < 1 {
            return Err((
                format!("{field}.maxSkew"),
                format!("must be at least 1, got {}", c.max_skew),
            ));
        }
        // A key the pod does not carry is ignored, as kube-scheduler does.
        for key in c.match_label_keys.iter().flatten() {
            if let Some(v) = labels.get(key) {
                selector = selector.and_label(key, v);
            }
        }
        let mut spread = Spread::new(
            TopologyKey::parse(&c.topology_key),
            c.max_skew as u32,
            selector,
        );
        if let Some(m) = c.min_domains {
            if m < 1 {
                return Err((
                    format!("{field}.minDomains"),
                    format!("must be at least 1, got {m}"),
                ));
            }
            spread.min_domains = m as u32;
        }
        spread.honor_affinity =
            policy(&c.node_affinity_policy, true, &field, "nodeAffinityPolicy")?;
        spread.honor_taints = policy(&c.node_taints_policy, false, &field, "nodeTaintsPolicy")?;
        out.push(spread);
    }
    Ok(out)
}

/// `Honor` / `Ignore`, or the default when unset.
fn policy(
    value: &Option<String>,
    default: bool,
    field: &str,
    name: &str,
) -> Result<bool, FieldError> {
    match value.as_deref() {
        None => Ok(default),
        Some("Honor") => Ok(true),
        Some("Ignore") => Ok(false),
        Some(other) => Err((
            format!("{field}.{name}"),
            format!("{other:?} is not one of Honor, Ignore"),
        )),
    }
}

fn affinity_terms(
    spec: &PodSpec,
    namespace: &str,
    anti: bool,
) -> Result<Vec<AffinityTerm>, FieldError> {
    let affinity = spec.affinity.as_ref();
    let (terms, field) = if anti {
        (
            affinity
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .and_then(|p| {
                    p.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )
    } else {
        (
            affinity
                .and_then(|a| a.pod_affinity.as_ref())
                .and_then(|p| {
                    p.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )
    };
    let mut out = vec![];
    for (i, t) in terms.into_iter().flatten().enumerate() {
        out.extend(affinity_term(t, namespace, &format!("{field}[{i}]"))?);
    }
    Ok(out)
}

/// One pod (anti-)affinity term; `None` without a label selector (it matches no pods).
fn affinity_term(
    t: &PodAffinityTerm,
    namespace: &str,
    field: &str,
) -> Result<Option<AffinityTerm>, FieldError> {
    let selector = match &t.label_selector {
        Some(s) => Selector::from_k8s(s).map_err(|m| (format!("{field}.labelSelector"), m))?,
        None => return Ok(None),
    };
    let mut namespaces = t.namespaces.clone().unwrap_or_default();
    // `namespaceSelector: {}` selects every namespace (kept as an empty list and no
    // selector); one with terms is kept to be matched against the Namespaces' labels,
    // beside the listed names; neither means the pod's own namespace.
    let namespace_selector = match &t.namespace_selector {
        Some(s) => {
            Some(Selector::from_k8s(s).map_err(|m| (format!("{field}.namespaceSelector"), m))?)
        }
        None => None,
    };
    let namespace_selector = match namespace_selector {
        Some(s) if s == Selector::default() => {
            namespaces.clear();
            None
        }
        Some(s) => Some(s),
        None => {
            if namespaces.is_empty() {
                namespaces.push(namespace.to_string());
            }
            None
        }
    };
    namespaces.sort();
    namespaces.dedup();
    Ok(Some(AffinityTerm {
        key: TopologyKey::parse(&t.topology_key),
        selector,
        namespaces,
        namespace_selector,
    }))
}

/// `preferredDuringSchedulingIgnoredDuringExecution` pod (anti-)affinity, heaviest first.
fn preferred_affinity_terms(
    spec: &PodSpec,
    namespace: &str,
    anti: bool,
) -> Result<Vec<AffinityTerm>, FieldError> {
    let affinity = spec.affinity.as_ref();
    let (terms, field) = if anti {
        (
            affinity
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .and_then(|p| {
                    p.preferred_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        )
    } else {
        (
            affinity
                .and_then(|a| a.pod_affinity.as_ref())
                .and_then(|p| {
                    p.preferred_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        )
    };
    let mut weighted = vec![];
    for (i, t) in terms.into_iter().flatten().enumerate() {
        if !(1..=100).contains(&t.weight) {
            return Err((
                format!("{field}[{i}].weight"),
                format!("{} is outside 1..=100", t.weight),
            ));
        }
        let term = affinity_term(&t.pod_affinity_term, namespace, &format!("{field}[{i}]"))?;
        weighted.extend(term.map(|a| (t.weight, a)));
    }
    weighted.sort_by_key(|w| std::cmp::Reverse(w.0));
    Ok(weighted.into_iter().map(|(_, a)| a).collect())
}

/// Whether `pod` is one of the sweeper's capacity-floor placeholders: their uid says so,
/// and the API server gives every real pod a UUID.
pub fn is_floor_placeholder(pod: &Pod) -> bool {
    pod.metadata
        .uid
        .as_deref()
        .is_some_and(|u| u.starts_with(crate::api::labels::CAPACITY_FLOOR_UID_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}}, "spec": spec}))
            .unwrap()
    }

    #[test]
    fn requests_take_the_larger_of_init_and_app_containers_plus_overhead() {
        let p = pod(json!({
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "512Mi"}}}
            ],
            "initContainers": [
                {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "100Mi"}}}
            ],
            "overhead": {"cpu": "100m"}
        }));
        let d = PodDemand::from_pod(&p).unwrap();
        assert_eq!(d.requests.cpu, 2000 + 100);
        assert_eq!(d.requests.memory, (1536i64 << 20) * 1000);
        assert_eq!(d.requests.pods, 1000);
    }

    #[test]
    fn sidecar_init_containers_add_to_the_app_containers() {
        let p = pod(json!({
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}}]
        }));
        assert_eq!(PodDemand::from_pod(&p).unwrap().requests.cpu, 1200);
    }

    #[test]
    fn node_affinity_terms_become_alternatives_each_with_the_node_selector() {
        let p = pod(json!({
            "containers": [{"name": "a"}],
            "nodeSelector": {"nodeType": "cpu-node"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["4"]}]}
            ]}}}
        }));
        let d = PodDemand::from_pod(&p).unwrap();
        assert_eq!(d.requirements.len(), 2);
        for alt in &d.requirements {
            assert!(alt.get("nodeType").is_some());
        }
        assert!(
            d.requirements[1]
                .get("karpenter.k8s.aws/instance-cpu")
                .unwrap()
                .allows(Some("8"))
        );
    }

    #[test]
    fn preferred_pod_affinity_terms_are_kept_heaviest_first_in_the_pods_namespace() {
        let term = |app: &str, key: &str| json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key});
        let p = pod(json!({
            "containers": [{"name": "a"}],
            "affinity": {
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": term("light", "kubernetes.io/hostname")},
                    {"weight": 90, "podAffinityTerm": term("heavy", "topology.kubernetes.io/zone")}
                ]},
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "podAffinityTerm": term("db", "topology.kubernetes.io/zone")}
                ]}
            }
        }));
        let d = PodDemand::from_pod(&p).unwrap();
        assert!(d.anti_affinity.is_empty() && d.affinity.is_empty());
        let keys: Vec<TopologyKey> = d.soft_anti_affinity.iter().map(|a| a.key.clone()).collect();
        assert_eq!(keys, vec![TopologyKey::Zone, TopologyKey::Hostname]);
        assert_eq!(d.soft_affinity.len(), 1);
        assert_eq!(d.soft_affinity[0].namespaces, vec!["ns".to_string()]);
    }

    #[test]
    fn a_bad_quantity_names_the_pod_and_field() {
        let p =
            pod(json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}));
        let e = PodDemand::from_pod(&p).unwrap_err();
        assert_eq!(e.pod, "ns/p");
        assert_eq!(e.field, "spec.containers[0].resources.requests.cpu");
    }

    #[test]
    fn schedule_anyway_spread_constraints_are_kept_apart_and_terms_default_to_the_pod_namespace() {
        let p = pod(json!({
            "containers": [{"name": "a"}],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "a"}}},
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "a"}}}
            ],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}}}
            ]}}
        }));
        let d = PodDemand::from_pod(&p).unwrap();
        assert_eq!(d.spread.len(), 1);
        assert_eq!(d.spread[0].key, TopologyKey::Zone);
        assert_eq!(d.soft_spread.len(), 1);
        assert_eq!(d.soft_spread[0].key, TopologyKey::Hostname);
        assert_eq!(d.anti_affinity[0].namespaces, vec!["ns".to_string()]);
        assert_eq!(d.anti_affinity[0].key, TopologyKey::Hostname);
    }

    #[test]
    fn spread_details_min_domains_policies_and_match_label_keys_are_read() {
        let p = pod(json!({
            "containers": [{"name": "a"}],
            "topologySpreadConstraints": [{
                "maxSkew": 2, "topologyKey": "karpenter.sh/capacity-type",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "a"}},
                "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor",
                "matchLabelKeys": ["app", "pod-template-hash"]
            }]
        }));
        let d = PodDemand::from_pod(&p).unwrap();
        let s = &d.spread[0];
        assert_eq!(
            s.key,
            TopologyKey::Label("karpenter.sh/capacity-type".into())
        );
        assert_eq!((s.max_skew, s.min_domains), (2, 3));
        assert!(!s.honor_affinity && s.honor_taints);
        // matchLabelKeys: "app" is ANDed in (same value); the pod lacks pod-template-hash,
        // which is then ignored, as kube-scheduler does.
        let mut other = BTreeMap::new();
        other.insert("app".to_string(), "a".to_string());
        assert!(s.selector.matches(&other));
        other.insert("app".to_string(), "b".to_string());
        assert!(!s.selector.matches(&other));
    }

    #[test]
    fn a_spread_keyed_on_the_pods_own_revision_matches_only_that_revision() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a", "pod-template-hash": "v2"}},
            "spec": {"containers": [{"name": "a"}], "topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "a"}},
                "matchLabelKeys": ["pod-template-hash"]
            }]}
        }))
        .unwrap();
        let d = PodDemand::from_pod(&p).unwrap();
        let labels = |hash: &str| -> BTreeMap<String, String> {
            [("app", "a"), ("pod-template-hash", hash)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(d.spread[0].selector.matches(&labels("v2")));
        assert!(!d.spread[0].selector.matches(&labels("v1")));
        assert_eq!(d.spread[0].min_domains, 1);
        assert!(d.spread[0].honor_affinity && !d.spread[0].honor_taints);
    }

    #[test]
    fn an_unknown_node_taints_policy_names_the_field() {
        let p = pod(json!({
            "containers": [{"name": "a"}],
            "topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "a"}},
                "nodeTaintsPolicy": "Sometimes"
            }]
        }));
        let e = PodDemand::from_pod(&p).unwrap_err();
        assert_eq!(
            e.field,
            "spec.topologySpreadConstraints[0].nodeTaintsPolicy"
        );
        assert!(e.message.contains("Sometimes"), "{}", e.message);
    }

    #[test]
    fn a_namespace_selector_with_terms_is_kept_beside_the_listed_names_instead_of_the_own_namespace()
     {
        let term = |ns: serde_json::Value| {
            pod(json!({
                "containers": [{"name": "a"}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "namespaceSelector": ns,
                     "namespaces": ["ops"], "labelSelector": {"matchLabels": {"app": "db"}}}
                ]}}
            }))
        };
        let d = PodDemand::from_pod(&term(json!({"matchLabels": {"team": "a"}}))).unwrap();
        let t = &d.anti_affinity[0];
        assert_eq!(t.namespaces, vec!["ops".to_string()]);
        let team_a: BTreeMap<String, String> = [("team".to_string(), "a".to_string())].into();
        assert!(t.namespace_selector.as_ref().unwrap().matches(&team_a));
        let e = PodDemand::from_pod(&term(json!(
            {"matchExpressions": [{"key": "team", "operator": "Near"}]}
        )))
        .unwrap_err();
        assert_eq!(
            e.field,
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector"
        );
    }

    #[test]
    fn an_empty_namespace_selector_covers_every_namespace_and_deprecated_keys_are_normalised() {
        let p = pod(json!({
            "containers": [{"name": "a"}],
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "failure-domain.beta.kubernetes.io/zone", "namespaceSelector": {},
                 "labelSelector": {"matchLabels": {"app": "db"}}},
                {"topologyKey": "example.com/rack", "namespaces": ["other"],
                 "labelSelector": {"matchLabels": {"app": "db"}}}
            ]}}
        }));
        let d = PodDemand::from_pod(&p).unwrap();
        assert!(d.affinity[0].namespaces.is_empty(), "every namespace");
        assert_eq!(d.affinity[0].key, TopologyKey::Zone);
        assert_eq!(d.affinity[1].namespaces, vec!["other".to_string()]);
        assert_eq!(
            d.affinity[1].key,
            TopologyKey::Label("example.com/rack".into())
        );
    }
}
