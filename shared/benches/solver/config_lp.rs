//! Lower bounds on what any packing of unconstrained pods can cost, tighter than the LPs
//! over summed capacity in `main.rs`, and sharing no code with the solver:
//!
//! - the **configuration LP** (Gilmore and Gomory, 1961): a column is one node, a type and
//!   how many pods of each shape it holds; the LP buys columns fractionally so that every
//!   pod is covered. Every packing is one of its solutions, so its optimum is a lower
//!   bound, and it knows what the summed-capacity LPs do not: a node holds whole pods, and
//!   a pod needs its CPU and its memory on the same node. It is solved through its dual
//!   (`max Σ n_s y_s` subject to `Σ_s a_s y_s <= price` for every column) by column
//!   generation, each type's best column found by an exact branch and bound;
//! - the **exact optimum** of a small set (up to [`EXACT_MAX_PODS`] pods), by dynamic
//!   programming over subsets: a node is any subset of the pods, on the cheapest type
//!   that holds it.

use microlp::{ComparisonOp, OptimizationDirection, Problem};

/// cpu, memory, ephemeral storage and pod slots, in milli-units.
pub type Vector = [i64; 4];

/// A type a node can be: its room for pods and its hourly price.
#[derive(Debug, Clone, Copy)]
pub struct Bin {
    pub free: Vector,
    pub price: f64,
}

/// A distinct pod size and how many pods have it.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub size: Vector,
    pub count: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// $/h: no packing of these pods costs less.
    pub value: f64,
    /// Whether column generation ended with no improving column (the value is then the
    /// LP's optimum), rather than at its iteration limit (a smaller, still valid, bound).
    pub converged: bool,
    pub columns: usize,
    pub iterations: usize,
}

/// Branch-and-bound nodes one pricing call may visit before it answers with an upper
/// bound instead of the exact value (the bound stays valid, only less tight).
const PRICING_NODE_LIMIT: u64 = 20_000;
const MAX_ITERATIONS: usize = 400;
/// A column improves the LP when it is worth more than its price by this share.
const TOLERANCE: f64 = 1e-7;

/// The configuration LP's value for `shapes` over `bins`; `None` when some shape fits no
/// bin (no packing exists) or the LP solver fails.
pub fn config_lp(bins: &[Bin], shapes: &[Shape]) -> Option<Bound> {
    let bins = undominated(bins);
    let mut dual = Problem::new(OptimizationDirection::Maximize);
    let y: Vec<_> = shapes
        .iter()
        .map(|s| dual.add_var(f64::from(s.count), (0.0, f64::INFINITY)))
        .collect();
    // Start with each shape alone on every type that holds it: the dual is then bounded.
    let mut columns = 0;
    for (s, shape) in shapes.iter().enumerate() {
        let mut any = false;
        for bin in &bins {
            let fit = fit_count(&bin.free, &shape.size).min(i64::from(shape.count));
            if fit > 0 {
                dual.add_constraint(&[(y[s], fit as f64)][..], ComparisonOp::Le, bin.price);
                columns += 1;
                any = true;
            }
        }
        if !any {
            return None;
        }
    }
    let mut solution = dual.solve().ok()?.into_solution().ok()?;
    let mut iterations = 0;
    loop {
        iterations += 1;
        let values: Vec<f64> = y.iter().map(|v| solution.var_value(*v).max(0.0)).collect();
        // Each type's most valuable column at these prices, and how much more than its
        // price the best column of any type is worth (theta; at most 1 once converged).
        let mut improving = vec![];
        let mut uppers = vec![];
        for bin in &bins {
            let (best, upper) = knapsack(bin, shapes, &values);
            uppers.push(upper);
            if best.value > bin.price * (1.0 + TOLERANCE) {
                improving.push((best.value / bin.price, best.counts));
            }
        }
        // The search found nothing better, but where it was cut short a better column may
        // still exist: ask the integer program (exact, with a time limit) there.
        if improving.is_empty() {
            for (k, bin) in bins.iter().enumerate() {
                if uppers[k] <= bin.price * (1.0 + TOLERANCE) {
                    continue;
                }
                if let Some((best, upper)) = exact_knapsack(bin, shapes, &values) {
                    uppers[k] = uppers[k].min(upper);
                    if best.value > bin.price * (1.0 + TOLERANCE) {
                        improving.push((best.value / bin.price, best.counts));
                    }
                }
            }
        }
        let theta = bins
            .iter()
            .zip(&uppers)
            .map(|(b, u)| u / b.price)
            .fold(0.0, f64::max);
        let objective: f64 = values
            .iter()
            .zip(shapes)
            .map(|(v, s)| v * f64::from(s.count))
            .sum();
        // Farley's bound: prices scaled down by theta are feasible for every column.
        let bound = objective / theta.max(1.0);
        if improving.is_empty() || iterations >= MAX_ITERATIONS {
            return Some(Bound {
                value: bound,
                converged: improving.is_empty() && theta <= 1.0 + TOLERANCE,
                columns,
                iterations,
            });
        }
        improving.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, counts) in improving.into_iter().take(25) {
            let row: Vec<_> = counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(s, c)| (y[s], f64::from(*c)))
                .collect();
            let price = bins
                .iter()
                .filter(|b| fits(&used(shapes, &counts), &b.free))
                .map(|b| b.price)
                .fold(f64::INFINITY, f64::min);
            solution = solution
                .add_constraint(row.as_slice(), ComparisonOp::Le, price)
                .ok()?
                .into_solution()
                .ok()?;
            columns += 1;
        }
    }
}

