//! Capacity on its way: instances nodewright launched (found by their tags) that have no
//! Node yet, so the next poll counts them instead of launching again; and nodes that
//! registered from such an instance without the node claim label.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Node;

use super::launch::{NODECLAIM_TAG, NODEPOOL_TAG};
use crate::api::{EC2NodeClass, NodePool, labels};
use crate::aws::{InstanceState, OwnedInstance};
use crate::catalog::Catalog;
use crate::ids::InstanceId;
use crate::kube::{InFlight, parse_provider_id};
use crate::scheduling::{PodDemand, Template};

/// The EC2 instance ids behind `nodes`, from their provider IDs.
pub(crate) fn node_instance_ids(nodes: &[Node]) -> HashSet<InstanceId> {
    nodes
        .iter()
        .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref())
        .filter_map(parse_provider_id)
        .map(|p| InstanceId::new(p.instance_id))
        .collect()
}

/// How long an owned instance without a Node counts as capacity on its way: a node joins
/// within minutes (Karpenter's registration TTL is 15 minutes); one that has not by then
/// never will, and the sweeper terminates it. Counting it for ever would leave its pods
/// pending for ever.
pub const JOIN_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// Owned instances that are pending or running, launched less than [`JOIN_DEADLINE`] ago
/// (an unknown launch time counts as recent), and that no Node names in its providerID,
/// with the labels and taints their NodePool gives them and their capacity from the
/// catalog (allocatable less the NodePool's DaemonSet overhead, as the solver counts a new
/// node). A type the catalog does not know counts with no capacity: it still counts for
/// topology, and nothing is planned onto it.
pub fn in_flight(
    owned: &[OwnedInstance],
    nodes: &[Node],
    catalog: &Catalog,
    pools: &[NodePool],
    classes: &[EC2NodeClass],
    daemon_sets: &[PodDemand],
    now: SystemTime,
) -> Vec<InFlight> {
    let registered = node_instance_ids(nodes);
    let empty = Catalog::default();
    let deadline = jiff::Timestamp::try_from(now)
        .ok()
        .and_then(|n| n.checked_sub(JOIN_DEADLINE).ok());
    owned
        .iter()
        .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
        .filter(|i| !registered.contains(i.id.as_str()))
        .filter(|i| match (i.launch_time, deadline) {
            (Some(launched), Some(deadline)) => launched > deadline,
            _ => true,
        })
        .map(|i| {
            let nodepool = i.tags.get(NODEPOOL_TAG).cloned();
            let pool = nodepool
                .as_deref()
                .and_then(|name| pools.iter().find(|p| p.metadata.name == name));
            // Built against an empty catalog: only the labels, taints, kubelet and
            // DaemonSet overhead are wanted here, not the instance types.
            let template = pool.map(|p| Template::build(p, classes, &empty, daemon_sets));
            let kubelet = template.as_ref().and_then(|t| t.kubelet.as_ref());
            let (capacity, allocatable) = match catalog.get(&i.instance_type) {
                Some(e) => {
                    let mut alloc = e.instance_type.allocatable(kubelet);
                    if let Some(t) = &template {
                        alloc.sub(&t.daemon_overhead);
                    }
                    (e.instance_type.capacity(kubelet), alloc)
                }
                None => Default::default(),
            };
            let node_labels: BTreeMap<String, String> = template
                .as_ref()
                .map(|t| t.labels.clone())
                .unwrap_or_default();
            InFlight {
                instance_id: i.id.clone(),
                instance_type: i.instance_type.clone(),
                zone: i.zone.clone(),
                capacity_type: Some(i.capacity_type),
                nodepool,
                nodeclaim: i.tags.get(NODECLAIM_TAG).cloned().unwrap_or_default(),
                labels: node_labels,
                taints: template.map(|t| t.taints).unwrap_or_default(),
                capacity,
                allocatable,
            }
        })
        .collect()
}

/// `(node name, node claim id)` for nodes that run one of our instances (by providerID)
/// whose `nodewright.io/nodeclaim` tag is set but whose label is missing.
pub fn missing_nodeclaim_labels(nodes: &[Node], owned: &[OwnedInstance]) -> Vec<(String, String)> {
    nodes
        .iter()
        .filter_map(|n| {
            let has_label = n
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(labels::NODECLAIM));
            if has_label {
                return None;
            }
            let id = crate::kube::instance_of(n)?;
            let claim = owned.iter().find(|i| i.id == id)?.tags.get(NODECLAIM_TAG)?;
            Some((n.metadata.name.clone()?, claim.clone()))
        })
        .collect()
}

