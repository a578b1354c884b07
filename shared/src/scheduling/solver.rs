//! `solve`: pending pods in, a provisioning plan out. Pure: no I/O, no clock.
//!
//! Packing is first-fit-decreasing with two changes aimed at the cheapest fleet rather
//! than the fewest nodes. A new claim is packed against the instance type that would cover
//! the NodePool's remaining demand most cheaply (price x how many such nodes the demand
//! needs, at least one), so big pods do not force big nodes and small leftovers do not
//! get expensive ones. When packing ends, each claim is offered every type that holds its
//! pods, cheapest first, so a half-full claim shrinks to the smallest type that fits.
//! Claims holding only pods free of constraints are then packed again for price
//! (`repack.rs`).
//!
//! One file past ~450 lines on purpose: packing, the per-claim type choice and nominating
//! pods onto existing and in-flight capacity share the solver's private state, and splitting
//! them would make that state public to the module for no reader's benefit.

use std::collections::{BTreeMap, HashMap};

use super::claim::{Claim, EXISTING};
use super::domains::Domain;
use super::overlay::Overlays;
use super::plan::ProvisioningPlan;
use super::pod::PodDemand;
use super::reasons::Why;
use super::requirements::Requirements;
use super::snapshot::{PreferencePolicy, Snapshot};
use super::taints::first_untolerated;
use super::template::{NODES, Template, defined_by_instance};
use super::topology::{GroupId, Groups, Key, Terms};
use crate::api::{EC2NodeClass, NodePool, labels};
use crate::catalog::Catalog;
use crate::resources::Resources;

pub fn solve(
    snapshot: &Snapshot,
    catalog: &Catalog,
    pools: &[NodePool],
    classes: &[EC2NodeClass],
) -> ProvisioningPlan {
    solve_repacking(snapshot, catalog, pools, classes, Repacking::Thorough)
}

/// How hard the repacking of new claims works (`repack.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repacking {
    /// Every packing worth comparing, the configuration LP included: what a launch uses.
    Thorough,
    /// Without the configuration LP, several times faster on large mixes of pods and at
    /// worst a little dearer: for the many simulations of one consolidation decision,
    /// where a move's saving underestimated only keeps a node, and the launch that
    /// follows plans again thoroughly.
    Quick,
}

/// [`solve`], repacking new claims as hard as `repacking` says.
pub fn solve_repacking(
    snapshot: &Snapshot,
    catalog: &Catalog,
    pools: &[NodePool],
    classes: &[EC2NodeClass],
    repacking: Repacking,
) -> ProvisioningPlan {
    let prepared = Prepared::new(
        pools,
        classes,
        catalog,
        &snapshot.daemon_sets,
        &snapshot.overlays,
    );
    solve_prepared(snapshot, &prepared, repacking)
}

/// The NodePools prepared for packing (their templates, with the NodeOverlays that apply
/// resolved over them): what every solve on one catalog, one set of DaemonSets and one set
/// of overlays starts from. Consolidation simulates dozens of moves on one cluster and
/// prepares them once.
#[derive(Debug, Clone)]
pub struct Prepared {
    templates: Vec<Template>,
    overlays: Overlays,
    overlay_conflicts: Vec<String>,
}

impl Prepared {
    pub fn new(
        pools: &[NodePool],
        classes: &[EC2NodeClass],
        catalog: &Catalog,
        daemon_sets: &[PodDemand],
        overlays: &Overlays,
    ) -> Prepared {
        let built: Vec<Template> = pools
            .iter()
            .map(|p| Template::build(p, classes, catalog, daemon_sets))
            .collect();
        let (overlays, overlay_conflicts) = overlays.resolve(&built);
        let mut templates: Vec<Template> =
            built.into_iter().map(|t| t.overlaid(&overlays)).collect();
        // Higher weight first, as Karpenter orders NodePools; the name breaks ties so plans
        // are deterministic.
        templates.sort_by(|a, b| {
            b.weight
                .cmp(&a.weight)
                .then_with(|| a.nodepool.cmp(&b.nodepool))
        });
        Prepared {
            templates,
            overlays,
            overlay_conflicts,
        }
    }
}

