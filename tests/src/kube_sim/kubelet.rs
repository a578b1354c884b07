//! The kubelet and the cloud node lifecycle, simulated: running EC2 instances register as
//! Nodes after a boot delay and become Ready; instances that shut down leave NotReady nodes
//! that are then deleted with their pods; bound pods start.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Taint;
use serde_json::{Value, json};

use super::clock::{elapsed, format_ts, parse_ts};
use super::cloud::{InstanceCapacity, InstanceState, NodeCapacity, SimInstance};
use super::finalizers;
use super::podspec::{NOT_READY, UNREACHABLE};
use super::resources::{NODES, PODS};
use super::scheduler::set_condition;
use super::store::{Store, Write};
use super::userdata::parse_user_data;
use super::{SimConfig, StepReport};

/// Marks nodes this simulation registered, so that only those are removed when their
/// instance disappears from the cloud view.
const MANAGED: &str = "sim.nodewright.io/registered-by-kubelet-sim";

fn instance_id_of(node: &Value) -> Option<String> {
    let pid = node.pointer("/spec/providerID")?.as_str()?;
    pid.strip_prefix("aws:///")?
        .rsplit('/')
        .next()
        .map(str::to_string)
}

pub(super) fn ready_status(node: &Value) -> Option<String> {
    node.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

fn ready_since(node: &Value) -> Option<Timestamp> {
    let c = node
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    parse_ts(c["lastTransitionTime"].as_str())
}

/// Registers, readies, fails and removes nodes to match the instances.
pub fn sync_nodes(
    store: &mut Store,
    cfg: &SimConfig,
    capacity: &dyn InstanceCapacity,
    instances: &[SimInstance],
    now: Timestamp,
    report: &mut StepReport,
) {
    let ts = format_ts(now);
    let nodes: Vec<Value> = store.list(NODES, None).cloned().collect();
    let by_instance: BTreeMap<String, &Value> = nodes
        .iter()
        .filter_map(|n| Some((instance_id_of(n)?, n)))
        .collect();
    for inst in instances {
        match by_instance.get(&inst.instance_id) {
            None if inst.state == InstanceState::Running
                && elapsed(inst.launch_time, cfg.boot_delay, now) =>
            {
                let Some(cap) = capacity.capacity(&inst.instance_type) else {
                    report.errors.push(format!(
                        "{}: no capacity known for instance type {}",
                        inst.instance_id, inst.instance_type
                    ));
                    continue;
                };
                let node = new_node(inst, &cap, &cfg.region, &ts);
                let name = node["metadata"]["name"].as_str().unwrap_or("").to_string();
                match store.create(NODES, "", node, &ts, Write::Internal) {
                    Ok(_) => report.nodes_registered.push(name),
                    Err(e) => report.errors.push(format!("registering node {name}: {e}")),
                }
            }
            None => {}
            Some(node) => {
                let name = node["metadata"]["name"].as_str().unwrap_or("").to_string();
                match inst.state {
                    InstanceState::Running | InstanceState::Pending => {
                        let registered = parse_ts(
                            node.pointer("/metadata/creationTimestamp")
                                .and_then(Value::as_str),
                        );
                        if ready_status(node).as_deref() == Some("False")
                            && registered.is_some_and(|t| elapsed(t, cfg.ready_delay, now))
                        {
                            let mut n = (*node).clone();
                            set_ready(&mut n, &ts);
                            if store.replace(NODES, "", &name, n, Write::Internal).is_ok() {
                                report.nodes_ready.push(name);
                            }
                        }
                    }
                    state => {
                        lose_node(store, node, state, cfg.node_removal_delay, now, &ts, report)
                    }
                }
            }
        }
    }
    // Nodes this sim registered whose instance the cloud no longer lists are gone too.
    for node in &nodes {
        let managed = node
            .pointer(&format!(
                "/metadata/annotations/{}",
                MANAGED.replace('/', "~1")
            ))
            .is_some();
        let listed =
            instance_id_of(node).is_some_and(|id| instances.iter().any(|i| i.instance_id == id));
        if managed && !listed {
            lose_node(
                store,
                node,
                InstanceState::Terminated,
                cfg.node_removal_delay,
                now,
                &ts,
                report,
            );
        }
    }
}

/// An instance that stopped or went away: the node goes NotReady (Unknown, unreachable
/// taints) and, once the instance is terminated for `removal_delay`, is deleted with its pods.
fn lose_node(
    store: &mut Store,
    node: &Value,
    state: InstanceState,
    removal_delay: Duration,
    now: Timestamp,
    ts: &str,
    report: &mut StepReport,
) {
    let name = node["metadata"]["name"].as_str().unwrap_or("").to_string();
    if ready_status(node).as_deref() != Some("Unknown") {
        let mut n = node.clone();
        mark_unreachable(&mut n, ts);
        if store.replace(NODES, "", &name, n, Write::Internal).is_ok() {
            report.nodes_not_ready.push(name);
        }
        return;
    }
    let gone = matches!(
        state,
        InstanceState::ShuttingDown | InstanceState::Terminated
    );
    if gone
        && ready_since(node).is_some_and(|t| elapsed(t, removal_delay, now))
        // With the garbage collector: the node's Lease goes with it. A finalizer keeps the
        // Node, marked, and its pods with it, until its owner removes the finalizer.
        && matches!(
            finalizers::delete(store, NODES, "", &name, ts, false),
            Ok(finalizers::Deletion::Gone(_))
        )
    {
        // Pod GC deletes the pods of a node that no longer exists.
        let orphans: Vec<(String, String)> = store
            .list(PODS, None)
            .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(name.as_str()))
            .map(|p| {
                let s = |k: &str| {
                    p.pointer(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                (s("/metadata/namespace"), s("/metadata/name"))
            })
            .collect();
        for (ns, pod) in orphans {
            if store.delete(PODS, &ns, &pod).is_ok() {
                report.pods_deleted.push(format!("{ns}/{pod}"));
            }
        }
        report.nodes_deleted.push(name);
    }
}

/// What the node lifecycle controller writes once a kubelet stops posting status: Ready
/// Unknown and the unreachable taints.
pub(super) fn mark_unreachable(node: &mut Value, ts: &str) {
    set_condition(
        node,
        "Ready",
        "Unknown",
        Some("NodeStatusUnknown"),
        Some("Kubelet stopped posting node status."),
        ts,
    );
    let mut taints: Vec<Value> = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    taints.retain(|t| t["key"] != NOT_READY && t["key"] != UNREACHABLE);
    taints.push(json!({"key": UNREACHABLE, "effect": "NoSchedule", "timeAdded": ts}));
    taints.push(json!({"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": ts}));
    node["spec"]["taints"] = json!(taints);
}

fn set_ready(node: &mut Value, ts: &str) {
    set_condition(
        node,
        "Ready",
        "True",
        Some("KubeletReady"),
        Some("kubelet is posting ready status"),
        ts,
    );
    if let Some(taints) = node
        .pointer_mut("/spec/taints")
        .and_then(Value::as_array_mut)
    {
        taints.retain(|t| t["key"] != NOT_READY);
    }
}

fn new_node(inst: &SimInstance, cap: &NodeCapacity, region: &str, ts: &str) -> Value {
    let flags = inst
        .user_data
        .as_deref()
        .map(parse_user_data)
        .unwrap_or_default();
    let name = if inst.private_dns_name.is_empty() {
        inst.instance_id.clone()
    } else {
        inst.private_dns_name.clone()
    };
    let region = if inst.zone.len() > 1 && inst.zone.ends_with(|c: char| c.is_ascii_lowercase()) {
        inst.zone[..inst.zone.len() - 1].to_string()
    } else {
        region.to_string()
    };
    let arch = cap.arch.label();
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/arch", arch),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/hostname", name.as_str()),
        ("beta.kubernetes.io/arch", arch),
        ("beta.kubernetes.io/os", "linux"),
        (
            "node.kubernetes.io/instance-type",
            inst.instance_type.as_str(),
        ),
        (
            "beta.kubernetes.io/instance-type",
            inst.instance_type.as_str(),
        ),
        ("topology.kubernetes.io/zone", inst.zone.as_str()),
        ("failure-domain.beta.kubernetes.io/zone", inst.zone.as_str()),
        ("topology.kubernetes.io/region", region.as_str()),
        ("failure-domain.beta.kubernetes.io/region", region.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    labels.extend(flags.labels);
    let mut taints: Vec<Taint> = flags.taints;
    taints.push(Taint {
        key: NOT_READY.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    });
    let pods = flags.max_pods.unwrap_or(cap.pods);
    let mut capacity = json!({
        "cpu": format!("{}m", cap.cpu_milli),
        "memory": format!("{}Ki", cap.memory_bytes / 1024),
        "pods": pods.to_string(),
        "ephemeral-storage": "20959212Ki",
    });
    let mut allocatable = json!({
        "cpu": format!("{}m", (cap.cpu_milli - cap.reserved_cpu_milli).max(0)),
        "memory": format!("{}Ki", (cap.memory_bytes - cap.reserved_memory_bytes).max(0) / 1024),
        "pods": pods.to_string(),
        "ephemeral-storage": "18242267924",
    });
    for (k, v) in &cap.extended {
        capacity[k] = json!(v.to_string());
        allocatable[k] = json!(v.to_string());
    }
    let ip = inst.private_ip.clone().unwrap_or_default();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                MANAGED: "true",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "alpha.kubernetes.io/provided-node-ip": ip,
            },
        },
        "spec": {
            "providerID": format!("aws:///{}/{}", inst.zone, inst.instance_id),
            "taints": taints,
        },
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "lastHeartbeatTime": ts, "lastTransitionTime": ts},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "lastHeartbeatTime": ts, "lastTransitionTime": ts},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "lastHeartbeatTime": ts, "lastTransitionTime": ts},
                {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                 "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
                 "lastHeartbeatTime": ts, "lastTransitionTime": ts},
            ],
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": arch, "operatingSystem": "linux", "osImage": "Amazon Linux 2023",
                "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.35.0-eks", "kubeProxyVersion": "v1.35.0-eks",
                "machineID": inst.instance_id, "systemUUID": inst.instance_id, "bootID": inst.instance_id,
            },
        },
    })
}

