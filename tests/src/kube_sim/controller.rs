//! The workload controllers, simulated: Deployment → ReplicaSet → pods, DaemonSets, pod
//! garbage collection for deleted nodes, and the disruption controller's
//! PodDisruptionBudget status.
//!
//! A Deployment owns one ReplicaSet `<deployment>-<pod-template-hash>`; a changed template
//! makes a new ReplicaSet and scales the old one to zero at once (no rolling update
//! surge/unavailability accounting). ReplicaSet pods are `<replicaset>-<random5>`, created
//! Pending for the scheduler; scale-down deletes unbound, then not-running, then not-ready,
//! then the newest pods first (upstream `ActivePodsWithRanks`, without its log-scale
//! buckets). DaemonSet pods are created already bound to each Ready node that matches the
//! template's node selection and tolerates its taints (upstream lets the scheduler bind them
//! via a `metadata.name` node affinity; the result is the same node). Not simulated:
//! StatefulSets, Jobs, minReadySeconds, progress deadlines, DaemonSet rolling updates.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

use super::StepReport;
use super::clock::format_ts;
use super::eviction::{self, is_ready};
use super::podspec::{is_active, matches_node_selection, node_name, untolerated};
use super::resources::{DAEMONSETS, DEPLOYMENTS, NODES, PDBS, PODS, REPLICASETS};
use super::scheduler::set_condition;
use super::store::{Store, Write};
use super::subresources::controller_scale;

pub fn reconcile(store: &mut Store, now: Timestamp, report: &mut StepReport) {
    let ts = format_ts(now);
    collect_pods_of_deleted_nodes(store, report);
    deployments(store, &ts);
    replicasets(store, &ts, report);
    deployment_status(store);
    daemonsets(store, &ts, report);
    disruption_budgets(store);
}

fn s(v: &Value, p: &str) -> String {
    v.pointer(p)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn owner_ref(owner: &Value, kind: &str) -> Value {
    json!({"apiVersion": owner["apiVersion"], "kind": kind, "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true})
}

fn controlled_by(pod: &Value, uid: &str) -> bool {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|os| {
            os.iter()
                .any(|o| o["uid"] == uid && o["controller"] == true)
        })
}

/// FNV-1a of the template, spelled with the name alphabet (like `pod-template-hash`).
fn template_hash(template: &Value) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in template.to_string().bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = u64::from(h);
    (0..10)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
            n /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn collect_pods_of_deleted_nodes(store: &mut Store, report: &mut StepReport) {
    let nodes: Vec<String> = store
        .list(NODES, None)
        .map(|n| s(n, "/metadata/name"))
        .collect();
    let orphans: Vec<(String, String)> = store
        .list(PODS, None)
        .filter(|p| {
            let n = s(p, "/spec/nodeName");
            !n.is_empty() && !nodes.contains(&n)
        })
        .map(|p| (s(p, "/metadata/namespace"), s(p, "/metadata/name")))
        .collect();
    for (ns, name) in orphans {
        if store.delete(PODS, &ns, &name).is_ok() {
            report.pods_deleted.push(format!("{ns}/{name}"));
        }
    }
}

fn deployments(store: &mut Store, ts: &str) {
    let deploys: Vec<Value> = store.list(DEPLOYMENTS, None).cloned().collect();
    for d in deploys {
        let (ns, name, uid) = (
            s(&d, "/metadata/namespace"),
            s(&d, "/metadata/name"),
            s(&d, "/metadata/uid"),
        );
        let replicas = d
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let hash = template_hash(&d["spec"]["template"]);
        let rs_name = format!("{name}-{hash}");
        let owned: Vec<Value> = store
            .list(REPLICASETS, Some(&ns))
            .filter(|r| controlled_by(r, &uid))
            .cloned()
            .collect();
        for old in owned.iter().filter(|r| s(r, "/metadata/name") != rs_name) {
            if old.pointer("/spec/replicas").and_then(Value::as_i64) != Some(0) {
                let mut o = old.clone();
                o["spec"]["replicas"] = json!(0);
                let _ = store.replace(
                    REPLICASETS,
                    &ns,
                    &s(old, "/metadata/name"),
                    o,
                    Write::Internal,
                );
            }
        }
        match owned.iter().find(|r| s(r, "/metadata/name") == rs_name) {
            Some(rs) if rs.pointer("/spec/replicas").and_then(Value::as_i64) != Some(replicas) => {
                let mut r = rs.clone();
                r["spec"]["replicas"] = json!(replicas);
                let _ = store.replace(REPLICASETS, &ns, &rs_name, r, Write::Internal);
            }
            Some(_) => {}
            None => {
                let mut template = d["spec"]["template"].clone();
                template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
                let mut selector = d["spec"]["selector"].clone();
                selector["matchLabels"]["pod-template-hash"] = json!(hash);
                let rs = json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": rs_name, "namespace": ns, "labels": template["metadata"]["labels"],
                                 "ownerReferences": [owner_ref(&d, "Deployment")]},
                    "spec": {"replicas": replicas, "selector": selector, "template": template},
                });
                let _ = store.create(REPLICASETS, &ns, rs, ts, Write::Internal);
            }
        }
    }
}

