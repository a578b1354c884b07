//! `nodewright plan`: what capacity pending workloads need, priced from the bundled catalog.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use nodewright::api::{Inputs, Operator, labels};
use nodewright::catalog::{BUNDLED_PRICE_REGION, Catalog, DEFAULT_SPOT_DISCOUNT};
use nodewright::scheduling::{NamespaceLabels, PlannedClaim, ProvisioningPlan, Snapshot, solve};
use serde_json::json;

use crate::table;

/// Zones used when neither `--zones` nor a NodePool names any.
const DEFAULT_ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// YAML (multi-document) or JSON files with NodePools, node classes and workloads.
    #[arg(short = 'f', long = "file", required = true)]
    pub files: Vec<PathBuf>,
    /// Zones to plan in, comma separated (default: the zones NodePools name, else us-east-1a,b,c).
    #[arg(long, value_delimiter = ',')]
    pub zones: Vec<String>,
    /// Estimated spot discount off on-demand (0.6 = spot costs 40% of on-demand).
    #[arg(long, default_value_t = DEFAULT_SPOT_DISCOUNT)]
    pub spot_discount: f64,
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

pub fn run(args: &Args) -> ExitCode {
    if !(0.0..1.0).contains(&args.spot_discount) {
        eprintln!(
            "error: --spot-discount must be at least 0 and below 1, got {}",
            args.spot_discount
        );
        return ExitCode::from(2);
    }
    let (inputs, problems) = crate::validate::load(&args.files);
    for p in &problems {
        eprintln!("{p}");
    }
    if problems.iter().any(|p| p.is_error()) {
        return ExitCode::from(2);
    }
    let (mut snapshot, pod_errors) = Snapshot::from_k8s(&inputs.pods, &inputs.daemon_sets);
    snapshot.namespace_labels = inputs.namespace_labels.clone();
    note_unknown_namespaces(snapshot.selects_namespaces(), &snapshot.namespace_labels);
    if !pod_errors.is_empty() {
        for e in &pod_errors {
            eprintln!("{e}");
        }
        return ExitCode::from(2);
    }
    let zones = zones(args, &inputs);
    let catalog = match Catalog::offline(&zones, args.spot_discount) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: the bundled catalog cannot be read: {e}");
            return ExitCode::FAILURE;
        }
    };
    let plan = solve(
        &snapshot,
        &catalog,
        &inputs.node_pools,
        &inputs.node_classes,
    );
    match args.output {
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&plan, &catalog, &zones)).unwrap_or_default()
        ),
        Output::Table => print!("{}", to_table(&plan, &catalog, args.spot_discount)),
    }
    ExitCode::SUCCESS
}

fn zones(args: &Args, inputs: &Inputs) -> Vec<String> {
    if !args.zones.is_empty() {
        return args.zones.clone();
    }
    let named: BTreeSet<String> = inputs
        .node_pools
        .iter()
        .flat_map(|p| p.spec.template.spec.requirements.iter())
        .filter(|r| r.key == labels::ZONE && r.operator == Operator::In)
        .flat_map(|r| r.values.iter().cloned())
        .collect();
    if named.is_empty() {
        DEFAULT_ZONES.iter().map(|z| z.to_string()).collect()
    } else {
        named.into_iter().collect()
    }
}

