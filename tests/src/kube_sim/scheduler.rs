//! kube-scheduler, simulated: filters like the default profile's filter plugins, picks the
//! node with the most free CPU, and reports failures with kube-scheduler's message.
//!
//! Simulated filters, in the upstream order (the first failing one is a node's reason):
//! NodeUnschedulable, TaintToleration (NoSchedule/NoExecute; a node whose Ready condition is
//! not True counts as tainted `node.kubernetes.io/not-ready`), NodeAffinity (nodeSelector
//! and required node affinity), NodeResourcesFit (cpu, memory, pods, extended resources;
//! init containers and overhead), PodTopologySpread (`DoNotSchedule` constraints, any
//! topology key, over nodes that pass node affinity), InterPodAffinity (required affinity and
//! anti-affinity of the pod, and existing pods' required anti-affinity, any topology key,
//! namespaces from the term or the pod's own).
//!
//! Not simulated: scoring plugins (the choice is "most free CPU, then most free memory, then
//! name", which spreads like LeastAllocated), preemption (the message has no "preemption:"
//! part), preferred (soft) affinity, `ScheduleAnyway` spread, namespaceSelector, matchLabelKeys,
//! host ports, volumes other than claims, scheduling gates, and pod overhead from a
//! RuntimeClass not already copied into the pod. VolumeBinding for claims is simulated in
//! [`volume_binding`].

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm};
use serde_json::{Value, json};

use super::StepReport;
use super::clock::format_ts;
use super::podspec::{
    Resources, UNSCHEDULABLE, allocatable, is_active, matches_node_selection, node_name,
    pod_requests, scheduling_taints, tolerations, untolerated,
};
use super::resources::{NODES, PODS};
use super::selectors::selector_matches;
use super::store::{Store, Write};

pub mod volume_binding;
use volume_binding::ClaimPlace;

/// The scheduler's answer for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Bind(String),
    /// kube-scheduler's FitError message.
    Unschedulable(String),
}

/// Places `pod` among `nodes`, given the active pods already bound (`bound`).
#[cfg(test)]
pub fn decide(pod: &Pod, nodes: &[Node], bound: &[Pod]) -> Decision {
    decide_with_claims(pod, nodes, bound, &[])
}

/// [`decide`] for a pod with these claims ([`volume_binding::claims_of`]).
pub fn decide_with_claims(
    pod: &Pod,
    nodes: &[Node],
    bound: &[Pod],
    claims: &[ClaimPlace],
) -> Decision {
    if nodes.is_empty() {
        return Decision::Unschedulable("no nodes available to schedule pods".to_string());
    }
    let by_name: BTreeMap<&str, &Node> = nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
        .collect();
    let request = pod_requests(pod);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(i64, i64, &str)> = None;
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        match filter(pod, &request, node, nodes, &by_name, bound, claims) {
            Ok(free) => {
                let free_cpu = free.get("cpu").copied().unwrap_or(0);
                let free_mem = free.get("memory").copied().unwrap_or(0);
                let better = match best {
                    None => true,
                    Some((c, m, n)) => {
                        (free_cpu, free_mem) > (c, m)
                            || ((free_cpu, free_mem) == (c, m) && name < n)
                    }
                };
                if better {
                    best = Some((free_cpu, free_mem, name));
                }
            }
            Err(rs) => {
                for r in rs {
                    *reasons.entry(r).or_default() += 1;
                }
            }
        }
    }
    if let Some((_, _, name)) = best {
        return Decision::Bind(name.to_string());
    }
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    Decision::Unschedulable(format!(
        "0/{} nodes are available: {}.",
        nodes.len(),
        parts.join(", ")
    ))
}