/// Deployment status from the current ReplicaSet's pods (after the ReplicaSets acted).
fn deployment_status(store: &mut Store) {
    let deploys: Vec<Value> = store.list(DEPLOYMENTS, None).cloned().collect();
    for d in deploys {
        let (ns, name) = (s(&d, "/metadata/namespace"), s(&d, "/metadata/name"));
        let replicas = d
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let rs_name = format!("{name}-{}", template_hash(&d["spec"]["template"]));
        let rs_uid = store
            .get(REPLICASETS, &ns, &rs_name)
            .map(|r| s(r, "/metadata/uid"))
            .unwrap_or_default();
        let pods: Vec<Pod> = owned_pods(store, &ns, &rs_uid);
        let ready = pods.iter().filter(|p| is_ready(p)).count() as i64;
        let status = json!({"observedGeneration": d.pointer("/metadata/generation"), "replicas": pods.len(),
                            "updatedReplicas": pods.len(), "readyReplicas": ready, "availableReplicas": ready,
                            "unavailableReplicas": (replicas - ready).max(0)});
        update_status(store, DEPLOYMENTS, &d, status);
    }
}

/// The disruption controller (k8s.io/kubernetes pkg/controller/disruption): each budget's
/// status from the pods it selects, computed as the eviction check computes it, so a
/// client that reads `status.disruptionsAllowed` (the sweeper's plan, `kubectl get pdb`)
/// sees what an eviction would be answered. Written once per step, after the workload
/// controllers; the eviction check itself never reads it (see `eviction.rs`). Not
/// simulated: `disruptedPods` and the `DisruptionAllowed` condition.
fn disruption_budgets(store: &mut Store) {
    let budgets: Vec<Value> = store.list(PDBS, None).cloned().collect();
    for v in budgets {
        let Ok(pdb) = serde_json::from_value::<PodDisruptionBudget>(v.clone()) else {
            continue;
        };
        let ns = s(&v, "/metadata/namespace");
        let pods: Vec<Pod> = store
            .list(PODS, Some(&ns))
            .filter_map(|p| serde_json::from_value(p.clone()).ok())
            .collect();
        let selected: Vec<&Pod> = pods.iter().filter(|p| eviction::selects(&pdb, p)).collect();
        let scale = |p: &Pod| controller_scale(store, p);
        // A budget the controller cannot compute (a bad percentage) keeps its old status.
        let Ok(st) = eviction::budget_status(&pdb, &selected, &scale) else {
            continue;
        };
        let status = json!({
            "observedGeneration": v.pointer("/metadata/generation"),
            "expectedPods": st.expected_pods,
            "desiredHealthy": st.desired_healthy,
            "currentHealthy": st.current_healthy,
            "disruptionsAllowed": st.disruptions_allowed(),
        });
        update_status(store, PDBS, &v, status);
    }
}

