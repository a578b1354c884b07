//! `nodewright status`, the view: the fleet at a glance as eks-node-viewer shows it beside
//! Karpenter, from a snapshot value and `now` to fixed text. No I/O here
//! (`status.rs` reads the cluster), so every line is tested by table.

use jiff::Timestamp;
use nodewright::resources::format_milli;
use serde_json::{Value, json};

use crate::money::{usd, usd_marked};
use crate::prices::Prices;
use crate::table;

/// One node as `status` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub name: String,
    /// The EC2 instance id from `spec.providerID`, when it names one.
    pub instance: Option<String>,
    /// `karpenter.sh/nodepool`; `None` for nodes nodewright did not launch.
    pub nodepool: Option<String>,
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    pub created: Option<Timestamp>,
    /// US dollars per hour, and whether it is an estimate (spot from the bundled
    /// on-demand price and a discount).
    pub price: Option<(f64, bool)>,
    pub ready: bool,
    pub pods: usize,
    pub cpu_requested: i64,
    pub cpu_allocatable: i64,
    pub memory_requested: i64,
    pub memory_allocatable: i64,
}

/// A pod waiting for a node, and why (the scheduler's condition message, or nodewright's
/// latest Event on it).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingView {
    pub pod: String,
    pub why: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fleet {
    pub nodes: Vec<NodeView>,
    pub pending: Vec<PendingView>,
}

/// Width of a utilisation bar, in cells.
pub const BAR: usize = 20;

/// `[#######.............]  35%`: requested over allocatable, clamped to a full bar (an
/// over-committed node shows its real percentage beside a full bar).
pub fn bar(requested: i64, allocatable: i64) -> String {
    if allocatable <= 0 {
        return format!("[{}]    -", " ".repeat(BAR));
    }
    let ratio = requested as f64 / allocatable as f64;
    let filled = ((ratio * BAR as f64).round() as usize).min(BAR);
    format!(
        "[{}{}] {:>3}%",
        "#".repeat(filled),
        ".".repeat(BAR - filled),
        (ratio * 100.0).round() as i64
    )
}

