//! Volume topology, case by case from Karpenter's scheduling suite ("Volume Topology
//! Requirements", pkg/controllers/provisioning/scheduling/suite_test.go) and its
//! consolidation case "can replace node with a local PV (ignoring hostname affinity)".

use serde_json::{Value, json};

use super::super::testkit::*;
use super::super::{PodDemand, Snapshot, TopologyKey, solve};
use super::*;
use crate::api::labels::ZONE;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];

fn pod(volumes: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "db-0", "namespace": "data", "labels": {"app": "db"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                 "volumes": volumes}
    }))
    .unwrap()
}

fn claim(name: &str, spec: Value, status: Value) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "data"}, "spec": spec, "status": status
    }))
    .unwrap()
}

fn bound(name: &str, volume: &str) -> PersistentVolumeClaim {
    claim(
        name,
        json!({"volumeName": volume}),
        json!({"phase": "Bound"}),
    )
}

fn unbound(name: &str, class: &str) -> PersistentVolumeClaim {
    claim(
        name,
        json!({"storageClassName": class}),
        json!({"phase": "Pending"}),
    )
}

fn volume(name: &str, spec: Value) -> PersistentVolume {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn zonal(name: &str, key: &str, zones: &[&str]) -> PersistentVolume {
    volume(
        name,
        json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": zones}]}
        ]}}}),
    )
}

fn class(name: &str, allowed: Value) -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": allowed
    }))
    .unwrap()
}

fn claimed(name: &str) -> Value {
    json!({"name": name, "persistentVolumeClaim": {"claimName": name}})
}

/// The zones each alternative allows, `None` for an alternative that allows any.
fn zones(alternatives: &[Requirements]) -> Zones {
    alternatives
        .iter()
        .map(|a| {
            a.get(ZONE)
                .and_then(|r| r.finite_values())
                .map(|v| v.iter().cloned().collect())
        })
        .collect()
}

/// The zones of each alternative, as [`zones`] gives them.
type Zones = Vec<Option<Vec<String>>>;

fn one(zone: &str) -> Option<Vec<String>> {
    Some(vec![zone.to_string()])
}

#[test]
fn each_kind_of_claim_leaves_the_pod_the_places_its_volume_allows() {
    let objects = VolumeObjects::new(
        vec![
            bound("data", "pv-a"),
            bound("ebs", "pv-ebs"),
            bound("local", "pv-local"),
            bound("host-only", "pv-host"),
            unbound("fresh", "two-zones"),
            unbound("anywhere", "no-topology"),
            claim("no-class", json!({}), json!({"phase": "Pending"})),
            bound("db-0-scratch", "pv-c"),
        ],
        vec![
            zonal("pv-a", ZONE, &["us-east-1a"]),
            zonal("pv-ebs", "topology.ebs.csi.aws.com/zone", &["us-east-1b"]),
            zonal("pv-c", ZONE, &["us-east-1c"]),
            volume(
                "pv-local",
                json!({"local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-1-1"]},
                        {"key": ZONE, "operator": "In", "values": ["us-east-1a"]}]}]}}}),
            ),
            volume(
                "pv-host",
                json!({"local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-1-1"]}]}]}}}),
            ),
        ],
        vec![
            class(
                "two-zones",
                json!([
                    {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1a"]}]},
                    {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1b"]}]}
                ]),
            ),
            class("no-topology", Value::Null),
        ],
    );
    let table: &[(&str, Value, Zones)] = &[
        (
            "a bound zonal volume",
            json!([claimed("data")]),
            vec![one("us-east-1a")],
        ),
        (
            "the EBS CSI driver's zone key is the node's zone",
            json!([claimed("ebs")]),
            vec![one("us-east-1b")],
        ),
        (
            "a local volume's hostname is dropped, its zone kept",
            json!([claimed("local")]),
            vec![one("us-east-1a")],
        ),
        (
            "a local volume held by hostname alone allows any node",
            json!([claimed("host-only")]),
            vec![None],
        ),
        (
            "an unbound claim follows its class's allowed topologies, each an alternative",
            json!([claimed("fresh")]),
            vec![one("us-east-1a"), one("us-east-1b")],
        ),
        (
            "a class without allowed topologies",
            json!([claimed("anywhere")]),
            vec![],
        ),
        (
            "a claim without a class",
            json!([claimed("no-class")]),
            vec![],
        ),
        (
            "a generic ephemeral volume's claim is <pod>-<volume>",
            json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]),
            vec![one("us-east-1c")],
        ),
        (
            "two volumes keep only the alternatives both allow",
            json!([claimed("fresh"), claimed("data")]),
            vec![one("us-east-1a")],
        ),
        (
            "no claim at all",
            json!([{"name": "tmp", "emptyDir": {}}]),
            vec![],
        ),
    ];
    for (case, volumes, want) in table {
        let got = objects.topology(&pod(volumes.clone()));
        assert_eq!(got.as_deref().map(zones), Ok(want.clone()), "{case}");
    }
}

