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

/// A store with nodes `a-node` (zone a) and `b-node` (zone b), a claim `data` bound to a
/// volume in zone b, a claim `fresh` of a class waiting for its first consumer in zone a or
/// b, and a claim `now` of an Immediate class never bound.
fn volume_world() -> Store {
    let mut store = Store::new();
    let now = "2026-11-28T00:00:00Z";
    let mut put = |r: usize, ns: &str, v: Value| {
        store.create(r, ns, v, now, Write::Internal).unwrap();
    };
    use super::super::resources::{CLAIMS, STORAGE_CLASSES, VOLUMES};
    for (name, zone) in [("a-node", "a"), ("b-node", "b")] {
        let mut n = serde_json::to_value(node(name, "4", json!({}))).unwrap();
        n["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!(zone);
        put(NODES, "", n);
    }
    put(
        VOLUMES,
        "",
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-b"},
               "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                   {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}}}),
    );
    put(
        STORAGE_CLASSES,
        "",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
               "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
               "allowedTopologies": [{"matchLabelExpressions": [
                   {"key": "topology.kubernetes.io/zone", "values": ["a"]}]}]}),
    );
    put(
        STORAGE_CLASSES,
        "",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "eager"},
               "provisioner": "ebs.csi.aws.com"}),
    );
    for (name, spec) in [
        ("data", json!({"volumeName": "pv-b"})),
        ("fresh", json!({"storageClassName": "gp3"})),
        ("now", json!({"storageClassName": "eager"})),
    ] {
        put(
            CLAIMS,
            "default",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
        );
    }
    store
}

fn mounting(claim: &str) -> Value {
    json!({"spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}})
}

#[test]
fn claims_hold_a_pod_to_its_volumes_zone_and_a_waiting_claim_is_provisioned_where_it_lands() {
    let mut store = volume_world();
    let table = [
        ("data", Ok("b-node")),
        ("fresh", Ok("a-node")),
        (
            "now",
            Err("pod has unbound immediate PersistentVolumeClaims"),
        ),
        (
            "missing",
            Err("persistentvolumeclaim \"missing\" not found"),
        ),
    ];
    for (claim, want) in table {
        let p = pod(claim, "500m", mounting(claim));
        let claims = volume_binding::claims_of(&p, &store);
        let nodes: Vec<Node> = store
            .list(NODES, None)
            .map(|v| serde_json::from_value(v.clone()).unwrap())
            .collect();
        match (claims, want) {
            (Ok(c), Ok(node)) => {
                assert_eq!(
                    decide_with_claims(&p, &nodes, &[], &c),
                    bind(node),
                    "{claim}"
                );
                let other = nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() != Some(node));
                let conflict = volume_binding::admits(&c, other.unwrap()).unwrap_err();
                assert!(conflict.contains("volume"), "{claim}: {conflict}");
            }
            (Err(got), Err(message)) => assert_eq!(got, message, "{claim}"),
            (got, want) => panic!("{claim}: {got:?}, expected {want:?}"),
        }
    }

    // Scheduled for real, the waiting claim gets a volume in zone a and is bound to it.
    let p = serde_json::to_value(pod("fresh", "500m", mounting("fresh"))).unwrap();
    store
        .create(PODS, "default", p, "2026-11-28T00:00:00Z", Write::Internal)
        .unwrap();
    let mut report = StepReport::default();
    schedule_pending(
        &mut store,
        Timestamp::UNIX_EPOCH,
        std::time::Duration::ZERO,
        &mut report,
    );
    assert_eq!(
        report.pods_bound,
        vec![("default/fresh".to_string(), "a-node".to_string())]
    );
    let claim = store
        .get(super::super::resources::CLAIMS, "default", "fresh")
        .unwrap();
    let volume = claim["spec"]["volumeName"].as_str().unwrap();
    let pv = store
        .get(super::super::resources::VOLUMES, "", volume)
        .unwrap();
    assert_eq!(
        pv.pointer("/spec/nodeAffinity/required/nodeSelectorTerms/0/matchExpressions/0/values/0"),
        Some(&json!("a"))
    );
}