/// Age the way `kubectl get` abbreviates it, coarsely enough to stay put between refreshes.
pub fn age(created: Option<Timestamp>, now: Timestamp) -> String {
    let Some(created) = created else {
        return "-".into();
    };
    let s = now.as_second().saturating_sub(created.as_second()).max(0);
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn price(p: Option<(f64, bool)>) -> String {
    match p {
        Some((v, estimated)) => usd_marked(v, estimated),
        None => "-".into(),
    }
}

/// Memory in GiB with one decimal: bars carry the proportion, this the scale.
fn gib(bytes_milli: i64) -> String {
    format!(
        "{:.1}Gi",
        bytes_milli as f64 / 1000.0 / f64::from(1u32 << 30)
    )
}

fn cpu(milli: i64) -> String {
    format_milli(milli, false)
}

/// nodewright's nodes by NodePool first, then the others (managed node groups, ...).
fn sorted(fleet: &Fleet) -> Vec<&NodeView> {
    let mut nodes: Vec<&NodeView> = fleet.nodes.iter().collect();
    nodes.sort_by(|a, b| {
        (a.nodepool.is_none(), &a.nodepool, &a.name).cmp(&(
            b.nodepool.is_none(),
            &b.nodepool,
            &b.name,
        ))
    });
    nodes
}

/// The fleet's dollars an hour (from +0.0: a float sum of nothing is -0.0), and whether any
/// part of it is an estimate.
fn hourly(nodes: &[&NodeView]) -> (f64, bool) {
    let total = nodes
        .iter()
        .filter_map(|n| n.price)
        .map(|(v, _)| v)
        .fold(0.0, |a, b| a + b);
    let estimated = nodes.iter().any(|n| matches!(n.price, Some((_, true))));
    (total, estimated)
}

/// The whole screen: nodes (by NodePool, then name), totals, pending pods; `wide` adds the
/// instance ids.
pub fn render(fleet: &Fleet, now: Timestamp, wide: bool, prices: &Prices) -> String {
    let nodes = sorted(fleet);
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            let mut row = vec![
                n.name.clone(),
                n.nodepool.clone().unwrap_or_else(|| "-".into()),
                n.instance_type.clone(),
                n.capacity_type.clone(),
                n.zone.clone(),
                age(n.created, now),
                price(n.price),
                format!("{}/{}", cpu(n.cpu_requested), cpu(n.cpu_allocatable)),
                bar(n.cpu_requested, n.cpu_allocatable),
                format!("{}/{}", gib(n.memory_requested), gib(n.memory_allocatable)),
                bar(n.memory_requested, n.memory_allocatable),
                n.pods.to_string(),
                if n.ready { "Ready" } else { "NotReady" }.into(),
            ];
            if wide {
                row.push(n.instance.clone().unwrap_or_else(|| "-".into()));
            }
            row
        })
        .collect();
    let mut headers = vec![
        "NODE", "NODEPOOL", "TYPE", "CAPACITY", "ZONE", "AGE", "$/H", "CPU", "", "MEMORY", "",
        "PODS", "STATUS",
    ];
    if wide {
        headers.push("INSTANCE");
    }
    let mut out = table::render(&headers, &rows, &[5, 6, 7, 9, 11]);

    let sum = |f: fn(&NodeView) -> i64| nodes.iter().map(|n| f(n)).sum::<i64>();
    let (hourly, estimated) = hourly(&nodes);
    let unpriced = nodes.iter().filter(|n| n.price.is_none()).count();
    let (cpu_req, cpu_alloc) = (sum(|n| n.cpu_requested), sum(|n| n.cpu_allocatable));
    let (mem_req, mem_alloc) = (sum(|n| n.memory_requested), sum(|n| n.memory_allocatable));
    out.push('\n');
    out.push_str(&format!(
        "{} nodes  {}${}/h (${:.0}/month){}\n",
        nodes.len(),
        if estimated { "~" } else { "" },
        usd(hourly),
        hourly * HOURS_PER_MONTH,
        if unpriced > 0 {
            format!(", {unpriced} unpriced")
        } else {
            String::new()
        },
    ));
    out.push_str(&format!(
        "CPU     {}/{}  {}\n",
        cpu(cpu_req),
        cpu(cpu_alloc),
        bar(cpu_req, cpu_alloc)
    ));
    out.push_str(&format!(
        "memory  {}/{}  {}\n",
        gib(mem_req),
        gib(mem_alloc),
        bar(mem_req, mem_alloc)
    ));
    out.push_str(&prices.source_line(estimated));
    out.push_str("\n\n");
    if fleet.pending.is_empty() {
        out.push_str("no pending pods\n");
    } else {
        let mut pending = fleet.pending.clone();
        pending.sort_by(|a, b| a.pod.cmp(&b.pod));
        let rows: Vec<Vec<String>> = pending.into_iter().map(|p| vec![p.pod, p.why]).collect();
        out.push_str(&format!("{} pending pods\n", rows.len()));
        out.push_str(&table::render(&["PENDING POD", "WHY"], &rows, &[]));
    }
    out
}

