//! From a planned node claim to the CreateFleet request that launches it: which (type,
//! subnet) overrides to offer, how the instance is tagged, and what labels and taints its
//! kubelet registers with. Pure: the caller resolves subnets and the launch template.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{Taint, labels};
use crate::aws::{FleetOverride, FleetRequest, LaunchTemplateRef, Subnet};
use crate::catalog::{CapacityType, Catalog, Reservation};
use crate::scheduling::MAX_INSTANCE_TYPES;
use crate::scheduling::{PlannedClaim, allows_reservation};

/// Instance tag naming the NodePool a node was launched for.
pub const NODEPOOL_TAG: &str = "nodewright.io/nodepool";
/// Instance tag naming the launch decision (same value as the node label).
pub const NODECLAIM_TAG: &str = labels::NODECLAIM;
/// Tag of an instance launched with fewer distinct values than a `minValues` asked for
/// (`MinValuesPolicy::BestEffort`), named as Karpenter's NodeClaim annotation.
pub const MIN_VALUES_RELAXED_TAG: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
/// The tag EKS and the console use to show which cluster an instance serves.
pub const EKS_CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";

/// The architecture a claim launches with and the candidate types of that architecture,
/// cheapest first. A launch template names one AMI, and an AMI has one architecture, so a
/// claim whose candidates mix amd64 and arm64 launches only the architecture of its
/// cheapest type; the others are dropped from this launch.
pub fn launch_types<'a>(claim: &'a PlannedClaim, catalog: &Catalog) -> (String, Vec<&'a str>) {
    let arch_of = |name: &str| catalog.get(name).map(|e| e.instance_type.arch.clone());
    let arch = arch_of(&claim.instance_type)
        .or_else(|| claim.instance_types.iter().find_map(|t| arch_of(t)))
        .unwrap_or_default();
    let types = claim
        .instance_types
        .iter()
        .filter(|t| arch_of(t).as_deref() == Some(arch.as_str()))
        .map(String::as_str)
        .take(MAX_INSTANCE_TYPES)
        .collect();
    (arch, types)
}

/// The tags every instance (and its volumes) gets, per DESIGN "State without a database".
/// The EC2NodeClass `tags` come first so they can never replace nodewright's own.
pub fn instance_tags(
    cluster: &str,
    nodepool: &str,
    nodeclaim_id: &str,
    node_class_tags: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut tags = node_class_tags.clone();
    for (k, v) in [
        (labels::OWNERSHIP_TAG.to_string(), cluster.to_string()),
        (NODEPOOL_TAG.to_string(), nodepool.to_string()),
        (NODECLAIM_TAG.to_string(), nodeclaim_id.to_string()),
        (
            format!("kubernetes.io/cluster/{cluster}"),
            "owned".to_string(),
        ),
        (EKS_CLUSTER_NAME_TAG.to_string(), cluster.to_string()),
        (
            "Name".to_string(),
            format!("{cluster}/{nodepool}/{nodeclaim_id}"),
        ),
    ] {
        tags.insert(k, v);
    }
    tags
}

/// The reservation a reserved claim launches into: one of its class's reservations of the
/// claim's types (its planned type first) in its zones that have a subnet, that its
/// requirements on the reservation labels allow, the one with the most room first. A launch template targets one reservation, so a reserved launch
/// asks for exactly one (type, zone). `None` for a claim that is not reserved, or when no
/// reservation has room left.
pub fn reservation_for<'c>(
    claim: &PlannedClaim,
    catalog: &'c Catalog,
    subnets_by_zone: &BTreeMap<String, Subnet>,
) -> Option<&'c Reservation> {
    if claim.capacity_type != CapacityType::Reserved {
        return None;
    }
    let (_, types) = launch_types(claim, catalog);
    let planned_first = std::iter::once(claim.instance_type.as_str())
        .chain(types.into_iter().filter(|t| *t != claim.instance_type));
    planned_first.into_iter().find_map(|ty| {
        claim
            .zones
            .iter()
            .filter(|z| subnets_by_zone.contains_key(*z))
            .flat_map(|z| catalog.reserved_for(&claim.node_class, ty, z))
            .filter(|r| allows_reservation(&claim.requirements, r))
            .max_by(|a, b| a.available.cmp(&b.available).then(b.id.cmp(&a.id)))
    })
}

