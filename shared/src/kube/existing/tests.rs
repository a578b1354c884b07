use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::*;

const GI: i64 = 1 << 30;

fn node(name: &str, patch: Value) -> Node {
    let mut base = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "karpenter.sh/nodepool": "general",
            "karpenter.sh/capacity-type": "spot",
            "topology.kubernetes.io/zone": "us-east-1a",
            "node.kubernetes.io/instance-type": "m6i.large",
            "nodewright.io/nodeclaim": format!("claim-{name}")
        }},
        "spec": {"providerID": "aws:///us-east-1a/i-0000000000000000a"},
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    });
    merge(&mut base, patch);
    serde_json::from_value(base).unwrap_or_else(|e| panic!("test node JSON: {e}"))
}

fn pod(name: &str, node: &str, cpu: &str, memory: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ]},
        "status": {"phase": "Running"}
    }))
    .unwrap_or_else(|e| panic!("test pod JSON: {e}"))
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

fn one(n: Node) -> ExistingNode {
    let mut out = existing_nodes(&[n], &HashMap::new(), &[]);
    assert_eq!(out.len(), 1);
    out.remove(0)
}

#[test]
fn a_ready_node_is_schedulable_with_its_labels_read() {
    let e = one(node("a", json!({})));
    assert!(e.schedulable);
    assert_eq!(e.name, "a");
    assert_eq!(e.nodepool.as_deref(), Some("general"));
    assert_eq!(e.zone, "us-east-1a");
    assert_eq!(e.instance_type, "m6i.large");
    assert_eq!(e.capacity_type, Some(CapacityType::Spot));
    assert_eq!(
        (e.allocatable.cpu, e.allocatable.memory, e.allocatable.pods),
        (1930, 7 * GI * 1000, 29_000)
    );
    assert_eq!((e.capacity.cpu, e.capacity.memory), (2000, 8 * GI * 1000));
}

#[test]
fn node_state_decides_whether_new_pods_may_go_there() {
    let disrupted =
        json!({"spec": {"taints": [{"key": "nodewright.io/disrupted", "effect": "NoSchedule"}]}});
    let cases: &[(&str, Value, bool)] = &[
        ("ready", json!({}), true),
        ("cordoned", json!({"spec": {"unschedulable": true}}), false),
        ("tainted for disruption", disrupted, false),
        (
            "being deleted",
            json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}}),
            false,
        ),
        (
            "ours, kubelet still starting",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}}),
            true,
        ),
        (
            "ours, no conditions yet",
            json!({"status": {"conditions": null}}),
            true,
        ),
        (
            "ours, kubelet stopped reporting",
            json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}}),
            false,
        ),
        (
            "not ours and not ready",
            json!({"metadata": {"labels": {"nodewright.io/nodeclaim": null}},
                   "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            false,
        ),
        (
            "not ours and ready",
            json!({"metadata": {"labels": {"nodewright.io/nodeclaim": null}}}),
            true,
        ),
    ];
    for (what, patch, want) in cases {
        assert_eq!(one(node("n", patch.clone())).schedulable, *want, "{what}");
    }
}

#[test]
fn a_starting_node_sheds_the_taints_it_loses_when_ready() {
    let e = one(node(
        "a",
        json!({
            "spec": {"taints": [
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
            ]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}
        }),
    ));
    assert_eq!(
        e.taints,
        vec![Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: TaintEffect::NoSchedule
        }]
    );
}

#[test]
fn bound_pods_fill_requested_and_topology_counts() {
    let mut bound = HashMap::new();
    bound.insert(
        "a".to_string(),
        vec![
            pod("web", "a", "500m", "1Gi"),
            pod("fluent-bit", "a", "100m", "200Mi"),
        ],
    );
    bound.insert(
        "elsewhere".to_string(),
        vec![pod("db", "elsewhere", "4", "16Gi")],
    );
    let nodes = existing_nodes(&[node("a", json!({}))], &bound, &[]);
    let e = &nodes[0];
    assert_eq!(e.requested.cpu, 600);
    assert_eq!(e.requested.memory, (GI + 200 * (1 << 20)) * 1000);
    assert_eq!(e.requested.pods, 2000);
    let apps: Vec<&str> = e.pods.iter().map(|(_, l)| l["app"].as_str()).collect();
    assert_eq!(apps, ["web", "fluent-bit"]);
    assert!(e.pods.iter().all(|(ns, _)| ns == "shop"));
}

