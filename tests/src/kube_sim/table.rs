//! Server-side printing: a GET whose `Accept` asks for `as=Table;g=meta.k8s.io` (kubectl's
//! `get` does) is answered with a `meta.k8s.io/v1` Table — the columns of the kind
//! ([`super::printers`]) and one row per object, each with the object as
//! PartialObjectMetadata (the default), whole (`includeObject=Object`, which kubectl asks
//! for with `--sort-by`) or not at all (`includeObject=None`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::printers::{cells, columns};
use super::resources::ResourceType;
use super::status::ApiError;

/// What each row carries besides its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub fn from_query(q: &BTreeMap<String, String>) -> Result<Include, ApiError> {
        match q.get("includeObject").map(String::as_str) {
            None | Some("" | "Metadata") => Ok(Include::Metadata),
            Some("Object") => Ok(Include::Object),
            Some("None") => Ok(Include::None),
            Some(other) => Err(ApiError::bad_request(format!(
                "includeObject: Unsupported value: {other:?}: supported values: \"Metadata\", \"None\", \"Object\""
            ))),
        }
    }
}

/// The Table version the client accepts (`v1` preferred), or `None` when it wants objects.
pub fn negotiate(accept: &str) -> Option<&'static str> {
    let mut found = None;
    for media in accept.split(',') {
        let mut parts = media.split(';').map(str::trim);
        let ty = parts.next().unwrap_or("");
        if ty != "application/json" {
            continue;
        }
        let params: BTreeMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
        if params.get("as") != Some(&"Table") || params.get("g") != Some(&"meta.k8s.io") {
            continue;
        }
        match params.get("v") {
            Some(&"v1") => return Some("meta.k8s.io/v1"),
            Some(&"v1beta1") => found = Some("meta.k8s.io/v1beta1"),
            _ => {}
        }
    }
    found
}

/// The Table of a list answer (`items`, with the list's `metadata`) or of one object.
pub fn render(
    rt: &ResourceType,
    answer: &Value,
    table_version: &str,
    include: Include,
    now: Timestamp,
) -> Value {
    let (items, meta) = match answer.get("items").and_then(Value::as_array) {
        Some(items) => (items.clone(), answer["metadata"].clone()),
        None => (
            vec![answer.clone()],
            json!({ "resourceVersion": answer.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null) }),
        ),
    };
    let column_definitions: Vec<Value> = columns(rt)
        .iter()
        .map(|c| {
            let format = if c.name == "Name" { "name" } else { "" };
            json!({ "name": c.name, "type": c.ty, "format": format,
                    "description": c.description, "priority": c.priority })
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let mut row = json!({ "cells": cells(rt, obj, now) });
            match include {
                Include::None => {}
                Include::Metadata => {
                    row["object"] = json!({ "kind": "PartialObjectMetadata", "apiVersion": table_version,
                                            "metadata": obj["metadata"].clone() });
                }
                Include::Object => {
                    let mut full = obj.clone();
                    full["apiVersion"] = json!(rt.api_version());
                    full["kind"] = json!(rt.kind);
                    row["object"] = full;
                }
            }
            row
        })
        .collect();
    json!({ "kind": "Table", "apiVersion": table_version, "metadata": meta,
            "columnDefinitions": column_definitions, "rows": rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_sim::resources::{NODES, RESOURCES};

    #[test]
    fn kubectl_get_asks_for_a_table_and_other_clients_do_not() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(kubectl), Some("meta.k8s.io/v1"));
        assert_eq!(
            negotiate("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            Some("meta.k8s.io/v1beta1")
        );
        assert_eq!(negotiate("application/json"), None);
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf, application/json"),
            None
        );
        assert_eq!(
            negotiate("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"),
            None
        );
    }

    #[test]
    fn a_node_list_becomes_rows_with_the_node_columns_and_metadata_objects() {
        let list = json!({"metadata": {"resourceVersion": "7"}, "items": [{
            "metadata": {"name": "ip-10-0-0-1.ec2.internal", "creationTimestamp": "2025-01-01T00:00:00Z",
                         "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.35.0-eks", "osImage": "Amazon Linux 2023"}}}]});
        let now: Timestamp = "2025-01-01T00:05:00Z"
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let t = render(
            &RESOURCES[NODES],
            &list,
            "meta.k8s.io/v1",
            Include::Metadata,
            now,
        );
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime"
            ]
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "ip-10-0-0-1.ec2.internal",
                "Ready,SchedulingDisabled",
                "worker",
                "5m",
                "v1.35.0-eks",
                "10.0.0.1",
                "<none>",
                "Amazon Linux 2023",
                "<unknown>",
                "<unknown>"
            ])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
    }
}