/// [`solve_repacking`] from NodePools already prepared; `snapshot`'s DaemonSets and
/// overlays must be those `prepared` was built with.
pub fn solve_prepared(
    snapshot: &Snapshot,
    prepared: &Prepared,
    repacking: Repacking,
) -> ProvisioningPlan {
    let ignoring;
    let snapshot = match snapshot.preferences {
        PreferencePolicy::Respect => snapshot,
        PreferencePolicy::Ignore => {
            ignoring = snapshot.without_preferences();
            &ignoring
        }
    };
    let mut solver = Solver::new(snapshot, &prepared.templates);
    solver.pack();
    solver.repack(repacking);
    let mut plan = solver.finish();
    plan.overlay_conflicts = prepared.overlay_conflicts.clone();
    plan.overlays = prepared.overlays.clone();
    plan
}

/// Where a placement lands: requirements narrowed by the pod, and the domain values
/// (key, value) to pin the claim to.
pub(super) struct Placement {
    reqs: Option<Requirements>,
    narrowed: bool,
    pins: Vec<(usize, usize)>,
}

pub(super) struct Solver<'a> {
    pub(super) pods: &'a [PodDemand],
    pub(super) snapshot: &'a Snapshot,
    pub(super) templates: &'a [Template],
    pub(super) groups: Groups,
    /// One per domain key the pods name (`domains.rs`); `[0]` is the zone.
    pub(super) domains: Vec<Domain>,
    /// Members of each group placed or running anywhere.
    pub(super) total: Vec<u32>,
    pub(super) claims: Vec<Claim>,
    open: Vec<usize>,
    /// Demand not yet placed that each template could host.
    remaining: Vec<Resources>,
    pub(super) limit_used: Vec<Resources>,
    class_of: Vec<usize>,
    class_templates: Vec<Vec<usize>>,
    /// How many existing or in-flight nodes each class's pods could run on (labels and
    /// taints; room aside).
    class_nodes: Vec<usize>,
    class_full_scan: Vec<bool>,
    smallest: (i64, i64),
    /// The node-affinity alternatives a pod is being placed with while a preferred term
    /// is held as required (`preferences.rs`); empty: its own required alternatives.
    pub(super) held: Vec<Vec<Requirements>>,
    pub(super) unschedulable: Vec<(usize, Vec<Why>)>,
}

