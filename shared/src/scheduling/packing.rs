//! Cost-aware bin packing of pods that carry no constraint but their size: the exact
//! optimum for identical pods, and a dual-priced greedy for mixes. Pure functions over
//! small vectors (cpu, memory, ephemeral storage, pod slots), so they are cheap to call
//! on every plan and easy to test against brute force.

use crate::resources::Resources;

/// cpu, memory, ephemeral storage and pod slots, in milli-units.
pub type Vector = [i64; 4];

pub fn vector(r: &Resources) -> Vector {
    [r.cpu, r.memory, r.ephemeral_storage, r.pods]
}

/// A type a node can be: its room after overhead and DaemonSets, and its hourly price.
#[derive(Debug, Clone, Copy)]
pub struct Bin {
    pub free: Vector,
    pub price: f64,
}

/// One node of a packing: the index of its bin and how many pods of each shape it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub bin: usize,
    pub counts: Vec<u32>,
}

/// How many pods of size `each` fit in `free` (`i64::MAX` for a zero-sized pod).
pub fn fit_count(free: &Vector, each: &Vector) -> i64 {
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

/// The cheapest bin that holds `used`, by price then by index (bins come cheapest first).
pub fn cheapest_holding(bins: &[Bin], used: &Vector) -> Option<usize> {
    bins.iter()
        .enumerate()
        .filter(|(_, b)| fits(used, &b.free))
        .min_by(|a, b| a.1.price.total_cmp(&b.1.price).then(a.0.cmp(&b.0)))
        .map(|(i, _)| i)
}

/// Drops bins that another bin beats: at most its price with at least its room in every
/// dimension. No packing needs a dominated bin, and the greedy below scans every bin left
/// once per node, so this keeps it fast on a 1,000-type catalog.
pub fn undominated(bins: &[Bin]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..bins.len()).collect();
    order.sort_by(|&a, &b| bins[a].price.total_cmp(&bins[b].price).then(a.cmp(&b)));
    let mut kept: Vec<usize> = vec![];
    for i in order {
        let beaten = kept
            .iter()
            .any(|&k| bins[k].price <= bins[i].price && fits(&bins[i].free, &bins[k].free));
        if !beaten {
            kept.push(i);
        }
    }
    kept
}

/// Upper bound on the pods per node the exact optimum below tabulates; larger counts
/// fall back to the greedy (EC2's largest max-pods is 737).
const MAX_DP_CELLS: usize = 40_000_000;

/// The cheapest set of nodes for `n` pods of one shape, exactly: a node of bin `k` holds
/// `fit_count` of them, and `best[m] = min over c (cheapest bin holding c) + best[m - c]`
/// is a dynamic program over the pod count (an unbounded knapsack cover). Returns the
/// total price and the nodes as (bin, pods on it), or `None` when no bin holds one pod
/// or the table would be too large.
pub fn identical_optimum(
    bins: &[Bin],
    shape: &Vector,
    n: usize,
) -> Option<(f64, Vec<(usize, usize)>)> {
    if n == 0 {
        return Some((0.0, vec![]));
    }
    // cheapest[c]: the cheapest bin that holds at least c pods.
    let mut cheapest: Vec<Option<(f64, usize)>> = vec![None; n + 1];
    for (k, b) in bins.iter().enumerate() {
        let c = fit_count(&b.free, shape).min(n as i64);
        if c <= 0 {
            continue;
        }
        let c = c as usize;
        if cheapest[c].is_none_or(|(p, _)| b.price < p) {
            cheapest[c] = Some((b.price, k));
        }
    }
    for c in (1..n).rev() {
        if let Some(next) = cheapest[c + 1]
            && cheapest[c].is_none_or(|(p, _)| next.0 < p)
        {
            cheapest[c] = Some(next);
        }
    }
    let cmax = (1..=n).rev().find(|&c| cheapest[c].is_some())?;
    if n.saturating_mul(cmax) > MAX_DP_CELLS {
        return None;
    }
    let mut best = vec![f64::INFINITY; n + 1];
    let mut take = vec![0usize; n + 1];
    best[0] = 0.0;
    for m in 1..=n {
        // Largest nodes first and only a strictly cheaper total replaces one: on a tie in
        // price the plan has fewer nodes.
        for c in (1..=cmax.min(m)).rev() {
            if let Some((p, _)) = cheapest[c] {
                let cost = p + best[m - c];
                if cost < best[m] - 1e-12 {
                    best[m] = cost;
                    take[m] = c;
                }
            }
        }
    }
    let mut nodes = vec![];
    let mut m = n;
    while m > 0 {
        let c = take[m];
        let (_, k) = cheapest[c]?;
        nodes.push((k, c));
        m -= c;
    }
    Some((best[n], nodes))
}

