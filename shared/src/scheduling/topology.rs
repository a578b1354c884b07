//! Bookkeeping for topology spread and pod (anti-)affinity: every distinct
//! (selector, namespaces) pair in the problem becomes a numbered group, each pod knows which
//! groups it belongs to, and counts per node and per zone are plain integer tables.

use std::collections::{BTreeMap, HashMap};

use super::pod::{PodDemand, TopologyKey};
use super::selector::Selector;

pub type GroupId = u16;

/// A pod's topology terms, with selectors replaced by group ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Terms {
    /// Required spreads, then the `soft` last ones held from `ScheduleAnyway`.
    pub spread: Vec<(GroupId, TopologyKey, u32)>,
    pub soft: usize,
    /// Required terms, then the `soft_affinity` (`soft_anti`) last ones held from
    /// preferred terms.
    pub affinity: Vec<(GroupId, TopologyKey)>,
    pub anti: Vec<(GroupId, TopologyKey)>,
    pub soft_affinity: usize,
    pub soft_anti: usize,
}

impl Terms {
    /// Whether where this pod lands depends on counts that can go up as well as block:
    /// such pods must look at every claim again instead of resuming where the last
    /// identical pod stopped.
    pub fn needs_full_scan(&self) -> bool {
        self.spread.iter().any(|s| s.1 == TopologyKey::Zone) || !self.affinity.is_empty()
    }

    /// The anti-affinity terms other pods must respect too: the required ones.
    pub fn hard_anti(&self) -> &[(GroupId, TopologyKey)] {
        &self.anti[..self.anti.len() - self.soft_anti]
    }

    pub fn has_zone_terms(&self) -> bool {
        self.spread.iter().any(|s| s.1 == TopologyKey::Zone)
            || self.affinity.iter().any(|a| a.1 == TopologyKey::Zone)
            || self.anti.iter().any(|a| a.1 == TopologyKey::Zone)
    }
}

pub struct Groups {
    keys: Vec<(Selector, Vec<String>)>,
    pub member_of: Vec<Vec<GroupId>>,
    pub terms: Vec<Terms>,
}

impl Groups {
    pub fn build(pods: &[PodDemand]) -> Groups {
        let mut index: HashMap<(Selector, Vec<String>), GroupId> = HashMap::new();
        let mut keys = vec![];
        let mut intern = |sel: &Selector, ns: &Vec<String>| -> GroupId {
            let key = (sel.clone(), ns.clone());
            *index.entry(key.clone()).or_insert_with(|| {
                keys.push(key);
                (keys.len() - 1) as GroupId
            })
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
                        .map(|s| (intern(&s.selector, &own_ns), s.key, s.max_skew))
                        .collect(),
                    soft: p.soft_spread.len(),
                    affinity: p
                        .affinity
                        .iter()
                        .chain(&p.soft_affinity)
                        .map(|a| (intern(&a.selector, &a.namespaces), a.key))
                        .collect(),
                    anti: p
                        .anti_affinity
                        .iter()
                        .chain(&p.soft_anti_affinity)
                        .map(|a| (intern(&a.selector, &a.namespaces), a.key))
                        .collect(),
                    soft_affinity: p.soft_affinity.len(),
                    soft_anti: p.soft_anti_affinity.len(),
                }
            })
            .collect();
        let mut groups = Groups {
            keys,
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
            .filter(|(_, (sel, ns))| ns.iter().any(|n| n == namespace) && sel.matches(labels))
            .map(|(i, _)| i as GroupId)
            .collect()
    }
}

/// Cluster-wide counts: members per (group, zone), members in total, and zones holding a
/// pod that is zone-anti-affine to a group.
pub struct ZoneCounts {
    zones: usize,
    counts: Vec<u32>,
    anti: Vec<bool>,
    pub total: Vec<u32>,
}

impl ZoneCounts {
    pub fn new(groups: usize, zones: usize) -> Self {
        ZoneCounts {
            zones,
            counts: vec![0; groups * zones],
            anti: vec![false; groups * zones],
            total: vec![0; groups],
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
