//! The object store behind the API server: every object as raw JSON, keyed by resource,
//! namespace and name, with the cluster-wide `resourceVersion` counter, uids and
//! creation timestamps the real server assigns.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::resources::{NAMESPACES, PODS, RESOURCES};
use super::status::ApiError;
use super::validation::{check_type_meta, default_pod, namespace_for, validate_name, validate_pod};

/// How a write is checked and what it may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// A client write to the main resource: `status` is kept as stored when the resource has
    /// a status subresource; a stale `resourceVersion` is a conflict.
    Main,
    /// A client write to `/status`: only `status` changes.
    Status,
    /// A write by the simulation itself or by seeding: taken whole, no version check.
    Internal,
}

type Key = (usize, String, String);

#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<Key, Value>,
    rv: u64,
    seq: u64,
    /// Pods clients took away from nodes, oldest first, once the audit is on (see
    /// `pod_removals.rs`).
    pod_removals: Option<Vec<super::pod_removals::PodRemoval>>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

/// Characters of generated name suffixes, from k8s.io/apimachinery/pkg/util/rand (no vowels,
/// no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl Store {
    /// An empty cluster with the namespaces every cluster has.
    pub fn new() -> Store {
        let mut s = Store {
            objects: BTreeMap::new(),
            rv: 1,
            seq: 0,
            pod_removals: None,
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                             "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
            let _ = s.create(NAMESPACES, "", obj, "2025-01-01T00:00:00Z", Write::Internal);
        }
        s
    }

    /// Audits every pod a client takes away from a node from now on; off by default.
    pub fn start_pod_removal_audit(&mut self) {
        self.pod_removals.get_or_insert_with(Vec::new);
    }

    pub fn audits_pod_removals(&self) -> bool {
        self.pod_removals.is_some()
    }

    /// Records a pod a client took away from a node (one that ran nowhere is left out).
    pub fn audit_pod_removal(&mut self, removal: super::pod_removals::PodRemoval) {
        if let (Some(log), Some(_)) = (self.pod_removals.as_mut(), &removal.node) {
            log.push(removal);
        }
    }

    /// The pod removals recorded since the last call.
    pub fn take_pod_removals(&mut self) -> Vec<super::pod_removals::PodRemoval> {
        self.pod_removals
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The latest resourceVersion (what list responses carry).
    pub fn resource_version(&self) -> String {
        self.rv.to_string()
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        // splitmix64: spreads consecutive numbers so that suffixes look random but stay reproducible.
        let mut z = self.seq.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A 5-character suffix like the ones `generateName` and controllers use.
    pub fn random_suffix(&mut self, len: usize) -> String {
        let mut n = self.next_seq();
        (0..len)
            .map(|_| {
                let c = NAME_ALPHABET[(n % NAME_ALPHABET.len() as u64) as usize] as char;
                n /= NAME_ALPHABET.len() as u64;
                c
            })
            .collect()
    }

    fn next_uid(&mut self) -> String {
        let a = self.next_seq();
        let b = self.next_seq();
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }

    fn bump(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    pub fn get(&self, r: usize, ns: &str, name: &str) -> Result<&Value, ApiError> {
        self.objects
            .get(&(r, ns.to_string(), name.to_string()))
            .ok_or_else(|| not_found(r, name))
    }

    /// Objects of one resource, in one namespace or (`None`) in all, ordered by namespace and name.
    pub fn list(&self, r: usize, ns: Option<&str>) -> impl Iterator<Item = &Value> {
        self.objects
            .range((r, String::new(), String::new())..)
            .take_while(move |((res, _, _), _)| *res == r)
            .filter(move |((_, n, _), _)| ns.is_none_or(|ns| ns == n))
            .map(|(_, v)| v)
    }

    pub fn create(
        &mut self,
        r: usize,
        ns: &str,
        mut obj: Value,
        now: &str,
        how: Write,
    ) -> Result<Value, ApiError> {
        let rt = &RESOURCES[r];
        check_type_meta(rt, &mut obj)?;
        let ns = namespace_for(rt, ns, &obj)?;
        let mut name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            let prefix = obj
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    rt.kind,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            name = format!("{prefix}{}", self.random_suffix(5));
        }
        validate_name(rt, &name)?;
        (rt.validate)(&obj).map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: {e}",
                rt.kind, rt.version, rt.kind
            ))
        })?;
        if r == PODS && how != Write::Internal {
            validate_pod(&obj, &name)?;
            default_pod(&mut obj);
        } else if r == PODS && obj.pointer("/status/phase").is_none() {
            // Internal writes keep the status a test or simulation wrote, but every new pod
            // has a phase on the real server: one written without gets `Pending` too.
            obj["status"]["phase"] = json!("Pending");
        }
        let key = (r, ns.clone(), name.clone());
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt.group, rt.plural, &name));
        }
        let uid = self.next_uid();
        let rv = self.bump();
        let mut meta = take_meta(&mut obj);
        meta.insert("name".into(), json!(name));
        if rt.namespaced {
            meta.insert("namespace".into(), json!(ns));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(uid));
        meta.insert("resourceVersion".into(), json!(rv));
        meta.entry("creationTimestamp").or_insert(json!(now));
        if meta.get("creationTimestamp").is_some_and(Value::is_null) {
            meta.insert("creationTimestamp".into(), json!(now));
        }
        if obj.get("spec").is_some() {
            meta.insert("generation".into(), json!(1));
        }
        put_meta(&mut obj, meta);
        self.objects.insert(key, obj.clone());
        Ok(obj)
    }

    pub fn replace(
        &mut self,
        r: usize,
        ns: &str,
        name: &str,
        mut obj: Value,
        how: Write,
    ) -> Result<Value, ApiError> {
        let rt = &RESOURCES[r];
        check_type_meta(rt, &mut obj)?;
        let key = (
            r,
            if rt.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name.to_string(),
        );
        let old = self
            .objects
            .get(&key)
            .ok_or_else(|| not_found(r, name))?
            .clone();
        let body_name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(name);
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let old_rv = old
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(Value::Null);
        if how != Write::Internal {
            match obj.pointer("/metadata/resourceVersion") {
                Some(Value::String(rv))
                    if !rv.is_empty() && Some(rv.as_str()) != old_rv.as_str() =>
                {
                    return Err(ApiError::conflict(rt.group, rt.plural, name));
                }
                _ => {}
            }
        }
        (rt.validate)(&obj).map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: {e}",
                rt.kind, rt.version, rt.kind
            ))
        })?;
        if how == Write::Main {
            transition_rules(r, name, &old, &obj)?;
        }
        let mut new = match how {
            Write::Status if rt.status_subresource => {
                let mut kept = old.clone();
                kept["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
                kept
            }
            Write::Main if rt.status_subresource => {
                match old.get("status") {
                    Some(s) => obj["status"] = s.clone(),
                    None => {
                        if let Some(o) = obj.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
                obj
            }
            _ => obj,
        };
        // Identity and bookkeeping fields stay the server's.
        let spec_changed = new.get("spec") != old.get("spec");
        let rv = self.bump();
        let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
        let mut meta = take_meta(&mut new);
        for f in ["uid", "creationTimestamp", "namespace"] {
            match old_meta.get(f) {
                Some(v) => meta.insert(f.into(), v.clone()),
                None => meta.remove(f),
            };
        }
        if how != Write::Internal {
            // Only a DELETE starts (or shortens) graceful deletion; writes cannot undo it.
            for f in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
                match old_meta.get(f) {
                    Some(v) => meta.insert(f.into(), v.clone()),
                    None => meta.remove(f),
                };
            }
        }
        meta.insert("name".into(), json!(name));
        meta.insert("resourceVersion".into(), json!(rv));
        let generation = old_meta.get("generation").and_then(Value::as_i64);
        if let Some(g) = generation {
            meta.insert(
                "generation".into(),
                json!(if spec_changed { g + 1 } else { g }),
            );
        }
        put_meta(&mut new, meta);
        self.objects.insert(key, new.clone());
        if super::finalizers::released(r, &new) {
            let _ = self.delete_cascade(r, ns, name);
        }
        Ok(new)
    }

    /// Deletes an object and, as the garbage collector does with background propagation,
    /// every object whose ownerReferences name it (transitively). Returns the object.
    pub fn delete_cascade(&mut self, r: usize, ns: &str, name: &str) -> Result<Value, ApiError> {
        let gone = self.delete(r, ns, name)?;
        let mut uids: Vec<String> = gone
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(String::from)
            .into_iter()
            .collect();
        while let Some(uid) = uids.pop() {
            let dependents: Vec<Key> = self
                .objects
                .iter()
                .filter(|(_, v)| {
                    v.pointer("/metadata/ownerReferences")
                        .and_then(Value::as_array)
                        .is_some_and(|os| os.iter().any(|o| o["uid"] == uid.as_str()))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for (dr, dns, dname) in dependents {
                if let Ok(d) = self.delete(dr, &dns, &dname)
                    && let Some(u) = d.pointer("/metadata/uid").and_then(Value::as_str)
                {
                    uids.push(u.to_string());
                }
            }
        }
        Ok(gone)
    }

    pub fn delete(&mut self, r: usize, ns: &str, name: &str) -> Result<Value, ApiError> {
        let rt = &RESOURCES[r];
        let key = (
            r,
            if rt.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name.to_string(),
        );
        let obj = self
            .objects
            .remove(&key)
            .ok_or_else(|| not_found(r, name))?;
        self.bump();
        Ok(obj)
    }
}

fn not_found(r: usize, name: &str) -> ApiError {
    let rt = &RESOURCES[r];
    ApiError::not_found(rt.group, rt.plural, name)
}

/// Takes `metadata` out of an object (an empty map if absent or not a map); put it back with
/// [`put_meta`].
fn take_meta(obj: &mut Value) -> Map<String, Value> {
    match obj.get_mut("metadata").map(Value::take) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// `obj` is a JSON object here (checked by `check_type_meta`), so indexing cannot panic.
fn put_meta(obj: &mut Value, meta: Map<String, Value>) {
    if let Some(o) = obj.as_object_mut() {
        o.insert("metadata".into(), Value::Object(meta));
    }
}

/// The CRDs' update rules over the old object (CEL's `oldSelf`): a NodePool does not switch
/// between static (`spec.replicas` set) and dynamic, as Karpenter's CRD.
fn transition_rules(r: usize, name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    let fixed = |o: &Value| o.pointer("/spec/replicas").is_some();
    if r == super::resources::NODEPOOLS && fixed(old) != fixed(new) {
        return Err(ApiError::invalid(
            "NodePool",
            name,
            "spec",
            "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2025-01-01T00:00:00Z";

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    }

    #[test]
    fn every_write_moves_the_cluster_resource_version_forward() {
        let mut s = Store::new();
        let before: u64 = s.resource_version().parse().unwrap_or(0);
        let a = s
            .create(PODS, "default", pod("a"), T, Write::Main)
            .unwrap_or_default();
        let b = s
            .create(PODS, "default", pod("b"), T, Write::Main)
            .unwrap_or_default();
        let rv = |v: &Value| {
            v.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .parse::<u64>()
                .unwrap_or(0)
        };
        assert!(rv(&a) > before);
        assert_eq!(rv(&b), rv(&a) + 1);
        assert_ne!(a["metadata"]["uid"], b["metadata"]["uid"]);
        assert_eq!(a["status"]["phase"], "Pending");
    }

    #[test]
    fn replacing_with_a_stale_resource_version_conflicts() {
        let mut s = Store::new();
        let a = s
            .create(PODS, "default", pod("a"), T, Write::Main)
            .unwrap_or_default();
        let mut first = a.clone();
        first["metadata"]["labels"] = json!({"x": "1"});
        let r = s.replace(PODS, "default", "a", first, Write::Main);
        assert!(r.is_ok(), "{r:?}");
        let mut stale = a;
        stale["metadata"]["labels"] = json!({"x": "2"});
        assert_eq!(
            s.replace(PODS, "default", "a", stale, Write::Main)
                .err()
                .map(|e| e.reason),
            Some("Conflict")
        );
    }

    #[test]
    fn create_without_name_is_invalid_and_duplicate_already_exists() {
        let mut s = Store::new();
        let mut nameless = pod("x");
        nameless["metadata"] = json!({});
        assert_eq!(
            s.create(PODS, "default", nameless, T, Write::Main)
                .err()
                .map(|e| e.code),
            Some(422)
        );
        assert!(s.create(PODS, "default", pod("a"), T, Write::Main).is_ok());
        let dup = s.create(PODS, "default", pod("a"), T, Write::Main).err();
        assert_eq!(
            dup.map(|e| (e.code, e.reason)),
            Some((409, "AlreadyExists"))
        );
    }
}