impl<'a> Solver<'a> {
    fn new(snapshot: &'a Snapshot, templates: &'a [Template]) -> Self {
        let pods = snapshot.pods.as_slice();
        let bound_anti: Vec<&[super::pod::AffinityTerm]> = snapshot
            .nodes
            .iter()
            .map(|n| n.anti_affinity.as_slice())
            .collect();
        let groups = Groups::build(pods, &bound_anti, &snapshot.namespace_labels);

        let mut domains: Vec<Domain> = groups
            .domain_keys
            .iter()
            .map(|k| Domain::build(k, templates, &snapshot.nodes, groups.len()))
            .collect();
        for terms in &groups.terms {
            let spreads = terms.spread.iter().map(|s| (s.group, s.key));
            for (g, key) in spreads.chain(terms.affinity.iter().chain(&terms.anti).copied()) {
                if let Key::Domain(d) = key {
                    domains[d as usize].tracked[g as usize] = true;
                }
            }
        }
        for &(g, key) in groups.bound_anti.iter().flatten() {
            if let Key::Domain(d) = key {
                domains[d as usize].tracked[g as usize] = true;
            }
        }
        let mut total = vec![0; groups.len()];

        // Nodes that exist become claims first, so pods land on room already paid for.
        let mut claims = vec![];
        let mut limit_used = vec![Resources::default(); templates.len()];
        for (i, node) in snapshot.nodes.iter().enumerate() {
            if let Some(t) = templates
                .iter()
                .position(|t| Some(&t.nodepool) == node.nodepool.as_ref())
            {
                limit_used[t].add(&node.capacity);
                *limit_used[t].extended.entry(NODES.into()).or_insert(0) += 1000;
            }
            let mut free = node.allocatable.clone();
            free.sub(&node.requested);
            let mut claim = Claim::new(
                EXISTING,
                Some(i),
                Requirements::from_labels(&node.labels),
                0,
                free,
                domains.len(),
            );
            for (d, dom) in domains.iter().enumerate() {
                claim.pins[d] = dom.of_node[i];
            }
            claim.closed = !node.schedulable;
            // Running pods' own anti-affinity keeps the pods it selects off this node, or
            // out of its zone (or other domain): kube-scheduler checks it both ways.
            for &(g, key) in &groups.bound_anti[i] {
                match key {
                    Key::Hostname => claim.anti.push(g),
                    Key::Domain(d) => {
                        if let Some(v) = claim.pins[d as usize] {
                            domains[d as usize].counts.mark_anti(g, v);
                        }
                    }
                }
            }
            for (ns, pod_labels) in &node.pods {
                for g in groups.membership(ns, pod_labels) {
                    claim.increment(g);
                    total[g as usize] += 1;
                    for (d, dom) in domains.iter_mut().enumerate() {
                        if let Some(v) = claim.pins[d] {
                            dom.counts.add(g, v);
                        }
                    }
                }
            }
            claims.push(claim);
        }
        let open = (0..claims.len()).filter(|&c| !claims[c].closed).collect();

        // Pods identical in every respect the solver looks at share a class, so a class
        // can resume its search where its previous pod was placed.
        let mut class_index: HashMap<ClassKey, usize> = HashMap::new();
        let mut class_of = Vec::with_capacity(pods.len());
        let mut class_templates = vec![];
        let mut class_full_scan = vec![];
        let mut class_nodes = vec![];
        for (i, pod) in pods.iter().enumerate() {
            let key = ClassKey::of(pod, &groups.terms[i], &groups.member_of[i]);
            let next = class_index.len();
            let class = *class_index.entry(key).or_insert(next);
            if class == next {
                class_templates.push(
                    (0..templates.len())
                        .filter(|&t| {
                            templates[t].unusable.is_none()
                                && templates[t].launches_for(pod).is_ok()
                                && templates[t].tolerated_by(&pod.tolerations).is_ok()
                                && pod.requirements.iter().any(|alt| {
                                    templates[t]
                                        .requirements
                                        .compatible(alt, defined_by_instance)
                                        .is_ok()
                                })
                        })
                        .collect::<Vec<_>>(),
                );
                class_full_scan.push(groups.terms[i].needs_full_scan());
                class_nodes.push(
                    snapshot
                        .nodes
                        .iter()
                        .filter(|n| {
                            n.schedulable
                                && first_untolerated(&n.taints, &pod.tolerations).is_none()
                                && pod
                                    .requirements
                                    .iter()
                                    .any(|alt| alt.matches_labels(&n.labels))
                        })
                        .count(),
                );
            }
            class_of.push(class);
        }
        let mut remaining = vec![Resources::default(); templates.len()];
        for (i, pod) in pods.iter().enumerate() {
            for &t in &class_templates[class_of[i]] {
                remaining[t].add(&pod.requests);
            }
        }
        let smallest = pods.iter().fold((i64::MAX, i64::MAX), |(c, m), p| {
            (c.min(p.requests.cpu), m.min(p.requests.memory))
        });

        Solver {
            pods,
            snapshot,
            templates,
            groups,
            domains,
            total,
            claims,
            open,
            remaining,
            limit_used,
            class_of,
            class_templates,
            class_nodes,
            class_full_scan,
            smallest,
            held: vec![vec![]; pods.len()],
            unschedulable: vec![],
        }
    }

    pub(super) fn member(&self, p: usize, g: GroupId) -> bool {
        self.groups.member_of[p].contains(&g)
    }

