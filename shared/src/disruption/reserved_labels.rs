//! A node labelled `reserved` whose instance no longer runs in a reservation (the
//! reservation expired or was cancelled, or the instance was taken out of it) runs on as
//! on-demand capacity. It is relabelled so, its reservation labels removed, as Karpenter's
//! `capacityreservation.capacitytype` controller does: pods selecting reserved capacity and
//! the sweeper's prices then see what it is.

use k8s_openapi::api::core::v1::Node;

use crate::api::labels::{CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_TYPE};
use crate::aws::OwnedInstance;
use crate::catalog::CapacityType;

/// The labels written on such a node: on-demand, and no reservation.
pub const OUT_OF_RESERVATION: [(&str, Option<&str>); 3] = [
    (CAPACITY_TYPE, Some(crate::api::labels::ON_DEMAND)),
    (CAPACITY_RESERVATION_ID, None),
    (CAPACITY_RESERVATION_TYPE, None),
];

/// The names of the nodes labelled `reserved` whose instance EC2 describes outside any
/// reservation. A node whose instance is not among `instances` is left alone: nothing
/// says where it runs.
pub fn out_of_reservation(nodes: &[Node], instances: &[OwnedInstance]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CAPACITY_TYPE))
                .is_some_and(|c| c == CapacityType::Reserved.as_str())
        })
        .filter(|n| {
            crate::kube::instance_of(n).is_some_and(|id| {
                instances
                    .iter()
                    .any(|i| i.id == id && i.capacity_type != CapacityType::Reserved)
            })
        })
        .filter_map(|n| n.metadata.name.clone())
        .collect()
}

/// `nodes` as relabelling `name` leaves it.
pub fn set_out_of_reservation(nodes: &mut [Node], name: &str) {
    for n in nodes
        .iter_mut()
        .filter(|n| n.metadata.name.as_deref() == Some(name))
    {
        let labels = n.metadata.labels.get_or_insert_with(Default::default);
        for (k, v) in OUT_OF_RESERVATION {
            match v {
                Some(v) => labels.insert(k.to_string(), v.to_string()),
                None => labels.remove(k),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::InstanceState;

    fn node(name: &str, instance: &str, capacity: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            [
                (CAPACITY_TYPE, capacity),
                (CAPACITY_RESERVATION_ID, "cr-0aa"),
                (CAPACITY_RESERVATION_TYPE, "default"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: Some(format!("aws:///us-east-1a/{instance}")),
            ..Default::default()
        });
        n
    }

    fn instance(id: &str, capacity_type: CapacityType) -> OwnedInstance {
        OwnedInstance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state: InstanceState::Running,
            capacity_type,
            launch_time: None,
            tags: Default::default(),
            private_dns_name: None,
            subnet_id: None,
            image_id: None,
            security_groups: vec![],
        }
    }

    #[test]
    fn a_reserved_node_whose_instance_left_its_reservation_becomes_on_demand() {
        let mut nodes = vec![
            node("still", "i-0000000a", "reserved"),
            node("left", "i-0000000b", "reserved"),
            node("unknown", "i-0000000c", "reserved"),
            node("spot", "i-0000000d", "spot"),
        ];
        let instances = [
            instance("i-0000000a", CapacityType::Reserved),
            instance("i-0000000b", CapacityType::OnDemand),
            instance("i-0000000d", CapacityType::Spot),
        ];
        let out = out_of_reservation(&nodes, &instances);
        assert_eq!(out, ["left"]);
        set_out_of_reservation(&mut nodes, "left");
        let labels = nodes[1].metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels.get(CAPACITY_TYPE).map(String::as_str),
            Some("on-demand")
        );
        assert!(!labels.contains_key(CAPACITY_RESERVATION_ID));
        assert!(!labels.contains_key(CAPACITY_RESERVATION_TYPE));
        assert!(out_of_reservation(&nodes, &instances).is_empty());
    }
}
