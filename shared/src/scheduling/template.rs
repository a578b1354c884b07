//! A NodePool prepared for packing: its requirements, taints, limits and the instance
//! types it may launch, each with allocatable after overhead and DaemonSets, and the
//! offerings its requirements allow.

use std::collections::BTreeMap;

use super::overlay::{Overlays, node_labels, selects};
use super::pod::PodDemand;
use super::requirements::{Requirement, Requirements};
use super::taints::{Toleration, first_untolerated};
use crate::api::{EC2NodeClass, KubeletConfiguration, NodePool, Taint, labels};
use crate::catalog::{CapacityType, Catalog, Offering, Reservation, ReservationKind};
use crate::resources::Resources;

/// A reserved offering's reservations that `class` selects and that have room; none for
/// any other offering.
fn reservations_of(
    catalog: &Catalog,
    class: &str,
    instance_type: &str,
    o: &Offering,
) -> Box<[(String, ReservationKind)]> {
    if o.capacity_type != CapacityType::Reserved {
        return Box::default();
    }
    catalog
        .reserved_for(class, instance_type, &o.zone)
        .into_iter()
        .map(|r| (r.id.clone(), r.kind))
        .collect()
}

/// The NodePool limit on the number of nodes, counted in milli-units like every resource.
pub const NODES: &str = "nodes";

/// Keys a new node's instance type (or offering) decides, so a template need not name them
/// for a pod to ask for them.
pub fn defined_by_instance(key: &str) -> bool {
    key.starts_with("karpenter.k8s.aws/")
        || matches!(
            key,
            labels::INSTANCE_TYPE
                | labels::ARCH
                | labels::OS
                | labels::ZONE
                | labels::REGION
                | labels::CAPACITY_TYPE
                | "beta.kubernetes.io/instance-type"
                | "beta.kubernetes.io/arch"
                | "beta.kubernetes.io/os"
                | "failure-domain.beta.kubernetes.io/zone"
        )
}

#[derive(Debug, Clone)]
pub struct OfferingView {
    pub zone: String,
    /// The zone's place in [`Template::zones`], so that a [`TypeFilter`] tests it by index.
    pub zone_slot: usize,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// A reserved offering's reservations (id, kind) with room, from the template's class;
    /// empty for any other. A node of the offering is labelled with one of them. Boxed: every
    /// offering carries it and most are empty, so it costs the solver's loops less room.
    pub reservations: Box<[(String, ReservationKind)]>,
}

/// Keys an offering decides beside zone and capacity type: the reservation a reserved node
/// runs in (Karpenter's scheduling labels for reserved capacity).
const OFFERING_KEYS: [&str; 2] = [
    labels::CAPACITY_RESERVATION_ID,
    labels::CAPACITY_RESERVATION_TYPE,
];

/// Whether `key` is decided per offering rather than per instance type.
fn per_offering(key: &str) -> bool {
    key == labels::ZONE || key == labels::CAPACITY_TYPE || OFFERING_KEYS.contains(&key)
}

impl OfferingView {
    /// Whether a node of this offering can carry reservation labels that `id` and `kind`
    /// (the requirements on them, if any) allow: a reserved offering through one of its
    /// reservations, any other without the labels.
    fn reservation_allows(&self, id: Option<&Requirement>, kind: Option<&Requirement>) -> bool {
        if id.is_none() && kind.is_none() {
            return true;
        }
        if self.reservations.is_empty() {
            return id.is_none_or(|r| r.allows(None)) && kind.is_none_or(|r| r.allows(None));
        }
        self.reservations
            .iter()
            .any(|(i, k)| reservation_allowed(id, kind, i, *k))
    }
}

/// Whether a node in reservation `id` of `kind` carries labels that the requirements on
/// them (`id_req`, `kind_req`, if any) allow: what the solver, the room a plan keeps and
/// the launch each ask of a reservation.
fn reservation_allowed(
    id_req: Option<&Requirement>,
    kind_req: Option<&Requirement>,
    id: &str,
    kind: ReservationKind,
) -> bool {
    id_req.is_none_or(|r| r.allows(Some(id)))
        && kind_req.is_none_or(|r| r.allows(Some(kind.as_str())))
}

