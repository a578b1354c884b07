//! The packing functions against oracles that share no code with them: brute-force
//! enumeration of every multiset of nodes for small cases.

use proptest::prelude::*;

use super::packing::*;

const CPU: i64 = 1000;
const GIB: i64 = (1 << 30) * 1000;

fn bin(cpu: i64, mem_gib: i64, pods: i64, price: f64) -> Bin {
    Bin {
        free: [cpu, mem_gib * GIB, 0, pods * 1000],
        price,
    }
}

fn one_cpu() -> Vector {
    [CPU, 0, 0, 1000]
}

/// The cheapest multiset of nodes whose summed per-node pod capacity reaches `n`, by
/// enumerating how many nodes of each bin to buy (an integer program, solved by brute
/// force). Pods of one shape are interchangeable, so capacity in whole pods is all that
/// matters.
fn brute_force(bins: &[Bin], shape: &Vector, n: usize) -> Option<f64> {
    let caps: Vec<usize> = bins
        .iter()
        .map(|b| fit_count(&b.free, shape).max(0) as usize)
        .collect();
    fn go(bins: &[Bin], caps: &[usize], i: usize, left: usize, cost: f64, best: &mut f64) {
        if left == 0 {
            *best = best.min(cost);
            return;
        }
        if i == bins.len() || cost >= *best {
            return;
        }
        let most = if caps[i] == 0 {
            0
        } else {
            left.div_ceil(caps[i])
        };
        for k in 0..=most {
            let covered = (k * caps[i]).min(left);
            go(
                bins,
                caps,
                i + 1,
                left - covered,
                cost + k as f64 * bins[i].price,
                best,
            );
        }
    }
    let mut best = f64::INFINITY;
    go(bins, &caps, 0, n, 0.0, &mut best);
    best.is_finite().then_some(best)
}

#[test]
fn ten_one_cpu_pods_take_a_2xlarge_and_an_xlarge_rather_than_one_4xlarge() {
    // The getting-started case in miniature: after overhead an xlarge holds 3 such pods,
    // a 2xlarge 7 and a 4xlarge 15, priced like c6a.
    let bins = [
        bin(3920, 6, 58, 0.153),
        bin(7910, 14, 58, 0.306),
        bin(15890, 29, 234, 0.612),
    ];
    let (price, mut nodes) = identical_optimum(&bins, &one_cpu(), 10).unwrap();
    nodes.sort();
    assert!((price - 0.459).abs() < 1e-9, "{price}");
    assert_eq!(nodes, vec![(0, 3), (1, 7)]);
}

#[test]
fn on_a_tie_in_price_the_optimum_uses_fewer_larger_nodes() {
    // Two xlarges cost what one 2xlarge costs and hold the same pods.
    let bins = [bin(4000, 8, 100, 0.1), bin(8000, 16, 100, 0.2)];
    let (price, nodes) = identical_optimum(&bins, &one_cpu(), 8).unwrap();
    assert!((price - 0.2).abs() < 1e-9);
    assert_eq!(nodes, vec![(1, 8)]);
}

#[test]
fn pods_no_bin_holds_have_no_optimum() {
    let bins = [bin(1000, 2, 10, 0.05)];
    assert_eq!(identical_optimum(&bins, &[2 * CPU, 0, 0, 1000], 3), None);
    assert_eq!(greedy(&bins, &[([2 * CPU, 0, 0, 1000], 3)]), None);
}

#[test]
fn a_bin_cheaper_and_larger_than_another_drops_the_other() {
    let bins = [
        bin(4000, 8, 50, 0.2),
        bin(4000, 16, 50, 0.15),
        bin(8000, 4, 50, 0.1),
    ];
    let mut kept = undominated(&bins);
    kept.sort();
    assert_eq!(kept, vec![1, 2]);
}