    fn pack(&mut self) {
        let mut order: Vec<usize> = (0..self.pods.len()).collect();
        // Largest first by dominant share of a 1 vCPU : 4 GiB node (the general-purpose
        // ratio), then by cpu and memory; pods needing extended resources (GPUs) lead.
        // Before size, pods that fewer existing or in-flight nodes can host go first: that
        // room is first-fit, and a pod that could go anywhere must not take the only node
        // the constrained ones can use (a spot pool's node in flight, filled by the default
        // pool's pods, would have its own pods launch a second one). Without nodes every
        // count is zero and the order is by size alone.
        const GIB4: f64 = 4.0 * 1024.0 * 1024.0 * 1024.0 * 1000.0;
        let size =
            |p: &PodDemand| (p.requests.cpu as f64 / 1000.0).max(p.requests.memory as f64 / GIB4);
        order.sort_by(|&a, &b| {
            let (pa, pb) = (&self.pods[a], &self.pods[b]);
            pb.requests
                .extended
                .is_empty()
                .cmp(&pa.requests.extended.is_empty())
                .reverse()
                .then_with(|| {
                    let hosts = |p: usize| self.class_nodes[self.class_of[p]];
                    hosts(a).cmp(&hosts(b))
                })
                .then_with(|| size(pb).total_cmp(&size(pa)))
                .then_with(|| pb.requests.cpu.cmp(&pa.requests.cpu))
                .then_with(|| pb.requests.memory.cmp(&pa.requests.memory))
                .then_with(|| self.class_of[a].cmp(&self.class_of[b]))
                .then_with(|| a.cmp(&b))
        });

        let mut cursor = vec![0usize; self.class_templates.len()];
        let mut failed = vec![];
        for p in order {
            let class = self.class_of[p];
            match self.attempt(p, cursor[class], self.class_full_scan[class]) {
                Ok((ci, 0)) => cursor[class] = ci,
                Ok(_) => {}
                Err(whys) => failed.push((p, whys)),
            }
            if self.open.len() > 64
                && self.open.iter().filter(|&&c| self.claims[c].closed).count() * 2
                    > self.open.len()
            {
                let claims = &self.claims;
                self.open.retain(|&c| !claims[c].closed);
            }
        }
        // As Karpenter requeues a pod that failed while others still schedule: a pod
        // packed before the pod it follows (a larger follower of a target pinned to one
        // zone) gets another try once that one is placed, until a round places nothing.
        while !failed.is_empty() {
            let before = failed.len();
            let mut still = vec![];
            for (p, _) in failed {
                if let Err(whys) = self.attempt(p, 0, true) {
                    still.push((p, whys));
                }
            }
            failed = still;
            if failed.len() == before {
                break;
            }
        }
        self.unschedulable.extend(failed);
    }

    /// Places pod `p` with every preference held, then dropping them one at a time
    /// (`preferences.rs`): the claim and the relaxation level that worked, or why every
    /// NodePool refused it at the last level. A pod that fails keeps its own terms, so a
    /// later try starts from all of them again.
    fn attempt(
        &mut self,
        p: usize,
        cursor: usize,
        full_scan: bool,
    ) -> Result<(usize, usize), Vec<Why>> {
        let levels = self.relaxations(p);
        let original = (levels > 0).then(|| self.groups.terms[p].clone());
        let mut whys = vec![];
        for level in 0..=levels {
            if !self.relax_to(p, level) {
                continue;
            }
            // A relaxed pod may fit a claim its class's cursor has passed.
            let start = if full_scan || level > 0 { 0 } else { cursor };
            match self.place_anywhere(p, start) {
                Ok(ci) => return Ok((ci, level)),
                Err(w) => whys = w,
            }
        }
        if let Some(terms) = original {
            self.groups.terms[p] = terms;
        }
        Err(whys)
    }

