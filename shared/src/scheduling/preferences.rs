//! Preferences, as Karpenter schedules them: held as if required, and dropped one at a
//! time while the pod cannot schedule, in Karpenter's order: preferred pod affinity, then
//! preferred pod anti-affinity (heaviest term first); then preferred node affinity (the
//! heaviest term is ANDed into every required alternative, then the next, then none); then
//! `ScheduleAnyway` topology spreads, first first. A preference that contradicts the pod's own
//! requirements is skipped, never an error: it is only a preference.

use super::requirements::Requirements;
use super::solver::Solver;

impl Solver<'_> {
    /// How many times pod `p` can be relaxed: level 0 holds every preference, the last
    /// none.
    pub(super) fn relaxations(&self, p: usize) -> usize {
        let pod = &self.pods[p];
        pod.soft_affinity.len()
            + pod.soft_anti_affinity.len()
            + pod.preferred.len()
            + pod.soft_spread.len()
    }

    /// Moves pod `p` to relaxation `level` (called with 0, 1, 2, ... in order). False when
    /// that level has nothing to try.
    pub(super) fn relax_to(&mut self, p: usize, level: usize) -> bool {
        let pods = self.pods;
        let pod = &pods[p];
        let pod_terms = pod.soft_affinity.len() + pod.soft_anti_affinity.len();
        let terms = &mut self.groups.terms[p];
        if level == 0 {
            return self.hold_preference(p, 0);
        }
        if level <= pod_terms {
            if terms.soft_affinity > 0 {
                let first = terms.affinity.len() - terms.soft_affinity;
                terms.affinity.remove(first);
                terms.soft_affinity -= 1;
            } else {
                let first = terms.anti.len() - terms.soft_anti;
                terms.anti.remove(first);
                terms.soft_anti -= 1;
            }
            return true;
        }
        if level - pod_terms <= pod.preferred.len() {
            return self.hold_preference(p, level - pod_terms);
        }
        let first_soft = terms.spread.len() - terms.soft;
        terms.spread.remove(first_soft);
        terms.soft -= 1;
        true
    }

    /// The alternatives pod `p` is placed with now: its required ones, ANDed with the
    /// preferred term being held.
    pub(super) fn alternatives(&self, p: usize) -> &[Requirements] {
        match self.held[p].as_slice() {
            [] => &self.pods[p].requirements,
            held => held,
        }
    }

    /// Holds pod `p`'s `level`-th preferred term (`level == preferred.len()`: none).
    /// False when that term contradicts every required alternative, so the level has
    /// nothing to try.
    fn hold_preference(&mut self, p: usize, level: usize) -> bool {
        let pod = &self.pods[p];
        let Some(preferred) = pod.preferred.get(level) else {
            self.held[p].clear();
            return true;
        };
        self.held[p] = held(&pod.requirements, preferred);
        !self.held[p].is_empty()
    }
}

/// Every required alternative ANDed with `preferred`, dropping those the AND empties.
fn held(required: &[Requirements], preferred: &Requirements) -> Vec<Requirements> {
    required
        .iter()
        .map(|alt| {
            let mut r = alt.clone();
            r.merge(preferred);
            r
        })
        .filter(|r| r.iter().all(|(_, req)| !req.is_empty()))
        .collect()
}