/// Starts pods bound to Ready nodes once `start_delay` has passed since binding.
pub fn start_pods(
    store: &mut Store,
    now: Timestamp,
    start_delay: Duration,
    report: &mut StepReport,
) {
    let ts = format_ts(now);
    let ready_nodes: BTreeMap<String, String> = store
        .list(NODES, None)
        .filter(|n| ready_status(n).as_deref() == Some("True"))
        .filter_map(|n| {
            let name = n.pointer("/metadata/name")?.as_str()?.to_string();
            let ip = n
                .pointer("/status/addresses")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
                .and_then(|a| a["address"].as_str())
                .unwrap_or("")
                .to_string();
            Some((name, ip))
        })
        .collect();
    let starting: Vec<Value> = store
        .list(PODS, None)
        .filter(|p| {
            p.pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("Pending")
                == "Pending"
        })
        .filter(|p| {
            p.pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| ready_nodes.contains_key(n))
        })
        .cloned()
        .collect();
    for mut pod in starting {
        let scheduled = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
            .and_then(|c| parse_ts(c["lastTransitionTime"].as_str()));
        if !scheduled.is_none_or(|t| elapsed(t, start_delay, now)) {
            continue;
        }
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("").to_string();
        let statuses: Vec<Value> = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": true, "started": true,
                       "restartCount": 0, "state": {"running": {"startedAt": ts}}})
            })
            .collect();
        pod["status"]["phase"] = json!("Running");
        pod["status"]["startTime"] = json!(ts);
        pod["status"]["hostIP"] = json!(ready_nodes.get(&node).cloned().unwrap_or_default());
        pod["status"]["containerStatuses"] = json!(statuses);
        for c in [
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "Ready",
        ] {
            set_condition(&mut pod, c, "True", None, None, &ts);
        }
        set_condition(&mut pod, "PodScheduled", "True", None, None, &ts);
        let s = |k: &str| {
            pod.pointer(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (ns, name) = (s("/metadata/namespace"), s("/metadata/name"));
        if store
            .replace(PODS, &ns, &name, pod, Write::Internal)
            .is_ok()
        {
            report.pods_started.push(format!("{ns}/{name}"));
        }
    }
}
