//! `nodewright explain-event -f FILE`: what the interruption function would do with an
//! EventBridge envelope, or with each message of whatever wraps it when a user pastes it (a
//! Lambda SQS event, one SQS record, `aws sqs receive-message` output, an SNS notification
//! delivered through SQS), without touching anything. The intent is the one for a node
//! nodewright owns, with the default rebalance choice, at the moment the event was emitted
//! (so a sample from the past is explained as it was meant, not as a stale event). With
//! `--objects` (the node and its pods as `kubectl get -o yaml` prints them), the next step of
//! the one removal decision for the node the event names is printed too.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright::interruption::{
    Intent, NodeFacts, Origin, Parsed, RebalancePolicy, intent_for, parse,
};
use nodewright::removal::{instance_of, offline};
use serde_json::{Value, json};

use crate::exit::Exit;
use crate::input::Files;
use crate::output::{Output, print_data};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub files: Files,
    /// wide adds each event's id and time, the SQS message id and what wrapped it.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Treat events from another account as suspicious, as the function does.
    #[arg(long, requires = "region")]
    pub account: Option<String>,
    /// Treat events from another region as suspicious, as the function does.
    #[arg(long, requires = "account")]
    pub region: Option<String>,
    /// Nodes and pods (YAML or JSON, documents or a List, as `kubectl get nodes,pods -A -o
    /// yaml` prints them): the next step of the removal of the node each event names.
    #[arg(long, value_name = "FILE")]
    pub objects: Option<PathBuf>,
}

/// One message of the input: its SQS message id when it came in one, what wrapped it, and
/// its body.
struct Input {
    message_id: Option<String>,
    wrapper: &'static str,
    body: String,
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// An SNS notification's message, when `body` is one (SNS-to-SQS without raw delivery).
fn unwrap_sns(body: String) -> (String, bool) {
    match serde_json::from_str::<Value>(&body) {
        Ok(v) if v["Type"] == "Notification" && v.get("Message").is_some() => {
            (text_of(&v["Message"]), true)
        }
        _ => (body, false),
    }
}

fn message(id: Option<String>, wrapper: &'static str, body: String) -> Input {
    let (body, sns) = unwrap_sns(body);
    Input {
        message_id: id,
        wrapper: if sns {
            match wrapper {
                "none" => "sns",
                "sqs-event" => "sqs-event+sns",
                "sqs-record" => "sqs-record+sns",
                _ => "receive-message+sns",
            }
        } else {
            wrapper
        },
        body,
    }
}

/// The file's messages, whatever wraps them.
fn inputs(text: &str) -> Vec<Input> {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return vec![message(None, "none", text.to_string())];
    };
    let id = |r: &Value, i: usize, key: &str| {
        r.get(key)
            .and_then(Value::as_str)
            .map_or_else(|| format!("record {i}"), str::to_string)
    };
    if let Some(records) = value.get("Records").and_then(Value::as_array) {
        return records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                message(
                    Some(id(r, i, "messageId")),
                    "sqs-event",
                    text_of(&r["body"]),
                )
            })
            .collect();
    }
    if let Some(received) = value.get("Messages").and_then(Value::as_array) {
        return received
            .iter()
            .enumerate()
            .map(|(i, r)| {
                message(
                    Some(id(r, i, "MessageId")),
                    "receive-message",
                    text_of(&r["Body"]),
                )
            })
            .collect();
    }
    for (id_key, body_key) in [("messageId", "body"), ("MessageId", "Body")] {
        if let (Some(mid), Some(body)) = (value.get(id_key), value.get(body_key)) {
            return vec![message(
                mid.as_str().map(str::to_string),
                "sqs-record",
                text_of(body),
            )];
        }
    }
    vec![message(None, "none", text.to_string())]
}

/// The nodes and pods `--objects` holds.
#[derive(Default)]
struct Objects {
    nodes: Vec<Node>,
    pods: Vec<Pod>,
}

/// The objects in `path`, or the exit status and why not: a file that cannot be read is a
/// usage error, one that holds invalid documents a problem found, as in every command.
fn objects(path: &PathBuf) -> Result<Objects, (Exit, String)> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| (Exit::Usage, format!("{name}: cannot be read: {e}")))?;
    invalid_objects(&name, &text).map_err(|e| (Exit::Problems, e))
}

fn invalid_objects(name: &str, text: &str) -> Result<Objects, String> {
    let mut out = Objects::default();
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let at = format!("{name}: document {}", index + 1);
        let value: Value = serde::Deserialize::deserialize(doc)
            .map_err(|e| format!("{at}: not YAML or JSON: {e}"))?;
        let items = match value.get("kind").and_then(Value::as_str) {
            Some("List") => value["items"].as_array().cloned().unwrap_or_default(),
            _ => vec![value],
        };
        for (i, item) in items.into_iter().enumerate() {
            let kind = item["kind"].as_str().unwrap_or_default().to_string();
            let bad = |e: serde_json::Error| format!("{at}: item {}: {kind}: {e}", i + 1);
            match kind.as_str() {
                "Node" => out.nodes.push(serde_json::from_value(item).map_err(bad)?),
                "Pod" => out.pods.push(serde_json::from_value(item).map_err(bad)?),
                _ => {}
            }
        }
    }
    Ok(out)
}

fn offering_of(node: &Node) -> Option<nodewright::removal::Avoid> {
    let labels = node.metadata.labels.as_ref()?;
    Some(nodewright::removal::Avoid {
        instance_type: labels.get(nodewright::api::labels::INSTANCE_TYPE)?.clone(),
        zone: labels.get(nodewright::api::labels::ZONE)?.clone(),
        capacity_type: labels.get(nodewright::api::labels::CAPACITY_TYPE)?.clone(),
    })
}