    /// Places pod `p` on the first open claim from `start` that takes it, or on a new
    /// claim; the reasons every NodePool refused it otherwise.
    fn place_anywhere(&mut self, p: usize, start: usize) -> Result<usize, Vec<Why>> {
        let from = self.open.partition_point(|&c| c < start);
        for i in from..self.open.len() {
            let ci = self.open[i];
            if self.claims[ci].closed {
                continue;
            }
            if let Some(pl) = self.try_place(p, ci) {
                self.place(p, ci, pl);
                return Ok(ci);
            }
        }
        self.open_claim(p)
    }

    fn try_place(&self, p: usize, ci: usize) -> Option<Placement> {
        let pod = &self.pods[p];
        let c = &self.claims[ci];
        if !pod.requests.fits_in(&c.free) {
            return None;
        }
        let terms = &self.groups.terms[p];
        for s in &terms.spread {
            if s.key == Key::Hostname
                && c.count(s.group) + u32::from(self.member(p, s.group)) > s.skew
            {
                return None;
            }
        }
        for &(g, key) in &terms.anti {
            if key == Key::Hostname && c.count(g) > 0 {
                return None;
            }
        }
        if self.groups.member_of[p].iter().any(|g| c.anti.contains(g)) {
            return None;
        }
        for &(g, key) in &terms.affinity {
            let first_of_group = self.total[g as usize] == 0 && self.member(p, g);
            if key == Key::Hostname && c.count(g) == 0 && !first_of_group {
                return None;
            }
        }

        let (reqs, narrowed) = match c.node {
            Some(n) => {
                let node = &self.snapshot.nodes[n];
                if first_untolerated(&node.taints, &pod.tolerations).is_some()
                    || !self
                        .alternatives(p)
                        .iter()
                        .any(|alt| alt.matches_labels(&node.labels))
                {
                    return None;
                }
                (None, false)
            }
            None => {
                let t = &self.templates[c.template];
                if t.tolerated_by(&pod.tolerations).is_err() || t.launches_for(pod).is_err() {
                    return None;
                }
                let mut chosen = None;
                for alt in self.alternatives(p) {
                    if alt.is_empty() {
                        chosen = Some((None, false));
                        break;
                    }
                    if c.reqs.compatible(alt, defined_by_instance).is_err() {
                        continue;
                    }
                    let mut r = c.reqs.clone();
                    r.merge(alt);
                    if t.types[c.pack].satisfies(&r) {
                        chosen = Some((Some(r), narrows_types(alt)));
                        break;
                    }
                }
                chosen?
            }
        };
        let pins = self.domain_pins(p, ci, reqs.as_ref().unwrap_or(&c.reqs))?;
        Some(Placement {
            reqs,
            narrowed,
            pins,
        })
    }

    fn place(&mut self, p: usize, ci: usize, pl: Placement) {
        let pod = &self.pods[p];
        let c = &mut self.claims[ci];
        if let Some(r) = pl.reqs {
            c.reqs = r;
        }
        c.narrowed |= pl.narrowed;
        c.free.sub(&pod.requests);
        c.used.add(&pod.requests);
        c.pods.push(p);
        for &g in &self.groups.member_of[p] {
            c.increment(g);
            self.total[g as usize] += 1;
        }
        for &(g, key) in self.groups.terms[p].hard_anti() {
            if key == Key::Hostname {
                c.anti.push(g);
            }
        }
        for d in 0..self.domains.len() {
            match pl.pins.iter().find(|pin| pin.0 == d) {
                Some(&(_, v)) => self.pin(ci, d, v),
                None => {
                    if let Some(v) = self.claims[ci].pins[d] {
                        self.count_in_domain(p, d, v);
                    }
                }
            }
        }
        for &t in &self.class_templates[self.class_of[p]] {
            self.remaining[t].sub(&pod.requests);
        }
        let c = &mut self.claims[ci];
        let (min_cpu, min_mem) = self.smallest;
        if c.free.cpu < min_cpu || c.free.memory < min_mem || c.free.pods < 1000 {
            c.closed = true;
        }
    }

