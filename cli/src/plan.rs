//! `nodewright plan`: what capacity pending workloads need, priced from the bundled catalog.

use std::collections::BTreeSet;
use std::str::FromStr as _;

use k8s_openapi::api::core::v1::Pod;
use nodewright::api::{Inputs, Operator, labels};
use nodewright::catalog::{Catalog, DEFAULT_SPOT_DISCOUNT};
use nodewright::scheduling::{
    MinValuesPolicy, NamespaceLabels, PlannedClaim, PreferencePolicy, ProvisioningPlan, Snapshot,
    VolumeObjects, claims_volumes, solve_within_room,
};
use serde_json::json;

use crate::exit::Exit;
use crate::input::Files;
use crate::money::{self, usd, usd_marked};
use crate::output::{Output, print_data};
use crate::{load, report, reservations, table};

/// Zones used when neither `--zones` nor a NodePool names any.
const DEFAULT_ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub files: Files,
    /// Zones to plan in, comma separated (default: the zones NodePools name, else us-east-1a,b,c).
    #[arg(long, value_delimiter = ',')]
    pub zones: Vec<String>,
    /// Estimated spot discount off on-demand (0.6 = spot costs 40% of on-demand).
    #[arg(long, default_value_t = DEFAULT_SPOT_DISCOUNT)]
    pub spot_discount: f64,
    /// Exit 1 when a pod cannot be placed by any NodePool (for CI).
    #[arg(long)]
    pub fail_on_unschedulable: bool,
    /// Respect or Ignore pods' preferences (preferred affinities, ScheduleAnyway spreads),
    /// as the stack's PreferencePolicy (Karpenter's --preference-policy).
    #[arg(long, value_name = "POLICY", default_value = "Respect", value_parser = PreferencePolicy::from_str)]
    pub preference_policy: PreferencePolicy,
    /// Strict or BestEffort when a NodePool's minValues cannot be met, as the stack's
    /// MinValuesPolicy (Karpenter's --min-values-policy).
    #[arg(long, value_name = "POLICY", default_value = "Strict", value_parser = MinValuesPolicy::from_str)]
    pub min_values_policy: MinValuesPolicy,
    /// The JSON output of `aws ec2 describe-capacity-reservations`: the reservations each
    /// EC2NodeClass's capacityReservationSelectorTerms select are planned first, as the
    /// functions plan them.
    #[arg(long, value_name = "FILE")]
    pub capacity_reservations: Option<std::path::PathBuf>,
    /// wide adds the zones and every instance type the launch may choose from.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

pub fn run(args: &Args) -> Exit {
    if !(0.0..1.0).contains(&args.spot_discount) {
        eprintln!(
            "error: --spot-discount must be at least 0 and below 1, got {}",
            args.spot_discount
        );
        return Exit::Usage;
    }
    let sources = match args.files.read() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}", nodewright::error_chain(&e));
            return Exit::Usage;
        }
    };
    let (inputs, problems) = load::load(&sources);
    report::print(&problems);
    if report::any_error(&problems) {
        return Exit::Problems;
    }
    let (mut snapshot, mut pod_errors) = Snapshot::from_k8s(&inputs.pods, &inputs.daemon_sets);
    note_unknown_volumes(&inputs.pods, &inputs.volume_objects);
    pod_errors.extend(snapshot.narrow_to_volumes(&inputs.pods, &inputs.volume_objects));
    snapshot.namespace_labels = inputs.namespace_labels.clone();
    snapshot.overlays = nodewright::scheduling::Overlays::new(&inputs.node_overlays);
    snapshot.preferences = args.preference_policy;
    snapshot.min_values = args.min_values_policy;
    note_unknown_namespaces(snapshot.selects_namespaces(), &snapshot.namespace_labels);
    if !pod_errors.is_empty() {
        for e in &pod_errors {
            eprintln!("error: {e}");
        }
        return Exit::Problems;
    }
    let zones = zones(args, &inputs);
    let mut catalog = match Catalog::offline(&zones, args.spot_discount) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "error: the bundled catalog cannot be read: {}",
                nodewright::error_chain(&e)
            );
            return Exit::Usage;
        }
    };
    if let Err(e) = add_reservations(&mut catalog, args, &inputs) {
        eprintln!("error: --capacity-reservations {e}");
        return Exit::Usage;
    }
    let overlays = inputs.node_overlays.len();
    let plan = solve_within_room(
        &snapshot,
        &catalog,
        &inputs.node_pools,
        &inputs.node_classes,
    );
    for name in &plan.overlay_conflicts {
        eprintln!(
            "warning: NodeOverlay {name}: in conflict with another of its weight over the same \
             offerings or resources; not applied (as Karpenter)"
        );
    }
    let printed = if args.output.is_data() {
        print_data(
            &to_json(&plan, &catalog, &zones, args.spot_discount, overlays),
            args.output,
        )
    } else {
        let wide = args.output == Output::Wide;
        let table = to_table(&plan, &catalog, args.spot_discount, wide, overlays);
        print!("{table}");
        true
    };
    if !printed {
        Exit::Usage
    } else if args.fail_on_unschedulable && !plan.unschedulable.is_empty() {
        Exit::Problems
    } else {
        Exit::Ok
    }
}

