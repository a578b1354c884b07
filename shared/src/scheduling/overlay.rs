//! NodeOverlays applied as Karpenter's scheduling simulation applies them: each offering of
//! each NodePool's instance types takes the price of the heaviest overlay that selects it
//! (its requirements matched against the node it would be: the pool's name and template
//! labels, the type's labels, the offering's zone and capacity type), and each instance
//! type the extended resources of the heaviest overlays that select one of its offerings,
//! resource by resource. Overlays of equal weight are taken in reverse name order, as
//! Karpenter orders them, and one that would set an offering's price or a type's resource
//! that an overlay of its own weight already set is in conflict and applies nowhere
//! (Karpenter's "no partial application"; [`Overlays::resolve`]).
//!
//! The solver (`Template::overlaid`), consolidation's prices of the nodes there are, `plan`
//! and `sweep-plan` all read prices through here, so a savings plan's discount written as
//! an overlay moves every decision the same way.

use std::collections::{BTreeMap, HashMap};

use super::template::{OfferingView, Template, TypeOption};
use crate::api::labels::{CAPACITY_TYPE, ZONE};
use crate::api::{NodeOverlay, OverlayOperator, OverlayRequirement, PriceChange};
use crate::catalog::CapacityType;

/// The valid NodeOverlays, heaviest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overlays {
    list: Vec<Compiled>,
}

#[derive(Debug, Clone, PartialEq)]
struct Compiled {
    name: String,
    weight: i32,
    requirements: Vec<OverlayRequirement>,
    price: Option<PriceChange>,
    /// Milli-units.
    capacity: BTreeMap<String, i64>,
}

impl Overlays {
    pub fn new(overlays: &[NodeOverlay]) -> Overlays {
        let mut sorted: Vec<&NodeOverlay> = overlays.iter().collect();
        sorted.sort_by(|a, b| {
            b.weight()
                .cmp(&a.weight())
                .then_with(|| b.metadata.name.cmp(&a.metadata.name))
        });
        let list = sorted
            .into_iter()
            .map(|o| Compiled {
                name: o.metadata.name.clone(),
                weight: o.weight(),
                requirements: o.spec.requirements.clone(),
                price: o.price_change(),
                capacity: o
                    .spec
                    .capacity
                    .iter()
                    .filter_map(|(k, q)| Some((k.clone(), q.milli().ok()?)))
                    .collect(),
            })
            .collect();
        Overlays { list }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The overlays that apply over `templates`, and the names of those in conflict: taken
    /// heaviest first, an overlay conflicts when an offering it prices, or a resource of a
    /// type it sizes, was last touched by an overlay of the same weight (Karpenter's
    /// `lowestWeight`); a conflicting overlay is left out whole.
    pub fn resolve(&self, templates: &[Template]) -> (Overlays, Vec<String>) {
        if self.list.is_empty() {
            return (self.clone(), Vec::new());
        }
        let mut prices: HashMap<(usize, usize, usize), i32> = HashMap::new();
        let mut resources: HashMap<(usize, usize, &str), i32> = HashMap::new();
        let (mut kept, mut conflicts) = (Vec::new(), Vec::new());
        for o in &self.list {
            let mut priced = Vec::new();
            let mut sized = Vec::new();
            for (ti, t) in templates.iter().enumerate() {
                for (yi, ty) in t.types.iter().enumerate() {
                    let selected: Vec<usize> = (0..ty.offerings.len())
                        .filter(|&oi| {
                            selects(&o.requirements, &node_labels(t, ty, &ty.offerings[oi]))
                        })
                        .collect();
                    if o.price.is_some() {
                        priced.extend(selected.iter().map(|&oi| (ti, yi, oi)));
                    }
                    if !selected.is_empty() {
                        sized.extend(o.capacity.keys().map(|k| (ti, yi, k.as_str())));
                    }
                }
            }
            let clash = priced.iter().any(|k| prices.get(k) == Some(&o.weight))
                || sized.iter().any(|k| resources.get(k) == Some(&o.weight));
            if clash {
                conflicts.push(o.name.clone());
                continue;
            }
            for k in priced {
                prices.insert(k, o.weight);
            }
            for k in sized {
                resources.insert(k, o.weight);
            }
            kept.push(o.clone());
        }
        (Overlays { list: kept }, conflicts)
    }

    /// [`Overlays::resolve`] over the templates of `pools` as the solver builds them.
    pub fn resolved(
        overlays: &[NodeOverlay],
        pools: &[crate::api::NodePool],
        classes: &[crate::api::EC2NodeClass],
        catalog: &crate::catalog::Catalog,
        daemon_sets: &[super::PodDemand],
    ) -> (Overlays, Vec<String>) {
        let templates: Vec<Template> = pools
            .iter()
            .map(|p| Template::build(p, classes, catalog, daemon_sets))
            .collect();
        Overlays::new(overlays).resolve(&templates)
    }

    /// The price of a node carrying `labels` whose undiscounted price is `base`.
    pub fn price(&self, labels: &dyn Fn(&str) -> Option<String>, base: f64) -> f64 {
        self.list
            .iter()
            .filter(|o| o.price.is_some() && selects(&o.requirements, labels))
            .find_map(|o| o.price)
            .map_or(base, |change| change.apply(base))
    }

    /// The extended resources (milli-units) added to a type one of whose offerings
    /// `any_offering` says an overlay's requirements select.
    pub fn capacity(
        &self,
        any_offering: &dyn Fn(&[OverlayRequirement]) -> bool,
    ) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for o in self.list.iter().filter(|o| !o.capacity.is_empty()) {
            if any_offering(&o.requirements) {
                for (k, v) in &o.capacity {
                    out.entry(k.clone()).or_insert(*v);
                }
            }
        }
        out
    }
}

