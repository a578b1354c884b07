//! What the solver returns: node claims to launch, pods nominated to capacity that already
//! exists, and pods that cannot be placed, each with a reason a person can act on.

use std::collections::BTreeMap;

use super::overlay::{Overlays, node_labels_of};
use super::requirements::{MinValuesShort, Requirements, min_values_short};
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
    /// Launched with fewer distinct values than a `minValues` asks for, under
    /// [`super::MinValuesPolicy::BestEffort`]; `requirements` carries the lowered values.
    pub min_values_relaxed: bool,
}

impl PlannedClaim {
    /// This claim narrowed to what a consolidation may launch in place of nodes costing
    /// `ceiling` an hour: its capacity type only, and the types whose every offering the
    /// launch could get (the claim's zones, available) costs at most `ceiling` (the worst
    /// launch price, as Karpenter judges it: EC2 picks the zone), none of `replaced`'s
    /// types; the cheapest option recomputed from them; `None` when no type is left.
    /// Offered the whole list, EC2 would be free to pick a dearer type than the plan's
    /// cheapest (spot picks by capacity first), and a consolidation that launches something
    /// dearer, or the same type again, only comes round again.
    /// Prices are the catalog's as `overlays` change them (the plan's, conflicts left out),
    /// so the ceiling and the offerings are in the same money.
    pub fn cheaper_than(
        &self,
        catalog: &Catalog,
        overlays: &Overlays,
        ceiling: f64,
        replaced: &[&str],
    ) -> Option<PlannedClaim> {
        // (price, offering) of each offering of `name` the launch could get.
        let offerings = |name: &str| -> Vec<(f64, &Offering)> {
            catalog.get(name).map_or_else(Vec::new, |e| {
                let type_labels = e.instance_type.labels();
                e.offerings
                    .iter()
                    .filter(|o| {
                        o.available
                            && o.capacity_type == self.capacity_type
                            && self.zones.contains(&o.zone)
                    })
                    .map(|o| {
                        let labels =
                            node_labels_of(&self.labels, &type_labels, &o.zone, o.capacity_type);
                        (overlays.price(&labels, o.price), o)
                    })
                    .collect()
            })
        };
        let mut kept: Vec<(&String, f64, &Offering)> = self
            .instance_types
            .iter()
            .filter(|t| !replaced.contains(&t.as_str()))
            .filter_map(|t| {
                let all = offerings(t);
                let worst = all.iter().map(|(p, _)| *p).max_by(f64::total_cmp)?;
                let (price, cheapest) = all.into_iter().min_by(|a, b| a.0.total_cmp(&b.0))?;
                (worst <= ceiling).then_some((t, price, cheapest))
            })
            .collect();
        kept.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (name, price, offering) = *kept.first()?;
        Some(PlannedClaim {
            instance_types: kept.iter().map(|(t, _, _)| (*t).clone()).collect(),
            instance_type: name.clone(),
            capacity_type: offering.capacity_type,
            capacity_types: vec![offering.capacity_type],
            zone: offering.zone.clone(),
            price_per_hour: price,
            ..self.clone()
        })
    }

    /// Why this claim's types fall short of a `minValues` of its NodePool's requirements,
    /// as [`Self::cheaper_than`] may leave them: Karpenter then makes no replacement
    /// rather than launch with less choice than the NodePool asks for.
    pub fn min_values_unmet(&self, catalog: &Catalog) -> Option<String> {
        let labelled: Vec<(&str, BTreeMap<String, String>)> = self
            .instance_types
            .iter()
            .map(|t| {
                let labels = catalog.get(t).map(|e| e.instance_type.labels());
                (t.as_str(), labels.unwrap_or_default())
            })
            .collect();
        let types = labelled.iter().map(|(name, labels)| (*name, labels));
        let MinValuesShort { key, min, distinct } = min_values_short(&self.requirements, types)?;
        Some(format!(
            "the types that would save have {} distinct values of {key} ({}), fewer than the NodePool's minValues {min}",
            distinct.len(),
            distinct.into_iter().collect::<Vec<_>>().join(", ")
        ))
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
    /// NodeOverlays left out for a conflict with another of their weight (`overlay.rs`).
    pub overlay_conflicts: Vec<String>,
    /// The NodeOverlays the plan was priced with, conflicts left out: what prices a claim
    /// later (`PlannedClaim::cheaper_than`).
    pub overlays: Overlays,
}

impl ProvisioningPlan {
    pub fn total_price_per_hour(&self) -> f64 {
        self.node_claims.iter().map(|c| c.price_per_hour).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CatalogEntry;
    use crate::scheduling::testkit::itype;

    fn spot(zone: &str, price: f64) -> Offering {
        Offering {
            zone: zone.into(),
            capacity_type: CapacityType::Spot,
            price,
            available: true,
        }
    }

    fn claim(types: &[&str]) -> PlannedClaim {
        PlannedClaim {
            nodepool: "default".into(),
            node_class: "default".into(),
            instance_types: types.iter().map(|t| t.to_string()).collect(),
            instance_type: types[0].into(),
            capacity_type: CapacityType::Spot,
            zone: "a".into(),
            price_per_hour: 0.0,
            zones: vec!["a".into(), "b".into()],
            capacity_types: vec![CapacityType::Spot, CapacityType::OnDemand],
            pods: vec![],
            requests: Resources::default(),
            daemon_overhead: Resources::default(),
            allocatable: Resources::default(),
            labels: BTreeMap::new(),
            taints: vec![],
            startup_taints: vec![],
            requirements: Requirements::default(),
            min_values_relaxed: false,
        }
    }

    #[test]
    fn a_type_is_kept_only_when_every_zone_the_launch_could_take_costs_less_than_the_ceiling() {
        let entry = |name: &str, offerings: Vec<Offering>| CatalogEntry {
            instance_type: itype(name, 2, 8),
            offerings,
        };
        let catalog = Catalog {
            entries: vec![
                // Cheap in zone a, dear in zone b: EC2 may pick b.
                entry("uneven.large", vec![spot("a", 0.01), spot("b", 0.09)]),
                entry("even.large", vec![spot("a", 0.04), spot("b", 0.045)]),
                // Its zone-c offering is not one the claim allows.
                entry("elsewhere.large", vec![spot("a", 0.03), spot("c", 0.5)]),
                entry("own.large", vec![spot("a", 0.02), spot("b", 0.02)]),
                entry("dear.large", vec![spot("a", 0.06), spot("b", 0.06)]),
            ],
            spot_prices_estimated: false,
            reservations: Default::default(),
        };
        let c = claim(&[
            "uneven.large",
            "own.large",
            "elsewhere.large",
            "even.large",
            "dear.large",
        ]);
        let narrowed = c
            .cheaper_than(&catalog, &Overlays::default(), 0.05, &["own.large"])
            .unwrap();
        assert_eq!(narrowed.instance_types, ["elsewhere.large", "even.large"]);
        assert_eq!(narrowed.instance_type, "elsewhere.large");
        assert_eq!(
            (narrowed.zone.as_str(), narrowed.price_per_hour),
            ("a", 0.03)
        );
        assert_eq!(narrowed.capacity_types, [CapacityType::Spot]);
        assert_eq!(
            c.cheaper_than(&catalog, &Overlays::default(), 0.02, &["own.large"]),
            None
        );
    }
}
