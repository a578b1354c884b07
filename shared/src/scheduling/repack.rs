//! Repacking after first-fit-decreasing: new claims that hold only pods with no
//! constraint but their size are packed again, as a whole, for price.
//!
//! First-fit-decreasing decides each claim's type before it knows how many pods will
//! follow, so a set of identical pods ends on one large node where two smaller ones cost
//! less (the getting-started example: ten 1-CPU pods plan a c6a.4xlarge at $0.612/h;
//! a c6a.2xlarge and a c6a.xlarge hold them for $0.459/h). Pods whose only constraint is
//! their size can move freely between claims of the same NodePool and requirements, so
//! those claims are packed again: exactly when the pods are identical
//! (`packing::identical_optimum`) or few (`exact::exact_optimum`), and otherwise by the
//! dual-priced greedy, plain first-fit-decreasing and the configuration LP seeded with
//! both (`columns::configuration_packing`); the cheapest of those and what the solver's
//! own first-fit-decreasing found is kept.

use std::collections::HashMap;

use super::claim::Claim;
use super::packing::{self, Bin, Vector, vector};
use super::requirements::Requirements;
use super::solver::{Repacking, Solver, within_limits};
use super::template::NODES;
use super::{columns, exact};
use crate::resources::Resources;

/// A set of claims whose pods may be packed again together.
struct Batch {
    template: usize,
    reqs: Requirements,
    claims: Vec<usize>,
}

impl Solver<'_> {
    /// Whether pod `p` can move to any claim of the same NodePool and requirements: no
    /// topology term of its own, no other pod's term counts it, and no extended resource
    /// (GPU pods stay where their type was chosen for them).
    fn movable(&self, p: usize) -> bool {
        let t = &self.groups.terms[p];
        t.spread.is_empty()
            && t.affinity.is_empty()
            && t.anti.is_empty()
            && self.groups.member_of[p].is_empty()
            && self.pods[p].requests.extended.is_empty()
    }

    pub(super) fn repack(&mut self, repacking: Repacking) {
        let mut index: HashMap<(usize, &Requirements), usize> = HashMap::new();
        let mut batches: Vec<Batch> = vec![];
        for (ci, c) in self.claims.iter().enumerate() {
            // Only new, unpinned claims: a domain pin (zone, capacity type, ...) or an
            // existing node is a decision some pod's rule depended on.
            if c.node.is_some() || c.pins.iter().any(Option::is_some) || c.pods.is_empty() {
                continue;
            }
            if !c.pods.iter().all(|&p| self.movable(p)) {
                continue;
            }
            let next = batches.len();
            let b = *index.entry((c.template, &c.reqs)).or_insert(next);
            if b == next {
                batches.push(Batch {
                    template: c.template,
                    reqs: c.reqs.clone(),
                    claims: vec![],
                });
            }
            batches[b].claims.push(ci);
        }
        for batch in batches {
            self.repack_batch(batch, repacking);
        }
    }

    fn repack_batch(&mut self, batch: Batch, repacking: Repacking) {
        let t = &self.templates[batch.template];
        // Types a claim with these requirements may launch, with the price it would pay.
        let filter = t.filter(&batch.reqs);
        let types: Vec<(usize, Bin)> = t
            .types
            .iter()
            .enumerate()
            .filter_map(|(k, ty)| {
                filter.offer(ty).map(|o| {
                    (
                        k,
                        Bin {
                            free: vector(&ty.free),
                            price: o.price,
                        },
                    )
                })
            })
            .collect();
        let bins: Vec<Bin> = types.iter().map(|(_, b)| *b).collect();

        // What first-fit-decreasing pays: each claim on the cheapest type that holds it,
        // as `finish` will choose.
        let mut current = 0.0;
        for &ci in &batch.claims {
            match packing::cheapest_holding(&bins, &vector(&self.claims[ci].used)) {
                Some(k) => current += bins[k].price,
                None => return,
            }
        }

        let mut shape_index: HashMap<Vector, usize> = HashMap::new();
        let mut shapes: Vec<(Vector, u32)> = vec![];
        let mut pods_of: Vec<Vec<usize>> = vec![];
        for &ci in &batch.claims {
            for &p in &self.claims[ci].pods {
                let v = vector(&self.pods[p].requests);
                let next = shapes.len();
                let s = *shape_index.entry(v).or_insert(next);
                if s == next {
                    shapes.push((v, 0));
                    pods_of.push(vec![]);
                }
                shapes[s].1 += 1;
                pods_of[s].push(p);
            }
        }

        let Some(best) = packings(&bins, &shapes, repacking)
            .into_iter()
            .min_by(|a, b| packing::price(&bins, a).total_cmp(&packing::price(&bins, b)))
        else {
            return;
        };
        if packing::price(&bins, &best) >= current - 1e-9 {
            return;
        }
        if !self.fits_limits(&batch, &best, &types) {
            return;
        }
        self.replace(batch, best, &types, &mut pods_of);
    }

    /// Whether the NodePool's limits still hold with the batch's claims replaced by
    /// `nodes`.
    fn fits_limits(&self, batch: &Batch, nodes: &[packing::Node], types: &[(usize, Bin)]) -> bool {
        let t = &self.templates[batch.template];
        let Some(limits) = &t.limits else {
            return true;
        };
        let mut used = self.limit_used[batch.template].clone();
        for &ci in &batch.claims {
            release(&mut used, &self.claims[ci]);
        }
        for node in nodes {
            let capacity = &t.types[types[node.bin].0].capacity;
            if !within_limits(&used, capacity, limits) {
                return false;
            }
            reserve(&mut used, capacity);
        }
        true
    }

    fn replace(
        &mut self,
        batch: Batch,
        nodes: Vec<packing::Node>,
        types: &[(usize, Bin)],
        pods_of: &mut [Vec<usize>],
    ) {
        let ti = batch.template;
        let mut narrowed = false;
        for &ci in &batch.claims {
            let c = &mut self.claims[ci];
            narrowed |= c.narrowed;
            release(&mut self.limit_used[ti], c);
            c.pods.clear();
            c.used = Resources::default();
            c.reserved = Resources::default();
        }
        for node in nodes {
            let k = types[node.bin].0;
            let ty = &self.templates[ti].types[k];
            let mut claim = Claim::new(
                ti,
                None,
                batch.reqs.clone(),
                k,
                ty.free.clone(),
                self.domains.len(),
            );
            claim.narrowed = narrowed;
            claim.reserved = ty.capacity.clone();
            claim.closed = true;
            reserve(&mut self.limit_used[ti], &ty.capacity);
            for (s, &n) in node.counts.iter().enumerate() {
                let split = pods_of[s].len() - n as usize;
                for p in pods_of[s].split_off(split) {
                    claim.free.sub(&self.pods[p].requests);
                    claim.used.add(&self.pods[p].requests);
                    claim.pods.push(p);
                }
            }
            claim.pods.sort_unstable();
            self.claims.push(claim);
        }
    }
}