/// The most valuable column of one type: how many pods of each shape, within its room and
/// the shapes' counts, maximise `Σ counts · values`. Returns the best column found and an
/// upper bound on the best there is: the value itself when the search finished, else the
/// largest bound of the branches it left unexplored, or the knapsack's LP relaxation
/// (whole room, pods split) when that is smaller.
fn knapsack(bin: &Bin, shapes: &[Shape], values: &[f64]) -> (Column, f64) {
    // Only shapes worth something are packed; order them by value per share of the room.
    let mut items: Vec<usize> = (0..shapes.len())
        .filter(|&s| values[s] > 1e-12 && fit_count(&bin.free, &shapes[s].size) > 0)
        .collect();
    let density = |s: usize| {
        let share: f64 = (0..4)
            .filter(|&d| bin.free[d] > 0)
            .map(|d| shapes[s].size[d] as f64 / bin.free[d] as f64)
            .fold(0.0, f64::max);
        values[s] / share.max(1e-12)
    };
    items.sort_by(|&a, &b| density(b).total_cmp(&density(a)));
    // Per dimension, the items' positions by value per unit of that dimension.
    let by_dim: Vec<Vec<usize>> = (0..4)
        .map(|d| {
            let ratio = |pos: usize| {
                let s = items[pos];
                let size = shapes[s].size[d];
                if size == 0 {
                    f64::INFINITY
                } else {
                    values[s] / size as f64
                }
            };
            let mut order: Vec<usize> = (0..items.len()).collect();
            order.sort_by(|&a, &b| ratio(b).total_cmp(&ratio(a)));
            order
        })
        .collect();
    let mut search = Search {
        shapes,
        values,
        items: &items,
        by_dim,
        best: Column {
            counts: vec![0; shapes.len()],
            value: 0.0,
        },
        counts: vec![0; shapes.len()],
        visited: 0,
        open: 0.0,
    };
    search.descend(0, bin.free, 0.0);
    let upper = if search.visited >= PRICING_NODE_LIMIT {
        search
            .open
            .max(search.best.value)
            .min(lp_relaxation(bin, shapes, values).unwrap_or(f64::INFINITY))
    } else {
        search.best.value
    };
    (search.best, upper)
}

/// How long the integer program may search one type's best column.
const EXACT_PRICING_TIME: std::time::Duration = std::time::Duration::from_secs(3);