/// Prices per unit of each dimension such that no bin is worth more than it costs: the
/// dual of the fractional cover "buy bins whose summed room covers `demand`", found by a
/// search over price directions (four dimensions, a few hundred directions: this is a
/// scoring rule for the greedy, not a bound, so approximate is enough).
pub fn dual_prices(bins: &[Bin], demand: &Vector) -> [f64; 4] {
    // Dimensions in units of the demand, so directions are comparable.
    let scale: Vec<f64> = demand.iter().map(|&d| (d.max(1)) as f64).collect();
    let mut best = (f64::NEG_INFINITY, [0.0; 4]);
    const N: usize = 12;
    for a in 0..=N {
        for b in 0..=N - a {
            for c in 0..=N - a - b {
                let d = N - a - b - c;
                let w = [a, b, c, d].map(|x| x as f64 / N as f64);
                let value =
                    |v: &Vector| -> f64 { (0..4).map(|i| w[i] * v[i] as f64 / scale[i]).sum() };
                let t = bins
                    .iter()
                    .map(|bin| {
                        let v = value(&bin.free);
                        if v > 0.0 {
                            bin.price / v
                        } else {
                            f64::INFINITY
                        }
                    })
                    .fold(f64::INFINITY, f64::min);
                let objective = t * value(demand);
                if t.is_finite() && objective > best.0 {
                    best = (objective, [0, 1, 2, 3].map(|i| t * w[i] / scale[i]));
                }
            }
        }
    }
    best.1
}

/// Packs `shapes` (size, count) into nodes, one node at a time: every bin is filled
/// first-fit-decreasing from what is left, and the node that packs the most value (pods
/// priced at the dual prices) per dollar is bought. A pattern is repeated while the same
/// fill would come out again. `None` when some pod fits no bin.
pub fn greedy(bins: &[Bin], shapes: &[(Vector, u32)]) -> Option<Vec<Node>> {
    let demand = used(shapes, &shapes.iter().map(|s| s.1).collect::<Vec<_>>());
    let candidates = undominated(bins);
    let kept: Vec<Bin> = candidates.iter().map(|&k| bins[k]).collect();
    let y = dual_prices(&kept, &demand);
    let value = |v: &Vector| -> f64 { (0..4).map(|i| y[i] * v[i] as f64).sum() };
    // Most valuable pods first: the first-fit-decreasing fill of one node.
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    order.sort_by(|&a, &b| value(&shapes[b].0).total_cmp(&value(&shapes[a].0)));
    let orders = [order];
    let mut left: Vec<u32> = shapes.iter().map(|s| s.1).collect();
    let mut nodes = vec![];
    let mut fill = vec![0u32; shapes.len()];
    while left.iter().any(|&n| n > 0) {
        // (efficiency, value, bin, fill)
        let mut best: Option<(f64, f64, usize, Vec<u32>)> = None;
        for &k in &candidates {
            for order in &orders {
                let mut free = bins[k].free;
                let mut packed = 0.0;
                for &s in order {
                    let (v, _) = &shapes[s];
                    let t = fit_count(&free, v).min(i64::from(left[s])).max(0);
                    fill[s] = t as u32;
                    if t > 0 {
                        for (f, x) in free.iter_mut().zip(v) {
                            *f -= x * t;
                        }
                        // The dual prices can value a shape at zero (a resource no bin
                        // runs short of): a pod placed still counts a little, or a node
                        // holding only such pods would never be chosen and the pack
                        // would give up on pods that fit.
                        packed += (value(v) + 1e-9) * t as f64;
                    }
                }
                if packed <= 0.0 {
                    continue;
                }
                let eff = packed / bins[k].price.max(1e-9);
                let better = best
                    .as_ref()
                    .is_none_or(|(e, p, ..)| eff > e + 1e-12 || (eff >= e - 1e-12 && packed > *p));
                if better {
                    best = Some((eff, packed, k, fill.clone()));
                }
            }
        }
        let (_, _, k, take) = best?;
        let reps = take
            .iter()
            .zip(&left)
            .filter(|(t, _)| **t > 0)
            .map(|(t, l)| l / t)
            .min()
            .unwrap_or(1)
            .max(1);
        for (l, t) in left.iter_mut().zip(&take) {
            *l -= t * reps;
        }
        for _ in 0..reps {
            nodes.push(Node {
                bin: k,
                counts: take.clone(),
            });
        }
    }
    // Each node shrinks to the cheapest bin that holds what it got.
    for node in &mut nodes {
        if let Some(k) = cheapest_holding(bins, &used(shapes, &node.counts)) {
            node.bin = k;
        }
    }
    merge_pairs(bins, &candidates, shapes, &mut nodes);
    Some(nodes)
}