/// `Ok(free resources after placing the pod)` or the node's failure reasons.
fn filter(
    pod: &Pod,
    request: &Resources,
    node: &Node,
    nodes: &[Node],
    by_name: &BTreeMap<&str, &Node>,
    bound: &[Pod],
    claims: &[ClaimPlace],
) -> Result<Resources, Vec<String>> {
    let tols = tolerations(pod);
    let name = node.metadata.name.as_deref().unwrap_or("");
    let unschedulable = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let tolerates_unschedulable = tols.iter().any(|t| {
        t.key.as_deref() == Some(UNSCHEDULABLE) && t.operator.as_deref() == Some("Exists")
            || (t.key.is_none() && t.operator.as_deref() == Some("Exists"))
    });
    if unschedulable && !tolerates_unschedulable {
        return Err(vec!["node(s) were unschedulable".into()]);
    }
    let taints = scheduling_taints(node);
    if let Some(t) = untolerated(&taints, &tols) {
        return Err(vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key,
            t.value.as_deref().unwrap_or("")
        )]);
    }
    if !matches_node_selection(pod, node) {
        return Err(vec![
            "node(s) didn't match Pod's node affinity/selector".into(),
        ]);
    }
    let on_node: Vec<&Pod> = bound
        .iter()
        .filter(|p| node_name(p) == Some(name))
        .collect();
    let mut free = allocatable(node);
    for p in &on_node {
        for (k, v) in pod_requests(p) {
            *free.entry(k).or_default() -= v;
        }
    }
    let mut insufficient = Vec::new();
    let pods_free = free.get("pods").copied().unwrap_or(0) - 1000 * on_node.len() as i64;
    if pods_free < 1000 {
        insufficient.push("Too many pods".to_string());
    }
    for (k, want) in request {
        if *want <= 0 || k == "pods" {
            continue;
        }
        // Upstream skips ephemeral storage when the node does not report it.
        if k == "ephemeral-storage" && !free.contains_key(k) {
            continue;
        }
        if free.get(k).copied().unwrap_or(0) < *want {
            insufficient.push(format!("Insufficient {k}"));
        }
    }
    if !insufficient.is_empty() {
        return Err(insufficient);
    }
    for (k, v) in request {
        *free.entry(k.clone()).or_default() -= v;
    }
    volume_binding::admits(claims, node).map_err(|r| vec![r])?;
    if !spread_ok(pod, node, nodes, by_name, bound) {
        return Err(vec![
            "node(s) didn't match pod topology spread constraints".into(),
        ]);
    }
    if let Err(r) = inter_pod_ok(pod, node, by_name, bound) {
        return Err(vec![r.to_string()]);
    }
    Ok(free)
}

fn labels(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.labels.clone().unwrap_or_default()
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

fn domain_of<'a>(node: &'a Node, key: &str) -> Option<&'a String> {
    node.metadata.labels.as_ref().and_then(|l| l.get(key))
}

/// `DoNotSchedule` topology spread constraints.
fn spread_ok(
    pod: &Pod,
    node: &Node,
    nodes: &[Node],
    by_name: &BTreeMap<&str, &Node>,
    bound: &[Pod],
) -> bool {
    let constraints = pod
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.clone())
        .unwrap_or_default();
    for c in constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
    {
        let Some(domain) = domain_of(node, &c.topology_key) else {
            return false;
        };
        let Some(sel) = c.label_selector.as_ref() else {
            continue;
        };
        // Domains: those of nodes the pod could go to by node affinity (nodeAffinityPolicy: Honor).
        let mut counts: BTreeMap<&String, i64> = nodes
            .iter()
            .filter(|n| matches_node_selection(pod, n))
            .filter_map(|n| domain_of(n, &c.topology_key))
            .map(|d| (d, 0))
            .collect();
        for p in bound
            .iter()
            .filter(|p| namespace(p) == namespace(pod) && selector_matches(sel, &labels(p)))
        {
            if let Some(d) = node_name(p)
                .and_then(|n| by_name.get(n))
                .and_then(|n| domain_of(n, &c.topology_key))
                && let Some(count) = counts.get_mut(d)
            {
                *count += 1;
            }
        }
        let min = counts.values().copied().min().unwrap_or(0);
        let self_match = i64::from(selector_matches(sel, &labels(pod)));
        let here = counts.get(domain).copied().unwrap_or(0);
        if here + self_match - min > i64::from(c.max_skew) {
            return false;
        }
    }
    true
}

fn term_namespaces(term: &PodAffinityTerm, owner: &Pod) -> Vec<String> {
    match term.namespaces.as_ref().filter(|n| !n.is_empty()) {
        Some(ns) => ns.clone(),
        None => vec![namespace(owner).to_string()],
    }
}

fn term_selects(term: &PodAffinityTerm, owner: &Pod, candidate: &Pod) -> bool {
    term_namespaces(term, owner)
        .iter()
        .any(|n| n == namespace(candidate))
        && term
            .label_selector
            .as_ref()
            .is_some_and(|s| selector_matches(s, &labels(candidate)))
}