/// One type's best column by microlp's branch and bound, and an upper bound on its value
/// (the value when proven optimal, the LP relaxation otherwise).
fn exact_knapsack(bin: &Bin, shapes: &[Shape], values: &[f64]) -> Option<(Column, f64)> {
    let mut mip = Problem::new(OptimizationDirection::Maximize);
    mip.set_time_limit(EXACT_PRICING_TIME);
    let vars: Vec<_> = shapes
        .iter()
        .zip(values)
        .map(|(s, v)| {
            let most = fit_count(&bin.free, &s.size).min(i64::from(s.count)) as i32;
            mip.add_integer_var(*v, (0, most.max(0)))
        })
        .collect();
    room_rows(&mut mip, bin, shapes, &vars);
    let outcome = mip.solve().ok()?;
    let optimal = outcome.is_optimal();
    let solution = outcome.into_solution().ok()?;
    let counts: Vec<u32> = vars
        .iter()
        .map(|v| solution.var_value(*v).round().max(0.0) as u32)
        .collect();
    // Recomputed from the rounded counts, and checked to fit: the solver's tolerances
    // must not make a column that does not exist.
    if !fits(&used(shapes, &counts), &bin.free) {
        return None;
    }
    let value = counts
        .iter()
        .zip(values)
        .map(|(c, v)| f64::from(*c) * v)
        .sum();
    let upper = if optimal {
        value
    } else {
        lp_relaxation(bin, shapes, values)?
    };
    Some((Column { counts, value }, upper.max(value)))
}

/// One row per dimension: the pods `vars` counts fit the type's room (in millions of
/// milli-units, so the coefficients stay near one).
fn room_rows(problem: &mut Problem, bin: &Bin, shapes: &[Shape], vars: &[microlp::Variable]) {
    for d in 0..4 {
        let row: Vec<_> = shapes
            .iter()
            .zip(vars)
            .filter(|(s, _)| s.size[d] > 0)
            .map(|(s, v)| (*v, s.size[d] as f64 / 1e6))
            .collect();
        if !row.is_empty() {
            problem.add_constraint(row.as_slice(), ComparisonOp::Le, bin.free[d] as f64 / 1e6);
        }
    }
}

/// The knapsack with pods split: an upper bound on any column's value.
fn lp_relaxation(bin: &Bin, shapes: &[Shape], values: &[f64]) -> Option<f64> {
    let mut lp = Problem::new(OptimizationDirection::Maximize);
    let vars: Vec<_> = shapes
        .iter()
        .zip(values)
        .map(|(s, v)| lp.add_var(*v, (0.0, f64::from(s.count))))
        .collect();
    room_rows(&mut lp, bin, shapes, &vars);
    Some(lp.solve().ok()?.into_solution().ok()?.objective())
}

#[derive(Debug, Clone)]
struct Column {
    counts: Vec<u32>,
    value: f64,
}

struct Search<'a> {
    shapes: &'a [Shape],
    values: &'a [f64],
    items: &'a [usize],
    by_dim: Vec<Vec<usize>>,
    best: Column,
    counts: Vec<u32>,
    visited: u64,
    /// The largest bound of a branch left unexplored at the node limit.
    open: f64,
}

