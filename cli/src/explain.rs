//! `nodewright explain-event -f FILE`: what the interruption function would do with an
//! EventBridge envelope, or with each message of an SQS batch as Lambda receives it,
//! without touching anything. The action is the one for a node nodewright owns, with the
//! default rebalance choice, at the moment the event was emitted (so a sample from the
//! past is explained as it was meant, not as a stale event).

use nodewright::interruption::{
    Action, NodeFacts, Origin, Parsed, RebalancePolicy, action_for, parse,
};
use serde_json::{Value, json};

use crate::exit::Exit;
use crate::input::Files;
use crate::output::{Output, print_data};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub files: Files,
    /// wide adds each event's id and time and the SQS message id.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Treat events from another account as suspicious, as the function does.
    #[arg(long, requires = "region")]
    pub account: Option<String>,
    /// Treat events from another region as suspicious, as the function does.
    #[arg(long, requires = "account")]
    pub region: Option<String>,
}

/// One message of the input: its SQS message id, if it came in a batch, and its body.
struct Input {
    message_id: Option<String>,
    body: String,
}

/// The file's messages: the records' bodies of an SQS event, or the whole file.
fn inputs(text: &str) -> Vec<Input> {
    let whole = || {
        vec![Input {
            message_id: None,
            body: text.to_string(),
        }]
    };
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return whole();
    };
    let Some(records) = value.get("Records").and_then(Value::as_array) else {
        return whole();
    };
    records
        .iter()
        .enumerate()
        .map(|(i, r)| Input {
            message_id: Some(
                r.get("messageId")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("record {i}"), str::to_string),
            ),
            body: match r.get("body") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
        })
        .collect()
}

fn explain(input: &Input, origin: Option<&Origin>) -> Value {
    let mut row = match parse(&input.body, origin) {
        Err(e) => json!({
            "kind": "invalid", "instance_ids": [], "action": "none", "reason": nodewright::error_chain(&e),
        }),
        Ok(Parsed::Ignored(i)) => json!({
            "kind": "ignored",
            "instance_ids": [],
            "action": "none",
            "reason": i.reason.to_string(),
            "suspicious": i.reason.is_suspicious(),
            "id": i.event_id,
            "source": i.source,
            "detail_type": i.detail_type,
        }),
        Ok(Parsed::Act(m)) => {
            let facts = NodeFacts {
                node: String::new(),
                owned: true,
                rebalance: RebalancePolicy::default(),
            };
            let action = action_for(&m, Some(&facts), m.time);
            let reason = match &action {
                Action::None { why, .. } => Some(why.clone()),
                _ => None,
            };
            let mut row = json!({
                "kind": m.kind().as_str(),
                "instance_ids": m.instance_ids,
                "action": action.as_str(),
                "id": m.event_id,
                "time": m.time.to_string(),
            });
            if let Some(d) = m.deadline() {
                row["deadline"] = json!(d.to_string());
            }
            if let Some(r) = reason {
                row["reason"] = json!(r);
            }
            row
        }
    };
    if let Some(id) = &input.message_id {
        row["message_id"] = json!(id);
    }
    row
}

pub fn run(args: &Args) -> Exit {
    let sources = match args.files.read() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}", nodewright::error_chain(&e));
            return Exit::Usage;
        }
    };
    let origin = match (&args.account, &args.region) {
        (Some(account), Some(region)) => Some(Origin {
            account: account.clone(),
            region: region.clone(),
        }),
        _ => None,
    };
    let events: Vec<Value> = sources
        .iter()
        .flat_map(|source| {
            inputs(&source.text).into_iter().map(|i| {
                let mut row = explain(&i, origin.as_ref());
                row["file"] = json!(source.name);
                row
            })
        })
        .collect();
    for e in events.iter().filter(|e| e["kind"] == "invalid") {
        eprintln!(
            "error: {}: {}",
            e["file"].as_str().unwrap_or_default(),
            e["reason"].as_str().unwrap_or_default()
        );
    }
    let invalid = events.iter().any(|e| e["kind"] == "invalid");
    if args.output.is_data() {
        if !print_data(&json!({ "events": events }), args.output) {
            return Exit::Usage;
        }
    } else {
        print!("{}", to_table(&events, args.output == Output::Wide));
    }
    if invalid { Exit::Problems } else { Exit::Ok }
}

fn to_table(events: &[Value], wide: bool) -> String {
    let cell = |v: &Value| v.as_str().unwrap_or("-").to_string();
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            let ids: Vec<String> = e["instance_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .map(cell)
                .collect();
            let mut row = vec![
                cell(&e["kind"]),
                if ids.is_empty() {
                    "-".into()
                } else {
                    ids.join(",")
                },
                cell(&e["action"]),
                cell(&e["deadline"]),
                cell(&e["reason"]),
            ];
            if wide {
                row.extend([cell(&e["id"]), cell(&e["time"]), cell(&e["message_id"])]);
            }
            row
        })
        .collect();
    let mut headers = vec!["KIND", "INSTANCES", "ACTION", "DEADLINE", "REASON"];
    if wide {
        headers.extend(["EVENT ID", "TIME", "MESSAGE ID"]);
    }
    crate::table::render(&headers, &rows, &[])
}
