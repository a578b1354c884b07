//! A node claim while the solver is filling it: the pods it holds, what room is left on
//! the instance type it is being packed against, and its topology counts.

use super::requirements::Requirements;
use super::topology::GroupId;
use crate::resources::Resources;

pub const EXISTING: usize = usize::MAX;

#[derive(Debug, Clone)]
pub struct Claim {
    /// Index of the template (NodePool), or `EXISTING` for a node that already exists.
    pub template: usize,
    pub node: Option<usize>,
    pub reqs: Requirements,
    /// True once a pod narrowed the requirements on an instance-decided key (arch,
    /// instance type, ...): candidate types must then be checked against them again.
    pub narrowed: bool,
    /// The instance type (index into the template's types) the claim is packed against.
    pub pack: usize,
    pub free: Resources,
    pub used: Resources,
    /// Capacity counted against the NodePool's limits while the claim is open.
    pub reserved: Resources,
    pub pods: Vec<usize>,
    /// The value of each domain key (`domains.rs`; `[0]` the zone) the claim is pinned
    /// to, or an existing node carries.
    pub pins: Vec<Option<usize>>,
    counts: Vec<(GroupId, u32)>,
    /// Groups some pod here is anti-affine to on hostname.
    pub anti: Vec<GroupId>,
    pub closed: bool,
}

impl Claim {
    pub fn new(
        template: usize,
        node: Option<usize>,
        reqs: Requirements,
        pack: usize,
        free: Resources,
        domains: usize,
    ) -> Self {
        Claim {
            template,
            node,
            reqs,
            narrowed: false,
            pack,
            free,
            used: Resources::default(),
            reserved: Resources::default(),
            pods: vec![],
            pins: vec![None; domains],
            counts: vec![],
            anti: vec![],
            closed: false,
        }
    }

    pub fn count(&self, g: GroupId) -> u32 {
        self.counts
            .iter()
            .find(|(k, _)| *k == g)
            .map_or(0, |(_, n)| *n)
    }

    pub fn increment(&mut self, g: GroupId) {
        match self.counts.iter_mut().find(|(k, _)| *k == g) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((g, 1)),
        }
    }
}
