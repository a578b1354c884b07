//! The sweeper's decision at scale (`make bench`): a fragmented cluster of 1,000 nodes and
//! 20,000 pods, read into the sweeper's snapshot and simulation and planned by
//! `plan_disruption`, as one sweep does after its API reads (issue 11: target ≤ 1 s on one
//! core). Also prints the fleet's $/h before and after that sweep's consolidation, and the
//! $/h of planning the same pods from scratch (the cheapest fleet the solver finds for
//! them), so the gap consolidation leaves is visible. Prints medians; BENCHMARKS.md records
//! them with the machine. Then the convergence series: sweeps applied one after another
//! until nothing is left to do (see [`converge`]). `NODEWRIGHT_SWEEP_NODES=40` runs a small
//! cluster (20 pods a node), enough to check the bench in a debug build.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright::api::{EC2NodeClass, NodePool};
use nodewright::catalog::{CapacityType, Catalog, DEFAULT_SPOT_DISCOUNT};
use nodewright::disruption::{
    FirstSight, Inputs, MAX_MULTI_NODE, Plan, SimulationInputs, Snapshot, consolidation_placement,
    plan_disruption, simulation, snapshot,
};
use serde_json::json;

/// The cluster's size; `NODEWRIGHT_SWEEP_NODES` sets another (a small one to check the
/// bench in a debug build).
const NODES: usize = 1_000;
const PODS_PER_NODE: usize = 20;
/// The most sweeps the convergence series runs.
const MAX_ROUNDS: usize = 50;
const RUNS: usize = 5;
/// How near the from-scratch fleet's price consolidation should bring the cluster.
const TARGET_RATIO: f64 = 1.10;
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// Node types of a cluster grown by several autoscalers over time.
const TYPES: [&str; 4] = ["m5.2xlarge", "c5.2xlarge", "r5.2xlarge", "m5.4xlarge"];

/// xorshift64*: a deterministic cluster without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn pool() -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}
                ]
            }},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m",
                "budgets": [{"nodes": "10%"}]}
        }
    }))
    .expect("the bench's NodePool")
}

fn class() -> EC2NodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {"role": "nodes", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}
    }))
    .expect("the bench's EC2NodeClass")
}