    /// Opens a new claim for `p` on the first NodePool (by weight) that can take it, or
    /// says for each NodePool why not.
    fn open_claim(&mut self, p: usize) -> Result<usize, Vec<Why>> {
        let pod = &self.pods[p];
        let terms = &self.groups.terms[p];
        let mut whys = vec![];
        for ti in 0..self.templates.len() {
            let t = &self.templates[ti];
            if let Some(u) = &t.unusable {
                whys.push(Why::Unusable {
                    pool: t.nodepool.clone(),
                    why: u.clone(),
                });
                continue;
            }
            if let Err(why) = t.launches_for(pod) {
                whys.push(Why::Unusable {
                    pool: t.nodepool.clone(),
                    why,
                });
                continue;
            }
            if let Err(taint) = t.tolerated_by(&pod.tolerations) {
                whys.push(Why::Taint {
                    pool: t.nodepool.clone(),
                    taint: taint.clone(),
                });
                continue;
            }
            for alt in self.alternatives(p) {
                if let Err(conflict) = t.requirements.compatible(alt, defined_by_instance) {
                    whys.push(Why::Requirement {
                        pool: t.nodepool.clone(),
                        conflict,
                    });
                    continue;
                }
                let mut reqs = t.requirements.clone();
                reqs.merge(alt);
                let joins_elsewhere = terms.affinity.iter().any(|&(g, key)| {
                    key == Key::Hostname && !(self.total[g as usize] == 0 && self.member(p, g))
                });
                if joins_elsewhere {
                    whys.push(Why::Topology {
                        pool: t.nodepool.clone(),
                        what: "its required pod affinity on kubernetes.io/hostname needs a node that already runs a matching pod, and none can take it".into(),
                    });
                    continue;
                }
                let pin_choices = match self.pin_choices(p, ti, &reqs) {
                    Ok(c) => c,
                    Err(what) => {
                        whys.push(Why::Topology {
                            pool: t.nodepool.clone(),
                            what,
                        });
                        continue;
                    }
                };
                let narrowed = narrows_types(alt);
                let mut last = None;
                for pins in pin_choices {
                    let mut r = reqs.clone();
                    for &(d, v) in &pins {
                        r.add(&self.domains[d].key, self.domains[d].pin_requirement(v));
                    }
                    match self.pick_pack_type(ti, &r, p, narrowed || !pins.is_empty()) {
                        Ok(k) => return Ok(self.create_claim(p, ti, r, k, narrowed, pins)),
                        Err(why) => last = Some(why),
                    }
                }
                whys.extend(last);
            }
        }
        Err(whys)
    }

    fn create_claim(
        &mut self,
        p: usize,
        ti: usize,
        reqs: Requirements,
        pack: usize,
        narrowed: bool,
        pins: Vec<(usize, usize)>,
    ) -> usize {
        let ty = &self.templates[ti].types[pack];
        let mut claim = Claim::new(ti, None, reqs, pack, ty.free.clone(), self.domains.len());
        claim.narrowed = narrowed;
        claim.reserved = ty.capacity.clone();
        self.limit_used[ti].add(&ty.capacity);
        *self.limit_used[ti]
            .extended
            .entry(NODES.into())
            .or_insert(0) += 1000;
        self.claims.push(claim);
        let ci = self.claims.len() - 1;
        self.open.push(ci);
        let placement = Placement {
            reqs: None,
            narrowed: false,
            pins,
        };
        self.place(p, ci, placement);
        ci
    }