/// Whether `reqs` allow a node in `reservation` (its id and type labels).
pub fn allows_reservation(reqs: &Requirements, reservation: &Reservation) -> bool {
    reservation_allowed(
        reqs.get(labels::CAPACITY_RESERVATION_ID),
        reqs.get(labels::CAPACITY_RESERVATION_TYPE),
        &reservation.id,
        reservation.kind,
    )
}

/// The requirements an offering is judged by (zone, capacity type, reservation), looked up
/// once for all the offerings they judge.
pub struct OfferingReqs<'r> {
    zone: Option<&'r Requirement>,
    capacity_type: Option<&'r Requirement>,
    reservation_id: Option<&'r Requirement>,
    reservation_kind: Option<&'r Requirement>,
}

impl<'r> OfferingReqs<'r> {
    pub fn of(reqs: &'r Requirements) -> Self {
        OfferingReqs {
            zone: reqs.get(labels::ZONE),
            capacity_type: reqs.get(labels::CAPACITY_TYPE),
            reservation_id: reqs.get(labels::CAPACITY_RESERVATION_ID),
            reservation_kind: reqs.get(labels::CAPACITY_RESERVATION_TYPE),
        }
    }

    /// Whether they allow `o`.
    pub fn allow(&self, o: &OfferingView) -> bool {
        self.zone.is_none_or(|r| r.allows(Some(&o.zone)))
            && self
                .capacity_type
                .is_none_or(|r| r.allows(Some(o.capacity_type.as_str())))
            && o.reservation_allows(self.reservation_id, self.reservation_kind)
    }
}

#[derive(Debug, Clone)]
pub struct TypeOption {
    pub name: String,
    /// Capacity as NodePool limits count it.
    pub capacity: Resources,
    /// Allocatable minus the DaemonSet pods that will land on every such node.
    pub free: Resources,
    pub labels: BTreeMap<String, String>,
    /// Available offerings the NodePool's zone and capacity-type requirements allow.
    pub offerings: Vec<OfferingView>,
}

impl TypeOption {
    /// The cheapest offering that `reqs` (zone, capacity type, reservation) allows.
    pub fn cheapest(&self, reqs: &Requirements) -> Option<&OfferingView> {
        let allowed = OfferingReqs::of(reqs);
        self.offerings
            .iter()
            .filter(|o| allowed.allow(o))
            .min_by(|a, b| {
                a.price
                    .total_cmp(&b.price)
                    .then(a.capacity_type.cmp(&b.capacity_type))
            })
    }

    /// Whether this type's labels satisfy the instance-decided keys of `reqs` and it has
    /// an offering those requirements allow.
    pub fn satisfies(&self, reqs: &Requirements) -> bool {
        reqs.iter().all(|(k, r)| {
            if per_offering(k) || !defined_by_instance(k) {
                true
            } else {
                r.allows(self.labels.get(k).map(String::as_str))
            }
        }) && self.cheapest(reqs).is_some()
    }
}

/// Requirements compiled for a template's types: [`TypeOption::satisfies`] and
/// [`TypeOption::cheapest`] without a string comparison per offering. The solver asks them
/// of every type of a NodePool for every claim it opens and finalizes.
pub struct TypeFilter<'r> {
    /// The instance-decided requirements other than zone and capacity type.
    labels: Vec<(&'r str, &'r Requirement)>,
    /// By zone slot: whether the zone is allowed.
    zones: Vec<bool>,
    spot: bool,
    on_demand: bool,
    reserved: bool,
    reservation_id: Option<&'r Requirement>,
    reservation_kind: Option<&'r Requirement>,
    /// Neither is asked for: the common case, tested once rather than per offering.
    no_reservation_reqs: bool,
}

