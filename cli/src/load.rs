//! NodePools, node classes and workloads from the inputs, with every problem found in them:
//! while loading, by validation, and in the NodePool settings the functions read.

use nodewright::api::{Inputs, Problem, not_yet_reported, validate};

use crate::input::Source;
use crate::settings;

/// The objects read and every problem, errors and warnings, each reported once.
pub fn load(sources: &[Source]) -> (Inputs, Vec<Problem>) {
    let mut inputs = Inputs::default();
    let mut problems = Vec::new();
    for s in sources {
        problems.extend(inputs.load_str(&s.name, &s.text));
    }
    let mut checked = validate(&inputs);
    checked.extend(settings::problems(&inputs));
    let checked = not_yet_reported(&problems, checked);
    problems.extend(checked);
    (inputs, problems)
}
