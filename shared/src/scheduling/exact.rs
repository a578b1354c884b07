//! The exact optimum of a small mix of free pods: what a real cluster's poll sees most
//! often (a handful of pods of a few shapes), and where a greedy's rounding costs the most
//! in relative terms (three assorted pods on two nodes where one would do).
//!
//! A packing is a partition of the pods into nodes, each node the cheapest bin that holds
//! its pods. Pods of one shape are interchangeable, so a group of pods is a count vector
//! (how many of each shape) and the dynamic program runs over count vectors:
//! `best[v] = min over u <= v (cheapest bin holding u) + best[v - u]`, with `u` taking at
//! least one pod of the first shape `v` has, so each partition is counted once. The work
//! is the number of (u, v) pairs, `Π_s (n_s + 1)(n_s + 2) / 2`; a mix past
//! [`MAX_PAIRS`] is left to the greedy.

use super::packing::{Bin, Node, Vector, undominated};

/// About 10 ms in a release build: 12 distinct pods are 3^12 = 531,441 pairs, ten pods of
/// one shape and ten of another 66^2 = 4,356.
const MAX_PAIRS: u64 = 600_000;

/// The cheapest packing of `shapes` (size, count), or `None` when the mix is too large
/// for the dynamic program or some pod fits no bin.
pub fn exact_optimum(bins: &[Bin], shapes: &[(Vector, u32)]) -> Option<Vec<Node>> {
    let mut pairs: u64 = 1;
    for (_, n) in shapes {
        let n = u64::from(*n);
        pairs = pairs.saturating_mul((n + 1) * (n + 2) / 2);
        if pairs > MAX_PAIRS {
            return None;
        }
    }
    let kept: Vec<usize> = undominated(bins);
    // Mixed-radix index of a count vector: digit s is the count of shape s.
    let radix: Vec<usize> = shapes.iter().map(|(_, n)| *n as usize + 1).collect();
    let states: usize = radix.iter().product();
    let digits = |mut i: usize| -> Vec<usize> {
        radix
            .iter()
            .map(|r| {
                let d = i % r;
                i /= r;
                d
            })
            .collect()
    };
    // node[u]: the cheapest bin holding the pods of u, as (price, bin).
    let node: Vec<Option<(f64, usize)>> = (0..states)
        .map(|u| {
            let counts = digits(u);
            let mut sum: Vector = [0; 4];
            for (s, c) in counts.iter().enumerate() {
                for (x, size) in sum.iter_mut().zip(&shapes[s].0) {
                    *x += size * *c as i64;
                }
            }
            kept.iter()
                .filter(|&&k| sum.iter().zip(&bins[k].free).all(|(u, f)| u <= f))
                .map(|&k| (bins[k].price, k))
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
        })
        .collect();
    let mut best = vec![f64::INFINITY; states];
    let mut take = vec![0usize; states];
    best[0] = 0.0;
    // Place values of the digits, to step through the sub-vectors of v.
    let place: Vec<usize> = radix
        .iter()
        .scan(1, |p, r| {
            let here = *p;
            *p *= r;
            Some(here)
        })
        .collect();
    for v in 1..states {
        let dv = digits(v);
        let first = dv.iter().position(|&d| d > 0).expect("v is not zero");
        // Every u <= v digit-wise with u[first] >= 1, counted like an odometer.
        let mut du = vec![0usize; dv.len()];
        du[first] = 1;
        let mut u = place[first];
        loop {
            if let Some((price, _)) = node[u] {
                let cost = price + best[v - u];
                if cost < best[v] - 1e-12 {
                    best[v] = cost;
                    take[v] = u;
                }
            }
            // Next sub-vector: increment the lowest digit that can grow, resetting those
            // below it (the first shape's digit never drops below one).
            let mut s = 0;
            loop {
                if s == du.len() {
                    break;
                }
                let low = usize::from(s == first);
                if du[s] < dv[s] {
                    du[s] += 1;
                    u += place[s];
                    break;
                }
                u -= (du[s] - low) * place[s];
                du[s] = low;
                s += 1;
            }
            if s == du.len() {
                break;
            }
        }
    }
    if !best[states - 1].is_finite() {
        return None;
    }
    let mut nodes = vec![];
    let mut v = states - 1;
    while v > 0 {
        let u = take[v];
        let (_, bin) = node[u]?;
        nodes.push(Node {
            bin,
            counts: digits(u).into_iter().map(|d| d as u32).collect(),
        });
        v -= u;
    }
    Some(nodes)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::scheduling::packing::price;

    const GIB: i64 = (1 << 30) * 1000;

    fn bin(cpu: i64, mem_gib: i64, price: f64) -> Bin {
        Bin {
            free: [cpu, mem_gib * GIB, 0, 110_000],
            price,
        }
    }

    fn pod(cpu: i64, mem_gib: i64) -> Vector {
        [cpu, mem_gib * GIB, 0, 1000]
    }

    /// Every partition of the pods into nodes, each on the cheapest bin holding it: the
    /// oracle, sharing no code with the dynamic program.
    fn brute_force(bins: &[Bin], pods: &[Vector]) -> Option<f64> {
        fn cheapest(bins: &[Bin], group: &[Vector]) -> f64 {
            let mut sum = [0i64; 4];
            for p in group {
                for d in 0..4 {
                    sum[d] += p[d];
                }
            }
            bins.iter()
                .filter(|b| (0..4).all(|d| sum[d] <= b.free[d]))
                .map(|b| b.price)
                .fold(f64::INFINITY, f64::min)
        }
        fn go(bins: &[Bin], pods: &[Vector], groups: &mut Vec<Vec<Vector>>, best: &mut f64) {
            let Some((first, rest)) = pods.split_first() else {
                let cost: f64 = groups.iter().map(|g| cheapest(bins, g)).sum();
                *best = best.min(cost);
                return;
            };
            for i in 0..groups.len() {
                groups[i].push(*first);
                go(bins, rest, groups, best);
                groups[i].pop();
            }
            groups.push(vec![*first]);
            go(bins, rest, groups, best);
            groups.pop();
        }
        let mut best = f64::INFINITY;
        go(bins, pods, &mut vec![], &mut best);
        best.is_finite().then_some(best)
    }

    fn shapes_of(pods: &[Vector]) -> Vec<(Vector, u32)> {
        let mut shapes: Vec<(Vector, u32)> = vec![];
        for p in pods {
            match shapes.iter_mut().find(|(s, _)| s == p) {
                Some((_, n)) => *n += 1,
                None => shapes.push((*p, 1)),
            }
        }
        shapes
    }

    #[test]
    fn three_assorted_pods_share_one_node_when_it_is_cheaper_than_two() {
        // A compute node and a memory node each hold one side; the general node holds all
        // three for less than the two smaller ones together.
        let bins = [
            bin(2000, 4, 0.085),
            bin(2000, 16, 0.126),
            bin(4000, 16, 0.192),
        ];
        let pods = [pod(500, 1), pod(1250, 1), pod(250, 4)];
        let shapes = shapes_of(&pods);
        let nodes = exact_optimum(&bins, &shapes).unwrap();
        assert!((price(&bins, &nodes) - 0.126).abs() < 1e-9, "{nodes:?}");
        assert_eq!(nodes.len(), 1);
    }

    #[test]
    fn every_pod_is_placed_once_and_every_node_holds_what_it_was_given() {
        let bins = [bin(2000, 4, 0.085), bin(4000, 8, 0.17), bin(8000, 32, 0.40)];
        let pods = [
            pod(1500, 1),
            pod(1500, 1),
            pod(700, 6),
            pod(300, 2),
            pod(300, 2),
        ];
        let shapes = shapes_of(&pods);
        let nodes = exact_optimum(&bins, &shapes).unwrap();
        for (s, (_, n)) in shapes.iter().enumerate() {
            let placed: u32 = nodes.iter().map(|node| node.counts[s]).sum();
            assert_eq!(placed, *n, "shape {s}");
        }
        for node in &nodes {
            for d in 0..4 {
                let used: i64 = shapes
                    .iter()
                    .zip(&node.counts)
                    .map(|((v, _), c)| v[d] * i64::from(*c))
                    .sum();
                assert!(used <= bins[node.bin].free[d], "{node:?}");
            }
        }
    }

    #[test]
    fn a_pod_no_bin_holds_and_a_mix_too_large_have_no_exact_answer() {
        let bins = [bin(2000, 4, 0.085)];
        assert!(exact_optimum(&bins, &[(pod(4000, 1), 1)]).is_none());
        let many: Vec<(Vector, u32)> = (0..20).map(|i| (pod(10 + i, 0), 1)).collect();
        assert!(exact_optimum(&bins, &many).is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn the_exact_optimum_is_what_trying_every_partition_finds(
            sizes in prop::collection::vec((1usize..8, 0usize..5), 1..7),
            prices in prop::collection::vec(1u32..100, 4),
        ) {
            let bins: Vec<Bin> = [(2000, 4), (2000, 16), (4000, 8), (8000, 32)]
                .iter()
                .zip(&prices)
                .map(|((c, m), p)| bin(*c, *m, f64::from(*p) / 100.0))
                .collect();
            let cpus = [250, 500, 750, 1000, 1500, 2000, 3000, 4000];
            let pods: Vec<Vector> = sizes.iter().map(|(c, m)| pod(cpus[*c], *m as i64)).collect();
            let want = brute_force(&bins, &pods);
            let got = exact_optimum(&bins, &shapes_of(&pods)).map(|n| price(&bins, &n));
            match (want, got) {
                (Some(w), Some(g)) => prop_assert!((w - g).abs() < 1e-9, "{w} {g}"),
                (w, g) => prop_assert_eq!(w.is_some(), g.is_some(), "{:?} {:?}", w, g),
            }
        }
    }
}