/// A Ready node of nodewright's `default` pool, as the kubelet and the provisioner label it.
fn node(
    name: &str,
    ty: &str,
    zone: &str,
    created: &str,
    claim: &str,
    id: &str,
    catalog: &Catalog,
) -> Node {
    let entry = catalog.get(ty).expect("a bundled type");
    let alloc = entry.instance_type.allocatable(None);
    serde_json::from_value::<Node>(json!({
        "metadata": {"name": name, "creationTimestamp": created, "labels": {
            "karpenter.sh/nodepool": "default", "nodewright.io/nodeclaim": claim,
            "node.kubernetes.io/instance-type": ty, "karpenter.sh/capacity-type": "on-demand",
            "topology.kubernetes.io/zone": zone, "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name}},
        "spec": {"providerID": format!("aws:///{zone}/{id}")},
        "status": {
            "allocatable": {"cpu": format!("{}m", alloc.cpu), "memory": format!("{}", alloc.memory / 1000), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
    .expect("a node")
}

/// `nodes` nodes two days old, each 25-60% requested by `nodes` x 20 pods in all (a cluster
/// after a peak: every node partly used, few empty). Each pod: 50-250m CPU, 64-512 MiB.
fn cluster(catalog: &Catalog, size: usize) -> (Vec<Node>, Vec<Pod>) {
    let pods_wanted = size * PODS_PER_NODE;
    let mut rng = Rng(0x5eed);
    let created = "2026-03-01T00:00:00Z";
    let mut nodes = Vec::with_capacity(size);
    let mut room = Vec::with_capacity(size);
    for i in 0..size {
        let ty = TYPES[i % TYPES.len()];
        let zone = ZONES[i % ZONES.len()];
        let entry = catalog.get(ty).expect("a bundled type");
        let alloc = entry.instance_type.allocatable(None);
        let name = format!("ip-10-0-{}-{}.ec2.internal", i / 250, i % 250);
        nodes.push(node(
            &name,
            ty,
            zone,
            created,
            &format!("nw-{i}"),
            &format!("i-{i:017x}"),
            catalog,
        ));
        // Fill to a random 25-60% of CPU and memory.
        let share = 25 + rng.below(36) as i64;
        room.push((
            name,
            alloc.cpu * share / 100,
            alloc.memory / 1000 * share / 100,
        ));
    }
    let mut pods = Vec::with_capacity(pods_wanted);
    let mut n = 0;
    'fill: loop {
        let mut placed = false;
        for (name, cpu_left, mem_left) in room.iter_mut() {
            if pods.len() == pods_wanted {
                break 'fill;
            }
            let cpu = 50 + 50 * rng.below(5) as i64;
            let mem = (64 << 20) * (1 + rng.below(8) as i64);
            if cpu > *cpu_left || mem > *mem_left {
                continue;
            }
            *cpu_left -= cpu;
            *mem_left -= mem;
            placed = true;
            n += 1;
            pods.push(
                serde_json::from_value::<Pod>(json!({
                    "metadata": {"name": format!("app-{n}"), "namespace": "default", "uid": format!("u-{n}"),
                        "creationTimestamp": created, "labels": {"app": format!("app{}", n % 50)},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("app{}", n % 50), "uid": "rs", "controller": true}]},
                    "spec": {"nodeName": name, "containers": [{"name": "c", "image": "app",
                        "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": format!("{mem}")}}}]},
                    "status": {"phase": "Running"}
                }))
                .expect("a pod"),
            );
        }
        if !placed {
            break;
        }
    }
    (nodes, pods)
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let zones: Vec<String> = ZONES.iter().map(|z| z.to_string()).collect();
    let catalog = Catalog::offline(&zones, DEFAULT_SPOT_DISCOUNT).expect("the bundled catalog");
    let (pools, classes) = (vec![pool()], vec![class()]);
    let size = std::env::var("NODEWRIGHT_SWEEP_NODES")
        .ok()
        .map(|v| {
            v.parse::<usize>()
                .expect("NODEWRIGHT_SWEEP_NODES: a number of nodes")
        })
        .unwrap_or(NODES);
    let (nodes, pods) = cluster(&catalog, size);
    let price = |t: &str, _: &str| {
        catalog.get(t).and_then(|e| {
            e.offerings
                .iter()
                .find(|o| o.capacity_type == CapacityType::OnDemand)
                .map(|o| o.price)
        })
    };
    let now: Timestamp = "2026-03-03T12:00:00Z".parse().unwrap();
    assert_eq!(
        pods.len(),
        size * PODS_PER_NODE,
        "the cluster holds every pod"
    );
    println!(
        "sweep decision: {} nodes, {} pods ({} types, 25-60% requested each), {RUNS} runs",
        nodes.len(),
        pods.len(),
        TYPES.len()
    );
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        let (_, plan) = sweep(&nodes, &pods, &pools, &classes, &price, now);
        times.push(started.elapsed());
        last = Some(plan);
    }
    let plan = last.expect("at least one run");
    let t = median(times.clone());
    println!(
        "  median {:.3} s (min {:.3}, max {:.3}); target <= 1 s on one core: {}",
        t.as_secs_f64(),
        times.iter().min().unwrap().as_secs_f64(),
        times.iter().max().unwrap().as_secs_f64(),
        if t <= Duration::from_secs(1) {
            "met"
        } else {
            "MISSED"
        }
    );
    let disrupted: usize = plan.commands.iter().map(|c| c.nodes.len()).sum();
    println!(
        "  one sweep: {} commands over {disrupted} nodes ({} kept with a reason); fleet ${:.2}/h before, ${:.2}/h after",
        plan.commands.len(),
        plan.kept.len(),
        plan.price_before,
        plan.price_after
    );
    // The same pods planned from scratch: the cheapest fleet the solver finds for them.
    let unbound: Vec<Pod> = pods
        .iter()
        .cloned()
        .map(|mut p| {
            if let Some(s) = p.spec.as_mut() {
                s.node_name = None;
            }
            p
        })
        .collect();
    let started = Instant::now();
    let (fresh, errors) = nodewright::scheduling::Snapshot::from_k8s(&unbound, &[]);
    assert!(errors.is_empty());
    let from_scratch = nodewright::scheduling::solve(&fresh, &catalog, &pools, &classes);
    let scratch_price: f64 = from_scratch
        .node_claims
        .iter()
        .map(|c| c.price_per_hour)
        .sum();
    println!(
        "  from scratch: {} nodes, ${scratch_price:.2}/h (planned in {:.2} s): the fleet is {:.2}x it before, {:.2}x after this sweep",
        from_scratch.node_claims.len(),
        started.elapsed().as_secs_f64(),
        plan.price_before / scratch_price,
        plan.price_after / scratch_price
    );
    converge(
        nodes,
        pods,
        &pools,
        &classes,
        &price,
        &catalog,
        now,
        scratch_price,
    );
}

type Price<'a> = dyn Fn(&str, &str) -> Option<f64> + 'a;

/// One sweep's decision, as the sweeper makes it after its API reads.
fn sweep(
    nodes: &[Node],
    pods: &[Pod],
    pools: &[NodePool],
    classes: &[EC2NodeClass],
    price: &Price<'_>,
    now: Timestamp,
) -> (Snapshot, Plan) {
    let (mut snap, problems) = snapshot(&Inputs {
        pools,
        nodes,
        pods,
        pdbs: &[],
        instances: None,
        price,
        overlays: &Default::default(),
        first_sight: FirstSight::SinceCreation,
        node_repair: false,
        now,
    });
    assert!(problems.is_empty(), "{problems:?}");
    let (sim, _) = simulation(&SimulationInputs {
        pools,
        classes,
        nodes,
        pods,
        daemon_sets: &[],
        spot_discount: DEFAULT_SPOT_DISCOUNT,
        namespace_labels: &Default::default(),
        overlays: &[],
        preferences: Default::default(),
        volumes: &Default::default(),
    });
    snap.simulation = sim.ok();
    let plan = plan_disruption(&snap, now);
    (snap, plan)
}

/// The convergence series: sweeps until a sweep plans nothing (or [`MAX_ROUNDS`]), each
/// round's commands applied to the cluster as the executor leaves it: the nodes deleted,
/// a replacement's claim a new node of its type and zone, the moved pods recreated where the
/// consolidation's simulation placed them (on the other nodes or the replacement), and the
/// clock moved 2 minutes, past `consolidateAfter` (1m) for the nodes that just got pods.
/// Budgets as the bench's NodePool configures them: `nodes: 10%`, with consolidation's own
/// limits (one command per sweep, at most 100 nodes).
#[allow(clippy::too_many_arguments)]
fn converge(
    mut nodes: Vec<Node>,
    mut pods: Vec<Pod>,
    pools: &[NodePool],
    classes: &[EC2NodeClass],
    price: &Price<'_>,
    catalog: &Catalog,
    mut now: Timestamp,
    scratch: f64,
) {
    println!(
        "convergence (budgets: nodes 10%; one consolidation command per sweep, at most {MAX_MULTI_NODE} nodes; {MAX_ROUNDS} sweeps at most):"
    );
    let started = Instant::now();
    let mut rounds = 0;
    let mut fleet = None;
    let mut moved = 0;
    let mut slowest = Duration::ZERO;
    // The first sweep after which the fleet is within the target of from scratch.
    let mut reached = None;
    for round in 1..=MAX_ROUNDS {
        let decided = Instant::now();
        let (snap, plan) = sweep(&nodes, &pods, pools, classes, price, now);
        let took = decided.elapsed();
        slowest = slowest.max(took);
        fleet = Some(plan.price_before);
        if plan.commands.is_empty() {
            break;
        }
        rounds = round;
        let gone: usize = plan.commands.iter().map(|c| c.nodes.len()).sum();
        let claims: usize = plan.commands.iter().map(|c| c.replacement.len()).sum();
        let sim = snap.simulation.as_ref().expect("the simulation");
        let mut bind: HashMap<String, String> = HashMap::new();
        let mut going: HashSet<String> = HashSet::new();
        for (k, command) in plan.commands.iter().enumerate() {
            going.extend(command.nodes.iter().cloned());
            let group: Vec<_> = snap
                .nodes
                .iter()
                .filter(|n| command.nodes.contains(&n.name))
                .collect();
            if group.iter().all(|n| n.pods.iter().all(|p| !p.moves())) {
                continue;
            }
            let placed = consolidation_placement(sim, &Default::default(), &group)
                .expect("the group's pods");
            assert!(
                placed.unschedulable.is_empty(),
                "{:?}",
                placed.unschedulable
            );
            for nomination in &placed.nominations {
                for pod in &nomination.pods {
                    bind.insert(pod_name(pod), nomination.node.clone());
                }
            }
            for (c, claim) in placed.node_claims.iter().enumerate() {
                let name = format!("ip-10-1-{round}-{k}-{c}.ec2.internal");
                let id = format!("i-{round:08x}{k:04x}{c:05x}");
                nodes.push(node(
                    &name,
                    &claim.instance_type,
                    &claim.zone,
                    &now.to_string(),
                    &format!("nw-r{round}-{k}-{c}"),
                    &id,
                    catalog,
                ));
                for pod in &claim.pods {
                    bind.insert(pod_name(pod), name.clone());
                }
            }
        }
        moved += bind.len();
        println!(
            "  sweep {round:>2} ({:.2} s): ${:.2}/h -> ${:.2}/h ({:.2}x), {} command(s): {gone} nodes go, {claims} launched, {} pods moved ({moved} in all)",
            took.as_secs_f64(),
            plan.price_before,
            plan.price_after,
            plan.price_after / scratch,
            plan.commands.len(),
            bind.len(),
        );
        if plan.price_after <= scratch * TARGET_RATIO && reached.is_none() {
            reached = Some(round);
        }
        nodes.retain(|n| !going.contains(n.metadata.name.as_deref().unwrap_or_default()));
        for pod in &mut pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            if let Some(to) = bind.get(&name) {
                pod.spec.as_mut().expect("a spec").node_name = Some(to.clone());
                pod.metadata.creation_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
            }
        }
        let stranded = pods
            .iter()
            .filter(|p| {
                going.contains(
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .unwrap_or_default(),
                )
            })
            .count();
        assert_eq!(stranded, 0, "every moved pod placed");
        now += jiff::SignedDuration::from_mins(2);
    }
    let fleet = fleet.expect("at least one sweep");
    println!(
        "  converged after {rounds} sweep(s){} in {:.2} s: {} nodes, ${fleet:.2}/h, {:.2}x the from-scratch ${scratch:.2}/h",
        if rounds == MAX_ROUNDS {
            " (the limit: not converged)"
        } else {
            ""
        },
        started.elapsed().as_secs_f64(),
        nodes.len(),
        fleet / scratch
    );
    println!(
        "  the slowest sweep's decision: {:.2} s (target <= 1 s)",
        slowest.as_secs_f64()
    );
    match reached {
        Some(round) => println!(
            "  within {TARGET_RATIO:.2}x of from scratch after sweep {round} (target: 20 sweeps at most; {moved} pods moved in all)"
        ),
        None => println!(
            "  never within {TARGET_RATIO:.2}x of from scratch (target: within 20 sweeps; {moved} pods moved in all)"
        ),
    }
}

/// A pod's name from the solver's `namespace/name` key.
fn pod_name(key: &str) -> String {
    key.rsplit('/').next().unwrap_or(key).to_string()
}