/// Whether every requirement holds for a node carrying `labels`.
pub fn selects(
    requirements: &[OverlayRequirement],
    labels: &dyn Fn(&str) -> Option<String>,
) -> bool {
    requirements.iter().all(|r| {
        let value = labels(&r.key);
        let number = || value.as_deref()?.parse::<i64>().ok();
        let bound = || r.values.first()?.parse::<i64>().ok();
        let compare =
            |f: fn(i64, i64) -> bool| matches!((number(), bound()), (Some(v), Some(b)) if f(v, b));
        match r.operator {
            OverlayOperator::In => value.is_some_and(|v| r.values.contains(&v)),
            OverlayOperator::NotIn => value.is_none_or(|v| !r.values.contains(&v)),
            OverlayOperator::Exists => value.is_some(),
            OverlayOperator::DoesNotExist => value.is_none(),
            OverlayOperator::Gt => compare(|v, b| v > b),
            OverlayOperator::Lt => compare(|v, b| v < b),
            OverlayOperator::Gte => compare(|v, b| v >= b),
            OverlayOperator::Lte => compare(|v, b| v <= b),
        }
    })
}

/// The labels of the node an offering of `ty` in `t` would be, without copying any: the
/// offering's zone and capacity type, the type's labels, the pool's name and template
/// labels.
pub fn node_labels<'a>(
    t: &'a Template,
    ty: &'a TypeOption,
    o: &'a OfferingView,
) -> impl Fn(&str) -> Option<String> + 'a {
    node_labels_of(&t.labels, &ty.labels, &o.zone, o.capacity_type)
}

/// The same from the parts: the pool's labels, the type's, the offering's zone and
/// capacity type.
pub fn node_labels_of<'a>(
    pool: &'a BTreeMap<String, String>,
    ty: &'a BTreeMap<String, String>,
    zone: &'a str,
    capacity_type: CapacityType,
) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| match k {
        ZONE => Some(zone.to_string()),
        CAPACITY_TYPE => Some(capacity_type.as_str().to_string()),
        _ => ty.get(k).or_else(|| pool.get(k)).cloned(),
    }
}

/// The labels of a node as a lookup, for [`Overlays::price`] and [`selects`].
pub fn lookup(labels: &BTreeMap<String, String>) -> impl Fn(&str) -> Option<String> + '_ {
    move |k| labels.get(k).cloned()
}
