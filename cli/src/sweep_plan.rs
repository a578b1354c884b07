//! `nodewright sweep-plan`: the sweeper's decision offline, on what `kubectl get
//! nodes,pods,pdb -A -o yaml` exports plus NodePools / EC2NodeClasses / Provisioners.
//! Offline nothing is written, so a node without the sweeper's empty-since marker counts
//! as empty since its creation, and no hygiene decision is made (that needs EC2).

use std::str::FromStr as _;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use nodewright::api::{Inputs, Problem, not_yet_reported};
use nodewright::catalog::{BUNDLED_PRICE_REGION, DEFAULT_SPOT_DISCOUNT, bundled_node_prices};
use nodewright::disruption::{
    FirstSight, Plan, Reason, SimulationInputs, plan_disruption, simulation, snapshot,
};
use nodewright::scheduling::{
    NamespaceLabels, PreferencePolicy, VolumeObjects, selects_namespaces,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::exit::Exit;
use crate::input::Files;
use crate::money::usd;
use crate::output::{Output, print_data};
use crate::plan::{claim_json, note_unknown_namespaces, note_unknown_volumes, round4};
use crate::{report, settings, table};

#[derive(clap::Args)]
pub struct Args {
    /// Nodes, Pods, PodDisruptionBudgets (as `kubectl get nodes,pods,pdb -A -o yaml` writes
    /// them), DaemonSets, Namespaces, PersistentVolumeClaims, PersistentVolumes,
    /// StorageClasses and NodePools / EC2NodeClasses / Provisioners / AWSNodeTemplates.
    #[command(flatten)]
    pub files: Files,
    /// The time to decide at (RFC 3339, e.g. 2026-03-02T10:00:00Z); default now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<Timestamp>,
    /// Plan node repair too, as the sweeper does with the template's `NodeRepair=true`.
    #[arg(long)]
    pub node_repair: bool,
    /// Respect or Ignore pods' preferences (preferred affinities, ScheduleAnyway spreads),
    /// as the stack's PreferencePolicy (Karpenter's --preference-policy).
    #[arg(long, value_name = "POLICY", default_value = "Respect", value_parser = PreferencePolicy::from_str)]
    pub preference_policy: PreferencePolicy,
    /// wide adds the instance type a replacement would launch.
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
    claims: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    storage_classes: Vec<StorageClass>,
}

pub fn run(args: &Args) -> Exit {
    let now = args.now.unwrap_or_else(Timestamp::now);
    let sources = match args.files.read() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}", nodewright::error_chain(&e));
            return Exit::Usage;
        }
    };
    let mut inputs = Inputs::default();
    let mut objects = Objects::default();
    let mut problems = Vec::new();
    let mut errors = Vec::new();
    for source in &sources {
        load(
            &source.name,
            &source.text,
            &mut inputs,
            &mut objects,
            &mut problems,
            &mut errors,
        );
    }
    // The NodePools' own settings the sweeper reads; a pool given without its EC2NodeClass
    // is still decided on (only a consolidation replacement would need the class).
    let checked = not_yet_reported(&problems, settings::problems(&inputs));
    problems.extend(checked);
    report::print(&problems);
    for e in &errors {
        eprintln!("error: {e}");
    }
    if !errors.is_empty() || report::any_error(&problems) {
        return Exit::Problems;
    }
    let prices = bundled_node_prices(DEFAULT_SPOT_DISCOUNT);
    let price = |t: &str, c: &str| prices.get(&(t.to_string(), c.to_string())).copied();
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
    let volumes = VolumeObjects::new(
        std::mem::take(&mut objects.claims),
        std::mem::take(&mut objects.volumes),
        std::mem::take(&mut objects.storage_classes),
    );
    note_unknown_volumes(&objects.pods, &volumes);
    let (sim, sim_problems) = simulation(&SimulationInputs {
        pools: &inputs.node_pools,
        classes: &inputs.node_classes,
        nodes: &objects.nodes,
        pods: &objects.pods,
        daemon_sets: &objects.daemon_sets,
        spot_discount: DEFAULT_SPOT_DISCOUNT,
        namespace_labels: &namespace_labels,
        overlays: &inputs.node_overlays,
        preferences: args.preference_policy,
        volumes: &volumes,
    });
    // Nodes are priced with the overlays the solver uses (conflicts left out).
    let overlays = match &sim {
        Ok(sim) => sim.overlays.clone(),
        Err(_) => nodewright::scheduling::Overlays::new(&inputs.node_overlays),
    };
    let (mut snapshot, mut snapshot_problems) = snapshot(&nodewright::disruption::Inputs {
        pools: &inputs.node_pools,
        nodes: &objects.nodes,
        pods: &objects.pods,
        pdbs: &objects.pdbs,
        instances: None,
        price: &price,
        overlays: &overlays,
        first_sight: FirstSight::SinceCreation,
        node_repair: args.node_repair,
        now,
    });
    snapshot_problems.extend(sim_problems);
    match sim {
        Ok(sim) => snapshot.simulation = Some(sim),
        // Emptiness and expiration do not need it: decide those, and say what is missing.
        Err(e) => eprintln!("note: underutilized nodes are not considered: {e}"),
    }
    if !snapshot_problems.is_empty() {
        for p in &snapshot_problems {
            eprintln!("error: {p}");
        }
        return Exit::Problems;
    }
    let plan = plan_disruption(&snapshot, now);
    let steps = next_steps(&plan, &objects, &inputs, now);
    if args.output.is_data() {
        let mut data = to_json(&plan);
        data["next"] = steps
            .iter()
            .map(|s| json!({"node": s.node, "state": s.state, "acts": s.acts}))
            .collect();
        if !print_data(&data, args.output) {
            return Exit::Usage;
        }
    } else {
        print!("{}", to_table(&plan, args.output == Output::Wide));
        print!("{}", steps_table(&steps));
    }
    Exit::Ok
}