#[test]
fn the_greedy_fills_memory_heavy_bins_with_memory_heavy_pods() {
    // A compute bin (2 GiB/cpu) and a memory bin (8 GiB/cpu) at the same price per cpu:
    // eight 1 cpu/8 GiB pods and eight 1 cpu/1 GiB pods cost least as one node of each.
    let bins = [bin(8000, 16, 100, 0.34), bin(8000, 64, 100, 0.5)];
    let shapes = [([CPU, 8 * GIB, 0, 1000], 8), ([CPU, GIB, 0, 1000], 8)];
    let nodes = greedy(&bins, &shapes).unwrap();
    let mut got: Vec<(usize, Vec<u32>)> = nodes.iter().map(|n| (n.bin, n.counts.clone())).collect();
    got.sort();
    assert_eq!(got, vec![(0, vec![0, 8]), (1, vec![8, 0])]);
}

fn ladder() -> impl Strategy<Value = Vec<Bin>> {
    prop::collection::vec((1i64..=16, 1i64..=8, 4i64..=40, 1u32..=100), 1..=4).prop_map(|v| {
        v.into_iter()
            .map(|(cpu, gib_per_cpu, pods, cents)| {
                bin(
                    cpu * CPU - 100,
                    cpu * gib_per_cpu,
                    pods,
                    f64::from(cents) / 100.0,
                )
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn the_identical_pod_optimum_is_what_brute_force_finds(
        bins in ladder(),
        cpu in prop::sample::select(vec![250i64, 500, 1000, 1500, 3000]),
        gib in 0i64..=6,
        n in 1usize..=30,
    ) {
        let shape = [cpu, gib * GIB / 2, 0, 1000];
        let exact = identical_optimum(&bins, &shape, n);
        let oracle = brute_force(&bins, &shape, n);
        match (exact, oracle) {
            (None, None) => {}
            (Some((price, nodes)), Some(best)) => {
                prop_assert!((price - best).abs() < 1e-9, "dp {price} brute force {best}");
                let held: usize = nodes.iter().map(|(_, c)| c).sum();
                prop_assert_eq!(held, n);
                for (k, c) in &nodes {
                    prop_assert!(fit_count(&bins[*k].free, &shape) >= *c as i64);
                }
                let summed: f64 = nodes.iter().map(|(k, _)| bins[*k].price).sum();
                prop_assert!((summed - price).abs() < 1e-9);
            }
            (a, b) => prop_assert!(false, "dp {a:?} but brute force {b:?}"),
        }
    }

    #[test]
    fn every_greedy_and_first_fit_node_holds_its_pods_and_every_pod_is_placed_once(
        bins in ladder(),
        shapes in prop::collection::vec(
            ((1i64..=12).prop_map(|c| c * 250), 0i64..=8, 1u32..=20), 1..=4),
    ) {
        let shapes: Vec<(Vector, u32)> = shapes
            .into_iter()
            .map(|(cpu, half_gib, n)| ([cpu, half_gib * GIB / 2, 0, 1000], n))
            .collect();
        let fits_somewhere = shapes
            .iter()
            .all(|(v, _)| bins.iter().any(|b| fit_count(&b.free, v) > 0));
        for packed in [greedy(&bins, &shapes), first_fit_decreasing(&bins, &shapes)] {
        match packed {
            None => prop_assert!(!fits_somewhere),
            Some(nodes) => {
                prop_assert!(fits_somewhere);
                for (s, (_, n)) in shapes.iter().enumerate() {
                    let placed: u32 = nodes.iter().map(|node| node.counts[s]).sum();
                    prop_assert_eq!(placed, *n);
                }
                for node in &nodes {
                    let mut used = [0i64; 4];
                    for (s, &c) in node.counts.iter().enumerate() {
                        for (u, x) in used.iter_mut().zip(&shapes[s].0) {
                            *u += x * i64::from(c);
                        }
                    }
                    prop_assert!(used.iter().zip(&bins[node.bin].free).all(|(u, f)| u <= f));
                }
            }
        }
        }
    }
}
