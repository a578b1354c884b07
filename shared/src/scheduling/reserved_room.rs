//! Plans that stay within their reservations' room. The solver prices a reserved offering
//! near zero but knows no count, so one solve may plan ten nodes into a reservation with
//! room for one. [`solve_within_room`] keeps the reserved claims that fit, as Karpenter's
//! scheduler counts reservations down while it plans, and solves the rest again with
//! those claims as nodes on their way and the full reservations left out, until every
//! claim fits: each pass fills at least one reserved offering, so it ends.

use std::collections::BTreeMap;

use super::{
    ExistingNode, PlannedClaim, PodDemand, ProvisioningPlan, Snapshot, allows_reservation, solve,
};
use crate::api::{EC2NodeClass, NodePool, labels};
use crate::catalog::{CapacityType, Catalog};
use crate::resources::Resources;

/// The name a claim kept in an earlier pass has while later passes plan around it; a `/`
/// is in no node's name.
const PLANNED: &str = "planned/";

/// `solve`, with no reservation planned past its room (see the module's text).
pub fn solve_within_room(
    snapshot: &Snapshot,
    catalog: &Catalog,
    pools: &[NodePool],
    classes: &[EC2NodeClass],
) -> ProvisioningPlan {
    let first = solve(snapshot, catalog, pools, classes);
    if catalog.reservations.is_empty() {
        return first;
    }
    let mut room = catalog.clone();
    // The nodes there are, with the pods earlier passes nominated onto them booked.
    let mut nodes = snapshot.nodes.clone();
    let mut plan = first.clone();
    let mut merged = ProvisioningPlan {
        node_claims: Vec::new(),
        nominations: Vec::new(),
        unschedulable: Vec::new(),
        ..first
    };
    loop {
        book(&mut nodes, &plan.nominations, snapshot);
        fold_nominations(&mut merged, plan.nominations, snapshot);
        merged.unschedulable.extend(plan.unschedulable);
        let (fit, over) = within_room(plan.node_claims, &mut room);
        merged.node_claims.extend(fit);
        if over.is_empty() {
            return merged;
        }
        let again: Vec<&str> = over
            .iter()
            .flat_map(|c| &c.pods)
            .map(String::as_str)
            .collect();
        let next = Snapshot {
            pods: snapshot
                .pods
                .iter()
                .filter(|p| again.contains(&p.key().as_str()))
                .cloned()
                .collect(),
            nodes: nodes
                .iter()
                .cloned()
                .chain(planned_nodes(&merged.node_claims, snapshot, catalog))
                .collect(),
            ..snapshot.clone()
        };
        plan = solve(&next, &room, pools, classes);
    }
}

/// `claims` split into those within their reservations' room (counted down in `room`) and
/// the reserved ones past it.
fn within_room(
    claims: Vec<PlannedClaim>,
    room: &mut Catalog,
) -> (Vec<PlannedClaim>, Vec<PlannedClaim>) {
    let mut fit = Vec::new();
    let mut over = Vec::new();
    for claim in claims {
        if claim.capacity_type != CapacityType::Reserved {
            fit.push(claim);
            continue;
        }
        // The one its launch goes into: the most room among those its requirements allow.
        let id = room
            .reserved_for(&claim.node_class, &claim.instance_type, &claim.zone)
            .into_iter()
            .find(|r| allows_reservation(&claim.requirements, r))
            .map(|r| r.id.clone());
        match id {
            Some(id) => {
                room.launched_into(&id);
                fit.push(claim);
            }
            None => over.push(claim),
        }
    }
    (fit, over)
}

/// `nominations` onto the nodes there are, as their pods: a later pass plans around them.
fn book(nodes: &mut [ExistingNode], nominations: &[super::Nomination], snapshot: &Snapshot) {
    for n in nominations {
        let Some(node) = nodes.iter_mut().find(|x| x.name == n.node) else {
            continue;
        };
        for p in n
            .pods
            .iter()
            .filter_map(|k| snapshot.pods.iter().find(|p| &p.key() == k))
        {
            node.requested.add(&p.requests);
            node.pods.push((p.namespace.clone(), p.labels.clone()));
            node.anti_affinity.extend(p.anti_affinity.iter().cloned());
        }
    }
}

/// A later pass's nominations: to a node that exists, kept; to a claim kept earlier, its
/// pods join that claim.
fn fold_nominations(
    merged: &mut ProvisioningPlan,
    nominations: Vec<super::Nomination>,
    snapshot: &Snapshot,
) {
    for n in nominations {
        let Some(i) = n
            .node
            .strip_prefix(PLANNED)
            .and_then(|i| i.parse::<usize>().ok())
        else {
            merged.nominations.push(n);
            continue;
        };
        let Some(claim) = merged.node_claims.get_mut(i) else {
            continue;
        };
        for key in n.pods {
            if let Some(p) = snapshot.pods.iter().find(|p| p.key() == key) {
                claim.requests.add(&p.requests);
            }
            claim.pods.push(key);
        }
    }
}

/// Each claim kept so far as a node on its way, its pods on it.
fn planned_nodes<'a>(
    claims: &'a [PlannedClaim],
    snapshot: &'a Snapshot,
    catalog: &'a Catalog,
) -> impl Iterator<Item = ExistingNode> + 'a {
    claims.iter().enumerate().map(move |(i, c)| {
        let name = format!("{PLANNED}{i}");
        let mut node_labels: BTreeMap<String, String> = catalog
            .get(&c.instance_type)
            .map(|e| e.instance_type.labels())
            .unwrap_or_default();
        node_labels.extend(c.labels.clone());
        node_labels.insert(labels::ZONE.into(), c.zone.clone());
        node_labels.insert(labels::HOSTNAME.into(), name.clone());
        let on_it: Vec<&PodDemand> = c
            .pods
            .iter()
            .filter_map(|k| snapshot.pods.iter().find(|p| &p.key() == k))
            .collect();
        let mut requested: Resources = c.requests.clone();
        requested.add(&c.daemon_overhead);
        ExistingNode {
            name,
            nodepool: Some(c.nodepool.clone()),
            instance_type: c.instance_type.clone(),
            zone: c.zone.clone(),
            capacity_type: Some(c.capacity_type),
            labels: node_labels,
            taints: c.taints.clone(),
            capacity: catalog
                .get(&c.instance_type)
                .map(|e| e.instance_type.capacity(None))
                .unwrap_or_default(),
            allocatable: c.allocatable.clone(),
            requested,
            pods: on_it
                .iter()
                .map(|p| (p.namespace.clone(), p.labels.clone()))
                .collect(),
            anti_affinity: on_it
                .iter()
                .flat_map(|p| p.anti_affinity.iter().cloned())
                .collect(),
            schedulable: true,
        }
    })
}

#[cfg(test)]
mod tests;