/// The next step of the removal path for one node.
struct Step {
    node: String,
    state: String,
    acts: String,
}

/// The next step of the one removal decision (`nodewright::removal`) for each node a
/// command would take, and for each node whose removal is under way, as the sweeper would
/// take it now.
fn next_steps(plan: &Plan, objects: &Objects, inputs: &Inputs, now: Timestamp) -> Vec<Step> {
    use nodewright::removal::{Record, offline, record_of};
    let planned: std::collections::BTreeMap<&str, Reason> = plan
        .commands
        .iter()
        .flat_map(|c| c.nodes.iter().map(move |n| (n.as_str(), c.reason)))
        .collect();
    let grace = |node: &Node| {
        let pool = node
            .metadata
            .labels
            .as_ref()?
            .get(nodewright::api::labels::NODEPOOL)?;
        let pool = inputs
            .node_pools
            .iter()
            .find(|p| p.metadata.name == *pool)?;
        pool.spec
            .template
            .spec
            .termination_grace_period
            .map(|d| d.0)
    };
    let mut steps = Vec::new();
    for node in &objects.nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let wanted = planned.get(name.as_str()).map(|r| Record::sweep(*r, now));
        let under_way = matches!(record_of(node), Ok(Some(_)) | Err(_));
        if wanted.is_none() && !under_way {
            continue;
        }
        let step = match offline::next_for(
            node,
            &objects.nodes,
            &objects.pods,
            wanted,
            grace(node),
            now,
        ) {
            Ok(next) => Step {
                node: name,
                state: next.note.clone().map_or_else(
                    || next.state.to_string(),
                    |n| format!("{}: {n}", next.state),
                ),
                acts: offline::summary(&next),
            },
            Err(e) => Step {
                node: name,
                state: "unreadable removal record".into(),
                acts: e.to_string(),
            },
        };
        steps.push(step);
    }
    steps
}

fn steps_table(steps: &[Step]) -> String {
    if steps.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = steps
        .iter()
        .map(|s| vec![s.node.clone(), s.state.clone(), s.acts.clone()])
        .collect();
    format!(
        "\n{}",
        table::render(&["NODE", "STATE", "NEXT"], &rows, &[])
    )
}

