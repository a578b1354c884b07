//! Packing a mix of free pods by the configuration LP (Gilmore and Gomory): a column is one
//! node, a type and how many pods of each shape it holds, and the LP buys columns
//! fractionally so that every pod is covered at the least price. Column generation finds
//! the columns worth having: the LP's dual prices say what each shape is worth, and for
//! each type the most valuable fill at those prices is added when it is worth more than
//! the type costs. The LP's answer is then made whole: every column the LP buys at least
//! once is bought that many times, and the pods left over are packed by the exact program
//! or the greedy, then the tail is merged pairwise.
//!
//! This is what closes the gap the greedy leaves on mixes of assorted sizes: the greedy
//! buys one node at a time, the LP sees the whole mix and pairs CPU-heavy with
//! memory-heavy pods on the types where that is cheapest. The LP is microlp's (pure Rust,
//! maintained); an LP it cannot solve leaves the greedy's answer in place.

use microlp::{ComparisonOp, OptimizationDirection, Problem, SolveOptions};

use super::exact::exact_optimum;
use super::packing::{
    Bin, Node, Vector, cheapest_holding, fit_count, greedy, merge_pairs, price, undominated, used,
};

/// Rounds of column generation at most for the whole mix, and for each step of the dive
/// (the leftover changes little from one step to the next).
const MAX_ROUNDS: usize = 30;
const DIVE_ROUNDS: usize = 2;
const COLUMNS_PER_ROUND: usize = 24;
/// Branch-and-bound nodes one type's fill may visit; past it the best fill found so far
/// is used (a heuristic column is still a real node, only perhaps not the best one).
const FILL_NODE_LIMIT: u32 = 400;
/// Distinct shapes past which the mix is left to the greedy: the LP has one row per shape.
pub const MAX_SHAPES: usize = 64;
/// Branch-and-bound nodes the integer program over the columns may take, and the mixes
/// it is tried on.
const MASTER_NODE_LIMIT: u64 = 300;
const MASTER_MAX_PODS: u32 = 100;
/// Leftovers of the dive up to this many pods get new columns of their own.
const DIVE_PRICING_MAX_PODS: u32 = 100;
/// A column improves the LP when it is worth more than its price by this share.
const IMPROVES: f64 = 1e-6;

