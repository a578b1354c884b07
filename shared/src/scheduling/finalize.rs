//! Turning packed claims into the plan: every instance type that holds a claim's pods,
//! cheapest first and cut to what CreateFleet takes while keeping `minValues` flexibility.

use std::collections::{BTreeMap, BTreeSet};

use super::claim::Claim;
use super::plan::{MAX_INSTANCE_TYPES, Nomination, PlannedClaim, ProvisioningPlan, Unschedulable};
use super::reasons::{Why, explain};
use super::requirements::{MinValuesShort, min_values_short, min_values_value};
use super::snapshot::MinValuesPolicy;
use super::solver::Solver;
use super::template::{OfferingReqs, Template, TypeOption, defined_by_instance};
use crate::api::labels;
use crate::catalog::CapacityType;

impl Solver<'_> {
    pub(super) fn finish(mut self) -> ProvisioningPlan {
        let mut plan = ProvisioningPlan::default();
        let claims = std::mem::take(&mut self.claims);
        for claim in &claims {
            if claim.pods.is_empty() {
                continue;
            }
            let names: Vec<String> = claim.pods.iter().map(|&p| self.pods[p].key()).collect();
            if let Some(n) = claim.node {
                plan.nominations.push(Nomination {
                    node: self.snapshot.nodes[n].name.clone(),
                    pods: names,
                });
                continue;
            }
            let template = &self.templates[claim.template];
            let relax = self.snapshot.min_values == MinValuesPolicy::BestEffort;
            match planned_claim(template, claim, names, false) {
                Ok(c) => plan.node_claims.push(c),
                // Karpenter never lets a claim grow past the types its minValues need: it
                // opens another. Do the same after the fact. (Not under NodePool limits:
                // the extra nodes were never checked against them.)
                Err(Why::MinValues { .. }) if template.limits.is_none() => {
                    for part in self.split_for_min_values(template, claim) {
                        let names = part.pods.iter().map(|&p| self.pods[p].key()).collect();
                        match planned_claim(template, &part, names, false) {
                            Ok(c) => plan.node_claims.push(c),
                            Err(Why::MinValues { .. }) if relax => {
                                self.plan_relaxed(&mut plan, template, &part)
                            }
                            Err(why) => self
                                .unschedulable
                                .extend(part.pods.iter().map(|&p| (p, vec![why.clone()]))),
                        }
                    }
                }
                Err(Why::MinValues { .. }) if relax => {
                    self.plan_relaxed(&mut plan, template, claim)
                }
                Err(why) => self
                    .unschedulable
                    .extend(claim.pods.iter().map(|&p| (p, vec![why.clone()]))),
            }
        }
        let mut unschedulable: Vec<Unschedulable> = self
            .unschedulable
            .iter()
            .map(|(p, whys)| Unschedulable {
                pod: self.pods[*p].key(),
                reason: explain(whys),
            })
            .collect();
        unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
        plan.unschedulable = unschedulable;
        plan
    }
}

impl Solver<'_> {
    /// A claim that falls short of `minValues` even alone, planned with the types there
    /// are ([`MinValuesPolicy::BestEffort`]).
    fn plan_relaxed(&mut self, plan: &mut ProvisioningPlan, t: &Template, claim: &Claim) {
        let names = claim.pods.iter().map(|&p| self.pods[p].key()).collect();
        match planned_claim(t, claim, names, true) {
            Ok(c) => plan.node_claims.push(c),
            Err(why) => self
                .unschedulable
                .extend(claim.pods.iter().map(|&p| (p, vec![why.clone()]))),
        }
    }

    /// Splits a claim's pods, in packing order, into claims that each still leave every
    /// `minValues` requirement enough distinct types. A pod that fails alone ends in a
    /// part of its own, which `planned_claim` then reports.
    fn split_for_min_values(&self, t: &Template, claim: &Claim) -> Vec<Claim> {
        let empty = |c: &Claim| {
            let mut part = c.clone();
            part.pods.clear();
            part.used = Default::default();
            part
        };
        let mut parts = vec![];
        let mut current = empty(claim);
        for &p in &claim.pods {
            let mut trial = current.clone();
            trial.pods.push(p);
            trial.used.add(&self.pods[p].requests);
            if current.pods.is_empty() || planned_claim(t, &trial, vec![], false).is_ok() {
                current = trial;
                continue;
            }
            parts.push(std::mem::replace(&mut current, empty(claim)));
            current.pods.push(p);
            current.used.add(&self.pods[p].requests);
        }
        parts.push(current);
        parts
    }
}

