//! The NodePool settings nodewright reads from its own annotations and the budgets'
//! schedules: what the functions would have to fall back from. The sweeper keeps every node
//! of a pool whose budgets or capacity windows it cannot read, and the interruption function
//! uses `replace` for a rebalance value it does not know; offline they are input errors.

use nodewright::api::{Inputs, NodePool, Problem, Severity, Source};
use nodewright::disruption::{pool_budgets, pool_capacity};
use nodewright::interruption::{REBALANCE_ANNOTATION, RebalancePolicy};

/// Every such setting of every NodePool read (in part or whole) that cannot be read.
pub fn problems(inputs: &Inputs) -> Vec<Problem> {
    let whole = inputs.node_pools.iter().zip(&inputs.node_pool_sources);
    let partial = inputs.partial_node_pools.iter().map(|(np, s)| (np, s));
    whole
        .chain(partial)
        .flat_map(|(np, source)| of_pool(np, source))
        .collect()
}

fn of_pool(np: &NodePool, source: &Source) -> Vec<Problem> {
    let problem = |field: String, message: String| Problem {
        file: source.file.clone(),
        document: source.describe(),
        field,
        message,
        severity: Severity::Error,
    };
    let mut out = Vec::new();
    for e in [pool_budgets(np).err(), pool_capacity(np).err()]
        .into_iter()
        .flatten()
    {
        out.push(problem(e.field, e.message));
    }
    let rebalance = np.metadata.annotations.get(REBALANCE_ANNOTATION);
    if let Err(message) = RebalancePolicy::from_annotation(rebalance.map(String::as_str)) {
        out.push(problem(
            format!("metadata.annotations[{REBALANCE_ANNOTATION}]"),
            message,
        ));
    }
    out
}