/// The packing, or `None` when the mix is out of this method's range or the LP fails.
/// `seeds` are packings found otherwise: their nodes are the first columns.
pub fn configuration_packing(
    bins: &[Bin],
    shapes: &[(Vector, u32)],
    seeds: &[&[Node]],
) -> Option<Vec<Node>> {
    if shapes.is_empty() || shapes.len() > MAX_SHAPES || bins.is_empty() {
        return None;
    }
    if bins.iter().any(|b| !b.price.is_finite() || b.price <= 0.0) {
        return None;
    }
    let mut lp = Columns {
        bins,
        kept: undominated(bins),
        shapes,
        columns: vec![],
    };
    for seed in seeds {
        for node in *seed {
            lp.add(node.counts.clone());
        }
    }
    // Each shape alone on its cheapest type per pod: the dual LP is then bounded.
    for (s, (size, n)) in shapes.iter().enumerate() {
        let best = lp
            .kept
            .iter()
            .filter_map(|&k| {
                let fit = fit_count(&bins[k].free, size).min(i64::from(*n));
                (fit > 0).then(|| (bins[k].price / fit as f64, fit))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))?;
        let mut counts = vec![0; shapes.len()];
        counts[s] = best.1 as u32;
        lp.add(counts);
    }
    let mut left: Vec<u32> = shapes.iter().map(|(_, n)| *n).collect();
    lp.generate(&left, MAX_ROUNDS)?;
    // Every column the LP buys whole, as many times as it does.
    let bought = lp.primal(&left)?;
    let mut nodes: Vec<Node> = vec![];
    let mut order: Vec<usize> = (0..lp.columns.len()).collect();
    order.sort_by(|&a, &b| bought[b].total_cmp(&bought[a]));
    for c in order {
        // x within the LP's tolerance of an integer counts as that integer.
        for _ in 0..(bought[c] + 1e-6).floor() as u32 {
            if !take(&lp.columns[c].counts, &mut left, &mut nodes) {
                break;
            }
        }
    }
    // The rest by diving: buy one node of the column the LP wants most, solve again for
    // what is left, until the leftover is small enough for the exact program.
    while left.iter().any(|n| *n > 0) {
        let rest: Vec<(Vector, u32)> = shapes
            .iter()
            .zip(&left)
            .map(|((size, _), n)| (*size, *n))
            .collect();
        if let Some(exact) = exact_optimum(bins, &rest) {
            nodes.extend(exact);
            break;
        }
        // New columns for what is left only while it is small: on a large mix each
        // step's pricing would cost more than the rounding it saves.
        let rounds = if left.iter().sum::<u32>() <= DIVE_PRICING_MAX_PODS {
            DIVE_ROUNDS
        } else {
            0
        };
        let next = lp.generate(&left, rounds).and_then(|_| {
            let x = lp.primal(&left)?;
            let c = (0..x.len())
                .filter(|&c| {
                    lp.columns[c]
                        .counts
                        .iter()
                        .zip(&left)
                        .any(|(a, l)| *a > 0 && *l > 0)
                })
                .max_by(|&a, &b| x[a].total_cmp(&x[b]))?;
            (x[c] > 1e-9).then_some(c)
        });
        match next {
            Some(c) => {
                let counts = lp.columns[c].counts.clone();
                take(&counts, &mut left, &mut nodes);
            }
            None => {
                nodes.extend(greedy(bins, &rest)?);
                break;
            }
        }
    }
    let mut best = finish(bins, &lp.kept, shapes, nodes)?;
    // The columns as an integer program (price-and-branch): on a mix of few pods, where
    // one node more or less is a large share of the price, its search often beats the
    // dive; on a large mix the dive's rounding is a small share and the search would
    // cost more than the rest together.
    let pods: u32 = shapes.iter().map(|(_, n)| n).sum();
    if pods <= MASTER_MAX_PODS
        && let Some(whole) = lp.integer(MASTER_NODE_LIMIT)
    {
        let mut left: Vec<u32> = shapes.iter().map(|(_, n)| *n).collect();
        let mut nodes = vec![];
        for (c, copies) in whole.iter().enumerate() {
            for _ in 0..*copies {
                take(&lp.columns[c].counts, &mut left, &mut nodes);
            }
        }
        if left.iter().all(|n| *n == 0)
            && let Some(nodes) = finish(bins, &lp.kept, shapes, nodes)
            && price(bins, &nodes) < price(bins, &best) - 1e-9
        {
            best = nodes;
        }
    }
    Some(best)
}

/// Each node on the cheapest type that holds it, then the emptiest merged in pairs.
fn finish(
    bins: &[Bin],
    kept: &[usize],
    shapes: &[(Vector, u32)],
    mut nodes: Vec<Node>,
) -> Option<Vec<Node>> {
    for node in &mut nodes {
        node.bin = cheapest_holding(bins, &used(shapes, &node.counts))?;
    }
    merge_pairs(bins, kept, shapes, &mut nodes);
    Some(nodes)
}

/// One node of `column`, holding no more of a shape than is `left`; false when it would
/// hold nothing.
fn take(column: &[u32], left: &mut [u32], nodes: &mut Vec<Node>) -> bool {
    let counts: Vec<u32> = column
        .iter()
        .zip(left.iter())
        .map(|(a, l)| *a.min(l))
        .collect();
    if counts.iter().all(|n| *n == 0) {
        return false;
    }
    for (l, n) in left.iter_mut().zip(&counts) {
        *l -= n;
    }
    nodes.push(Node { bin: 0, counts });
    true
}

/// The LP's columns so far, over the undominated types.
struct Columns<'a> {
    bins: &'a [Bin],
    kept: Vec<usize>,
    shapes: &'a [(Vector, u32)],
    columns: Vec<Column>,
}

struct Column {
    price: f64,
    counts: Vec<u32>,
}

impl Column {
    fn row(&self, y: &[microlp::Variable]) -> Vec<(microlp::Variable, f64)> {
        self.counts
            .iter()
            .zip(y)
            .filter(|(c, _)| **c > 0)
            .map(|(c, v)| (*v, f64::from(*c)))
            .collect()
    }
}

