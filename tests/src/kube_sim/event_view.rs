//! The two Event APIs are one storage on a real server: an `events.k8s.io/v1` Event is also
//! a core/v1 Event (and back), converted field by field as
//! kubernetes pkg/apis/events/v1/conversion.go does. nodewright writes `events.k8s.io/v1`
//! Events while `kubectl get events` and `kubectl describe` read core/v1 ones, so the
//! simulated server lists each API with the other's objects converted in.

use serde_json::{Map, Value, json};

/// (events.k8s.io/v1 field, core/v1 field) pairs that carry the same value.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];
/// Fields of the same name in both.
const SAME: &[&str] = &[
    "metadata",
    "eventTime",
    "series",
    "action",
    "related",
    "reason",
    "type",
    "reportingInstance",
];

fn convert(
    obj: &Value,
    api_version: &str,
    pairs: impl Iterator<Item = (&'static str, &'static str)>,
) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    for f in SAME {
        if let Some(v) = obj.get(*f) {
            out.insert((*f).into(), v.clone());
        }
    }
    for (from, to) in pairs {
        if let Some(v) = obj.get(from) {
            out.insert(to.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// An `events.k8s.io/v1` Event as core/v1 shows it. The server writes the core Event's
/// `firstTimestamp` and `lastTimestamp` even when unset (a Go `metav1.Time` field is never
/// omitted: its zero value is `null`), and `source` as `{}`; `kubectl get events
/// --sort-by=.lastTimestamp` finds no such field otherwise and prints nothing.
pub fn to_core(obj: &Value) -> Value {
    let mut core = convert(obj, "v1", RENAMED.iter().copied());
    if let Some(fields) = core.as_object_mut() {
        for time in ["firstTimestamp", "lastTimestamp"] {
            fields.entry(time).or_insert(Value::Null);
        }
        fields.entry("source").or_insert(json!({}));
    }
    core
}

/// A core/v1 Event as `events.k8s.io/v1` shows it.
pub fn to_events_v1(obj: &Value) -> Value {
    convert(
        obj,
        "events.k8s.io/v1",
        RENAMED.iter().map(|(a, b)| (*b, *a)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_v1_event_reads_as_the_core_event_it_is_stored_as() {
        let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Pod", "name": "web"}, "note": "launched", "reason": "Launched",
            "type": "Normal", "reportingController": "nodewright.io/provisioner",
            "deprecatedCount": 2, "eventTime": "2025-01-01T00:00:00.000000Z"});
        let core = to_core(&ev);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(
            core.get("lastTimestamp"),
            Some(&Value::Null),
            "written, as null"
        );
        assert_eq!(core["source"], json!({}));
        assert_eq!(core["involvedObject"]["name"], "web");
        assert_eq!(core["message"], "launched");
        assert_eq!(core["reportingComponent"], "nodewright.io/provisioner");
        assert_eq!(core["count"], 2);
        // Back again, with the unset times and source as the core view wrote them.
        let mut back = ev.clone();
        back["deprecatedFirstTimestamp"] = Value::Null;
        back["deprecatedLastTimestamp"] = Value::Null;
        back["deprecatedSource"] = json!({});
        assert_eq!(to_events_v1(&core), back);
    }
}
