//! Bookkeeping for topology spread and pod (anti-)affinity: every distinct
//! (selector, namespaces) pair in the problem becomes a numbered group, each pod knows which
//! groups it belongs to, and counts per node and per domain (zone, capacity type, any
//! label) are plain integer tables.

use std::collections::{BTreeMap, HashMap};

use super::namespaces::{NamespaceLabels, covers};
use super::pod::{AffinityTerm, PodDemand, TopologyKey};
use super::selector::Selector;
use crate::api::labels;

/// A group: the pods `.0` selects in the namespace scope of `.1` and `.2`.
type GroupKey = (Selector, Vec<String>, Option<Selector>);

pub type GroupId = u16;

/// Where a term is measured: per node, or per value of a node label (a "domain key":
/// zone is always domain key 0, the others are numbered as the pods name them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    Hostname,
    Domain(u16),
}

pub const ZONE: Key = Key::Domain(0);

/// A topology spread constraint with its selector replaced by a group id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpreadTerm {
    pub group: GroupId,
    pub key: Key,
    pub skew: u32,
    pub min_domains: u32,
    pub honor_affinity: bool,
    pub honor_taints: bool,
}

/// A pod's topology terms, with selectors replaced by group ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Terms {
    /// Required spreads, then the `soft` last ones held from `ScheduleAnyway`.
    pub spread: Vec<SpreadTerm>,
    pub soft: usize,
    /// Required terms, then the `soft_affinity` (`soft_anti`) last ones held from
    /// preferred terms.
    pub affinity: Vec<(GroupId, Key)>,
    pub anti: Vec<(GroupId, Key)>,
    pub soft_affinity: usize,
    pub soft_anti: usize,
}

impl Terms {
    /// Whether where this pod lands depends on counts that can go up as well as block:
    /// such pods must look at every claim again instead of resuming where the last
    /// identical pod stopped.
    pub fn needs_full_scan(&self) -> bool {
        self.spread.iter().any(|s| s.key != Key::Hostname) || !self.affinity.is_empty()
    }

    /// The anti-affinity terms other pods must respect too: the required ones.
    pub fn hard_anti(&self) -> &[(GroupId, Key)] {
        &self.anti[..self.anti.len() - self.soft_anti]
    }

    /// Whether some term of this pod is measured over domain key `d`.
    pub fn on_domain(&self, d: u16) -> bool {
        let k = Key::Domain(d);
        self.spread.iter().any(|s| s.key == k)
            || self.affinity.iter().any(|a| a.1 == k)
            || self.anti.iter().any(|a| a.1 == k)
    }

    /// Whether this pod's spread or affinity (not only anti-affinity) uses domain key `d`:
    /// those need the node to carry the label.
    pub fn needs_domain(&self, d: u16) -> bool {
        let k = Key::Domain(d);
        self.spread.iter().any(|s| s.key == k) || self.affinity.iter().any(|a| a.1 == k)
    }
}

pub struct Groups {
    /// Each group's selector and namespace scope (see [`super::pod::covers`]).
    keys: Vec<GroupKey>,
    namespace_labels: NamespaceLabels,
    /// The label each domain key names; `[0]` is the zone.
    pub domain_keys: Vec<String>,
    pub member_of: Vec<Vec<GroupId>>,
    pub terms: Vec<Terms>,
    /// Per existing node, the required anti-affinity terms of the pods running there.
    pub bound_anti: Vec<Vec<(GroupId, Key)>>,
}

