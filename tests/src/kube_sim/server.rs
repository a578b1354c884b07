//! The HTTP front: parses Kubernetes REST paths and dispatches them to the store.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::authz::{self, Identity};
use super::event_view;
use super::faults::RequestFacts;
use super::finalizers::{self, Deletion};
use super::graceful;
use super::openapi;
use super::patch::{self, PatchKind};
use super::pod_removals::{self, Via};
use super::request_log::LoggedRequest;
use super::resources::{
    self, DEPLOYMENTS, EVENTS, EVENTS_V1, NODEPOOLS, PODS, REPLICASETS, RESOURCES,
};
use super::selectors::{FieldSelector, LabelSelector, labels_of};
use super::state::Shared;
use super::status::{self, ApiError};
use super::store::{Store, Write};
use super::strict;
use super::subresources::{evict, scale_of};
use super::table::{self, Include};

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
    OpenApiV3Index,
    OpenApiV3(String),
    OpenApiV2,
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
        ["openapi", "v3"] => return Route::OpenApiV3Index,
        ["openapi", "v3", rest @ ..] => return Route::OpenApiV3(rest.join("/")),
        ["openapi", "v2"] | ["swagger-2.0.0.pb-v1"] => return Route::OpenApiV2,
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
    Query(mut query): Query<BTreeMap<String, String>>,
    identity: Option<axum::Extension<Identity>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let route = parse_route(&path, sh.crds_installed());
    let (plural, sub) = match &route {
        Route::Resource(t) => (Some(RESOURCES[t.res].plural), t.sub.as_deref()),
        _ => (None, None),
    };
    let watching = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    sh.record_request(format!(
        "{} {}{}",
        if watching { "WATCH" } else { method.as_str() },
        plural.unwrap_or(path.as_str()),
        sub.map(|s| format!("/{s}")).unwrap_or_default()
    ));
    sh.log_request(|| LoggedRequest {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        content_type: headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    if let Some(axum::Extension(who)) = &identity
        && let Err(e) = authorized(&sh, who, method.as_str(), &path, watching)
    {
        return e.into_response();
    }
    let (delay, fault, before) = {
        let mut f = sh.faults();
        let facts = RequestFacts {
            method: method.as_str(),
            path: &path,
            plural,
            subresource: sub,
            continued: query.contains_key("continue"),
        };
        let asked = query.get("limit").and_then(|l| l.parse().ok());
        if let Some(limit) = f.page_limit(asked).filter(|_| method == Method::GET) {
            query.insert("limit".into(), limit.to_string());
        }
        (f.delay_for(&path), f.take(facts), f.take_before(facts))
    };
    // An injected delay is the server's latency in the world's time, not work.
    if let Some(d) = delay {
        sh.clock.sleep(d).await;
    }
    let _busy = (!watching).then(|| sh.clock.busy());
    for object in before {
        if let Err(e) = super::store_object(&sh, object) {
            tracing::warn!(error = %e, "an object staged before a request was not stored");
        }
    }
    if let Some(e) = fault {
        return e.into_response();
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // Server-side printing for reads of a resource (kubectl get), not of its subresources.
    let table_version = match &route {
        Route::Resource(t) if method == Method::GET && t.sub.is_none() => headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .and_then(table::negotiate),
        _ => None,
    };
    let printing = match table_version {
        Some(v) => match Include::from_query(&query) {
            Ok(include) => Some((v, include)),
            Err(e) => return e.into_response(),
        },
        None => None,
    };
    if let Route::Resource(t) = &route
        && method == Method::GET
        && t.name.is_none()
        && query.get("watch").is_some_and(|w| w == "true" || w == "1")
    {
        return watch_collection(sh.clone(), t.clone(), query, printing);
    }
    match dispatch(&sh, &method, route.clone(), &query, content_type, &body) {
        Ok((code, mut v)) => {
            if let (Some((version, include)), Route::Resource(t)) = (printing, &route) {
                v = table::render(&RESOURCES[t.res], &v, version, include, sh.clock.now());
            }
            (
                StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
                axum::Json(v),
            )
                .into_response()
        }
        Err(e) => e.into_response(),
    }
}

pub type Answer = Result<(u16, Value), ApiError>;

/// RBAC's verdict on a request from `who`; a refusal is remembered for the tests.
fn authorized(
    sh: &Shared,
    who: &Identity,
    method: &str,
    path: &str,
    watching: bool,
) -> Result<(), ApiError> {
    let Some(what) = authz::attributes(method, path, watching) else {
        return Ok(());
    };
    let verdict = {
        let store = sh.store();
        let of = |plural: &str| -> Vec<&Value> {
            resources::find("rbac.authorization.k8s.io", "v1", plural)
                .map(|r| store.list(r, None).collect())
                .unwrap_or_default()
        };
        let policy = authz::Policy {
            cluster_roles: of("clusterroles"),
            cluster_role_bindings: of("clusterrolebindings"),
            roles: of("roles"),
            role_bindings: of("rolebindings"),
        };
        authz::authorize(&policy, who, &what)
    };
    verdict.map_err(|message| {
        sh.record_refusal(message.clone());
        ApiError::forbidden(message)
    })
}

/// A watch on a collection, served by re-listing it ([`super::watch`]); with `printing`,
/// each event carries a one-row Table, as `kubectl get -w` asks.
fn watch_collection(
    sh: Arc<Shared>,
    t: Target,
    mut query: BTreeMap<String, String>,
    printing: Option<(&'static str, Include)>,
) -> Response {
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
    let clock = sh.clock.clone();
    let present = move |obj: Value| match printing {
        Some((version, include)) => table::render(rt, &obj, version, include, clock.now()),
        None => obj,
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
    super::watch::respond(list, dropped, present, &watch_query)
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
        Route::OpenApiV3Index => Ok((200, openapi::index(crds))),
        Route::OpenApiV3(p) => openapi::document(&p, crds)
            .map(|v| (200, v))
            .ok_or_else(ApiError::path_not_found),
        Route::OpenApiV2 => Err(ApiError::not_served(
            "the simulated cluster serves OpenAPI v3 (/openapi/v3) only; OpenAPI v2 is protobuf",
        )),
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
            let obj = parse_body(body)?;
            if strict_fields(q) {
                strict::check(rt, &obj)?;
            }
            Ok((201, store.create(t.res, &ns, obj, now, Write::Main)?))
        }
        ("DELETE", None, None) => {
            let (_, listed) = list(store, t.res, t.ns.as_deref(), q)?;
            for item in listed["items"].as_array().into_iter().flatten() {
                let (ins, iname) = ns_name(item);
                let home = event_home(store, t.res, &ins, &iname);
                delete_one(store, now, home, &ins, &iname, q, body)?;
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
            let obj = parse_body(body)?;
            if strict_fields(q) {
                strict::check(rt, &obj)?;
            }
            Ok((200, store.replace(t.res, &ns, name, obj, how)?))
        }
        ("PATCH", Some(name), s @ (None | Some("status"))) => {
            let how = if s.is_some() {
                Write::Status
            } else {
                Write::Main
            };
            let strict = strict_fields(q);
            patch_object(store, now, t.res, &ns, name, how, ct, body, strict)
        }
        ("DELETE", Some(name), None) => {
            let gone = match delete_one(store, now, t.res, &ns, name, q, body)? {
                // Kept for its finalizers: the answer is the object, marked.
                Deletion::Finalizing(marked) => return Ok((200, marked)),
                Deletion::Gone(gone) => gone,
            };
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
        ("POST", Some(name), Some("eviction")) if t.res == PODS => {
            evict(store, now, &ns, name, body)
        }
        ("GET", Some(name), Some("scale")) if scaled(t.res) => {
            Ok((200, scale_of(store.get(t.res, &ns, name)?)))
        }
        ("PATCH" | "PUT", Some(name), Some("scale")) if scaled(t.res) => {
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
            if t.res == NODEPOOLS {
                static_pool_scale(name, replicas)?;
            }
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
        (_, Some(name), Some(sub @ ("log" | "exec" | "attach" | "portforward" | "proxy")))
            if t.res == PODS =>
        {
            Err(ApiError::not_served(format!(
                "pods/{sub} is not served by the simulated cluster: no container runs in it, \
                 so pod {ns}/{name} has no logs, shell or ports to reach"
            )))
        }
        (m, _, s) => Err(ApiError::method_not_allowed(format!(
            "{m} is not supported on {}{} by the simulated cluster",
            rt.plural,
            s.map(|s| format!("/{s}")).unwrap_or_default()
        ))),
    }
}

/// `fieldValidation=Strict`: unknown fields are an error (`Warn` and `Ignore` accept them,
/// without the warning header the real server adds for `Warn`).
fn strict_fields(q: &BTreeMap<String, String>) -> bool {
    q.get("fieldValidation").map(String::as_str) == Some("Strict")
}

/// Deletes with background propagation unless `propagationPolicy=Orphan` (query or
/// DeleteOptions body). A pod a node runs is deleted gracefully (see [`graceful`]); other
/// objects go at once.
fn delete_one(
    store: &mut Store,
    now: &str,
    res: usize,
    ns: &str,
    name: &str,
    q: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Deletion, ApiError> {
    let options = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    check_preconditions(&RESOURCES[res], name, store.get(res, ns, name)?, &options)?;
    if res == PODS {
        let grace = graceful::requested_grace(q, &options);
        let forbidden = |s: &Store| super::subresources::budget_check(s, ns, name).is_err();
        return pod_removals::delete(store, (ns, name), grace, now, Via::Delete, forbidden)
            .map(Deletion::Gone);
    }
    let body_policy = options
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(String::from);
    let orphan = q.get("propagationPolicy").map(String::as_str) == Some("Orphan")
        || body_policy.as_deref() == Some("Orphan");
    finalizers::delete(store, res, ns, name, now, orphan)
}

/// DeleteOptions `preconditions`: a delete (or an eviction, whose DeleteOptions carry them)
/// of an object whose uid or resourceVersion moved on since the caller read it is a 409
/// Conflict (leader election and drain rely on it).
pub(super) fn check_preconditions(
    rt: &resources::ResourceType,
    name: &str,
    current: &Value,
    options: &Value,
) -> Result<(), ApiError> {
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let Some(want) = options
            .pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let have = current
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if want != have {
            let mut e = ApiError::conflict(rt.group, rt.plural, name);
            e.message = format!(
                "Precondition failed: {label} in precondition: {want}, {label} in object meta: {have}"
            );
            return Err(e);
        }
    }
    Ok(())
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

/// The objects of a collection in namespace/name order; each Event API also lists the
/// other's Events, converted, as one storage serves both on a real server.
fn stored_items(store: &Store, res: usize, ns: Option<&str>) -> Vec<Value> {
    let other = match res {
        EVENTS => Some((EVENTS_V1, event_view::to_core as fn(&Value) -> Value)),
        EVENTS_V1 => Some((EVENTS, event_view::to_events_v1 as fn(&Value) -> Value)),
        _ => None,
    };
    let mut items: Vec<Value> = store.list(res, ns).cloned().collect();
    if let Some((other, convert)) = other {
        items.extend(store.list(other, ns).map(convert));
        items.sort_by_key(ns_name);
    }
    items
}

/// Where a listed object is stored: an Event listed through one Event API may live in the
/// other's store (see [`stored_items`]).
fn event_home(store: &Store, res: usize, ns: &str, name: &str) -> usize {
    match res {
        EVENTS if store.get(EVENTS, ns, name).is_err() => EVENTS_V1,
        EVENTS_V1 if store.get(EVENTS_V1, ns, name).is_err() => EVENTS,
        other => other,
    }
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
    for obj in &stored_items(store, res, ns) {
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
    strict: bool,
) -> Answer {
    let kind = PatchKind::from_content_type(ct)?;
    let rt = &RESOURCES[res];
    let current = match store.get(res, ns, name) {
        Ok(v) => v.clone(),
        Err(e) if kind == PatchKind::Apply && how == Write::Main => {
            // Server-side apply creates what does not exist yet.
            let mut fresh = json!({ "metadata": { "name": name } });
            patch::apply(kind, &mut fresh, body)?;
            if strict {
                strict::check(rt, &fresh)?;
            }
            return store
                .create(res, ns, fresh, now, Write::Main)
                .map(|v| (201, v))
                .map_err(|_| e);
        }
        Err(e) => return Err(e),
    };
    let mut doc = current;
    patch::apply(kind, &mut doc, body)?;
    if strict {
        strict::check(rt, &doc)?;
    }
    Ok((200, store.replace(res, ns, name, doc, how)?))
}

/// The kinds with a `scale` subresource.
fn scaled(res: usize) -> bool {
    matches!(res, DEPLOYMENTS | REPLICASETS | NODEPOOLS)
}

/// Karpenter's CRD's minimum for a NodePool's scale (a dynamic NodePool, which has no
/// `replicas`, is refused by the store's transition rule).
fn static_pool_scale(name: &str, replicas: i64) -> Result<(), ApiError> {
    if replicas < 0 {
        return Err(ApiError::invalid(
            "NodePool",
            name,
            "spec.replicas",
            "should be greater than or equal to 0",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(p: &str) -> Route {
        parse_route(p, false)
    }

    #[test]
    fn deleting_the_event_collection_deletes_the_events_of_both_apis() {
        let mut store = Store::new();
        let t = "2025-01-01T00:00:00Z";
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "a"},
                          "involvedObject": {"kind": "Pod", "name": "p"}});
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "b"},
                        "eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "x",
                        "reportingInstance": "y", "action": "A", "reason": "R", "regarding": {"kind": "Pod"}});
        assert!(
            store
                .create(EVENTS, "default", core, t, Write::Main)
                .is_ok()
        );
        assert!(
            store
                .create(EVENTS_V1, "default", v1, t, Write::Main)
                .is_ok()
        );
        let target = Target {
            res: EVENTS,
            ns: Some("default".into()),
            name: None,
            sub: None,
        };
        let answer = resource(
            &mut store,
            t,
            &Method::DELETE,
            target,
            &BTreeMap::new(),
            "",
            &[],
        );
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(
            store.list(EVENTS, None).count() + store.list(EVENTS_V1, None).count(),
            0
        );
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
