//! What one poll's next solve starts from when some claims found no capacity, as values: the
//! pods of those claims only, with what this round did launch counted as capacity on its way,
//! so the next round neither plans placed pods again nor forgets the nodes coming for them.
//! The offerings that failed are kept out by the caller's catalog
//! ([`super::UnavailableOfferings`]), not here.

use std::collections::{HashMap, HashSet};

use crate::aws::LaunchedInstance;
use crate::catalog::Catalog;
use crate::kube::{InFlight, existing_nodes};
use crate::scheduling::{PlannedClaim, Snapshot};

/// The next round's snapshot: `snapshot` less every pod not in `retry` (pod keys
/// `namespace/name`), plus `launched` as nodes in flight.
pub fn next_round(
    mut snapshot: Snapshot,
    retry: &HashSet<String>,
    launched: &[InFlight],
) -> Snapshot {
    snapshot.pods.retain(|d| retry.contains(&d.key()));
    snapshot
        .nodes
        .extend(existing_nodes(&[], &HashMap::new(), launched));
    snapshot
}

/// The instances one claim launched, as capacity in flight until their Nodes register: the
/// claim's pool, labels, taints and allocatable, the catalog's capacity for the type.
pub fn launched_in_flight(
    claim: &PlannedClaim,
    instances: &[LaunchedInstance],
    nodeclaim: &str,
    catalog: &Catalog,
) -> Vec<InFlight> {
    instances
        .iter()
        .map(|i| InFlight {
            instance_id: i.id.clone(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: Some(i.capacity_type),
            nodepool: Some(claim.nodepool.clone()),
            nodeclaim: nodeclaim.to_string(),
            labels: claim.labels.clone(),
            taints: claim.taints.clone(),
            capacity: catalog
                .get(&i.instance_type)
                .map(|e| e.instance_type.capacity(None))
                .unwrap_or_default(),
            allocatable: claim.allocatable.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CapacityType;
    use crate::resources::Resources;
    use crate::scheduling::PodDemand;

    fn snapshot(pods: &[&str]) -> Snapshot {
        Snapshot {
            pods: pods
                .iter()
                .map(|p| PodDemand::simple("default", p, Resources::default()))
                .collect(),
            ..Snapshot::default()
        }
    }

    fn launched(id: &str) -> InFlight {
        InFlight {
            instance_id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: Some(CapacityType::Spot),
            nodepool: Some("default".into()),
            nodeclaim: format!("claim-{id}"),
            labels: Default::default(),
            taints: vec![],
            capacity: Resources::default(),
            allocatable: Resources::default(),
        }
    }

    fn keys(s: &Snapshot) -> Vec<String> {
        s.pods.iter().map(PodDemand::key).collect()
    }

    #[test]
    fn only_the_pods_of_claims_that_found_no_capacity_are_planned_again() {
        let retry: HashSet<String> = ["default/b".to_string()].into();
        let next = next_round(snapshot(&["a", "b", "c"]), &retry, &[]);
        assert_eq!(keys(&next), ["default/b"]);
        assert!(next.nodes.is_empty());
    }

    #[test]
    fn what_this_round_launched_is_a_node_on_its_way_in_the_next() {
        let retry: HashSet<String> = ["default/a".to_string()].into();
        let next = next_round(
            snapshot(&["a"]),
            &retry,
            &[launched("i-1"), launched("i-2")],
        );
        let nodes: Vec<(&str, &str, Option<&str>)> = next
            .nodes
            .iter()
            .map(|n| {
                (
                    n.instance_type.as_str(),
                    n.zone.as_str(),
                    n.nodepool.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            nodes,
            [
                ("m5.large", "us-east-1a", Some("default")),
                ("m5.large", "us-east-1a", Some("default"))
            ]
        );
    }

    #[test]
    fn nothing_to_retry_leaves_no_pods_to_plan() {
        let next = next_round(snapshot(&["a"]), &HashSet::new(), &[launched("i-1")]);
        assert!(next.pods.is_empty());
        assert_eq!(next.nodes.len(), 1);
    }
}