/// The CreateFleet request for `claim`: its candidate types of one architecture (see
/// [`launch_types`]) x the claim's zones that have a subnet, kept only where the catalog
/// still offers that type there at the claim's capacity type (an offering marked
/// unavailable after insufficient capacity is not asked for again). A reserved claim asks
/// for its `reservation`'s type and zone only.
///
/// `client_token` is the attempt's (see [`super::attempts`]): it does not depend on the
/// overrides, so what drifts between a crash and its retry does not change it.
#[allow(clippy::too_many_arguments)]
pub fn fleet_request(
    claim: &PlannedClaim,
    catalog: &Catalog,
    reservation: Option<&Reservation>,
    nodeclaim_id: &str,
    client_token: &str,
    launch_template: &LaunchTemplateRef,
    subnets_by_zone: &BTreeMap<String, Subnet>,
    cluster: &str,
    node_class_tags: &BTreeMap<String, String>,
) -> FleetRequest {
    let overrides = match reservation {
        Some(r) => subnets_by_zone
            .get(&r.zone)
            .map(|subnet| FleetOverride {
                instance_type: r.instance_type.clone(),
                subnet_id: subnet.id.clone(),
                zone: r.zone.clone(),
                priority: None,
            })
            .into_iter()
            .collect(),
        None => offered_overrides(claim, catalog, subnets_by_zone),
    };
    FleetRequest {
        client_token: client_token.to_string(),
        launch_template: launch_template.clone(),
        overrides,
        capacity_type: claim.capacity_type,
        reservation_kind: reservation.map(|r| r.kind),
        tags: {
            let mut tags = instance_tags(cluster, &claim.nodepool, nodeclaim_id, node_class_tags);
            if claim.min_values_relaxed {
                tags.insert(MIN_VALUES_RELAXED_TAG.to_string(), "true".to_string());
            }
            tags
        },
    }
}

/// Every (type, subnet) the catalog still offers at the claim's capacity type.
fn offered_overrides(
    claim: &PlannedClaim,
    catalog: &Catalog,
    subnets_by_zone: &BTreeMap<String, Subnet>,
) -> Vec<FleetOverride> {
    let (_, types) = launch_types(claim, catalog);
    let zones: BTreeSet<&str> = claim.zones.iter().map(String::as_str).collect();
    let mut overrides = Vec::new();
    for ty in types {
        let Some(entry) = catalog.get(ty) else {
            continue;
        };
        for zone in &zones {
            let Some(subnet) = subnets_by_zone.get(*zone) else {
                continue;
            };
            let offered = entry
                .offerings
                .iter()
                .any(|o| o.available && o.zone == *zone && o.capacity_type == claim.capacity_type);
            if offered {
                overrides.push(FleetOverride {
                    instance_type: ty.to_string(),
                    subnet_id: subnet.id.clone(),
                    zone: zone.to_string(),
                    priority: None,
                });
            }
        }
    }
    overrides
}

/// The labels of a node launched into `reservation`, beside the claim's (Karpenter's).
pub fn reservation_labels(reservation: &Reservation) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            labels::CAPACITY_RESERVATION_ID.to_string(),
            reservation.id.clone(),
        ),
        (
            labels::CAPACITY_RESERVATION_TYPE.to_string(),
            reservation.kind.as_str().to_string(),
        ),
    ])
}

/// The labels the node registers with: the claim's (NodePool, capacity type, the NodePool
/// template's labels). Not the node claim id: it would make every launch's user data, and
/// so its launch template, unique. The id is on the instance as a tag, and the provisioner
/// copies it to the node's `nodewright.io/nodeclaim` label once the node has joined
/// ([`super::in_flight::missing_nodeclaim_labels`]).
pub fn node_labels(claim: &PlannedClaim) -> BTreeMap<String, String> {
    claim.labels.clone()
}

/// The taints the node registers with: the NodePool's taints, then its startup taints.
pub fn node_taints(claim: &PlannedClaim) -> Vec<Taint> {
    claim
        .taints
        .iter()
        .chain(&claim.startup_taints)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