impl Columns<'_> {
    /// Adds a column priced at the cheapest type that holds it; false when it holds
    /// nothing, no type holds it, or it is there already.
    fn add(&mut self, counts: Vec<u32>) -> bool {
        let Some(bin) = cheapest_holding(self.bins, &used(self.shapes, &counts)) else {
            return false;
        };
        if counts.iter().all(|c| *c == 0) || self.columns.iter().any(|c| c.counts == counts) {
            return false;
        }
        self.columns.push(Column {
            price: self.bins[bin].price,
            counts,
        });
        true
    }

    /// Column generation for covering `demand`: the dual (max Σ demand_s y_s subject to
    /// Σ_s a_s y_s <= price for every column) is solved, each type's best fill at those
    /// prices is added when it is worth more than the type costs, and again, for at most
    /// `rounds` rounds or until no fill improves.
    fn generate(&mut self, demand: &[u32], rounds: usize) -> Option<()> {
        let mut dual = Problem::new(OptimizationDirection::Maximize);
        let y: Vec<_> = demand
            .iter()
            .map(|n| dual.add_var(f64::from(*n), (0.0, f64::INFINITY)))
            .collect();
        for c in &self.columns {
            dual.add_constraint(c.row(&y).as_slice(), ComparisonOp::Le, c.price);
        }
        let mut solution = dual.solve().ok()?.into_solution().ok()?;
        for _ in 0..rounds {
            let values: Vec<f64> = y.iter().map(|v| solution.var_value(*v).max(0.0)).collect();
            let mut improving: Vec<(f64, Vec<u32>)> = self
                .kept
                .iter()
                .filter_map(|&k| {
                    let bin = &self.bins[k];
                    let (counts, value) = best_fill(bin, self.shapes, demand, &values)?;
                    (value > bin.price * (1.0 + IMPROVES)).then(|| (value / bin.price, counts))
                })
                .collect();
            if improving.is_empty() {
                break;
            }
            improving.sort_by(|a, b| b.0.total_cmp(&a.0));
            let mut added = 0;
            for (_, counts) in improving {
                if added == COLUMNS_PER_ROUND {
                    break;
                }
                if self.add(counts) {
                    let c = self.columns.last().expect("just added");
                    solution = solution
                        .add_constraint(c.row(&y).as_slice(), ComparisonOp::Le, c.price)
                        .ok()?
                        .into_solution()
                        .ok()?;
                    added += 1;
                }
            }
            if added == 0 {
                break;
            }
        }
        Some(())
    }

    /// The cheapest whole number of each column that covers every pod, as far as a
    /// branch and bound of `node_limit` nodes finds; `None` when it finds none.
    fn integer(&self, node_limit: u64) -> Option<Vec<u32>> {
        let mut ip = Problem::new(OptimizationDirection::Minimize);
        let most = self.shapes.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let x: Vec<_> = self
            .columns
            .iter()
            .map(|c| ip.add_integer_var(c.price, (0, i32::try_from(most).unwrap_or(i32::MAX))))
            .collect();
        for (s, (_, n)) in self.shapes.iter().enumerate() {
            let row: Vec<_> = self
                .columns
                .iter()
                .zip(&x)
                .filter(|(c, _)| c.counts[s] > 0)
                .map(|(c, v)| (*v, f64::from(c.counts[s])))
                .collect();
            ip.add_constraint(row.as_slice(), ComparisonOp::Ge, f64::from(*n));
        }
        let mut options = SolveOptions::default();
        options.node_limit = Some(node_limit);
        let outcome = ip.solve_with(options).ok()?;
        let solution = outcome.solution()?;
        Some(
            x.iter()
                .map(|v| solution.var_value(*v).round().max(0.0) as u32)
                .collect(),
        )
    }

    /// How many of each column the LP buys: min Σ price x subject to covering `demand`.
    fn primal(&self, demand: &[u32]) -> Option<Vec<f64>> {
        let mut lp = Problem::new(OptimizationDirection::Minimize);
        let x: Vec<_> = self
            .columns
            .iter()
            .map(|c| lp.add_var(c.price, (0.0, f64::INFINITY)))
            .collect();
        for (s, n) in demand.iter().enumerate().filter(|(_, n)| **n > 0) {
            let row: Vec<_> = self
                .columns
                .iter()
                .zip(&x)
                .filter(|(c, _)| c.counts[s] > 0)
                .map(|(c, v)| (*v, f64::from(c.counts[s].min(*n))))
                .collect();
            lp.add_constraint(row.as_slice(), ComparisonOp::Ge, f64::from(*n));
        }
        let solution = lp.solve().ok()?.into_solution().ok()?;
        Some(x.iter().map(|v| solution.var_value(*v).max(0.0)).collect())
    }
}

