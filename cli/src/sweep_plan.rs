//! `nodewright sweep-plan`: the sweeper's decision offline, on what `kubectl get
//! nodes,pods,pdb -A -o yaml` exports plus NodePools / EC2NodeClasses / Provisioners.
//! Offline nothing is written, so a node without the sweeper's empty-since marker counts
//! as empty since its creation, and no hygiene decision is made (that needs EC2).

use std::path::PathBuf;
use std::process::ExitCode;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use nodewright::api::{Inputs, Problem, Severity};
use nodewright::catalog::{DEFAULT_SPOT_DISCOUNT, bundled_instance_types, estimated_spot_price};
use nodewright::disruption::{
    FirstSight, Plan, SimulationInputs, plan_disruption, pool_budgets, pool_capacity, simulation,
    snapshot,
};
use nodewright::scheduling::{NamespaceLabels, selects_namespaces};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::plan::{Output, claim_json, note_unknown_namespaces};

#[derive(clap::Args)]
pub struct Args {
    /// YAML (multi-document, or a `List`) or JSON files: Nodes, Pods, PodDisruptionBudgets
    /// and NodePools / EC2NodeClasses / Provisioners / AWSNodeTemplates.
    #[arg(short = 'f', long = "file", required = true)]
    pub files: Vec<PathBuf>,
    /// The time to decide at (RFC 3339); default now.
    #[arg(long)]
    pub now: Option<String>,
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// The cluster objects read, beside the NodePools (which `Inputs` reads).
#[derive(Default)]
struct Objects {
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    pdbs: Vec<PodDisruptionBudget>,
    daemon_sets: Vec<DaemonSet>,
    namespaces: Vec<Namespace>,
}

pub fn run(args: &Args) -> ExitCode {
    let now = match args.now.as_deref().map(str::parse::<Timestamp>) {
        None => Timestamp::now(),
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            eprintln!("error: --now: not an RFC 3339 time ({e})");
            return ExitCode::FAILURE;
        }
    };
    let mut inputs = Inputs::default();
    let mut objects = Objects::default();
    let mut errors = Vec::new();
    for path in &args.files {
        let file = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("{file}: cannot be read: {e}"));
                continue;
            }
        };
        load(&file, &text, &mut inputs, &mut objects, &mut errors);
    }
    errors.extend(disruption_settings(&inputs).iter().map(Problem::to_string));
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("error: {e}");
        }
        return ExitCode::FAILURE;
    }
    let prices: std::collections::HashMap<(String, String), f64> = bundled_instance_types()
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(t, od)| {
            let spot = estimated_spot_price(od, DEFAULT_SPOT_DISCOUNT);
            [
                ((t.name.clone(), "on-demand".to_string()), od),
                ((t.name, "spot".to_string()), spot),
            ]
        })
        .collect();
    let price = |t: &str, c: &str| prices.get(&(t.to_string(), c.to_string())).copied();
    let (mut snapshot, mut problems) = snapshot(&nodewright::disruption::Inputs {
        pools: &inputs.node_pools,
        nodes: &objects.nodes,
        pods: &objects.pods,
        pdbs: &objects.pdbs,
        instances: None,
        price: &price,
        first_sight: FirstSight::SinceCreation,
    });
    let namespace_labels: NamespaceLabels = objects
        .namespaces
        .iter()
        .filter_map(|n| {
            Some((
                n.metadata.name.clone()?,
                n.metadata.labels.clone().unwrap_or_default(),
            ))
        })
        .collect();
    note_unknown_namespaces(selects_namespaces(&objects.pods), &namespace_labels);
    let (sim, sim_problems) = simulation(&SimulationInputs {
        pools: &inputs.node_pools,
        classes: &inputs.node_classes,
        nodes: &objects.nodes,
        pods: &objects.pods,
        daemon_sets: &objects.daemon_sets,
        spot_discount: DEFAULT_SPOT_DISCOUNT,
        namespace_labels: &namespace_labels,
    });
    problems.extend(sim_problems);
    match sim {
        Ok(sim) => snapshot.simulation = Some(sim),
        // Emptiness and expiration do not need it: decide those, and say what is missing.
        Err(e) => eprintln!("note: underutilized nodes are not considered: {e}"),
    }
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("error: {p}");
        }
        return ExitCode::FAILURE;
    }
    let plan = plan_disruption(&snapshot, now);
    match args.output {
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&plan)).unwrap_or_default()
        ),
        Output::Table => print!("{}", to_table(&plan)),
    }
    ExitCode::SUCCESS
}