impl Search<'_> {
    /// An upper bound on what items `from..` add within `room`: in each dimension alone the
    /// fractional knapsack (a pod may be split), and the smallest of those.
    fn upper(&self, from: usize, room: &Vector) -> f64 {
        let mut best = f64::INFINITY;
        for (d, order) in self.by_dim.iter().enumerate() {
            let mut left = room[d] as f64;
            let mut total = 0.0;
            for &pos in order {
                if pos < from {
                    continue;
                }
                let s = self.items[pos];
                let size = self.shapes[s].size[d] as f64;
                let n = f64::from(self.shapes[s].count);
                if size == 0.0 {
                    total += self.values[s] * n;
                    continue;
                }
                let take = (left / size).min(n);
                total += take * self.values[s];
                left -= take * size;
                if left <= 0.0 {
                    break;
                }
            }
            best = best.min(total);
            if best <= 0.0 {
                break;
            }
        }
        best
    }

    fn descend(&mut self, i: usize, room: Vector, value: f64) {
        self.visited += 1;
        if value > self.best.value {
            self.best = Column {
                counts: self.counts.clone(),
                value,
            };
        }
        if i == self.items.len() {
            return;
        }
        let bound = value + self.upper(i, &room);
        if bound <= self.best.value * (1.0 + 1e-12) {
            return;
        }
        if self.visited >= PRICING_NODE_LIMIT {
            self.open = self.open.max(bound);
            return;
        }
        let s = self.items[i];
        let size = self.shapes[s].size;
        let most = fit_count(&room, &size).min(i64::from(self.shapes[s].count));
        for n in (0..=most).rev() {
            let mut left = room;
            for d in 0..4 {
                left[d] -= size[d] * n;
            }
            self.counts[s] = n as u32;
            self.descend(i + 1, left, value + self.values[s] * n as f64);
        }
        self.counts[s] = 0;
    }
}

/// Up to this many pods the exact optimum is computed (3^n subset pairs).
pub const EXACT_MAX_PODS: usize = 13;

/// The cheapest packing of `pods` (each a size), exactly; `None` for more than
/// [`EXACT_MAX_PODS`] pods or when some pod fits no bin.
pub fn exact_optimum(bins: &[Bin], pods: &[Vector]) -> Option<f64> {
    let n = pods.len();
    if n > EXACT_MAX_PODS {
        return None;
    }
    let bins = undominated(bins);
    let full = (1usize << n) - 1;
    // node[m]: the cheapest type that holds the pods of subset m together.
    let node: Vec<f64> = (0..=full)
        .map(|m| {
            let mut sum = [0i64; 4];
            for (p, size) in pods.iter().enumerate() {
                if m & (1 << p) != 0 {
                    for d in 0..4 {
                        sum[d] += size[d];
                    }
                }
            }
            bins.iter()
                .filter(|b| fits(&sum, &b.free))
                .map(|b| b.price)
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let mut best = vec![f64::INFINITY; full + 1];
    best[0] = 0.0;
    for m in 1..=full {
        // The node holding the lowest pod of m is some subset of m that contains it.
        let low = m & m.wrapping_neg();
        let rest = m ^ low;
        let mut sub = rest;
        loop {
            let with = sub | low;
            let cost = node[with] + best[m ^ with];
            if cost < best[m] {
                best[m] = cost;
            }
            if sub == 0 {
                break;
            }
            sub = (sub - 1) & rest;
        }
    }
    best[full].is_finite().then_some(best[full])
}

fn fit_count(free: &Vector, each: &Vector) -> i64 {
    free.iter()
        .zip(each)
        .filter(|(_, e)| **e > 0)
        .map(|(f, e)| (f / e).max(0))
        .min()
        .unwrap_or(i64::MAX)
}

fn fits(used: &Vector, free: &Vector) -> bool {
    used.iter().zip(free).all(|(u, f)| u <= f)
}

fn used(shapes: &[Shape], counts: &[u32]) -> Vector {
    let mut out = [0i64; 4];
    for (s, &n) in counts.iter().enumerate() {
        for (o, size) in out.iter_mut().zip(&shapes[s].size) {
            *o += size * i64::from(n);
        }
    }
    out
}

/// Types no packing needs: another is at most as dear with at least as much room.
fn undominated(bins: &[Bin]) -> Vec<Bin> {
    let mut order: Vec<Bin> = bins.to_vec();
    order.sort_by(|a, b| a.price.total_cmp(&b.price));
    let mut kept: Vec<Bin> = vec![];
    for b in order {
        if !kept
            .iter()
            .any(|k| k.price <= b.price && fits(&b.free, &k.free))
        {
            kept.push(b);
        }
    }
    kept
}