/// The most valuable fill of one type at `values` per pod: a depth-first search over how
/// many pods of each shape, most valuable per share of the room first, cut off by a
/// fractional bound and after [`FILL_NODE_LIMIT`] nodes.
fn best_fill(
    bin: &Bin,
    shapes: &[(Vector, u32)],
    demand: &[u32],
    values: &[f64],
) -> Option<(Vec<u32>, f64)> {
    let share = |s: usize| -> f64 {
        (0..4)
            .filter(|&d| bin.free[d] > 0)
            .map(|d| shapes[s].0[d] as f64 / bin.free[d] as f64)
            .fold(0.0, f64::max)
    };
    let mut items: Vec<usize> = (0..shapes.len())
        .filter(|&s| demand[s] > 0 && values[s] > 1e-12 && fit_count(&bin.free, &shapes[s].0) > 0)
        .collect();
    items.sort_by(|&a, &b| {
        (values[b] / share(b).max(1e-12)).total_cmp(&(values[a] / share(a).max(1e-12)))
    });
    // Per dimension, the items' positions by value per unit of that dimension.
    let by_dim: [Vec<usize>; 4] = std::array::from_fn(|d| {
        let ratio = |pos: usize| {
            let s = items[pos];
            match shapes[s].0[d] {
                0 => f64::INFINITY,
                size => values[s] / size as f64,
            }
        };
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by(|&a, &b| ratio(b).total_cmp(&ratio(a)));
        order
    });
    let mut search = Fill {
        shapes,
        demand,
        values,
        items: &items,
        by_dim,
        counts: vec![0; shapes.len()],
        best: (vec![0; shapes.len()], 0.0),
        visited: 0,
    };
    // A type whose room cannot be worth its price even with pods split adds nothing.
    if search.upper(0, &bin.free) <= bin.price * (1.0 + IMPROVES) {
        return None;
    }
    search.descend(0, bin.free, 0.0);
    Some(search.best)
}

struct Fill<'a> {
    shapes: &'a [(Vector, u32)],
    /// How many pods of each shape a fill may take.
    demand: &'a [u32],
    values: &'a [f64],
    /// Shapes worth something that fit, densest first.
    items: &'a [usize],
    by_dim: [Vec<usize>; 4],
    counts: Vec<u32>,
    best: (Vec<u32>, f64),
    visited: u32,
}