#[test]
fn zone_falls_back_to_the_provider_id_and_unknown_capacity_types_are_none() {
    let e = one(node(
        "a",
        json!({"metadata": {"labels": {"topology.kubernetes.io/zone": null, "karpenter.sh/capacity-type": "reserved"}},
               "spec": {"providerID": "aws:///eu-west-1b/i-0123456789abcdef0"}}),
    ));
    assert_eq!(e.zone, "eu-west-1b");
    assert_eq!(e.capacity_type, None);
}

fn flight(instance_id: &str, nodeclaim: &str) -> InFlight {
    InFlight {
        instance_id: instance_id.into(),
        instance_type: "c6g.xlarge".into(),
        zone: "us-east-1b".into(),
        capacity_type: Some(CapacityType::OnDemand),
        nodepool: Some("arm".into()),
        nodeclaim: nodeclaim.into(),
        labels: BTreeMap::from([("team".to_string(), "search".to_string())]),
        taints: vec![],
        capacity: Resources {
            cpu: 4000,
            memory: 8 * GI * 1000,
            pods: 58_000,
            ..Default::default()
        },
        allocatable: Resources {
            cpu: 3920,
            memory: 7 * GI * 1000,
            pods: 58_000,
            ..Default::default()
        },
    }
}

#[test]
fn an_in_flight_instance_is_a_schedulable_node_named_by_its_nodeclaim() {
    let nodes = existing_nodes(
        &[],
        &HashMap::new(),
        &[flight("i-0aaaaaaaaaaaaaaaa", "nc-7f3a")],
    );
    assert_eq!(nodes.len(), 1);
    let e = &nodes[0];
    assert_eq!(e.name, "nodeclaim/nc-7f3a");
    assert!(e.schedulable);
    assert_eq!(e.requested, Resources::default());
    assert_eq!(e.allocatable.cpu, 3920);
    assert_eq!(e.nodepool.as_deref(), Some("arm"));
    let want: BTreeMap<String, String> = [
        ("team", "search"),
        ("topology.kubernetes.io/zone", "us-east-1b"),
        ("node.kubernetes.io/instance-type", "c6g.xlarge"),
        ("karpenter.sh/nodepool", "arm"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("nodewright.io/nodeclaim", "nc-7f3a"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(e.labels, want);
}

#[test]
fn an_in_flight_instance_whose_node_registered_is_not_counted_twice() {
    let registered_by_id = node(
        "a",
        json!({"spec": {"providerID": "aws:///us-east-1b/i-0aaaaaaaaaaaaaaaa"}}),
    );
    let registered_by_claim = node(
        "b",
        json!({"metadata": {"labels": {"nodewright.io/nodeclaim": "nc-2"}}}),
    );
    let in_flight = [
        flight("i-0aaaaaaaaaaaaaaaa", "nc-1"),
        flight("i-0bbbbbbbbbbbbbbbb", "nc-2"),
        flight("i-0cccccccccccccccc", "nc-3"),
    ];
    let names: Vec<String> = existing_nodes(
        &[registered_by_id, registered_by_claim],
        &HashMap::new(),
        &in_flight,
    )
    .into_iter()
    .map(|e| e.name)
    .collect();
    assert_eq!(names, ["a", "b", "nodeclaim/nc-3"]);
}

#[test]
fn bound_pods_required_anti_affinity_is_kept_for_symmetry_in_their_namespace() {
    let mut db = pod("db", "a", "1", "2Gi");
    db.spec.as_mut().unwrap().affinity = Some(
        serde_json::from_value(json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "topology.kubernetes.io/zone",
                 "labelSelector": {"matchLabels": {"app": "batch"}}}
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                 "labelSelector": {"matchLabels": {"app": "noisy"}}}}
            ]
        }}))
        .unwrap(),
    );
    let mut bound = HashMap::new();
    bound.insert("a".to_string(), vec![db, pod("web", "a", "500m", "1Gi")]);
    let nodes = existing_nodes(&[node("a", json!({}))], &bound, &[]);
    let anti = &nodes[0].anti_affinity;
    // Only the required term: Karpenter and kube-scheduler keep preferred ones one-way.
    assert_eq!(anti.len(), 1, "{anti:?}");
    assert_eq!(anti[0].key, crate::scheduling::TopologyKey::Zone);
    assert_eq!(anti[0].namespaces, vec!["shop".to_string()]);
    let batch: BTreeMap<String, String> = [("app".to_string(), "batch".to_string())].into();
    assert!(anti[0].selector.matches(&batch));
}