impl TypeFilter<'_> {
    /// What `ty.cheapest(reqs)` answers.
    pub fn cheapest<'t>(&self, ty: &'t TypeOption) -> Option<&'t OfferingView> {
        ty.offerings
            .iter()
            .filter(|o| self.zones.get(o.zone_slot).copied().unwrap_or(false))
            .filter(|o| match o.capacity_type {
                CapacityType::Spot => self.spot,
                CapacityType::OnDemand => self.on_demand,
                CapacityType::Reserved => self.reserved,
            })
            .filter(|o| {
                self.no_reservation_reqs
                    || o.reservation_allows(self.reservation_id, self.reservation_kind)
            })
            .min_by(|a, b| {
                a.price
                    .total_cmp(&b.price)
                    .then(a.capacity_type.cmp(&b.capacity_type))
            })
    }

    /// What `ty.satisfies(reqs)` answers, and the cheapest offering when it does.
    pub fn offer<'t>(&self, ty: &'t TypeOption) -> Option<&'t OfferingView> {
        self.labels
            .iter()
            .all(|(k, r)| r.allows(ty.labels.get(*k).map(String::as_str)))
            .then(|| self.cheapest(ty))
            .flatten()
    }
}

#[derive(Debug, Clone)]
pub struct Template {
    pub nodepool: String,
    pub node_class: String,
    pub weight: i32,
    pub requirements: Requirements,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub kubelet: Option<KubeletConfiguration>,
    /// Only the limits the NodePool sets, in milli-units (`nodes` too: 1000 per node).
    pub limits: Option<BTreeMap<String, i64>>,
    pub daemon_overhead: Resources,
    /// Types sorted cheapest first.
    pub types: Vec<TypeOption>,
    /// The zones the types' offerings are in, each once.
    pub zones: Vec<String>,
    /// Set when the NodePool cannot be used at all, with the reason.
    pub unusable: Option<String>,
    /// A static NodePool's replica count: it launches only for its own floor.
    pub replicas: Option<usize>,
}

impl Template {
    pub fn build(
        pool: &NodePool,
        classes: &[EC2NodeClass],
        catalog: &Catalog,
        daemon_sets: &[PodDemand],
    ) -> Template {
        let spec = &pool.spec.template.spec;
        let name = pool.metadata.name.clone();
        let class = classes
            .iter()
            .find(|c| c.metadata.name == spec.node_class_ref.name);
        let kubelet = class.and_then(|c| c.spec.kubelet.clone());

        let mut template_labels = pool.spec.template.metadata.labels.clone();
        template_labels.insert(labels::NODEPOOL.into(), name.clone());
        let mut requirements = Requirements::from_api(&spec.requirements);
        // Karpenter launches on-demand when a NodePool does not name a capacity type; spot
        // must be asked for.
        if requirements.get(labels::CAPACITY_TYPE).is_none() {
            requirements.add(
                labels::CAPACITY_TYPE,
                Requirement::in_values([labels::ON_DEMAND.to_string()]),
            );
        }
        for (k, v) in &template_labels {
            requirements.add(k, Requirement::in_values([v.clone()]));
        }

        let mut unusable = None;
        let limits = if pool.spec.limits.is_empty() {
            None
        } else {
            let mut parsed = BTreeMap::new();
            for (k, q) in &pool.spec.limits {
                match q.milli() {
                    Ok(v) => {
                        parsed.insert(k.clone(), v);
                    }
                    Err(e) => unusable = Some(format!("spec.limits.{k}: {e}")),
                }
            }
            Some(parsed)
        };
        if class.is_none() {
            unusable = Some(format!(
                "its nodeClassRef names EC2NodeClass {:?}, which does not exist",
                spec.node_class_ref.name
            ));
        }

        let taints = spec.taints.clone();
        let daemon_overhead = daemon_sets
            .iter()
            .filter(|ds| lands_on(ds, &requirements, &taints))
            .fold(Resources::default(), |mut acc, ds| {
                acc.add(&ds.requests);
                acc
            });

        let mut zones: Vec<String> = vec![];
        let mut types: Vec<TypeOption> = catalog
            .entries
            .iter()
            .filter_map(|e| {
                let it = &e.instance_type;
                let labels = it.labels();
                let mut free = it.allocatable(kubelet.as_ref());
                free.sub(&daemon_overhead);
                if free.cpu < 0 || free.memory < 0 || free.pods < 0 {
                    return None;
                }
                let class = &spec.node_class_ref.name;
                let offerings = e
                    .offerings
                    .iter()
                    .filter(|o| o.available)
                    .map(|o| (o, reservations_of(catalog, class, &it.name, o)))
                    .filter(|(o, r)| o.capacity_type != CapacityType::Reserved || !r.is_empty())
                    .map(|(o, reservations)| OfferingView {
                        zone: o.zone.clone(),
                        zone_slot: zones.iter().position(|z| *z == o.zone).unwrap_or_else(|| {
                            zones.push(o.zone.clone());
                            zones.len() - 1
                        }),
                        capacity_type: o.capacity_type,
                        price: o.price,
                        reservations,
                    })
                    .collect();
                let option = TypeOption {
                    name: it.name.clone(),
                    capacity: it.capacity(kubelet.as_ref()),
                    free,
                    labels,
                    offerings,
                };
                option.satisfies(&requirements).then_some(option)
            })
            .collect();
        cheapest_first(&mut types, &requirements);

        Template {
            nodepool: name,
            node_class: spec.node_class_ref.name.clone(),
            weight: pool.spec.weight.unwrap_or(0),
            requirements,
            labels: template_labels,
            taints,
            startup_taints: spec.startup_taints.clone(),
            kubelet,
            limits,
            daemon_overhead,
            types,
            zones,
            unusable,
            replicas: pool.spec.static_replicas(),
        }
    }