/// Sets the `nodewright.io/nodeclaim` label on the node named `name` in `nodes`, as
/// labelling it in the cluster does.
pub fn set_nodeclaim_label(nodes: &mut [Node], name: &str, claim: &str) {
    for n in nodes
        .iter_mut()
        .filter(|n| n.metadata.name.as_deref() == Some(name))
    {
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(labels::NODECLAIM.to_string(), claim.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CapacityType, DEFAULT_SPOT_DISCOUNT};
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn instance(id: &str, state: InstanceState, claim: Option<&str>) -> OwnedInstance {
        let mut tags = BTreeMap::new();
        tags.insert(NODEPOOL_TAG.to_string(), "default".to_string());
        if let Some(c) = claim {
            tags.insert(NODECLAIM_TAG.to_string(), c.to_string());
        }
        OwnedInstance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state,
            capacity_type: CapacityType::Spot,
            launch_time: None,
            tags,
            private_dns_name: None,
            subnet_id: None,
            image_id: None,
            security_groups: Vec::new(),
        }
    }

    fn node(name: &str, instance: &str, claim_label: Option<&str>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: claim_label.map(|c| {
                    [(labels::NODECLAIM.to_string(), c.to_string())]
                        .into_iter()
                        .collect()
                }),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("aws:///us-east-1a/{instance}")),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn only_live_instances_without_a_node_are_in_flight_with_catalog_capacity() {
        let zones = vec!["us-east-1a".to_string()];
        let catalog = Catalog::offline(&zones, DEFAULT_SPOT_DISCOUNT).unwrap_or_default();
        let owned = [
            instance("i-00000001", InstanceState::Pending, Some("nw-a")),
            instance("i-00000002", InstanceState::Running, Some("nw-b")),
            instance("i-00000003", InstanceState::ShuttingDown, Some("nw-c")),
            instance("i-00000004", InstanceState::Running, Some("nw-d")),
        ];
        let nodes = [node("ip-10-0-0-4", "i-00000004", Some("nw-d"))];
        let got = in_flight(&owned, &nodes, &catalog, &[], &[], &[], SystemTime::now());
        let ids: Vec<(&str, &str)> = got
            .iter()
            .map(|f| (f.instance_id.as_str(), f.nodeclaim.as_str()))
            .collect();
        assert_eq!(ids, [("i-00000001", "nw-a"), ("i-00000002", "nw-b")]);
        // m5.large: 2 vCPUs, so 2000 millicores of capacity.
        assert!(
            got.iter()
                .all(|f| f.capacity.cpu == 2000 && f.allocatable.cpu > 0)
        );
    }

    #[test]
    fn an_instance_that_never_joined_stops_counting_fifteen_minutes_after_launch() {
        let zones = vec!["us-east-1a".to_string()];
        let catalog = Catalog::offline(&zones, DEFAULT_SPOT_DISCOUNT).unwrap_or_default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        let launched = |ago: u64| {
            let at = jiff::Timestamp::try_from(now - Duration::from_secs(ago)).ok();
            move |mut i: OwnedInstance| {
                i.launch_time = at;
                i
            }
        };
        let owned = [
            launched(60)(instance("i-00000001", InstanceState::Running, Some("nw-a"))),
            launched(14 * 60 + 59)(instance("i-00000002", InstanceState::Running, Some("nw-b"))),
            launched(15 * 60)(instance("i-00000003", InstanceState::Running, Some("nw-c"))),
            launched(3 * 3600)(instance("i-00000004", InstanceState::Pending, Some("nw-d"))),
            instance("i-00000005", InstanceState::Pending, Some("nw-e")),
        ];
        let got: Vec<String> = in_flight(&owned, &[], &catalog, &[], &[], &[], now)
            .into_iter()
            .map(|f| f.instance_id)
            .collect();
        assert_eq!(got, ["i-00000001", "i-00000002", "i-00000005"]);
    }

    #[test]
    fn a_node_of_ours_without_the_claim_label_gets_it_from_the_instance_tag() {
        let owned = [
            instance("i-00000001", InstanceState::Running, Some("nw-a")),
            instance("i-00000002", InstanceState::Running, Some("nw-b")),
            instance("i-00000003", InstanceState::Running, None),
        ];
        let nodes = [
            node("n1", "i-00000001", None),
            node("n2", "i-00000002", Some("nw-b")),
            node("n3", "i-00000003", None),
            node("n4", "i-00000009", None),
        ];
        assert_eq!(
            missing_nodeclaim_labels(&nodes, &owned),
            [("n1".to_string(), "nw-a".to_string())]
        );
    }
}