pub(crate) fn claim_json(c: &PlannedClaim) -> serde_json::Value {
    json!({
        "nodepool": c.nodepool,
        "nodeclass": c.node_class,
        "instance_types": c.instance_types,
        "instance_type": c.instance_type,
        "capacity_type": c.capacity_type.as_str(),
        "zone": c.zone,
        "capacity_types": c.capacity_types.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        "zones": c.zones,
        "pods": c.pods,
        "requests": c.requests.to_map(),
        "daemonset_overhead": c.daemon_overhead.to_map(),
        "allocatable": c.allocatable.to_map(),
        "labels": c.labels,
        "taints": c.taints,
        "price_per_hour": round4(c.price_per_hour),
    })
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn to_json(plan: &ProvisioningPlan, catalog: &Catalog, zones: &[String]) -> serde_json::Value {
    json!({
        "nodeclaims": plan.node_claims.iter().map(claim_json).collect::<Vec<_>>(),
        "unschedulable": plan.unschedulable.iter().map(|u| json!({"pod": u.pod, "reason": u.reason})).collect::<Vec<_>>(),
        "total_price_per_hour": round4(plan.total_price_per_hour()),
        "spot_prices_estimated": catalog.spot_prices_estimated,
        "zones": zones,
    })
}

/// "used/allocatable" with DaemonSets counted as used: CPU in cores, memory in GiB.
fn used_of(c: &PlannedClaim, name: &str) -> String {
    let mut used = c.requests.clone();
    used.add(&c.daemon_overhead);
    let unit = if name == "cpu" {
        1000.0
    } else {
        1000.0 * (1u64 << 30) as f64
    };
    let (u, a) = (
        used.get(name) as f64 / unit,
        c.allocatable.get(name) as f64 / unit,
    );
    if name == "cpu" {
        format!("{u:.2}/{a:.2}")
    } else {
        format!("{u:.1}/{a:.1}Gi")
    }
}

fn to_table(plan: &ProvisioningPlan, catalog: &Catalog, discount: f64) -> String {
    let rows: Vec<Vec<String>> = plan
        .node_claims
        .iter()
        .map(|c| {
            vec![
                c.nodepool.clone(),
                c.instance_type.clone(),
                format!("+{}", c.instance_types.len().saturating_sub(1)),
                c.capacity_type.as_str().to_string(),
                c.zone.clone(),
                c.pods.len().to_string(),
                used_of(c, "cpu"),
                used_of(c, "memory"),
                format!("{:.4}", c.price_per_hour),
            ]
        })
        .collect();
    let mut out = table::render(
        &[
            "NODEPOOL",
            "INSTANCE TYPE",
            "ALTERNATIVES",
            "CAPACITY",
            "ZONE",
            "PODS",
            "CPU USED/ALLOC",
            "MEMORY USED/ALLOC",
            "$/HOUR",
        ],
        &rows,
        &[2, 5, 6, 7, 8],
    );
    let placed: usize = plan.node_claims.iter().map(|c| c.pods.len()).sum();
    out.push_str(&format!(
        "\n{} node claims for {} pods, {} unschedulable, ${:.4}/hour",
        plan.node_claims.len(),
        placed,
        plan.unschedulable.len(),
        plan.total_price_per_hour()
    ));
    out.push_str(&format!(
        "\nPrices: bundled {BUNDLED_PRICE_REGION} on-demand table"
    ));
    let any_spot = plan
        .node_claims
        .iter()
        .any(|c| c.capacity_type.as_str() == labels::SPOT);
    if catalog.spot_prices_estimated && any_spot {
        out.push_str(&format!(
            "; spot prices are estimates (on-demand less {:.0}%)",
            discount * 100.0
        ));
    }
    out.push('\n');
    if !plan.unschedulable.is_empty() {
        out.push_str("\nUnschedulable pods:\n");
        for u in &plan.unschedulable {
            out.push_str(&format!("  {}: {}\n", u.pod, u.reason));
        }
    }
    out
}

/// A `namespaceSelector` with terms is matched against the Namespace objects given; with
/// none given it can match no namespace, so say so rather than plan on it unseen.
pub(crate) fn note_unknown_namespaces(selects: bool, given: &NamespaceLabels) {
    if selects && given.is_empty() {
        eprintln!(
            "note: a pod (anti-)affinity term selects namespaces by label and no Namespace \
             was given: it covers only the namespaces it lists (add \
             `kubectl get namespaces -o yaml` to the files)"
        );
    }
}
