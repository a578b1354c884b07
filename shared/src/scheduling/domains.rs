//! Topology domains wider than a node: zone, capacity type, architecture, and any label a
//! NodePool's requirements or template labels give its nodes. Each key the pods name
//! (zone always) is a `Domain`: the values NodePools and existing nodes can carry, and the
//! cluster-wide counts per value. A new claim is pinned to one value of a key (an `In`
//! requirement on the claim, so the node gets that label) when some pod's spread or pod
//! (anti-)affinity on that key needs it.

use std::collections::{BTreeSet, HashMap};

use super::claim::EXISTING;
use super::requirements::{Requirement, Requirements};
use super::snapshot::ExistingNode;
use super::solver::Solver;
use super::taints::first_untolerated;
use super::template::{Template, defined_by_instance};
use super::topology::{DomainCounts, Key, SpreadTerm};
use crate::api::labels;

pub(super) struct Domain {
    pub key: String,
    pub values: Vec<String>,
    /// The values each template can give a new node.
    pub of_template: Vec<Vec<usize>>,
    /// The value each existing node carries.
    pub of_node: Vec<Option<usize>>,
    pub counts: DomainCounts,
    /// Groups some pod's spread or pod (anti-)affinity measures on this key: their members
    /// are pinned to a value too, so a pod following them knows where they are.
    pub tracked: Vec<bool>,
}

impl Domain {
    pub fn build(
        key: &str,
        templates: &[Template],
        nodes: &[ExistingNode],
        groups: usize,
    ) -> Domain {
        let per_template: Vec<BTreeSet<String>> =
            templates.iter().map(|t| template_values(t, key)).collect();
        let per_node: Vec<Option<&str>> = nodes.iter().map(|n| node_value(n, key)).collect();
        let mut values: Vec<String> = per_template
            .iter()
            .flatten()
            .cloned()
            .chain(per_node.iter().flatten().map(|v| v.to_string()))
            .collect();
        values.sort();
        values.dedup();
        let index: HashMap<&str, usize> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (v.as_str(), i))
            .collect();
        let of_template = per_template
            .iter()
            .map(|vs| vs.iter().map(|v| index[v.as_str()]).collect())
            .collect();
        let of_node = per_node
            .iter()
            .map(|v| v.map(|v| index[v]))
            .collect::<Vec<_>>();
        Domain {
            key: key.to_string(),
            counts: DomainCounts::new(groups, values.len()),
            values,
            of_template,
            of_node,
            tracked: vec![false; groups],
        }
    }

    /// The requirement pinning a claim to value `v`.
    pub fn pin_requirement(&self, v: usize) -> Requirement {
        Requirement::in_values([self.values[v].clone()])
    }

    /// Whether pinning this key narrows the instance types (arch, instance family, ...),
    /// beyond what the offering check (zone, capacity type) covers.
    pub fn narrows_types(&self) -> bool {
        defined_by_instance(&self.key)
            && self.key != labels::ZONE
            && self.key != labels::CAPACITY_TYPE
    }
}

/// The values a NodePool can give its nodes for `key`: zones and capacity types from its
/// types' offerings, other instance labels from its types, any other label from the values
/// its requirements (template labels included) list. All filtered by its requirements.
fn template_values(t: &Template, key: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if t.unusable.is_some() {
        return out;
    }
    if key == labels::ZONE || key == labels::CAPACITY_TYPE {
        for o in t.types.iter().flat_map(|ty| &ty.offerings) {
            out.insert(if key == labels::ZONE {
                o.zone.clone()
            } else {
                o.capacity_type.as_str().to_string()
            });
        }
    } else if defined_by_instance(key) {
        for ty in &t.types {
            let v = if key == labels::INSTANCE_TYPE {
                Some(&ty.name)
            } else {
                ty.labels.get(key)
            };
            out.extend(v.cloned());
        }
    } else if let Some(vs) = t.requirements.get(key).and_then(|r| r.finite_values()) {
        out.extend(vs.iter().cloned());
    }
    out.retain(|v| {
        t.requirements
            .get(key)
            .is_none_or(|r| r.allows(Some(v.as_str())))
    });
    out
}

fn node_value<'n>(n: &'n ExistingNode, key: &str) -> Option<&'n str> {
    if key == labels::ZONE && !n.zone.is_empty() {
        return Some(&n.zone);
    }
    n.labels.get(key).map(String::as_str)
}