/// Reads one input: the cluster's objects into `objects`, the configuration's into `inputs`
/// (its problems into `problems`), and what cannot be read into `errors`.
fn load(
    file: &str,
    text: &str,
    inputs: &mut Inputs,
    objects: &mut Objects,
    problems: &mut Vec<Problem>,
    errors: &mut Vec<String>,
) {
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let at = format!("{file}: document {}", index + 1);
        let value: Value = match serde::Deserialize::deserialize(doc) {
            Ok(v) => v,
            Err(e) => {
                // The stream cannot go on past it: serde_yaml answers the same error again.
                errors.push(format!("{at}: not YAML or JSON: {e}"));
                break;
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
                "NodePool" | "EC2NodeClass" | "Provisioner" | "AWSNodeTemplate" | "NodeOverlay" => {
                    problems.extend(inputs.load_value(file, index + 1, item));
                }
                // A new node's DaemonSet overhead, when consolidation plans a replacement.
                "DaemonSet" => push(&at, "DaemonSet", item, &mut objects.daemon_sets, errors),
                // Labels for pod (anti-)affinity terms that select namespaces by them.
                "Namespace" => push(&at, "Namespace", item, &mut objects.namespaces, errors),
                // Where pods with claims may move.
                "PersistentVolumeClaim" => push(
                    &at,
                    "PersistentVolumeClaim",
                    item,
                    &mut objects.claims,
                    errors,
                ),
                "PersistentVolume" => {
                    push(&at, "PersistentVolume", item, &mut objects.volumes, errors)
                }
                "StorageClass" => push(
                    &at,
                    "StorageClass",
                    item,
                    &mut objects.storage_classes,
                    errors,
                ),
                "" => errors.push(format!("{at}: kind: every document needs a kind")),
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

fn to_json(plan: &Plan) -> Value {
    json!({
        "commands": plan.commands.iter().map(|c| json!({
            "action": c.action,
            "reason": c.reason,
            "nodes": c.nodes,
            // Consolidation plans its replacement; an expired node's pods are planned by
            // the provisioner once they are pending, so its list is empty.
            // Priced from the bundled table, spot estimated.
            "replacement": c.replacement.iter().map(|r| claim_json(r, true)).collect::<Vec<_>>(),
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

fn to_table(plan: &Plan, wide: bool) -> String {
    let action = |c: &nodewright::disruption::Command| {
        serde_json::to_value(c.action)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let mut rows: Vec<Vec<String>> = plan
        .commands
        .iter()
        .map(|c| {
            let mut row = vec![
                action(c),
                c.reason.as_str().to_string(),
                c.nodes.join(","),
                format!("saves ${}/h", usd(c.savings_per_hour)),
            ];
            if wide {
                let types: Vec<&str> = c
                    .replacement
                    .iter()
                    .map(|r| r.instance_type.as_str())
                    .collect();
                row.push(if types.is_empty() {
                    "-".into()
                } else {
                    types.join(",")
                });
            }
            row
        })
        .collect();
    rows.extend(plan.kept.iter().map(|k| {
        let mut row = vec![
            "kept".into(),
            k.reason.as_str().to_string(),
            k.node.clone(),
            k.why.to_string(),
        ];
        if wide {
            row.push("-".into());
        }
        row
    }));
    let mut out = String::new();
    if plan.commands.is_empty() {
        out.push_str("no node to disrupt\n");
    }
    if !rows.is_empty() {
        let mut headers = vec!["ACTION", "REASON", "NODES", "WHY"];
        if wide {
            headers.push("REPLACEMENT");
        }
        out.push_str(&table::render(&headers, &rows, &[]));
    }
    out.push_str(&format!(
        "fleet ${}/h -> ${}/h (priced from the bundled {BUNDLED_PRICE_REGION} on-demand \
         table, spot estimated as on-demand less {:.0}%)\n",
        usd(plan.price_before),
        usd(plan.price_after),
        DEFAULT_SPOT_DISCOUNT * 100.0,
    ));
    out
}