    /// `reqs` compiled for testing many of this template's types against it.
    pub fn filter<'r>(&self, reqs: &'r Requirements) -> TypeFilter<'r> {
        let zone = reqs.get(labels::ZONE);
        let ct = reqs.get(labels::CAPACITY_TYPE);
        let reservation_id = reqs.get(labels::CAPACITY_RESERVATION_ID);
        let reservation_kind = reqs.get(labels::CAPACITY_RESERVATION_TYPE);
        TypeFilter {
            labels: reqs
                .iter()
                .filter(|(k, _)| !per_offering(k) && defined_by_instance(k))
                .map(|(k, r)| (k.as_str(), r))
                .collect(),
            zones: self
                .zones
                .iter()
                .map(|z| zone.is_none_or(|r| r.allows(Some(z))))
                .collect(),
            spot: ct.is_none_or(|r| r.allows(Some(CapacityType::Spot.as_str()))),
            on_demand: ct.is_none_or(|r| r.allows(Some(CapacityType::OnDemand.as_str()))),
            reserved: ct.is_none_or(|r| r.allows(Some(CapacityType::Reserved.as_str()))),
            reservation_id,
            reservation_kind,
            no_reservation_reqs: reservation_id.is_none() && reservation_kind.is_none(),
        }
    }

    /// This NodePool's types as NodeOverlays change them: each offering's price, each
    /// type's extended resources (`overlay.rs`); then cheapest first again.
    pub fn overlaid(mut self, overlays: &Overlays) -> Template {
        if overlays.is_empty() {
            return self;
        }
        let mut changes = Vec::with_capacity(self.types.len());
        for ty in &self.types {
            let prices: Vec<f64> = ty
                .offerings
                .iter()
                .map(|o| overlays.price(&node_labels(&self, ty, o), o.price))
                .collect();
            let extra = overlays.capacity(&|reqs| {
                ty.offerings
                    .iter()
                    .any(|o| selects(reqs, &node_labels(&self, ty, o)))
            });
            changes.push((prices, extra));
        }
        for (ty, (prices, extra)) in self.types.iter_mut().zip(changes) {
            for (o, price) in ty.offerings.iter_mut().zip(prices) {
                o.price = price;
            }
            // Set, as Karpenter's `ApplyCapacityOverlay` assigns: a GPU time-sliced four
            // ways is four GPUs, not five.
            for (name, amount) in extra {
                let taken = ty.capacity.get(&name) - ty.free.get(&name);
                ty.capacity.extended.insert(name.clone(), amount);
                ty.free.extended.insert(name, amount - taken);
            }
        }
        cheapest_first(&mut self.types, &self.requirements);
        self
    }

    /// Whether `pod` may open a claim on this NodePool: a static one (`replicas`) launches
    /// only to keep its count, for its own floor's placeholders, never for pending pods
    /// (which still land on its nodes once they are there), as Karpenter's static pools.
    pub fn launches_for(&self, pod: &PodDemand) -> Result<(), String> {
        match self.replicas {
            Some(n) if pod.labels.get(labels::CAPACITY_FLOOR) != Some(&self.nodepool) => Err(
                format!("a static NodePool (replicas: {n}) launches only to keep its node count"),
            ),
            _ => Ok(()),
        }
    }

    pub fn tolerated_by(&self, tolerations: &[Toleration]) -> Result<(), &Taint> {
        match first_untolerated(&self.taints, tolerations) {
            Some(t) => Err(t),
            None => Ok(()),
        }
    }
}