impl Solver<'_> {
    /// Whether where pod `p` lands on domain key `d` matters: a term of its own, or a
    /// group it belongs to that some pod's term on `d` counts.
    pub(super) fn involved(&self, p: usize, d: usize) -> bool {
        self.groups.terms[p].on_domain(d as u16)
            || self.groups.member_of[p]
                .iter()
                .any(|&g| self.domains[d].tracked[g as usize])
    }

    /// The values of key `d` a claim of `template` with `reqs` may take.
    pub(super) fn allowed_values(
        &self,
        d: usize,
        template: usize,
        reqs: &Requirements,
    ) -> Vec<usize> {
        let dom = &self.domains[d];
        let req = reqs.get(&dom.key);
        dom.of_template[template]
            .iter()
            .copied()
            .filter(|&v| req.is_none_or(|r| r.allows(Some(&dom.values[v]))))
            .collect()
    }

    /// The domains a spread's skew is measured over: values some NodePool or node can
    /// carry; with `nodeAffinityPolicy: Honor` only those one of the pod's node-affinity
    /// alternatives allows, with `nodeTaintsPolicy: Honor` only those of NodePools and
    /// nodes whose taints it tolerates. Never just the value a claim happens to be pinned
    /// to, or every count would look balanced against itself.
    fn spread_domains(&self, p: usize, s: &SpreadTerm, d: usize) -> Vec<usize> {
        let pod = &self.pods[p];
        let dom = &self.domains[d];
        let mut eligible = vec![false; dom.values.len()];
        for (t, vs) in dom.of_template.iter().enumerate() {
            if s.honor_taints && self.templates[t].tolerated_by(&pod.tolerations).is_err() {
                continue;
            }
            // A static pool launches nothing for this pod: none of its domains is one the
            // pod could be spread into.
            if self.templates[t].launches_for(pod).is_err() {
                continue;
            }
            for &v in vs {
                eligible[v] = true;
            }
        }
        for (n, v) in dom.of_node.iter().enumerate() {
            if let Some(v) = *v
                && (!s.honor_taints
                    || first_untolerated(&self.snapshot.nodes[n].taints, &pod.tolerations)
                        .is_none())
            {
                eligible[v] = true;
            }
        }
        (0..dom.values.len())
            .filter(|&v| {
                eligible[v]
                    && (!s.honor_affinity
                        || pod.affinity_requirements().iter().any(|alt| {
                            alt.get(&dom.key)
                                .is_none_or(|r| r.allows(Some(&dom.values[v])))
                        }))
            })
            .collect()
    }

    /// Values from `candidates` that satisfy pod `p`'s rules on key `d`, best first (fewest
    /// members of its spread groups, then name order).
    pub(super) fn rank_values(&self, p: usize, d: usize, candidates: &[usize]) -> Vec<usize> {
        let terms = &self.groups.terms[p];
        let key = Key::Domain(d as u16);
        let dom = &self.domains[d];
        let counts = &dom.counts;
        // Each spread's global minimum, over its eligible domains; 0 while fewer than
        // minDomains are eligible, as kube-scheduler counts it.
        let minima: Vec<(SpreadTerm, u32)> = terms
            .spread
            .iter()
            .filter(|s| s.key == key)
            .map(|s| {
                let domains = self.spread_domains(p, s, d);
                let min = if (domains.len() as u32) < s.min_domains {
                    0
                } else {
                    domains
                        .iter()
                        .map(|&v| counts.count(s.group, v))
                        .min()
                        .unwrap_or(0)
                };
                (*s, min)
            })
            .collect();
        let mut ok: Vec<(u32, usize)> = candidates
            .iter()
            .copied()
            .filter(|&v| {
                minima.iter().all(|(s, min)| {
                    counts.count(s.group, v) + u32::from(self.member(p, s.group)) <= min + s.skew
                }) && terms
                    .anti
                    .iter()
                    .filter(|a| a.1 == key)
                    .all(|&(g, _)| counts.count(g, v) == 0)
                    && self.groups.member_of[p].iter().all(|&g| !counts.anti(g, v))
                    && terms.affinity.iter().filter(|a| a.1 == key).all(|&(g, _)| {
                        counts.count(g, v) > 0 || (self.total[g as usize] == 0 && self.member(p, g))
                    })
            })
            .map(|v| {
                let load = minima.iter().map(|(s, _)| counts.count(s.group, v)).sum();
                (load, v)
            })
            .collect();
        ok.sort();
        ok.into_iter().map(|(_, v)| v).collect()
    }

    /// The pins placing pod `p` on claim `ci` (with `reqs`) needs, as (key, value); `None`
    /// when its rules on some key forbid the claim.
    pub(super) fn domain_pins(
        &self,
        p: usize,
        ci: usize,
        reqs: &Requirements,
    ) -> Option<Vec<(usize, usize)>> {
        let mut pins = vec![];
        let mut narrowed: Option<Requirements> = None;
        for d in 0..self.domains.len() {
            if !self.involved(p, d) {
                continue;
            }
            let c = &self.claims[ci];
            let needs = self.groups.terms[p].needs_domain(d as u16);
            let candidates: Vec<usize> = match c.pins[d] {
                Some(v) => vec![v],
                // A node without the label: only anti-affinity can hold there.
                None if c.template == EXISTING => {
                    if needs {
                        return None;
                    }
                    continue;
                }
                None => {
                    let r = narrowed.as_ref().unwrap_or(reqs);
                    if !needs && self.domains[d].of_template[c.template].is_empty() {
                        continue;
                    }
                    let pack = &self.templates[c.template].types[c.pack];
                    let dom = &self.domains[d];
                    self.allowed_values(d, c.template, r)
                        .into_iter()
                        .filter(|&v| {
                            let mut r = r.clone();
                            r.add(&dom.key, dom.pin_requirement(v));
                            pack.satisfies(&r)
                        })
                        .collect()
                }
            };
            let best = self.rank_values(p, d, &candidates).into_iter().next()?;
            if c.pins[d].is_none() {
                let r = narrowed.get_or_insert_with(|| reqs.clone());
                r.add(&self.domains[d].key, self.domains[d].pin_requirement(best));
                pins.push((d, best));
            }
        }
        Some(pins)
    }

    /// The ways a new claim of template `ti` with `reqs` may be pinned for pod `p`, best
    /// first (at most 64), or why none: every combination of ranked values over the keys
    /// the pod is involved in.
    pub(super) fn pin_choices(
        &self,
        p: usize,
        ti: usize,
        reqs: &Requirements,
    ) -> Result<Vec<Vec<(usize, usize)>>, String> {
        let mut choices: Vec<Vec<(usize, usize)>> = vec![vec![]];
        for d in 0..self.domains.len() {
            if !self.involved(p, d) {
                continue;
            }
            let dom = &self.domains[d];
            let needs = self.groups.terms[p].needs_domain(d as u16);
            if !needs && dom.of_template[ti].is_empty() {
                continue;
            }
            let candidates = self.allowed_values(d, ti, reqs);
            let ranked = self.rank_values(p, d, &candidates);
            if ranked.is_empty() {
                return Err(if dom.of_template[ti].is_empty() {
                    format!(
                        "its topology spread or pod affinity on {} needs that node label, and no node of this NodePool carries it",
                        dom.key
                    )
                } else {
                    format!(
                        "no value of {} satisfies its topology spread and pod (anti-)affinity",
                        dom.key
                    )
                });
            }
            choices = choices
                .into_iter()
                .flat_map(|c| {
                    ranked.iter().map(move |&v| {
                        let mut c = c.clone();
                        c.push((d, v));
                        c
                    })
                })
                .take(64)
                .collect();
        }
        Ok(choices)
    }

    /// Pins claim `ci` to value `v` of key `d` and counts the pods already on it there.
    pub(super) fn pin(&mut self, ci: usize, d: usize, v: usize) {
        let req = self.domains[d].pin_requirement(v);
        let narrows = self.domains[d].narrows_types();
        let c = &mut self.claims[ci];
        c.pins[d] = Some(v);
        c.reqs.add(&self.domains[d].key, req);
        c.narrowed |= narrows;
        let pods = c.pods.clone();
        for q in pods {
            self.count_in_domain(q, d, v);
        }
    }

    pub(super) fn count_in_domain(&mut self, p: usize, d: usize, v: usize) {
        let dom = &mut self.domains[d];
        for &g in &self.groups.member_of[p] {
            dom.counts.add(g, v);
        }
        for &(g, key) in self.groups.terms[p].hard_anti() {
            if key == Key::Domain(d as u16) {
                dom.counts.mark_anti(g, v);
            }
        }
    }
}