    /// The type to pack a new claim against: among types that satisfy `reqs`, hold the
    /// pod and stay inside the NodePool's limits, the one that covers the NodePool's
    /// remaining demand most cheaply.
    fn pick_pack_type(
        &self,
        ti: usize,
        reqs: &Requirements,
        p: usize,
        check_reqs: bool,
    ) -> Result<usize, Why> {
        let t = &self.templates[ti];
        let pod = &self.pods[p];
        let demand = &self.remaining[ti];
        let mut best: Option<(f64, f64, usize)> = None;
        let mut any_satisfies = false;
        let mut any_fits = false;
        let mut largest_free = Resources::default();
        let filter = t.filter(reqs);
        for (k, ty) in t.types.iter().enumerate() {
            let offer = if check_reqs {
                filter.offer(ty)
            } else {
                filter.cheapest(ty)
            };
            if check_reqs && offer.is_none() {
                continue;
            }
            any_satisfies = true;
            if !pod.requests.fits_in(&ty.free) {
                largest_free.max(&ty.free);
                continue;
            }
            any_fits = true;
            if let Some(limits) = &t.limits
                && !within_limits(&self.limit_used[ti], &ty.capacity, limits)
            {
                continue;
            }
            let Some(offer) = offer else {
                continue;
            };
            let ratio = |need: i64, have: i64| {
                if have > 0 {
                    need as f64 / have as f64
                } else {
                    f64::INFINITY
                }
            };
            // Room counts only in whole pods of the shape being placed (the largest left,
            // packing decreasing): a 3.92-vCPU node holds one 2-vCPU pod, not 1.96.
            let usable = |free: i64, each: i64| if each > 0 { free / each * each } else { free };
            // Whole nodes: two half-empty small nodes cost what they cost.
            let nodes = ratio(demand.cpu, usable(ty.free.cpu, pod.requests.cpu))
                .max(ratio(
                    demand.memory,
                    usable(ty.free.memory, pod.requests.memory),
                ))
                .max(ratio(demand.pods, ty.free.pods))
                .ceil()
                .max(1.0);
            let cost = offer.price * nodes;
            // On a tie in cost, fewer nodes: less overhead and fewer launches.
            let better =
                best.is_none_or(|(c, n, _)| cost < c - 1e-12 || (cost <= c + 1e-12 && nodes < n));
            if better {
                best = Some((cost, nodes, k));
            }
        }
        match best {
            Some((_, _, k)) => Ok(k),
            None if !any_satisfies => Why::no_type(&t.nodepool, reqs),
            None if !any_fits => Err(Why::TooBig {
                pool: t.nodepool.clone(),
                requests: Box::new(pod.requests.clone()),
                largest_free: Box::new(largest_free),
            }),
            None => Err(Why::Limit {
                pool: t.nodepool.clone(),
                limits: t.limits.clone().unwrap_or_default(),
                used: Box::new(self.limit_used[ti].clone()),
            }),
        }
    }
}

/// Whether an affinity alternative constrains instance-decided labels other than zone and
/// capacity type, which the offering check covers.
fn narrows_types(alt: &Requirements) -> bool {
    alt.iter()
        .any(|(k, _)| defined_by_instance(k) && k != labels::ZONE && k != labels::CAPACITY_TYPE)
}

/// Whether adding a node of `adding` capacity keeps every limit the NodePool sets.
pub(super) fn within_limits(
    used: &Resources,
    adding: &Resources,
    limits: &BTreeMap<String, i64>,
) -> bool {
    limits.iter().all(|(k, &limit)| {
        let after = if k == NODES {
            used.get(NODES) + 1000
        } else {
            used.get(k) + adding.get(k)
        };
        after <= limit
    })
}

#[derive(PartialEq, Eq, Hash)]
struct ClassKey {
    namespace: String,
    requests: Resources,
    requirements: Vec<Requirements>,
    preferred: Vec<Requirements>,
    tolerations: Vec<super::taints::Toleration>,
    terms: Terms,
    member_of: Vec<GroupId>,
    /// The pool whose floor the pod is a placeholder of: a static pool launches only for it.
    floor_of: Option<String>,
}

impl ClassKey {
    fn of(pod: &PodDemand, terms: &Terms, member_of: &[GroupId]) -> Self {
        ClassKey {
            namespace: pod.namespace.clone(),
            requests: pod.requests.clone(),
            requirements: pod.requirements.clone(),
            preferred: pod.preferred.clone(),
            tolerations: pod.tolerations.clone(),
            terms: terms.clone(),
            member_of: member_of.to_vec(),
            floor_of: pod.labels.get(crate::api::labels::CAPACITY_FLOOR).cloned(),
        }
    }
}