#[test]
fn a_claim_that_cannot_be_used_is_an_error_naming_the_volume_and_the_object() {
    let mut deleting = bound("deleting", "pv-a");
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-28T00:00:00Z".parse().unwrap(),
        ));
    let objects = VolumeObjects::new(
        vec![
            deleting,
            claim(
                "lost",
                json!({"volumeName": "pv-a"}),
                json!({"phase": "Lost"}),
            ),
            bound("dangling", "pv-gone"),
            unbound("classless", "no-such-class"),
            bound("data", "pv-a"),
            bound("other", "pv-b"),
        ],
        vec![
            zonal("pv-a", ZONE, &["us-east-1a"]),
            zonal("pv-b", ZONE, &["us-east-1b"]),
        ],
        vec![],
    );
    let table: &[(Value, &str, &str)] = &[
        (
            json!([claimed("missing")]),
            "spec.volumes[0]",
            "PersistentVolumeClaim data/missing not found",
        ),
        (
            json!([claimed("deleting")]),
            "spec.volumes[0]",
            "is being deleted",
        ),
        (
            json!([claimed("lost")]),
            "spec.volumes[0]",
            "no longer exists",
        ),
        (
            json!([claimed("dangling")]),
            "spec.volumes[0]",
            "PersistentVolume pv-gone not found",
        ),
        (
            json!([claimed("classless")]),
            "spec.volumes[0]",
            "StorageClass no-such-class not found",
        ),
        (
            json!([claimed("data"), claimed("other")]),
            "spec.volumes[1]",
            "shares no place with the pod's other volumes",
        ),
    ];
    for (volumes, field, message) in table {
        let (f, m) = objects.topology(&pod(volumes.clone())).unwrap_err();
        assert_eq!(f, *field, "{volumes}");
        assert!(m.contains(message), "{volumes}: {m}");
    }
}

fn demand_in(zones_allowed: &[&str]) -> PodDemand {
    pods(
        "db",
        1,
        |p| p.require(ZONE, crate::api::Operator::In, zones_allowed),
        1000,
        GI,
    )
    .remove(0)
}

#[test]
fn volumes_narrow_where_the_pod_goes_but_not_its_own_node_affinity() {
    let a = zonal("pv-a", ZONE, &["us-east-1a"]);
    let alts = volume_topology(&a, "v").unwrap();

    let mut d = demand_in(&["us-east-1a", "us-east-1b"]);
    d.narrow_to_volumes(&alts).unwrap();
    assert_eq!(zones(&d.requirements), vec![one("us-east-1a")]);
    assert_eq!(
        zones(d.affinity_requirements()),
        vec![Some(vec![
            "us-east-1a".to_string(),
            "us-east-1b".to_string()
        ])],
        "spread domains still count by the pod's own affinity"
    );

    let mut elsewhere = demand_in(&["us-east-1b"]);
    let e = elsewhere.narrow_to_volumes(&alts).unwrap_err();
    assert!(e.contains("no node in common"), "{e}");

    let mut free = demand_in(&["us-east-1b"]);
    free.narrow_to_volumes(&[]).unwrap();
    assert!(
        free.own_requirements.is_none(),
        "no volume, nothing narrowed"
    );
}

fn plan_for(
    pending: Vec<PodDemand>,
    nodes: Vec<super::super::ExistingNode>,
) -> super::super::ProvisioningPlan {
    solve(
        &Snapshot {
            pods: pending,
            nodes,
            ..Default::default()
        },
        &standard_catalog(ZONES),
        &[pool("default").build()],
        &[super::super::testkit::class("default")],
    )
}

#[test]
fn a_pending_pod_with_a_zonal_volume_gets_a_node_in_the_volumes_zone() {
    // Karpenter: "should schedule to storage class zones if volume does not exist" and
    // "should not schedule if volume zone is incompatible with pod node selector".
    let mut snapshot = Snapshot {
        pods: vec![PodDemand::from_pod(&pod(json!([claimed("data")]))).unwrap()],
        ..Default::default()
    };
    let objects = VolumeObjects::new(
        vec![bound("data", "pv-c")],
        vec![zonal("pv-c", ZONE, &["us-east-1c"])],
        vec![],
    );
    let errors = snapshot.narrow_to_volumes(&[pod(json!([claimed("data")]))], &objects);
    assert!(errors.is_empty(), "{errors:?}");
    let plan = plan_for(snapshot.pods, vec![]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims.len(), 1);
    assert_eq!(plan.node_claims[0].zones, vec!["us-east-1c".to_string()]);

    let mut missing = Snapshot {
        pods: vec![PodDemand::from_pod(&pod(json!([claimed("data")]))).unwrap()],
        ..Default::default()
    };
    let errors =
        missing.narrow_to_volumes(&[pod(json!([claimed("data")]))], &VolumeObjects::default());
    assert_eq!(errors.len(), 1, "a claim not found is the pod's error");
    assert_eq!(errors[0].pod, "data/db-0");
    assert!(
        missing.pods.is_empty(),
        "and the pod is not planned on a guess"
    );
}

#[test]
fn a_spread_counts_the_zones_of_the_pods_own_affinity_not_its_volumes() {
    // One db pod runs in us-east-1a, none in b or c. Another, held to us-east-1a by its
    // volume, would make the skew 2 against a zone its own affinity allows: kube-scheduler
    // refuses it, so no node is launched for it. Without the spread it goes to us-east-1a.
    let mut node = super::super::solver_topology_tests::full_node("db-node-a", "us-east-1a");
    node.pods = vec![(
        "default".to_string(),
        [("app".to_string(), "db".to_string())].into(),
    )];
    let volume_in_a = volume_topology(&zonal("pv-a", ZONE, &["us-east-1a"]), "v").unwrap();

    let spread = |p: PodBuilder| p.label("app", "db").spread(TopologyKey::Zone, 1, "db");
    let mut held = pods("db", 1, spread, 1000, GI).remove(0);
    held.narrow_to_volumes(&volume_in_a).unwrap();
    let plan = plan_for(vec![held], vec![node.clone()]);
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    assert_eq!(plan.unschedulable.len(), 1);

    let mut unspread = pods("db", 1, |p| p.label("app", "db"), 1000, GI).remove(0);
    unspread.narrow_to_volumes(&volume_in_a).unwrap();
    let plan = plan_for(vec![unspread], vec![node]);
    assert_eq!(plan.node_claims.len(), 1, "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims[0].zones, vec!["us-east-1a".to_string()]);
}
