//! `/openapi/v3`: the OpenAPI v3 discovery kubectl reads before `apply` (does the server
//! validate fields itself? — it does, `fieldValidation=Strict`, see [`super::strict`]) and
//! for `explain`.
//!
//! The index lists one document per served group-version; each document has the paths of
//! its resources with the `x-kubernetes-group-version-kind` extension and the
//! `fieldValidation` query parameter kubectl looks for, and a schema per kind. The Karpenter
//! kinds get a structural schema written from their documented fields ([`super::crd_schema`]),
//! so `kubectl explain nodepool.spec.disruption` works; the built-in kinds publish only their
//! top level (emulated, and named as such: the real server publishes the whole schema).
//!
//! PATCH operations list JSON, merge and apply patches but not strategic merge, so kubectl's
//! `apply` computes its strategic merge patch from the types compiled into it, as it does
//! against a server whose OpenAPI v3 lacks a kind.
//!
//! Not served: `/openapi/v2` (kubectl reads it as protobuf only, and falls back to v3).

use serde_json::{Value, json};

use super::crd_schema;
use super::resources::{RESOURCES, ResourceType};

/// The path of a group-version's document: `api/v1`, `apis/apps/v1`.
fn gv_path(r: &ResourceType) -> String {
    if r.group.is_empty() {
        format!("api/{}", r.version)
    } else {
        format!("apis/{}/{}", r.group, r.version)
    }
}

fn served(crds: bool) -> impl Iterator<Item = &'static ResourceType> {
    RESOURCES.iter().filter(move |r| !r.crd || crds)
}

/// A stable hash of a document (FNV-1a), for the `?hash=` the index carries: clients cache
/// a document by URL, so the URL changes when the document does.
fn hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `/openapi/v3`.
pub fn index(crds: bool) -> Value {
    let mut paths = serde_json::Map::new();
    for r in served(crds) {
        let p = gv_path(r);
        if paths.contains_key(&p) {
            continue;
        }
        let doc = document(&p, crds)
            .map(|d| d.to_string())
            .unwrap_or_default();
        paths.insert(
            p.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(&doc)) }),
        );
    }
    json!({ "paths": paths })
}

/// The schema name of a kind, as the real server names it.
fn schema_name(r: &ResourceType) -> String {
    let group = match r.group {
        "" => "core",
        "apps" | "policy" => r.group,
        "events.k8s.io" => "events",
        "coordination.k8s.io" => "coordination",
        other => {
            // CRDs: the reversed group, as the apiextensions server names them.
            let reversed: Vec<&str> = other.split('.').rev().collect();
            return format!("{}.{}.{}", reversed.join("."), r.version, r.kind);
        }
    };
    format!("io.k8s.api.{group}.{}.{}", r.version, r.kind)
}

fn gvk(r: &ResourceType) -> Value {
    json!([{ "group": r.group, "version": r.version, "kind": r.kind }])
}

fn operation(r: &ResourceType, action: &str, writes: bool) -> Value {
    let mut params =
        vec![json!({ "name": "pretty", "in": "query", "schema": { "type": "string" } })];
    if writes {
        params.push(json!({ "name": "dryRun", "in": "query", "schema": { "type": "string" } }));
        params
            .push(json!({ "name": "fieldManager", "in": "query", "schema": { "type": "string" } }));
        params.push(json!({
            "name": "fieldValidation", "in": "query", "schema": { "type": "string" },
            "description": "Ignore, Warn or Strict: whether unknown or duplicate fields are an error (Strict, kubectl's default)",
        }));
    }
    let mut op = json!({
        "operationId": format!("{action}{}", r.kind), "parameters": params,
        "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk(r)[0].clone(),
        "responses": { "200": { "description": "OK" } },
    });
    if action == "patch" {
        op["requestBody"] = json!({ "content": {
            "application/json-patch+json": {}, "application/merge-patch+json": {},
            "application/apply-patch+yaml": {} } });
    }
    op
}

/// The schema of a kind: written out for the Karpenter kinds, the top level for the others.
fn schema(r: &ResourceType) -> Value {
    let mut s = crd_schema::for_kind(r.kind).unwrap_or_else(|| {
        json!({
            "description": format!("{} (the simulated cluster publishes the top level of built-in kinds only)", r.kind),
            "type": "object",
            "properties": {
                "apiVersion": { "type": "string", "description": "The versioned schema of this object." },
                "kind": { "type": "string", "description": "The REST resource this object represents." },
                "metadata": { "type": "object", "description": "Standard object metadata.", "x-kubernetes-preserve-unknown-fields": true },
                "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                "status": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
            },
        })
    });
    s["x-kubernetes-group-version-kind"] = gvk(r);
    s
}

/// `/openapi/v3/{api/v1 | apis/<group>/<version>}`, or `None` if nothing is served there.
pub fn document(path: &str, crds: bool) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for r in served(crds).filter(|r| gv_path(r) == path) {
        let base = format!("/{path}");
        let (collection, item) = if r.namespaced {
            (
                format!("{base}/namespaces/{{namespace}}/{}", r.plural),
                format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
            )
        } else {
            (
                format!("{base}/{}", r.plural),
                format!("{base}/{}/{{name}}", r.plural),
            )
        };
        paths.insert(
            collection,
            json!({ "get": operation(r, "list", false), "post": operation(r, "post", true) }),
        );
        paths.insert(
            item,
            json!({ "get": operation(r, "get", false), "put": operation(r, "put", true),
                    "patch": operation(r, "patch", true), "delete": operation(r, "delete", false) }),
        );
        schemas.insert(schema_name(r), schema(r));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.35.0-nodewright-sim" },
        "paths": paths,
        "components": { "schemas": schemas },
    }))
}

/// The schema a served kind's objects are checked against under `fieldValidation=Strict`,
/// when one is written out (the Karpenter kinds).
pub fn strict_schema(r: &ResourceType) -> Option<Value> {
    crd_schema::for_kind(r.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_points_at_one_document_per_served_group_version() {
        let without = index(false);
        assert!(
            without["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .is_some_and(|u| u.starts_with("/openapi/v3/api/v1?hash="))
        );
        assert!(without["paths"].get("apis/karpenter.sh/v1").is_none());
        assert!(index(true)["paths"].get("apis/karpenter.sh/v1").is_some());
        assert!(document("apis/karpenter.sh/v1", false).is_none());
    }

    #[test]
    fn patch_operations_name_their_kind_and_take_field_validation() {
        let doc = document("apis/apps/v1", false).unwrap_or_default();
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        let params = patch["parameters"].as_array().cloned().unwrap_or_default();
        assert!(
            params
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        let np = document("apis/karpenter.sh/v1", true).unwrap_or_default();
        assert_eq!(
            np["components"]["schemas"]["sh.karpenter.v1.NodePool"]["x-kubernetes-group-version-kind"]
                [0]["kind"],
            "NodePool"
        );
    }
}