/// Types by the price of their cheapest offering `requirements` allow; the name breaks ties.
fn cheapest_first(types: &mut [TypeOption], requirements: &Requirements) {
    types.sort_by(|a, b| {
        let pa = a.cheapest(requirements).map_or(f64::MAX, |o| o.price);
        let pb = b.cheapest(requirements).map_or(f64::MAX, |o| o.price);
        pa.total_cmp(&pb).then_with(|| a.name.cmp(&b.name))
    });
}

/// Whether a DaemonSet's pod would run on nodes of this template: it tolerates the taints
/// and one of its node-affinity alternatives fits the template's requirements.
fn lands_on(ds: &PodDemand, reqs: &Requirements, taints: &[Taint]) -> bool {
    first_untolerated(taints, &ds.tolerations).is_none()
        && ds
            .requirements
            .iter()
            .any(|alt| reqs.compatible(alt, defined_by_instance).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Operator::*;
    use crate::catalog::DEFAULT_SPOT_DISCOUNT;
    use crate::scheduling::testkit::{class, pool};

    #[test]
    fn a_filter_answers_what_satisfies_and_cheapest_answer_for_every_type() {
        let zones: Vec<String> = ["us-east-1a", "us-east-1b", "us-east-1c"]
            .iter()
            .map(|z| z.to_string())
            .collect();
        let catalog = Catalog::offline(&zones, DEFAULT_SPOT_DISCOUNT).unwrap();
        let wide = pool("default")
            .req(labels::CAPACITY_TYPE, In, &["spot", "on-demand"])
            .req(labels::ARCH, In, &["amd64", "arm64"])
            .build();
        let t = Template::build(&wide, &[class("default")], &catalog, &[]);
        let with = |extra: &[(&str, Requirement)]| {
            let mut r = t.requirements.clone();
            for (k, req) in extra {
                r.add(k, req.clone());
            }
            r
        };
        let cases = [
            with(&[]),
            with(&[(labels::ZONE, Requirement::in_values(["us-east-1b"]))]),
            with(&[(labels::CAPACITY_TYPE, Requirement::in_values(["on-demand"]))]),
            with(&[
                (
                    labels::ZONE,
                    Requirement::in_values(["us-east-1a", "us-east-1c"]),
                ),
                (labels::CAPACITY_TYPE, Requirement::in_values(["spot"])),
            ]),
            with(&[(labels::ARCH, Requirement::in_values(["arm64"]))]),
            with(&[(labels::INSTANCE_CATEGORY, Requirement::in_values(["r"]))]),
            // A zone no offering has, and a label no type carries.
            with(&[(labels::ZONE, Requirement::in_values(["us-west-2a"]))]),
            with(&[(labels::INSTANCE_FAMILY, Requirement::in_values(["nope"]))]),
            // Keys the instance does not decide pass, as `satisfies` has them.
            with(&[("team", Requirement::in_values(["a"]))]),
        ];
        let view = |o: Option<&OfferingView>| o.map(|o| (o.zone.clone(), o.capacity_type, o.price));
        for reqs in &cases {
            let filter = t.filter(reqs);
            let mut offered = 0;
            for ty in &t.types {
                let want = if ty.satisfies(reqs) {
                    ty.cheapest(reqs)
                } else {
                    None
                };
                assert_eq!(
                    view(filter.offer(ty)),
                    view(want),
                    "{} under {reqs}",
                    ty.name
                );
                assert_eq!(
                    view(filter.cheapest(ty)),
                    view(ty.cheapest(reqs)),
                    "{}",
                    ty.name
                );
                offered += usize::from(want.is_some());
            }
            // The cases mean something: most leave types, the impossible ones none.
            let impossible = reqs
                .get(labels::ZONE)
                .is_some_and(|r| r.allows(Some("us-west-2a")))
                || reqs.get(labels::INSTANCE_FAMILY).is_some();
            assert_eq!(offered == 0, impossible, "{reqs}: {offered} types");
        }
    }
}
