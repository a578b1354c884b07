//! Table tests of the scheduler's placement decisions.

use super::*;
use serde_json::json;

fn node(name: &str, cpu: &str, extra: Value) -> Node {
    let mut v = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "a"}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "10"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    });
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap_or_default()
}

fn pod(name: &str, cpu: &str, extra: Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}
    });
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap_or_default()
}

fn on(p: Pod, node: &str) -> Pod {
    let mut p = p;
    if let Some(s) = p.spec.as_mut() {
        s.node_name = Some(node.to_string());
    }
    p
}

fn bind(n: &str) -> Decision {
    Decision::Bind(n.to_string())
}

fn unsched(m: &str) -> Decision {
    Decision::Unschedulable(m.to_string())
}

#[test]
fn pod_goes_to_the_fitting_node_with_most_free_cpu() {
    let nodes = [node("small", "1", json!({})), node("big", "4", json!({}))];
    assert_eq!(
        decide(&pod("p", "500m", json!({})), &nodes, &[]),
        bind("big")
    );
    // With 3.8 cpu used on big, small has more room left.
    let busy = [on(pod("q", "3800m", json!({})), "big")];
    assert_eq!(
        decide(&pod("p", "100m", json!({})), &nodes, &busy),
        bind("small")
    );
}

#[test]
fn unschedulable_pod_gets_kube_scheduler_message() {
    let nodes = [
        node("a", "1", json!({})),
        node("b", "1", json!({})),
        node(
            "c",
            "4",
            json!({"spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}}),
        ),
    ];
    let cases = [
        (
            pod("p", "2", json!({})),
            "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: yes}, 2 Insufficient cpu.",
        ),
        (
            pod(
                "p",
                "100m",
                json!({"spec": {"nodeSelector": {"team": "x"}}}),
            ),
            "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: yes}, 2 node(s) didn't match Pod's node affinity/selector.",
        ),
    ];
    for (p, msg) in cases {
        assert_eq!(decide(&p, &nodes, &[]), unsched(msg));
    }
    assert_eq!(
        decide(&pod("p", "1", json!({})), &[], &[]),
        unsched("no nodes available to schedule pods")
    );
}

#[test]
fn taints_cordons_and_readiness_keep_pods_away_unless_tolerated() {
    let tainted = node(
        "t",
        "2",
        json!({"spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]}}),
    );
    let cordoned = node("c", "2", json!({"spec": {"unschedulable": true}}));
    let not_ready = node(
        "n",
        "2",
        json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    );
    let tolerant = pod(
        "p",
        "100m",
        json!({"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}),
    );
    let cases = [
        (
            vec![tainted.clone()],
            pod("p", "100m", json!({})),
            unsched("0/1 nodes are available: 1 node(s) had untolerated taint {gpu: }."),
        ),
        (vec![tainted], tolerant, bind("t")),
        (
            vec![cordoned],
            pod("p", "100m", json!({})),
            unsched("0/1 nodes are available: 1 node(s) were unschedulable."),
        ),
        (
            vec![not_ready],
            pod("p", "100m", json!({})),
            unsched(
                "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }.",
            ),
        ),
    ];
    for (nodes, p, want) in cases {
        assert_eq!(decide(&p, &nodes, &[]), want);
    }
}

#[test]
fn required_node_affinity_selects_by_label() {
    let nodes = [
        node("a", "2", json!({"metadata": {"labels": {"gen": "5"}}})),
        node("b", "2", json!({"metadata": {"labels": {"gen": "7"}}})),
    ];
    let affinity = |op: &str, v: &str| {
        pod(
            "p",
            "100m",
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": op, "values": [v]}]}]}}}}}),
        )
    };
    assert_eq!(decide(&affinity("Gt", "6"), &nodes, &[]), bind("b"));
    assert_eq!(decide(&affinity("Lt", "6"), &nodes, &[]), bind("a"));
    assert_eq!(decide(&affinity("NotIn", "5"), &nodes, &[]), bind("b"));
}

#[test]
fn pods_count_against_the_max_pods_of_a_node() {
    let nodes = [node(
        "a",
        "2",
        json!({"status": {"allocatable": {"pods": "1"}}}),
    )];
    let existing = [on(pod("q", "10m", json!({})), "a")];
    assert_eq!(
        decide(&pod("p", "10m", json!({})), &nodes, &existing),
        unsched("0/1 nodes are available: 1 Too many pods.")
    );
}

#[test]
fn required_anti_affinity_on_hostname_puts_replicas_on_different_nodes() {
    let nodes = [node("a", "4", json!({})), node("b", "2", json!({}))];
    let anti = json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        [{"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}}}});
    let first = on(pod("p1", "100m", anti.clone()), "a");
    assert_eq!(
        decide(
            &pod("p2", "100m", anti.clone()),
            &nodes,
            std::slice::from_ref(&first)
        ),
        bind("b")
    );
    let second = on(pod("p2", "100m", anti.clone()), "b");
    assert_eq!(
        decide(&pod("p3", "100m", anti), &nodes, &[first.clone(), second]),
        unsched("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.")
    );
    // A pod without its own anti-affinity is still kept off a node by the existing pod's.
    assert_eq!(
        decide(&pod("p4", "100m", json!({})), &nodes[..1], &[first]),
        unsched(
            "0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules."
        )
    );
}

#[test]
fn zone_topology_spread_fills_the_emptier_zone() {
    let nodes = [
        node(
            "a1",
            "4",
            json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "a"}}}),
        ),
        node(
            "b1",
            "1",
            json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "b"}}}),
        ),
    ];
    let spread = json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}});
    let in_a = [on(pod("x", "100m", json!({})), "a1")];
    // a1 has more free cpu, but zone a already has one more web pod.
    assert_eq!(decide(&pod("p", "100m", spread), &nodes, &in_a), bind("b1"));
}
