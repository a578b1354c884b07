//! Preferred node affinity, as Karpenter schedules it: the heaviest preferred term is
//! held as if it were required, ANDed into every required alternative; a pod that cannot
//! schedule so drops it and tries the next, and finally schedules on its required terms
//! alone. A preference that contradicts the pod's own requirements is skipped, never an
//! error: it is only a preference.

use super::requirements::Requirements;
use super::solver::Solver;

impl Solver<'_> {
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
    pub(super) fn hold_preference(&mut self, p: usize, level: usize) -> bool {
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
