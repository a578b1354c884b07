//! The HTTP front: parses Kubernetes REST paths and dispatches them to the store.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::faults::RequestFacts;
use super::patch::{self, PatchKind};
use super::resources::{self, DEPLOYMENTS, PODS, REPLICASETS, RESOURCES};
use super::selectors::{FieldSelector, LabelSelector, labels_of};
use super::state::Shared;
use super::status::{self, ApiError};
use super::store::{Store, Write};
use super::subresources::{evict, scale_of};

/// Where a path leads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    ResourceList(String, String),
    Resource(Target),
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    res: usize,
    /// `None`: the all-namespaces collection (or a cluster-scoped resource).
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_route(path: &str, crds: bool) -> Route {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "readyz" | "livez", ..] => return Route::Health,
        ["api"] => return Route::CoreVersions,
        ["apis"] => return Route::Groups,
        ["apis", g] => return Route::Group(g.to_string()),
        ["api", v] => return Route::ResourceList(String::new(), v.to_string()),
        ["apis", g, v] => return Route::ResourceList(g.to_string(), v.to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NotFound,
    };
    let (ns, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..] if tail.len() <= 2 => {
            (Some(ns.to_string()), *plural, tail.first(), tail.get(1))
        }
        [plural, tail @ ..] if tail.len() <= 2 => (None, *plural, tail.first(), tail.get(1)),
        _ => return Route::NotFound,
    };
    let Some(res) = resources::find(group, version, plural) else {
        return Route::NotFound;
    };
    let rt = &RESOURCES[res];
    if (rt.crd && !crds)
        || (!rt.namespaced && ns.is_some())
        || (rt.namespaced && ns.is_none() && name.is_some())
    {
        return Route::NotFound;
    }
    Route::Resource(Target {
        res,
        ns,
        name: name.map(|s| s.to_string()),
        sub: sub.map(|s| s.to_string()),
    })
}

