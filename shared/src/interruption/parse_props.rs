//! Property tests for the queue's outside input: any text, and every documented sample
//! envelope with any JSON put in place of any one of its fields. The parser must answer
//! each with a value, never a panic (`panic = "abort"` would kill the whole batch), and an
//! error must say where: an envelope error its path, a field error a field under
//! `detail` (or the envelope's `time` or `id`).

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::parse::{Origin, ParseError, parse};

const SAMPLES: &[&str] = &[
    "capacity-reservation-interruption-warning.json",
    "health-scheduled-change.json",
    "instance-state-change-stopping.json",
    "rebalance-recommendation.json",
    "spot-interruption-warning.json",
];

fn sample(name: &str) -> Value {
    let path = format!(
        "{}/src/interruption/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn here() -> Origin {
    Origin {
        account: "123456789012".into(),
        region: "us-east-1".into(),
    }
}

/// Any JSON value, a few levels deep.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,24}".prop_map(Value::String),
        Just(Value::String("i-0123456789abcdef0".into())),
        Just(Value::String("2026-01-01T00:00:00Z".into())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every path to a value in `v` (object keys and array indexes), the root included.
fn paths(v: &Value) -> Vec<Vec<String>> {
    let mut out = vec![vec![]];
    let children: Vec<(String, &Value)> = match v {
        Value::Object(m) => m.iter().map(|(k, c)| (k.clone(), c)).collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, c)| (i.to_string(), c))
            .collect(),
        _ => vec![],
    };
    for (key, child) in children {
        for mut rest in paths(child) {
            rest.insert(0, key.clone());
            out.push(rest);
        }
    }
    out
}

fn replace(v: &mut Value, path: &[String], with: Value) {
    let Some((first, rest)) = path.split_first() else {
        *v = with;
        return;
    };
    let child = match v {
        Value::Object(m) => m.get_mut(first),
        Value::Array(a) => first.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    };
    if let Some(c) = child {
        replace(c, rest, with);
    }
}

fn error_says_where(e: &ParseError) -> bool {
    match e {
        ParseError::Envelope { .. } => !e.to_string().is_empty(),
        // The envelope fields a kind needs beyond serde's (its id, its time) or one
        // under `detail`.
        ParseError::Field { field, .. } => {
            field.starts_with("detail") || field == "time" || field == "id"
        }
    }
}

proptest! {
    #[test]
    fn any_text_is_parsed_or_refused_without_a_panic(body in "\\PC{0,200}") {
        if let Err(e) = parse(&body, Some(&here()), jiff::Timestamp::UNIX_EPOCH) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn any_json_in_place_of_any_field_of_a_sample_is_parsed_or_refused_naming_where(
        which in 0..SAMPLES.len(),
        pick in any::<prop::sample::Index>(),
        with in json(),
    ) {
        let mut event = sample(SAMPLES[which]);
        let all = paths(&event);
        let path = pick.get(&all).clone();
        replace(&mut event, &path, with);
        if let Err(e) = parse(&event.to_string(), Some(&here()), jiff::Timestamp::UNIX_EPOCH) {
            prop_assert!(error_says_where(&e), "{}: {path:?}: {e}", SAMPLES[which]);
        }
    }
}