impl Groups {
    /// `bound_anti`: per existing node, its pods' required anti-affinity terms;
    /// `namespace_labels`: for terms that select namespaces by label.
    pub fn build(
        pods: &[PodDemand],
        bound_anti: &[&[AffinityTerm]],
        namespace_labels: &NamespaceLabels,
    ) -> Groups {
        let mut index: HashMap<GroupKey, GroupId> = HashMap::new();
        let mut keys = vec![];
        let mut intern = |sel: &Selector, ns: &Vec<String>, ns_sel: &Option<Selector>| -> GroupId {
            let key = (sel.clone(), ns.clone(), ns_sel.clone());
            *index.entry(key.clone()).or_insert_with(|| {
                keys.push(key);
                (keys.len() - 1) as GroupId
            })
        };
        let mut domain_keys = vec![labels::ZONE.to_string()];
        let mut key_of = |k: &TopologyKey| -> Key {
            match k {
                TopologyKey::Hostname => Key::Hostname,
                TopologyKey::Zone => ZONE,
                TopologyKey::Label(name) => {
                    let d = match domain_keys.iter().position(|n| n == name) {
                        Some(d) => d,
                        None => {
                            domain_keys.push(name.clone());
                            domain_keys.len() - 1
                        }
                    };
                    Key::Domain(d as u16)
                }
            }
        };
        let terms: Vec<Terms> = pods
            .iter()
            .map(|p| {
                let own_ns = vec![p.namespace.clone()];
                Terms {
                    spread: p
                        .spread
                        .iter()
                        .chain(&p.soft_spread)
                        .map(|s| SpreadTerm {
                            group: intern(&s.selector, &own_ns, &None),
                            key: key_of(&s.key),
                            skew: s.max_skew,
                            min_domains: s.min_domains,
                            honor_affinity: s.honor_affinity,
                            honor_taints: s.honor_taints,
                        })
                        .collect(),
                    soft: p.soft_spread.len(),
                    affinity: p
                        .affinity
                        .iter()
                        .chain(&p.soft_affinity)
                        .map(|a| {
                            (
                                intern(&a.selector, &a.namespaces, &a.namespace_selector),
                                key_of(&a.key),
                            )
                        })
                        .collect(),
                    anti: p
                        .anti_affinity
                        .iter()
                        .chain(&p.soft_anti_affinity)
                        .map(|a| {
                            (
                                intern(&a.selector, &a.namespaces, &a.namespace_selector),
                                key_of(&a.key),
                            )
                        })
                        .collect(),
                    soft_affinity: p.soft_affinity.len(),
                    soft_anti: p.soft_anti_affinity.len(),
                }
            })
            .collect();
        let bound_anti = bound_anti
            .iter()
            .map(|terms| {
                terms
                    .iter()
                    .map(|a| {
                        (
                            intern(&a.selector, &a.namespaces, &a.namespace_selector),
                            key_of(&a.key),
                        )
                    })
                    .collect()
            })
            .collect();
        let mut groups = Groups {
            keys,
            namespace_labels: namespace_labels.clone(),
            bound_anti,
            domain_keys,
            member_of: vec![],
            terms,
        };
        groups.member_of = pods
            .iter()
            .map(|p| groups.membership(&p.namespace, &p.labels))
            .collect();
        groups
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn membership(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<GroupId> {
        self.keys
            .iter()
            .enumerate()
            .filter(|(_, (sel, ns, ns_sel))| {
                covers(ns, ns_sel.as_ref(), namespace, &self.namespace_labels)
                    && sel.matches(labels)
            })
            .map(|(i, _)| i as GroupId)
            .collect()
    }
}

/// Cluster-wide counts over one domain key: members per (group, value), and values
/// holding a pod that is anti-affine to a group on that key.
pub struct DomainCounts {
    zones: usize,
    counts: Vec<u32>,
    anti: Vec<bool>,
}

impl DomainCounts {
    pub fn new(groups: usize, zones: usize) -> Self {
        DomainCounts {
            zones,
            counts: vec![0; groups * zones],
            anti: vec![false; groups * zones],
        }
    }
    pub fn count(&self, g: GroupId, z: usize) -> u32 {
        self.counts[g as usize * self.zones + z]
    }
    pub fn add(&mut self, g: GroupId, z: usize) {
        self.counts[g as usize * self.zones + z] += 1;
    }
    pub fn anti(&self, g: GroupId, z: usize) -> bool {
        self.anti[g as usize * self.zones + z]
    }
    pub fn mark_anti(&mut self, g: GroupId, z: usize) {
        self.anti[g as usize * self.zones + z] = true;
    }
}