/// 730 hours: AWS's own figure for a month in its pricing examples (8,760 h / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// The fleet as data, for `-o json|yaml`: quantities in cores and bytes, prices with
/// whether each is an estimate.
pub fn to_json(fleet: &Fleet, prices: &Prices) -> Value {
    let nodes = sorted(fleet);
    let (hourly, estimated) = hourly(&nodes);
    let round4 = crate::plan::round4;
    json!({
        "nodes": nodes.iter().map(|n| json!({
            "name": n.name,
            "instance": n.instance,
            "nodepool": n.nodepool,
            "instance_type": n.instance_type,
            "capacity_type": n.capacity_type,
            "zone": n.zone,
            "created": n.created.map(|t| t.to_string()),
            "price_per_hour": n.price.map(|(v, _)| round4(v)),
            "price_estimated": n.price.is_some_and(|(_, e)| e),
            "ready": n.ready,
            "pods": n.pods,
            "cpu": {"requested": n.cpu_requested as f64 / 1000.0, "allocatable": n.cpu_allocatable as f64 / 1000.0},
            "memory": {"requested": n.memory_requested / 1000, "allocatable": n.memory_allocatable / 1000},
        })).collect::<Vec<_>>(),
        "pending": fleet.pending.iter().map(|p| json!({"pod": p.pod, "why": p.why})).collect::<Vec<_>>(),
        "price_per_hour": round4(hourly),
        "price_per_month": (hourly * HOURS_PER_MONTH).round(),
        "price_estimated": estimated,
        "prices": prices.source_line(estimated),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: i64 = 1000 * (1 << 30);

    fn bundled() -> Prices {
        Prices::bundled(0.6).unwrap()
    }

    fn node(name: &str, pool: Option<&str>, created: &str) -> NodeView {
        NodeView {
            name: name.into(),
            instance: Some(format!("i-{name}")),
            nodepool: pool.map(str::to_string),
            instance_type: "m5.large".into(),
            capacity_type: "on-demand".into(),
            zone: "us-east-1a".into(),
            created: Some(created.parse().unwrap()),
            price: Some((0.096, false)),
            ready: true,
            pods: 3,
            cpu_requested: 500,
            cpu_allocatable: 1930,
            memory_requested: 2 * GI,
            memory_allocatable: 7 * GI,
        }
    }

    #[test]
    fn bars_fill_in_proportion_and_clamp_when_overcommitted() {
        let cases = [
            (0, 1000, "[....................]   0%"),
            (500, 1000, "[##########..........]  50%"),
            (1000, 1000, "[####################] 100%"),
            (1500, 1000, "[####################] 150%"),
            (10, 0, "[                    ]    -"),
        ];
        for (requested, allocatable, want) in cases {
            assert_eq!(
                bar(requested, allocatable),
                want,
                "{requested}/{allocatable}"
            );
        }
    }

    #[test]
    fn ages_are_abbreviated_like_kubectl_and_coarse_enough_to_stay_put() {
        let now: Timestamp = "2026-11-24T12:00:00Z".parse().unwrap();
        let cases = [
            ("2026-11-24T11:59:15Z", "45s"),
            ("2026-11-24T11:50:00Z", "10m"),
            ("2026-11-24T07:00:00Z", "5h"),
            ("2026-11-20T12:00:00Z", "4d"),
            ("2026-11-24T12:00:30Z", "0s"),
        ];
        for (created, want) in cases {
            assert_eq!(age(Some(created.parse().unwrap()), now), want, "{created}");
        }
        assert_eq!(age(None, now), "-");
    }

    #[test]
    fn a_fleet_renders_nodes_by_pool_totals_and_pending_pods_with_their_reason() {
        let now: Timestamp = "2026-11-24T12:00:00Z".parse().unwrap();
        let mut spot = node("ip-10-0-2-7", Some("batch"), "2026-11-24T11:50:00Z");
        spot.capacity_type = "spot".into();
        spot.instance_type = "c5.xlarge".into();
        spot.zone = "us-east-1b".into();
        spot.price = Some((0.068, true));
        spot.cpu_requested = 3920;
        spot.cpu_allocatable = 3920;
        spot.memory_requested = 0;
        spot.memory_allocatable = 6 * GI;
        spot.pods = 5;
        let mut system = node("ip-10-0-9-9", None, "2026-11-20T12:00:00Z");
        system.price = None;
        system.ready = false;
        let fleet = Fleet {
            nodes: vec![
                system,
                node("ip-10-0-1-5", Some("default"), "2026-11-24T07:00:00Z"),
                spot,
            ],
            pending: vec![
                PendingView {
                    pod: "default/web-2".into(),
                    why: "0/3 nodes are available: 3 Insufficient cpu.".into(),
                },
                PendingView {
                    pod: "default/web-1".into(),
                    why: "no instance type fits: requests 96 cpu".into(),
                },
            ],
        };
        let out = render(&fleet, now, false, &bundled());
        let expected = "\
NODE         NODEPOOL  TYPE       CAPACITY   ZONE        AGE      $/H          CPU                                    MEMORY                               PODS  STATUS
ip-10-0-2-7  batch     c5.xlarge  spot       us-east-1b  10m  ~0.0680  3920m/3920m  [####################] 100%  0.0Gi/6.0Gi  [....................]   0%     5  Ready
ip-10-0-1-5  default   m5.large   on-demand  us-east-1a   5h   0.0960   500m/1930m  [#####...............]  26%  2.0Gi/7.0Gi  [######..............]  29%     3  Ready
ip-10-0-9-9  -         m5.large   on-demand  us-east-1a   4d        -   500m/1930m  [#####...............]  26%  2.0Gi/7.0Gi  [######..............]  29%     3  NotReady

3 nodes  ~$0.1640/h ($120/month), 1 unpriced
CPU     4920m/7780m  [#############.......]  63%
memory  4.0Gi/20.0Gi  [####................]  20%
Prices: bundled us-east-1 on-demand table; ~ marks an estimate: spot taken as on-demand less 60% (--spot-discount)

2 pending pods
PENDING POD    WHY
default/web-1  no instance type fits: requests 96 cpu
default/web-2  0/3 nodes are available: 3 Insufficient cpu.
";
        assert_eq!(out, expected, "\n{out}");
    }

    #[test]
    fn wide_adds_each_nodes_instance_id_as_the_last_column() {
        let now: Timestamp = "2026-11-24T12:00:00Z".parse().unwrap();
        let mut foreign = node("ip-10-0-9-9", None, "2026-11-24T07:00:00Z");
        foreign.instance = None;
        let fleet = Fleet {
            nodes: vec![
                node("ip-10-0-1-5", Some("default"), "2026-11-24T07:00:00Z"),
                foreign,
            ],
            pending: vec![],
        };
        let out = render(&fleet, now, true, &bundled());
        let last_two = |line: &str| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words[words.len() - 2..].join(" ")
        };
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(last_two(lines[0]), "STATUS INSTANCE", "{out}");
        assert_eq!(last_two(lines[1]), "Ready i-ip-10-0-1-5", "{out}");
        assert_eq!(last_two(lines[2]), "Ready -", "{out}");
    }

    #[test]
    fn as_data_a_fleet_keeps_each_price_with_whether_it_is_an_estimate() {
        let mut spot = node("ip-10-0-2-7", Some("batch"), "2026-11-24T07:00:00Z");
        spot.price = Some((0.038, true));
        let fleet = Fleet {
            nodes: vec![
                spot,
                node("ip-10-0-1-5", Some("default"), "2026-11-24T07:00:00Z"),
            ],
            pending: vec![],
        };
        let data = to_json(&fleet, &bundled());
        assert_eq!(data["nodes"][0]["name"], "ip-10-0-2-7");
        assert_eq!(data["nodes"][0]["price_estimated"], true);
        assert_eq!(data["nodes"][1]["price_estimated"], false);
        assert_eq!(data["price_per_hour"], 0.134);
        assert_eq!(data["price_estimated"], true);
        assert_eq!(data["nodes"][1]["cpu"]["allocatable"], 1.93);
    }

    #[test]
    fn an_empty_cluster_says_so_rather_than_printing_an_empty_table() {
        let out = render(&Fleet::default(), Timestamp::UNIX_EPOCH, false, &bundled());
        assert!(out.contains("0 nodes  $0.0000/h ($0/month)\n"), "{out}");
        assert!(out.ends_with("no pending pods\n"), "{out}");
    }
}