/// The next step for the node an event names, when `objects` has it.
fn next_step(m: &nodewright::interruption::Message, objects: &Objects) -> Option<Value> {
    let (node, id) = m.instance_ids.iter().find_map(|id| {
        let node = objects
            .nodes
            .iter()
            .find(|n| instance_of(n).as_deref() == Some(id.as_str()))?;
        Some((node, id))
    })?;
    let facts = NodeFacts {
        node: node.metadata.name.clone().unwrap_or_default(),
        owned: true,
        rebalance: RebalancePolicy::default(),
        offering: offering_of(node),
    };
    let wanted = match intent_for(m, Some(&facts), m.time) {
        Intent::Remove(r) => Some(*r),
        Intent::Continue { .. } => None,
        other => return Some(json!({"node": facts.node, "instance": id, "state": other.as_str()})),
    };
    match offline::next_for(node, &objects.nodes, &objects.pods, wanted, None, m.time) {
        Ok(next) => Some(json!({
            "node": facts.node,
            "instance": id,
            "state": next.state,
            "acts": offline::summary(&next),
            "note": next.note,
            "recheck": next.recheck.map(|t| t.to_string()),
        })),
        Err(e) => Some(
            json!({"node": facts.node, "instance": id, "state": "unreadable record",
            "note": e.to_string()}),
        ),
    }
}

fn explain(input: &Input, origin: Option<&Origin>, objects: Option<&Objects>) -> Value {
    let mut row = match parse(&input.body, origin, jiff::Timestamp::now()) {
        Err(e) => json!({
            "kind": "invalid", "instance_ids": [], "action": "none",
            "reason": match input.wrapper {
                "none" => nodewright::error_chain(&e),
                w => format!("read as a message of {w}: {}", nodewright::error_chain(&e)),
            },
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
                offering: None,
            };
            let action = intent_for(&m, Some(&facts), m.time);
            let reason = match &action {
                Intent::None { why, .. } => Some(why.clone()),
                Intent::Remove(r) => Some(format!("{} removal", r.cause.as_str())),
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
            if let Some(next) = objects.and_then(|o| next_step(&m, o)) {
                row["next"] = next;
            }
            row
        }
    };
    if let Some(id) = &input.message_id {
        row["message_id"] = json!(id);
    }
    row["wrapper"] = json!(input.wrapper);
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
    let objects = match args.objects.as_ref().map(objects).transpose() {
        Ok(o) => o,
        Err((exit, e)) => {
            eprintln!("error: {e}");
            return exit;
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
                let mut row = explain(&i, origin.as_ref(), objects.as_ref());
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
        print!(
            "{}",
            to_table(&events, args.output == Output::Wide, objects.is_some())
        );
    }
    if invalid { Exit::Problems } else { Exit::Ok }
}

fn to_table(events: &[Value], wide: bool, next: bool) -> String {
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
            if next {
                let n = &e["next"];
                row.extend([cell(&n["node"]), cell(&n["state"]), cell(&n["acts"])]);
            }
            if wide {
                row.extend([
                    cell(&e["id"]),
                    cell(&e["time"]),
                    cell(&e["message_id"]),
                    cell(&e["wrapper"]),
                ]);
            }
            row
        })
        .collect();
    let mut headers = vec!["KIND", "INSTANCES", "ACTION", "DEADLINE", "REASON"];
    if next {
        headers.extend(["NODE", "STATE", "NEXT"]);
    }
    if wide {
        headers.extend(["EVENT ID", "TIME", "MESSAGE ID", "WRAPPER"]);
    }
    crate::table::render(&headers, &rows, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str = r#"{"version":"0","id":"e1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"2026-11-21T09:15:00Z","region":"us-east-1","resources":[],"detail":{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate"}}"#;

    #[test]
    fn every_wrapper_a_user_pastes_is_taken_off_and_named() {
        let sns =
            json!({"Type": "Notification", "MessageId": "sns-1", "Message": EVENT}).to_string();
        let cases = [
            (EVENT.to_string(), "none", None),
            (
                json!({"Records": [{"messageId": "m1", "body": EVENT}]}).to_string(),
                "sqs-event",
                Some("m1"),
            ),
            (
                json!({"messageId": "m2", "body": EVENT, "eventSource": "aws:sqs"}).to_string(),
                "sqs-record",
                Some("m2"),
            ),
            (
                json!({"Messages": [{"MessageId": "m3", "Body": EVENT}]}).to_string(),
                "receive-message",
                Some("m3"),
            ),
            (sns.clone(), "sns", None),
            (
                json!({"Records": [{"messageId": "m4", "body": sns}]}).to_string(),
                "sqs-event+sns",
                Some("m4"),
            ),
        ];
        for (text, wrapper, id) in cases {
            let got = inputs(&text);
            assert_eq!(got.len(), 1, "{wrapper}");
            assert_eq!(got[0].wrapper, wrapper);
            assert_eq!(got[0].message_id.as_deref(), id, "{wrapper}");
            let row = explain(&got[0], None, None);
            assert_eq!(row["kind"], "spot-interruption", "{wrapper}: {row}");
        }
    }

    #[test]
    fn a_message_that_cannot_be_read_says_what_wrapped_it() {
        let text =
            json!({"Messages": [{"MessageId": "m1", "Body": "{\"detail-type\": 1}"}]}).to_string();
        let row = explain(&inputs(&text)[0], None, None);
        assert_eq!(row["kind"], "invalid");
        assert!(
            row["reason"]
                .as_str()
                .unwrap()
                .starts_with("read as a message of receive-message"),
            "{row}"
        );
    }
}