/// The claim as launched: its candidate types cheapest first, cut to what CreateFleet
/// takes. Short of a `minValues`, an error, or with `relax` the claim's requirements with
/// each `minValues` lowered to the distinct values the types that fit have.
fn planned_claim(
    t: &Template,
    claim: &Claim,
    pods: Vec<String>,
    relax: bool,
) -> Result<PlannedClaim, Why> {
    let reserved_ok = |ty: &TypeOption| match &t.limits {
        // Never offer a type bigger, in a limited resource, than the one the limit was
        // checked against when the claim was opened.
        Some(limits) => limits
            .keys()
            .all(|k| ty.capacity.get(k) <= claim.reserved.get(k)),
        None => true,
    };
    let filter = t.filter(&claim.reqs);
    let mut candidates: Vec<(&TypeOption, f64)> = t
        .types
        .iter()
        .filter(|ty| claim.used.fits_in(&ty.free) && reserved_ok(ty))
        .filter_map(|ty| {
            let offer = if claim.narrowed {
                filter.offer(ty)
            } else {
                filter.cheapest(ty)
            };
            offer.map(|o| (ty, o.price))
        })
        .collect();
    candidates.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.name.cmp(&b.0.name)));
    let mut requirements = claim.reqs.clone();
    let mut min_values_relaxed = false;
    let chosen = match truncate_keeping_min_values(&candidates, &requirements) {
        Ok(chosen) => chosen,
        Err(_) if relax && !candidates.is_empty() => {
            min_values_relaxed = lower_min_values(&mut requirements, &candidates);
            truncate_keeping_min_values(&candidates, &requirements).map_err(|what| {
                Why::MinValues {
                    pool: t.nodepool.clone(),
                    what,
                }
            })?
        }
        Err(what) => {
            return Err(Why::MinValues {
                pool: t.nodepool.clone(),
                what,
            });
        }
    };
    let Some(&(cheapest, _)) = chosen.first() else {
        // The type the claim was packed against always fits; reaching here is a bug.
        return Err(Why::NoType {
            pool: t.nodepool.clone(),
            reqs: claim.reqs.to_string(),
        });
    };
    let offer = cheapest.cheapest(&claim.reqs).ok_or_else(|| Why::NoType {
        pool: t.nodepool.clone(),
        reqs: claim.reqs.to_string(),
    })?;

    let mut zones = BTreeSet::new();
    let mut capacity_types = BTreeSet::new();
    let allowed = OfferingReqs::of(&claim.reqs);
    for (ty, _) in &chosen {
        for o in &ty.offerings {
            if allowed.allow(o) {
                zones.insert(o.zone.clone());
                capacity_types.insert(o.capacity_type);
            }
        }
    }
    let mut node_labels: BTreeMap<String, String> = claim
        .reqs
        .labels()
        .into_iter()
        .filter(|(k, _)| !defined_by_instance(k))
        .collect();
    node_labels.extend(t.labels.clone());
    node_labels.insert(
        labels::CAPACITY_TYPE.into(),
        offer.capacity_type.as_str().into(),
    );
    let mut allocatable = cheapest.free.clone();
    allocatable.add(&t.daemon_overhead);

    Ok(PlannedClaim {
        nodepool: t.nodepool.clone(),
        node_class: t.node_class.clone(),
        instance_types: chosen.iter().map(|(ty, _)| ty.name.clone()).collect(),
        instance_type: cheapest.name.clone(),
        capacity_type: offer.capacity_type,
        zone: offer.zone.clone(),
        price_per_hour: offer.price,
        zones: zones.into_iter().collect(),
        capacity_types: capacity_types.into_iter().collect::<Vec<CapacityType>>(),
        pods,
        requests: claim.used.clone(),
        daemon_overhead: t.daemon_overhead.clone(),
        allocatable,
        labels: node_labels,
        taints: t.taints.clone(),
        startup_taints: t.startup_taints.clone(),
        requirements,
        min_values_relaxed,
    })
}

/// Lowers each `minValues` of `reqs` to the distinct values `candidates` have, as Karpenter's
/// `BestEffort` does; whether any was lowered.
fn lower_min_values(
    reqs: &mut super::requirements::Requirements,
    candidates: &[(&TypeOption, f64)],
) -> bool {
    let mut lowered = false;
    while let Some(short) = min_values_short(
        reqs,
        candidates
            .iter()
            .map(|(ty, _)| (ty.name.as_str(), &ty.labels)),
    ) {
        let distinct = short.distinct.len() as u32;
        if !reqs.lower_min_values(&short.key, distinct) {
            break;
        }
        lowered = true;
    }
    lowered
}

/// Keeps at most `MAX_INSTANCE_TYPES` candidates, cheapest first, but makes sure every
/// requirement with `minValues` still sees that many distinct values among them (as
/// Karpenter does, so spot can fall back across families).
fn truncate_keeping_min_values<'a>(
    sorted: &[(&'a TypeOption, f64)],
    reqs: &super::requirements::Requirements,
) -> Result<Vec<(&'a TypeOption, f64)>, String> {
    let named = sorted.iter().map(|(ty, _)| (ty.name.as_str(), &ty.labels));
    if let Some(short) = min_values_short(reqs, named) {
        let MinValuesShort { key, min, distinct } = short;
        return Err(format!(
            "requirement {key} has minValues {min} but only {} distinct values fit the pods: {}",
            distinct.len(),
            distinct.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let min_keys: Vec<(&String, u32)> = reqs
        .iter()
        .filter_map(|(k, r)| r.min_values.map(|m| (k, m)))
        .collect();
    let value = |ty: &TypeOption, key: &str| min_values_value(&ty.name, &ty.labels, key);
    if sorted.len() <= MAX_INSTANCE_TYPES {
        return Ok(sorted.to_vec());
    }
    let mut keep = vec![false; sorted.len()];
    for (key, min) in &min_keys {
        let mut seen = BTreeSet::new();
        for (i, (ty, _)) in sorted.iter().enumerate() {
            if seen.len() as u32 >= *min {
                break;
            }
            if let Some(v) = value(ty, key)
                && seen.insert(v)
            {
                keep[i] = true;
            }
        }
    }
    let mut budget = MAX_INSTANCE_TYPES.saturating_sub(keep.iter().filter(|k| **k).count());
    for k in keep.iter_mut() {
        if budget == 0 {
            break;
        }
        if !*k {
            *k = true;
            budget -= 1;
        }
    }
    Ok(sorted
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(c, _)| *c)
        .collect())
}