fn owned_pods(store: &Store, ns: &str, uid: &str) -> Vec<Pod> {
    store
        .list(PODS, Some(ns))
        .filter(|p| controlled_by(p, uid))
        .filter_map(|p| serde_json::from_value::<Pod>(p.clone()).ok())
        .filter(|p| is_active(p) && p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn update_status(store: &mut Store, res: usize, obj: &Value, status: Value) {
    if obj.get("status") != Some(&status) {
        let mut o = obj.clone();
        o["status"] = status;
        let _ = store.replace(
            res,
            &s(obj, "/metadata/namespace"),
            &s(obj, "/metadata/name"),
            o,
            Write::Internal,
        );
    }
}

fn new_pod(store: &mut Store, owner: &Value, kind: &str, template: &Value) -> Value {
    let name = format!("{}-{}", s(owner, "/metadata/name"), store.random_suffix(5));
    let mut meta = template.get("metadata").cloned().unwrap_or(json!({}));
    meta["name"] = json!(name);
    meta["namespace"] = owner["metadata"]["namespace"].clone();
    meta["ownerReferences"] = json!([owner_ref(owner, kind)]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec").cloned().unwrap_or(json!({}))})
}

fn replicasets(store: &mut Store, ts: &str, report: &mut StepReport) {
    let sets: Vec<Value> = store.list(REPLICASETS, None).cloned().collect();
    for rs in sets {
        let Ok(typed) = serde_json::from_value::<ReplicaSet>(rs.clone()) else {
            continue;
        };
        let (ns, uid) = (s(&rs, "/metadata/namespace"), s(&rs, "/metadata/uid"));
        let want = typed
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1)
            .max(0) as usize;
        let mut pods = owned_pods(store, &ns, &uid);
        if pods.len() < want {
            for _ in pods.len()..want {
                let pod = new_pod(store, &rs, "ReplicaSet", &rs["spec"]["template"]);
                if let Ok(created) = store.create(PODS, &ns, pod, ts, Write::Main) {
                    report
                        .pods_created
                        .push(format!("{ns}/{}", s(&created, "/metadata/name")));
                }
            }
        } else if pods.len() > want {
            // Least valuable first: unbound, not running, not ready, newest.
            pods.sort_by_key(|p| {
                let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                let created = p
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.as_second())
                    .unwrap_or(0);
                (node_name(p).is_some(), running, is_ready(p), -created)
            });
            for p in &pods[..pods.len() - want] {
                let name = p.metadata.name.clone().unwrap_or_default();
                if store.delete(PODS, &ns, &name).is_ok() {
                    report.pods_deleted.push(format!("{ns}/{name}"));
                }
            }
        }
        let pods = owned_pods(store, &ns, &uid);
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        let status = json!({"replicas": pods.len(), "fullyLabeledReplicas": pods.len(), "readyReplicas": ready,
                            "availableReplicas": ready, "observedGeneration": rs.pointer("/metadata/generation")});
        update_status(store, REPLICASETS, &rs, status);
    }
}

/// Tolerations the DaemonSet controller adds to every daemon pod.
fn daemon_tolerations() -> Vec<Toleration> {
    [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    .into_iter()
    .map(|(k, e)| Toleration {
        key: Some(k.into()),
        operator: Some("Exists".into()),
        effect: Some(e.into()),
        ..Default::default()
    })
    .collect()
}

fn daemonsets(store: &mut Store, ts: &str, report: &mut StepReport) {
    let nodes: Vec<Node> = store
        .list(NODES, None)
        .filter_map(|n| serde_json::from_value::<Node>(n.clone()).ok())
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .collect();
    let sets: Vec<Value> = store.list(DAEMONSETS, None).cloned().collect();
    for ds in sets {
        let Ok(typed) = serde_json::from_value::<DaemonSet>(ds.clone()) else {
            continue;
        };
        let (ns, uid) = (s(&ds, "/metadata/namespace"), s(&ds, "/metadata/uid"));
        let template = typed
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let probe = Pod {
            metadata: template.metadata.clone().unwrap_or_default(),
            spec: template.spec.clone(),
            status: None,
        };
        let mut tols = probe
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.clone())
            .unwrap_or_default();
        tols.extend(daemon_tolerations());
        let wanted: BTreeMap<String, ()> = nodes
            .iter()
            .filter(|n| matches_node_selection(&probe, n))
            .filter(|n| {
                let taints: Vec<_> = n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default();
                let hard: Vec<_> = taints
                    .into_iter()
                    .filter(|t| t.effect != "PreferNoSchedule")
                    .collect();
                untolerated(&hard, &tols).is_none()
            })
            .filter_map(|n| n.metadata.name.clone().map(|name| (name, ())))
            .collect();
        let pods = owned_pods(store, &ns, &uid);
        let mut covered: BTreeMap<String, ()> = BTreeMap::new();
        for p in &pods {
            let node = node_name(p).unwrap_or("").to_string();
            let name = p.metadata.name.clone().unwrap_or_default();
            if !wanted.contains_key(&node) || covered.contains_key(&node) {
                if store.delete(PODS, &ns, &name).is_ok() {
                    report.pods_deleted.push(format!("{ns}/{name}"));
                }
            } else {
                covered.insert(node, ());
            }
        }
        for node in wanted.keys().filter(|n| !covered.contains_key(*n)) {
            let mut pod = new_pod(store, &ds, "DaemonSet", &ds["spec"]["template"]);
            pod["spec"]["nodeName"] = json!(node);
            pod["spec"]["tolerations"] = serde_json::to_value(&tols).unwrap_or(json!([]));
            if let Ok(created) = store.create(PODS, &ns, pod, ts, Write::Main) {
                let mut bound = created.clone();
                set_condition(&mut bound, "PodScheduled", "True", None, None, ts);
                let name = s(&created, "/metadata/name");
                let _ = store.replace(PODS, &ns, &name, bound, Write::Internal);
                report.pods_created.push(format!("{ns}/{name}"));
                report
                    .pods_bound
                    .push((format!("{ns}/{name}"), node.clone()));
            }
        }
        let pods = owned_pods(store, &ns, &uid);
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        let status = json!({"desiredNumberScheduled": wanted.len(), "currentNumberScheduled": pods.len(),
                            "numberReady": ready, "numberAvailable": ready, "updatedNumberScheduled": pods.len(),
                            "numberMisscheduled": 0, "observedGeneration": ds.pointer("/metadata/generation")});
        update_status(store, DAEMONSETS, &ds, status);
    }
}