impl Fill<'_> {
    /// What items `from..` could add within `room`: in each dimension alone the
    /// fractional knapsack (a pod may be split), and the smallest of those.
    fn upper(&self, from: usize, room: &Vector) -> f64 {
        let mut best = f64::INFINITY;
        for (d, order) in self.by_dim.iter().enumerate() {
            let mut left = room[d] as f64;
            let mut total = 0.0;
            for &pos in order.iter().filter(|&&pos| pos >= from) {
                let s = self.items[pos];
                let (size, n) = (self.shapes[s].0[d] as f64, f64::from(self.demand[s]));
                let take = if size == 0.0 { n } else { (left / size).min(n) };
                total += take * self.values[s];
                left -= take * size;
                if left <= 0.0 {
                    break;
                }
            }
            best = best.min(total);
        }
        best
    }

    fn descend(&mut self, i: usize, room: Vector, value: f64) {
        self.visited += 1;
        if value > self.best.1 {
            self.best = (self.counts.clone(), value);
        }
        if i == self.items.len() || self.visited >= FILL_NODE_LIMIT {
            return;
        }
        if value + self.upper(i, &room) <= self.best.1 * (1.0 + 1e-12) {
            return;
        }
        let s = self.items[i];
        let size = self.shapes[s].0;
        let most = fit_count(&room, &size).min(i64::from(self.demand[s]));
        for n in (0..=most).rev() {
            let mut left = room;
            for d in 0..4 {
                left[d] -= size[d] * n;
            }
            self.counts[s] = n as u32;
            self.descend(i + 1, left, value + self.values[s] * n as f64);
            if self.visited >= FILL_NODE_LIMIT {
                break;
            }
        }
        self.counts[s] = 0;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const GIB: i64 = (1 << 30) * 1000;

    fn bin(cpu: i64, mem_gib: i64, price: f64) -> Bin {
        Bin {
            free: [cpu, mem_gib * GIB, 0, 110_000],
            price,
        }
    }

    /// A catalog's shape in small: compute, general and memory types in three sizes,
    /// each size twice the price of the one below.
    fn family() -> Vec<Bin> {
        let mut bins = vec![];
        for (per_cpu_gib, price_per_cpu) in [(2, 0.0425), (4, 0.048), (8, 0.063)] {
            for cpus in [2, 4, 8, 16] {
                bins.push(bin(
                    cpus * 1000,
                    cpus * per_cpu_gib,
                    price_per_cpu * cpus as f64,
                ));
            }
        }
        bins
    }

    fn placed_once_and_fitting(bins: &[Bin], shapes: &[(Vector, u32)], nodes: &[Node]) {
        for (s, (_, n)) in shapes.iter().enumerate() {
            let placed: u32 = nodes.iter().map(|node| node.counts[s]).sum();
            assert_eq!(placed, *n, "shape {s}: {nodes:?}");
        }
        for node in nodes {
            let u = used(shapes, &node.counts);
            assert!(
                u.iter().zip(&bins[node.bin].free).all(|(u, f)| u <= f),
                "{node:?} does not fit {:?}",
                bins[node.bin]
            );
        }
    }

    #[test]
    fn cpu_heavy_and_memory_heavy_pods_share_general_nodes_where_the_greedy_splits_them() {
        let bins = family();
        let shapes = [
            ([1500, GIB / 2, 0, 1000], 12),
            ([250, 6 * GIB, 0, 1000], 12),
            ([500, GIB, 0, 1000], 7),
        ];
        let greedy = greedy(&bins, &shapes).unwrap();
        let packed = configuration_packing(&bins, &shapes, &[&greedy]).unwrap();
        placed_once_and_fitting(&bins, &shapes, &packed);
        assert!(
            price(&bins, &packed) < price(&bins, &greedy) - 1e-9,
            "configuration {} greedy {}",
            price(&bins, &packed),
            price(&bins, &greedy)
        );
    }

    #[test]
    fn a_mix_with_more_shapes_than_the_lp_takes_is_left_to_the_greedy() {
        let shapes: Vec<(Vector, u32)> = (0..=MAX_SHAPES as i64)
            .map(|i| ([100 + i, GIB, 0, 1000], 1))
            .collect();
        assert!(configuration_packing(&family(), &shapes, &[]).is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn every_pod_is_placed_once_on_a_node_that_holds_it(
            mix in prop::collection::vec((0usize..6, 0usize..6, 1u32..12), 1..8),
        ) {
            let bins = family();
            let cpus = [100, 250, 500, 1000, 2000, 3500];
            let mems = [GIB / 8, GIB / 2, GIB, 3 * GIB, 8 * GIB, 20 * GIB];
            let mut shapes: Vec<(Vector, u32)> = vec![];
            for (c, m, n) in mix {
                let size = [cpus[c], mems[m], 0, 1000];
                match shapes.iter_mut().find(|(s, _)| *s == size) {
                    Some((_, k)) => *k += n,
                    None => shapes.push((size, n)),
                }
            }
            let greedy = greedy(&bins, &shapes).unwrap();
            let packed = configuration_packing(&bins, &shapes, &[&greedy]).unwrap();
            placed_once_and_fitting(&bins, &shapes, &packed);
            // Its price against the greedy's is no property: rounding the LP can cost more
            // (a mix of six shapes did), which is why the repack keeps the cheapest of its
            // packings, the greedy's among them (`repack::packings`). Where the LP wins is
            // shown on fixed mixes above.
        }
    }
}