pub async fn handle(
    State(sh): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let route = parse_route(&path, sh.crds_installed());
    let (plural, sub) = match &route {
        Route::Resource(t) => (Some(RESOURCES[t.res].plural), t.sub.as_deref()),
        _ => (None, None),
    };
    let (delay, fault) = {
        let mut f = sh.faults();
        let facts = RequestFacts {
            method: method.as_str(),
            path: &path,
            plural,
            subresource: sub,
        };
        (f.delay_for(&path), f.take(facts))
    };
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    if let Some(e) = fault {
        return e.into_response();
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Route::Resource(t) = &route
        && method == Method::GET
        && t.name.is_none()
        && query.get("watch").is_some_and(|w| w == "true" || w == "1")
    {
        return watch_collection(sh.clone(), t.clone(), query);
    }
    match dispatch(&sh, &method, route, &query, content_type, &body) {
        Ok((code, v)) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
            axum::Json(v),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

pub type Answer = Result<(u16, Value), ApiError>;

/// A watch on a collection, served by re-listing it ([`super::watch`]).
fn watch_collection(sh: Arc<Shared>, t: Target, mut query: BTreeMap<String, String>) -> Response {
    let rt = &RESOURCES[t.res];
    let api_version = if rt.group.is_empty() {
        rt.version.to_string()
    } else {
        format!("{}/{}", rt.group, rt.version)
    };
    let watch_query = query.clone();
    query.remove("watch");
    query.remove("resourceVersion");
    let generation = sh.watch_generation();
    let dropped = {
        let guard = sh.watch_opened();
        move || guard.shared().watch_generation() != generation
    };
    let list = move || {
        let now = sh.clock.rfc3339();
        let mut store = sh.store();
        match resource(&mut store, &now, &Method::GET, t.clone(), &query, "", &[]) {
            Ok((_, mut v)) => {
                for item in v["items"].as_array_mut().into_iter().flatten() {
                    item["apiVersion"] = json!(api_version);
                    item["kind"] = json!(rt.kind);
                }
                Ok(v)
            }
            Err(e) => Err(e.into_response()),
        }
    };
    super::watch::respond(list, dropped, &watch_query)
}

fn dispatch(
    sh: &Shared,
    method: &Method,
    route: Route,
    q: &BTreeMap<String, String>,
    ct: &str,
    body: &[u8],
) -> Answer {
    let crds = sh.crds_installed();
    match route {
        Route::Version => Ok((200, version())),
        Route::Health => Ok((200, json!("ok"))),
        Route::CoreVersions => Ok((200, resources::core_versions())),
        Route::Groups => Ok((200, resources::group_list(crds))),
        Route::Group(g) => resources::group(&g, crds)
            .map(|v| (200, v))
            .ok_or_else(ApiError::path_not_found),
        Route::ResourceList(g, v) => resources::resource_list(&g, &v, crds)
            .map(|v| (200, v))
            .ok_or_else(ApiError::path_not_found),
        Route::NotFound => Err(ApiError::path_not_found()),
        Route::Resource(t) => {
            if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
                return Err(ApiError::method_not_allowed(
                    "the simulated cluster watches collections only",
                ));
            }
            let now = sh.clock.rfc3339();
            let mut store = sh.store();
            resource(&mut store, &now, method, t, q, ct, body)
        }
    }
}

fn version() -> Value {
    json!({
        "major": "1", "minor": "35", "gitVersion": "v1.35.0-nodewright-sim", "gitCommit": "",
        "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24",
        "compiler": "gc", "platform": "linux/amd64",
    })
}

pub fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
}

fn resource(
    store: &mut Store,
    now: &str,
    method: &Method,
    t: Target,
    q: &BTreeMap<String, String>,
    ct: &str,
    body: &[u8],
) -> Answer {
    let rt = &RESOURCES[t.res];
    let ns = t.ns.clone().unwrap_or_default();
    match (method.as_str(), t.name.as_deref(), t.sub.as_deref()) {
        ("GET", None, None) => list(store, t.res, t.ns.as_deref(), q),
        ("POST", None, None) => {
            if rt.namespaced && t.ns.is_none() {
                return Err(ApiError::method_not_allowed(format!(
                    "create of {} needs a namespace in the path",
                    rt.plural
                )));
            }
            Ok((
                201,
                store.create(t.res, &ns, parse_body(body)?, now, Write::Main)?,
            ))
        }
        ("DELETE", None, None) => {
            let (_, listed) = list(store, t.res, t.ns.as_deref(), q)?;
            for item in listed["items"].as_array().into_iter().flatten() {
                let (ins, iname) = ns_name(item);
                delete_one(store, t.res, &ins, &iname, q, body)?;
            }
            Ok((200, listed))
        }
        ("GET", Some(name), None | Some("status")) => {
            Ok((200, store.get(t.res, &ns, name)?.clone()))
        }
        ("PUT", Some(name), s @ (None | Some("status"))) => {
            let how = if s.is_some() {
                Write::Status
            } else {
                Write::Main
            };
            Ok((
                200,
                store.replace(t.res, &ns, name, parse_body(body)?, how)?,
            ))
        }
        ("PATCH", Some(name), s @ (None | Some("status"))) => {
            let how = if s.is_some() {
                Write::Status
            } else {
                Write::Main
            };
            patch_object(store, now, t.res, &ns, name, how, ct, body)
        }
        ("DELETE", Some(name), None) => {
            let gone = delete_one(store, t.res, &ns, name, q, body)?;
            if t.res == PODS {
                // Pods answer with the object they were; other kinds with a success Status.
                return Ok((200, gone));
            }
            Ok((
                200,
                status::success(
                    200,
                    json!({"name": name, "group": rt.group, "kind": rt.plural, "uid": gone["metadata"]["uid"]}),
                ),
            ))
        }
        ("POST", Some(name), Some("eviction")) if t.res == PODS => evict(store, &ns, name, body),
        ("GET", Some(name), Some("scale")) if t.res == DEPLOYMENTS || t.res == REPLICASETS => {
            Ok((200, scale_of(store.get(t.res, &ns, name)?)))
        }
        ("PATCH" | "PUT", Some(name), Some("scale"))
            if t.res == DEPLOYMENTS || t.res == REPLICASETS =>
        {
            let current = store.get(t.res, &ns, name)?.clone();
            let mut scale = scale_of(&current);
            if method == Method::PUT {
                scale = parse_body(body)?;
            } else {
                patch::apply(PatchKind::from_content_type(ct)?, &mut scale, body)?;
            }
            let replicas = scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let mut updated = current;
            updated["spec"]["replicas"] = json!(replicas);
            if let Some(rv) = scale.pointer("/metadata/resourceVersion") {
                updated["metadata"]["resourceVersion"] = rv.clone();
            }
            Ok((
                200,
                scale_of(&store.replace(t.res, &ns, name, updated, Write::Main)?),
            ))
        }
        (m, _, s) => Err(ApiError::method_not_allowed(format!(
            "{m} is not supported on {}{} by the simulated cluster",
            rt.plural,
            s.map(|s| format!("/{s}")).unwrap_or_default()
        ))),
    }
}

/// Deletes with background propagation unless `propagationPolicy=Orphan` (query or
/// DeleteOptions body); `gracePeriodSeconds` is accepted and deletion is immediate.
fn delete_one(
    store: &mut Store,
    res: usize,
    ns: &str,
    name: &str,
    q: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Value, ApiError> {
    let body_policy = serde_json::from_slice::<Value>(body).ok().and_then(|b| {
        b.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
    });
    let orphan = q.get("propagationPolicy").map(String::as_str) == Some("Orphan")
        || body_policy.as_deref() == Some("Orphan");
    if orphan {
        store.delete(res, ns, name)
    } else {
        store.delete_cascade(res, ns, name)
    }
}

fn ns_name(obj: &Value) -> (String, String) {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("/metadata/namespace"), s("/metadata/name"))
}

fn list(store: &Store, res: usize, ns: Option<&str>, q: &BTreeMap<String, String>) -> Answer {
    let rt = &RESOURCES[res];
    let labels = LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map(String::as_str).unwrap_or(""),
        rt.field_labels,
    )?;
    let limit: usize = q
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    // The continue token is the namespace/name of the last item returned.
    let after = q.get("continue").cloned().unwrap_or_default();
    let mut items: Vec<Value> = Vec::new();
    let mut more = None;
    for obj in store.list(res, ns) {
        let (ins, iname) = ns_name(obj);
        let key = format!("{ins}/{iname}");
        if !after.is_empty() && key <= after {
            continue;
        }
        if !labels.matches(&labels_of(obj)) || !fields.matches(obj) {
            continue;
        }
        if items.len() == limit {
            more = items.last().map(|last| {
                let (lns, lname) = ns_name(last);
                format!("{lns}/{lname}")
            });
            break;
        }
        items.push(obj.clone());
    }
    let mut meta = json!({ "resourceVersion": store.resource_version() });
    if let Some(token) = more {
        meta["continue"] = json!(token);
    }
    Ok((
        200,
        json!({ "kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(), "metadata": meta, "items": items }),
    ))
}

#[allow(clippy::too_many_arguments)]
fn patch_object(
    store: &mut Store,
    now: &str,
    res: usize,
    ns: &str,
    name: &str,
    how: Write,
    ct: &str,
    body: &[u8],
) -> Answer {
    let kind = PatchKind::from_content_type(ct)?;
    let current = match store.get(res, ns, name) {
        Ok(v) => v.clone(),
        Err(e) if kind == PatchKind::Apply && how == Write::Main => {
            // Server-side apply creates what does not exist yet.
            let mut fresh = json!({ "metadata": { "name": name } });
            patch::apply(kind, &mut fresh, body)?;
            return store
                .create(res, ns, fresh, now, Write::Main)
                .map(|v| (201, v))
                .map_err(|_| e);
        }
        Err(e) => return Err(e),
    };
    let mut doc = current;
    patch::apply(kind, &mut doc, body)?;
    Ok((200, store.replace(res, ns, name, doc, how)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(p: &str) -> Route {
        parse_route(p, false)
    }

    #[test]
    fn paths_route_to_resources_like_the_real_server() {
        let pods = |ns: Option<&str>, name: Option<&str>, sub: Option<&str>| {
            Route::Resource(Target {
                res: PODS,
                ns: ns.map(String::from),
                name: name.map(String::from),
                sub: sub.map(String::from),
            })
        };
        assert_eq!(route("/api/v1/pods"), pods(None, None, None));
        assert_eq!(
            route("/api/v1/namespaces/a/pods/b/eviction"),
            pods(Some("a"), Some("b"), Some("eviction"))
        );
        assert_eq!(route("/api/v1/pods/b"), Route::NotFound);
        assert_eq!(route("/api/v1/namespaces/a/nodes"), Route::NotFound);
        assert_eq!(route("/apis/karpenter.sh/v1/nodepools"), Route::NotFound);
        assert!(matches!(
            parse_route("/apis/karpenter.sh/v1/nodepools", true),
            Route::Resource(_)
        ));
        assert_eq!(
            route("/apis/apps/v1"),
            Route::ResourceList("apps".into(), "v1".into())
        );
    }
}