/// The packings of `shapes` worth comparing: the exact optimum when the mix is small
/// enough for one (identical pods, or a few assorted ones), and otherwise the dual-priced
/// greedy, plain first-fit-decreasing, and (when thorough) the configuration LP seeded with
/// both.
fn packings(
    bins: &[Bin],
    shapes: &[(Vector, u32)],
    repacking: Repacking,
) -> Vec<Vec<packing::Node>> {
    let mut options: Vec<Vec<packing::Node>> = vec![];
    if let [(shape, n)] = shapes
        && let Some((_, nodes)) = packing::identical_optimum(bins, shape, *n as usize)
    {
        options.push(
            nodes
                .into_iter()
                .map(|(bin, c)| packing::Node {
                    bin,
                    counts: vec![c as u32],
                })
                .collect(),
        );
    } else if let Some(nodes) = exact::exact_optimum(bins, shapes) {
        options.push(nodes);
    }
    let exact = !options.is_empty();
    if let Some(nodes) = packing::greedy(bins, shapes) {
        options.push(nodes);
    }
    if let Some(nodes) = packing::first_fit_decreasing(bins, shapes) {
        options.push(nodes);
    }
    if !exact && repacking == Repacking::Thorough {
        let seeds: Vec<&[packing::Node]> = options.iter().map(Vec::as_slice).collect();
        if let Some(nodes) = columns::configuration_packing(bins, shapes, &seeds) {
            options.push(nodes);
        }
    }
    options
}

fn release(used: &mut Resources, c: &Claim) {
    used.sub(&c.reserved);
    *used.extended.entry(NODES.into()).or_insert(0) -= 1000;
}

fn reserve(used: &mut Resources, capacity: &Resources) {
    used.add(capacity);
    *used.extended.entry(NODES.into()).or_insert(0) += 1000;
}