/// The NodePools' disruption settings that cannot be read (budgets, the budgets' time zone,
/// capacity windows), named by file, document and field. The function keeps such a pool's
/// nodes and says so in an Event; offline they are input errors, as any invalid field is.
fn disruption_settings(inputs: &Inputs) -> Vec<Problem> {
    inputs
        .node_pools
        .iter()
        .zip(&inputs.node_pool_sources)
        .flat_map(|(np, source)| {
            let budgets = pool_budgets(np).err();
            let capacity = pool_capacity(np).err();
            budgets.into_iter().chain(capacity).map(|e| Problem {
                file: source.file.clone(),
                document: source.describe(),
                field: e.field,
                message: e.message,
                severity: Severity::Error,
            })
        })
        .collect()
}

fn load(
    file: &str,
    text: &str,
    inputs: &mut Inputs,
    objects: &mut Objects,
    errors: &mut Vec<String>,
) {
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let at = format!("{file}: document {}", index + 1);
        let value: Value = match serde::Deserialize::deserialize(doc) {
            Ok(v) => v,
            Err(e) => {
                errors.push(format!("{at}: not YAML or JSON: {e}"));
                continue;
            }
        };
        if value.is_null() {
            continue;
        }
        let items = match value.get("kind").and_then(Value::as_str) {
            Some("List") => match value.get("items").and_then(Value::as_array) {
                Some(items) => items
                    .iter()
                    .cloned()
                    .enumerate()
                    .map(|(i, v)| (format!("{at}: items[{i}]"), v))
                    .collect(),
                None => {
                    errors.push(format!("{at}: items: a List needs a list of items"));
                    continue;
                }
            },
            _ => vec![(at.clone(), value)],
        };
        for (at, item) in items {
            match item.get("kind").and_then(Value::as_str).unwrap_or_default() {
                "Node" => push(&at, "Node", item, &mut objects.nodes, errors),
                "Pod" => push(&at, "Pod", item, &mut objects.pods, errors),
                "PodDisruptionBudget" => {
                    push(&at, "PodDisruptionBudget", item, &mut objects.pdbs, errors)
                }
                "NodePool" | "EC2NodeClass" | "Provisioner" | "AWSNodeTemplate" => {
                    for p in inputs.load_value(file, index + 1, item) {
                        if p.is_error() {
                            errors.push(p.to_string());
                        }
                    }
                }
                // A new node's DaemonSet overhead, when consolidation plans a replacement.
                "DaemonSet" => push(&at, "DaemonSet", item, &mut objects.daemon_sets, errors),
                // Labels for pod (anti-)affinity terms that select namespaces by them.
                "Namespace" => push(&at, "Namespace", item, &mut objects.namespaces, errors),
                // Deployments, Events...: their pods are listed as Pods.
                _ => {}
            }
        }
    }
}

fn push<T: DeserializeOwned>(
    at: &str,
    kind: &str,
    value: Value,
    into: &mut Vec<T>,
    errors: &mut Vec<String>,
) {
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("(no name)")
        .to_string();
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(v) => into.push(v),
        Err(e) => errors.push(format!("{at}: {kind} {name}: {}: {}", e.path(), e.inner())),
    }
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn to_json(plan: &Plan) -> Value {
    json!({
        "commands": plan.commands.iter().map(|c| json!({
            "action": c.action,
            "reason": c.reason,
            "nodes": c.nodes,
            // Consolidation plans its replacement; an expired node's pods are planned by
            // the provisioner once they are pending, so its list is empty.
            "replacement": c.replacement.iter().map(claim_json).collect::<Vec<_>>(),
            "savings_per_hour": round4(c.savings_per_hour),
        })).collect::<Vec<_>>(),
        "kept": plan.kept.iter().map(|k| json!({
            "node": k.node,
            "reason": k.why.to_string(),
            "disruption": k.reason,
        })).collect::<Vec<_>>(),
        "price_per_hour": {"before": round4(plan.price_before), "after": round4(plan.price_after)},
    })
}

fn to_table(plan: &Plan) -> String {
    let mut out = String::new();
    if plan.commands.is_empty() {
        out.push_str("no node to disrupt\n");
    }
    for c in &plan.commands {
        out.push_str(&format!(
            "{:<8} {:<14} {:<40} saves ${:.4}/h\n",
            serde_json::to_value(c.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            c.reason.as_str(),
            c.nodes.join(","),
            c.savings_per_hour
        ));
    }
    for k in &plan.kept {
        out.push_str(&format!(
            "kept     {:<14} {:<40} {}\n",
            k.reason.as_str(),
            k.node,
            k.why
        ));
    }
    out.push_str(&format!(
        "fleet ${:.4}/h -> ${:.4}/h\n",
        plan.price_before, plan.price_after
    ));
    out
}