/// The reservations of `--capacity-reservations` the classes select, as reserved
/// offerings; a class that selects some when no file is given is noted.
fn add_reservations(catalog: &mut Catalog, args: &Args, inputs: &Inputs) -> Result<(), String> {
    let Some(path) = &args.capacity_reservations else {
        for class in &inputs.node_classes {
            if !class.spec.capacity_reservation_selector_terms.is_empty() {
                eprintln!(
                    "note: EC2NodeClass {} selects capacity reservations; give \
                     --capacity-reservations (the JSON output of \
                     `aws ec2 describe-capacity-reservations`) to plan them",
                    class.metadata.name
                );
            }
        }
        return Ok(());
    };
    let described = reservations::read(path)?;
    let now = std::time::SystemTime::now();
    for (class, n) in reservations::add(catalog, &inputs.node_classes, &described, now) {
        if n == 0 {
            eprintln!(
                "note: EC2NodeClass {class}: its capacityReservationSelectorTerms select none of the active reservations in {}",
                path.display()
            );
        }
    }
    Ok(())
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

/// Whether a claim's price is an estimate: spot from a catalog that estimates spot prices.
pub(crate) fn estimated(c: &PlannedClaim, catalog_estimates_spot: bool) -> bool {
    catalog_estimates_spot && c.capacity_type.as_str() == labels::SPOT
}

pub(crate) fn claim_json(c: &PlannedClaim, catalog_estimates_spot: bool) -> serde_json::Value {
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
        "price_estimated": estimated(c, catalog_estimates_spot),
        "min_values_relaxed": c.min_values_relaxed,
    })
}

/// Four decimals, and `0.0` for a sum of nothing (which is `-0.0` in floating point).
pub(crate) fn round4(x: f64) -> f64 {
    let r = (x * 10_000.0).round() / 10_000.0;
    if r == 0.0 { 0.0 } else { r }
}

fn to_json(
    plan: &ProvisioningPlan,
    catalog: &Catalog,
    zones: &[String],
    discount: f64,
    overlays: usize,
) -> serde_json::Value {
    let estimates = catalog.spot_prices_estimated;
    json!({
        "nodeclaims": plan.node_claims.iter().map(|c| claim_json(c, estimates)).collect::<Vec<_>>(),
        "unschedulable": plan.unschedulable.iter().map(|u| json!({"pod": u.pod, "reason": u.reason})).collect::<Vec<_>>(),
        "total_price_per_hour": round4(plan.total_price_per_hour()),
        "total_price_estimated": plan.node_claims.iter().any(|c| estimated(c, estimates)),
        "spot_prices_estimated": estimates,
        "prices": prices_line(discount, estimates, overlays),
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

/// Where the prices come from, NodeOverlays included.
fn prices_line(discount: f64, estimates: bool, overlays: usize) -> String {
    let mut line = money::source_line(discount, estimates);
    if overlays > 0 {
        line.push_str(&format!(
            "; changed by {overlays} NodeOverlay(s) where their requirements select"
        ));
    }
    line
}

fn to_table(
    plan: &ProvisioningPlan,
    catalog: &Catalog,
    discount: f64,
    wide: bool,
    overlays: usize,
) -> String {
    let estimates = catalog.spot_prices_estimated;
    let rows: Vec<Vec<String>> = plan
        .node_claims
        .iter()
        .map(|c| {
            let mut row = vec![
                c.nodepool.clone(),
                c.instance_type.clone(),
                format!("+{}", c.instance_types.len().saturating_sub(1)),
                c.capacity_type.as_str().to_string(),
                c.zone.clone(),
                c.pods.len().to_string(),
                used_of(c, "cpu"),
                used_of(c, "memory"),
                usd_marked(c.price_per_hour, estimated(c, estimates)),
            ];
            if wide {
                row.push(c.zones.join(","));
                row.push(c.instance_types.join(","));
            }
            row
        })
        .collect();
    let mut headers = vec![
        "NODEPOOL",
        "INSTANCE TYPE",
        "ALTERNATIVES",
        "CAPACITY",
        "ZONE",
        "PODS",
        "CPU USED/ALLOC",
        "MEMORY USED/ALLOC",
        "$/HOUR",
    ];
    if wide {
        headers.extend(["ZONES", "INSTANCE TYPES"]);
    }
    let mut out = table::render(&headers, &rows, &[2, 5, 6, 7, 8]);
    let placed: usize = plan.node_claims.iter().map(|c| c.pods.len()).sum();
    let any_estimate = plan.node_claims.iter().any(|c| estimated(c, estimates));
    out.push_str(&format!(
        "\n{} node claims for {} pods, {} unschedulable, {}${}/hour\n",
        plan.node_claims.len(),
        placed,
        plan.unschedulable.len(),
        if any_estimate { "~" } else { "" },
        usd(plan.total_price_per_hour()),
    ));
    out.push_str(&prices_line(discount, any_estimate, overlays));
    out.push('\n');
    if !plan.unschedulable.is_empty() {
        out.push_str("\nUnschedulable pods:\n");
        for u in &plan.unschedulable {
            out.push_str(&format!("  {}: {}\n", u.pod, u.reason));
        }
    }
    out
}

/// A pod's claims are looked up among the PersistentVolumeClaims, PersistentVolumes and
/// StorageClasses given; with none given each claim is an error, so say what to add.
pub(crate) fn note_unknown_volumes(pods: &[Pod], given: &VolumeObjects) {
    if claims_volumes(pods) && given.is_empty() {
        eprintln!(
            "note: pods mount PersistentVolumeClaims and none was given: their volumes \
             decide where they can run (add `kubectl get pvc,pv,storageclass -A -o yaml` to \
             the files)"
        );
    }
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
