//! What the solver returns: node claims to launch, pods nominated to capacity that already
//! exists, and pods that cannot be placed, each with a reason a person can act on.

use std::collections::BTreeMap;

use super::requirements::Requirements;
use crate::api::Taint;
use crate::catalog::{CapacityType, Catalog, Offering};
use crate::resources::Resources;

/// Karpenter's `maxInstanceTypes`: at most 60 instance types are offered to one launch. The
/// solver keeps a claim's candidates within it, the fleet request is cut to it
/// (`provision::launch`), and the EC2 adapter refuses a request past it
/// (`aws::fleet`): one number, defined here.
pub const MAX_INSTANCE_TYPES: usize = 60;

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedClaim {
    pub nodepool: String,
    pub node_class: String,
    /// Candidate types, cheapest first; every one holds every pod of the claim.
    pub instance_types: Vec<String>,
    /// The cheapest option: its type, capacity type, zone and hourly price.
    pub instance_type: String,
    pub capacity_type: CapacityType,
    pub zone: String,
    pub price_per_hour: f64,
    /// Everything the launch may be offered: zones and capacity types the claim allows.
    pub zones: Vec<String>,
    pub capacity_types: Vec<CapacityType>,
    pub pods: Vec<String>,
    /// Sum of the pods' requests (DaemonSet overhead is separate).
    pub requests: Resources,
    pub daemon_overhead: Resources,
    /// Allocatable of the cheapest type, before DaemonSets.
    pub allocatable: Resources,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub requirements: Requirements,
}

impl PlannedClaim {
    /// This claim narrowed to what a consolidation may launch in place of nodes costing
    /// `ceiling` an hour: the types whose cheapest offering the claim allows (its zones and
    /// capacity types, available) costs at most `ceiling`, none of `replaced`'s types, the
    /// cheapest option recomputed from them; `None` when no type is left. Offered the
    /// whole list, EC2 would be free to pick a dearer type than the plan's cheapest (spot
    /// picks by capacity first), and a consolidation that launches something dearer, or
    /// the same type again, only comes round again.
    pub fn cheaper_than(
        &self,
        catalog: &Catalog,
        ceiling: f64,
        replaced: &[&str],
    ) -> Option<PlannedClaim> {
        let cheapest = |name: &str| {
            catalog
                .get(name)?
                .offerings
                .iter()
                .filter(|o| {
                    o.available
                        && self.zones.contains(&o.zone)
                        && self.capacity_types.contains(&o.capacity_type)
                })
                .min_by(|a, b| a.price.total_cmp(&b.price))
        };
        let mut kept: Vec<(&String, &Offering)> = self
            .instance_types
            .iter()
            .filter(|t| !replaced.contains(&t.as_str()))
            .filter_map(|t| cheapest(t).map(|o| (t, o)))
            .filter(|(_, o)| o.price <= ceiling)
            .collect();
        kept.sort_by(|a, b| a.1.price.total_cmp(&b.1.price));
        let (name, offering) = *kept.first()?;
        Some(PlannedClaim {
            instance_types: kept.iter().map(|(t, _)| (*t).clone()).collect(),
            instance_type: name.clone(),
            capacity_type: offering.capacity_type,
            zone: offering.zone.clone(),
            price_per_hour: offering.price,
            ..self.clone()
        })
    }
}

/// Pods that fit on a node that exists or is already being launched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nomination {
    pub node: String,
    pub pods: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    pub pod: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProvisioningPlan {
    pub node_claims: Vec<PlannedClaim>,
    pub nominations: Vec<Nomination>,
    pub unschedulable: Vec<Unschedulable>,
}

impl ProvisioningPlan {
    pub fn total_price_per_hour(&self) -> f64 {
        self.node_claims.iter().map(|c| c.price_per_hour).sum()
    }
}