/// Required pod affinity / anti-affinity, both the incoming pod's and existing pods'.
fn inter_pod_ok(
    pod: &Pod,
    node: &Node,
    by_name: &BTreeMap<&str, &Node>,
    bound: &[Pod],
) -> Result<(), &'static str> {
    let same_domain = |other: &Pod, key: &str| -> bool {
        let Some(here) = domain_of(node, key) else {
            return false;
        };
        node_name(other)
            .and_then(|n| by_name.get(n))
            .and_then(|n| domain_of(n, key))
            == Some(here)
    };
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let anti = affinity
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default();
    for term in &anti {
        if bound
            .iter()
            .any(|p| term_selects(term, pod, p) && same_domain(p, &term.topology_key))
        {
            return Err("node(s) didn't match pod anti-affinity rules");
        }
    }
    let aff = affinity
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default();
    for term in &aff {
        let satisfied = bound
            .iter()
            .any(|p| term_selects(term, pod, p) && same_domain(p, &term.topology_key));
        // The first pod of a group that selects itself may go anywhere with the key.
        let first_of_group = !bound.iter().any(|p| term_selects(term, pod, p))
            && term_selects(term, pod, pod)
            && domain_of(node, &term.topology_key).is_some();
        if !satisfied && !first_of_group {
            return Err("node(s) didn't match pod affinity rules");
        }
    }
    for existing in bound {
        let terms = existing
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        for term in terms.into_iter().flatten() {
            if term_selects(term, existing, pod) && same_domain(existing, &term.topology_key) {
                return Err("node(s) didn't satisfy existing pods anti-affinity rules");
            }
        }
    }
    Ok(())
}

/// Pods the default scheduler must place: unbound, not finished, not being deleted.
fn wants_scheduling(pod: &Pod) -> bool {
    let scheduler = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    node_name(pod).is_none()
        && is_active(pod)
        && pod.metadata.deletion_timestamp.is_none()
        && (scheduler == "default-scheduler" || scheduler.is_empty())
}

/// One scheduling pass over the store: binds what fits, marks the rest Unschedulable.
pub fn schedule_pending(
    store: &mut Store,
    now: Timestamp,
    _start_delay: std::time::Duration,
    report: &mut StepReport,
) {
    let nodes: Vec<Node> = store
        .list(NODES, None)
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    let all: Vec<Pod> = store
        .list(PODS, None)
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    let mut bound: Vec<Pod> = all
        .iter()
        .filter(|p| node_name(p).is_some() && is_active(p))
        .cloned()
        .collect();
    let mut queue: Vec<&Pod> = all.iter().filter(|p| wants_scheduling(p)).collect();
    // Active queue order: priority, then age (upstream PrioritySort).
    queue.sort_by_key(|p| {
        let prio = -(p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0) as i64);
        let created = p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
            .unwrap_or(0);
        (prio, created, p.metadata.name.clone())
    });
    let ts = format_ts(now);
    for pod in queue {
        let ns = namespace(pod).to_string();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Ok(stored) = store.get(PODS, &ns, &name).cloned() else {
            continue;
        };
        let decision = match volume_binding::claims_of(pod, store) {
            Ok(claims) => (decide_with_claims(pod, &nodes, &bound, &claims), claims),
            Err(why) => (
                Decision::Unschedulable(format!("0/{} nodes are available: {why}.", nodes.len())),
                Vec::new(),
            ),
        };
        match decision.0 {
            Decision::Bind(node) => {
                if let Some(n) = nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(&node))
                {
                    volume_binding::provision(store, &decision.1, n, &ts);
                }
                let mut updated = stored;
                updated["spec"]["nodeName"] = json!(node);
                set_condition(&mut updated, "PodScheduled", "True", None, None, &ts);
                if store
                    .replace(PODS, &ns, &name, updated.clone(), Write::Internal)
                    .is_ok()
                {
                    if let Ok(p) = serde_json::from_value::<Pod>(updated) {
                        bound.push(p);
                    }
                    report.pods_bound.push((format!("{ns}/{name}"), node));
                }
            }
            Decision::Unschedulable(message) => {
                let mut updated = stored.clone();
                set_condition(
                    &mut updated,
                    "PodScheduled",
                    "False",
                    Some("Unschedulable"),
                    Some(&message),
                    &ts,
                );
                if updated != stored
                    && store
                        .replace(PODS, &ns, &name, updated, Write::Internal)
                        .is_ok()
                {
                    report.pods_unschedulable.push(format!("{ns}/{name}"));
                }
            }
        }
    }
}

/// Sets a pod condition, keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(
    pod: &mut Value,
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
    now: &str,
) {
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    if !pod["status"].get("conditions").is_some_and(Value::is_array) {
        pod["status"]["conditions"] = json!([]);
    }
    let Some(conds) = pod["status"]["conditions"].as_array_mut() else {
        return;
    };
    let mut cond = json!({ "type": type_, "status": status, "lastProbeTime": null, "lastTransitionTime": now });
    if let Some(r) = reason {
        cond["reason"] = json!(r);
    }
    if let Some(m) = message {
        cond["message"] = json!(m);
    }
    match conds.iter_mut().find(|c| c["type"] == type_) {
        Some(existing) => {
            if existing["status"] == status {
                cond["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            *existing = cond;
        }
        None => conds.push(cond),
    }
}

#[cfg(test)]
mod tests;