/// First-fit decreasing, each new node the cheapest bin that holds the pod that opened
/// it, then shrunk to the cheapest bin that holds what it got. The plain baseline: the
/// repack keeps it as one option, so a plan of free pods never costs more than it.
/// `None` when some pod fits no bin.
pub fn first_fit_decreasing(bins: &[Bin], shapes: &[(Vector, u32)]) -> Option<Vec<Node>> {
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    order.sort_by(|&a, &b| shapes[b].0[..2].cmp(&shapes[a].0[..2]));
    let mut nodes: Vec<(Node, Vector)> = vec![];
    for s in order {
        let (v, n) = &shapes[s];
        for _ in 0..*n {
            let take = |left: &mut Vector| {
                for (f, x) in left.iter_mut().zip(v) {
                    *f -= x;
                }
            };
            if let Some((node, left)) = nodes.iter_mut().find(|(_, left)| fits(v, left)) {
                take(left);
                node.counts[s] += 1;
                continue;
            }
            let k = cheapest_holding(bins, v)?;
            let mut left = bins[k].free;
            take(&mut left);
            let mut counts = vec![0; shapes.len()];
            counts[s] = 1;
            nodes.push((Node { bin: k, counts }, left));
        }
    }
    let mut nodes: Vec<Node> = nodes.into_iter().map(|(n, _)| n).collect();
    for node in &mut nodes {
        if let Some(k) = cheapest_holding(bins, &used(shapes, &node.counts)) {
            node.bin = k;
        }
    }
    Some(nodes)
}

pub(super) fn used(shapes: &[(Vector, u32)], counts: &[u32]) -> Vector {
    let mut out = [0i64; 4];
    for (s, &n) in counts.iter().enumerate() {
        for (o, x) in out.iter_mut().zip(&shapes[s].0) {
            *o += x * i64::from(n);
        }
    }
    out
}

/// How many of the emptiest nodes the merge pass looks at: the greedy's tail, where
/// nodes bought late for what was left are small and half full.
const MERGE_WINDOW: usize = 48;

/// Local repair of the greedy's tail: two nodes whose pods one cheaper node holds become
/// that node, until no pair gains.
pub(super) fn merge_pairs(
    bins: &[Bin],
    candidates: &[usize],
    shapes: &[(Vector, u32)],
    nodes: &mut Vec<Node>,
) {
    loop {
        let n = nodes.len();
        let from = n.saturating_sub(MERGE_WINDOW);
        let mut best: Option<(f64, usize, usize, usize)> = None;
        for i in from..n {
            for j in i + 1..n {
                let counts: Vec<u32> = nodes[i]
                    .counts
                    .iter()
                    .zip(&nodes[j].counts)
                    .map(|(a, b)| a + b)
                    .collect();
                // Undominated bins are enough: a dominated one is never cheaper.
                let u = used(shapes, &counts);
                let Some(k) = candidates
                    .iter()
                    .copied()
                    .filter(|&k| fits(&u, &bins[k].free))
                    .min_by(|&a, &b| bins[a].price.total_cmp(&bins[b].price).then(a.cmp(&b)))
                else {
                    continue;
                };
                let gain = bins[nodes[i].bin].price + bins[nodes[j].bin].price - bins[k].price;
                if gain > 1e-9 && best.is_none_or(|(g, ..)| gain > g) {
                    best = Some((gain, i, j, k));
                }
            }
        }
        let Some((_, i, j, k)) = best else {
            return;
        };
        let removed = nodes.remove(j);
        for (a, b) in nodes[i].counts.iter_mut().zip(&removed.counts) {
            *a += b;
        }
        nodes[i].bin = k;
    }
}

pub fn price(bins: &[Bin], nodes: &[Node]) -> f64 {
    nodes.iter().map(|n| bins[n.bin].price).sum()
}
