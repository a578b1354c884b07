//! The resources the simulated API server serves, and the discovery documents built from them.

use serde_json::{Value, json};

/// One served resource (group/version/plural) and how the server treats it.
#[derive(Debug)]
pub struct ResourceType {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Served only while the Karpenter CRDs are "installed" (`SimCluster::set_crds_installed`).
    pub crd: bool,
    /// Has a `/status` subresource: writes to the main resource keep the stored status and
    /// writes to `/status` change only the status, as on the real server.
    pub status_subresource: bool,
    pub short_names: &'static [&'static str],
    /// Field selectors the real server accepts for this resource beyond `metadata.name`
    /// and `metadata.namespace`; `None` accepts any path (events).
    pub field_labels: Option<&'static [&'static str]>,
    /// Checks that a body decodes as the real type (the server answers 400 otherwise).
    pub validate: fn(&Value) -> Result<(), String>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

fn decodes<T: serde::de::DeserializeOwned>(v: &Value) -> Result<(), String> {
    serde_json::from_value::<T>(v.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn any_object(v: &Value) -> Result<(), String> {
    if v.is_object() {
        Ok(())
    } else {
        Err("expected a JSON object".to_string())
    }
}

use k8s_openapi::api::{
    apps::v1 as apps, coordination::v1 as coordination, core::v1 as core, events::v1 as events,
    policy::v1 as policy, rbac::v1 as rbac, storage::v1 as storage,
};

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const NODE_FIELDS: &[&str] = &["spec.unschedulable"];
const NONE: &[&str] = &[];

macro_rules! res {
    ($g:expr, $v:expr, $p:expr, $s:expr, $k:expr, ns=$ns:expr, crd=$crd:expr, status=$st:expr, short=$sh:expr, fields=$f:expr, $val:expr) => {
        ResourceType {
            group: $g,
            version: $v,
            plural: $p,
            singular: $s,
            kind: $k,
            namespaced: $ns,
            crd: $crd,
            status_subresource: $st,
            short_names: $sh,
            field_labels: $f,
            validate: $val,
        }
    };
}

pub static RESOURCES: &[ResourceType] = &[
    res!(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        ns = true,
        crd = false,
        status = true,
        short = &["po"],
        fields = Some(POD_FIELDS),
        decodes::<core::Pod>
    ),
    res!(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        ns = false,
        crd = false,
        status = true,
        short = &["no"],
        fields = Some(NODE_FIELDS),
        decodes::<core::Node>
    ),
    res!(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        ns = false,
        crd = false,
        status = true,
        short = &["ns"],
        fields = Some(&["status.phase"]),
        decodes::<core::Namespace>
    ),
    res!(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        ns = true,
        crd = false,
        status = false,
        short = &["cm"],
        fields = Some(NONE),
        decodes::<core::ConfigMap>
    ),
    res!(
        "",
        "v1",
        "events",
        "event",
        "Event",
        ns = true,
        crd = false,
        status = false,
        short = &["ev"],
        fields = None,
        decodes::<core::Event>
    ),
    res!(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        ns = true,
        crd = false,
        status = true,
        short = &["deploy"],
        fields = Some(NONE),
        decodes::<apps::Deployment>
    ),
    res!(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        ns = true,
        crd = false,
        status = true,
        short = &["rs"],
        fields = Some(NONE),
        decodes::<apps::ReplicaSet>
    ),
    res!(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        ns = true,
        crd = false,
        status = true,
        short = &["ds"],
        fields = Some(NONE),
        decodes::<apps::DaemonSet>
    ),
    res!(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        ns = true,
        crd = false,
        status = true,
        short = &["pdb"],
        fields = Some(NONE),
        decodes::<policy::PodDisruptionBudget>
    ),
    res!(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        ns = true,
        crd = false,
        status = false,
        short = &["ev"],
        fields = None,
        decodes::<events::Event>
    ),
    res!(
        "karpenter.sh",
        "v1",
        "nodepools",
        "nodepool",
        "NodePool",
        ns = false,
        crd = true,
        status = true,
        short = &[],
        fields = Some(NONE),
        any_object
    ),
    res!(
        "karpenter.sh",
        "v1alpha5",
        "provisioners",
        "provisioner",
        "Provisioner",
        ns = false,
        crd = true,
        status = true,
        short = &[],
        fields = Some(NONE),
        any_object
    ),
    res!(
        "karpenter.k8s.aws",
        "v1",
        "ec2nodeclasses",
        "ec2nodeclass",
        "EC2NodeClass",
        ns = false,
        crd = true,
        status = true,
        short = &["ec2nc", "ec2ncs"],
        fields = Some(NONE),
        any_object
    ),
    res!(
        "karpenter.k8s.aws",
        "v1alpha1",
        "awsnodetemplates",
        "awsnodetemplate",
        "AWSNodeTemplate",
        ns = false,
        crd = true,
        status = true,
        short = &[],
        fields = Some(NONE),
        any_object
    ),
    // Kubelets renew one per node in kube-node-lease (`kubectl describe node` reads it);
    // leader election uses them too: updates carry resourceVersion preconditions.
    res!(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        ns = true,
        crd = false,
        status = false,
        short = &[],
        fields = Some(NONE),
        decodes::<coordination::Lease>
    ),
    // What `nodewright rbac` prints, so kubectl can apply it here (stored, not enforced:
    // the simulated server authorizes every request).
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        ns = false,
        crd = false,
        status = false,
        short = &[],
        fields = Some(NONE),
        decodes::<rbac::ClusterRole>
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        ns = false,
        crd = false,
        status = false,
        short = &[],
        fields = Some(NONE),
        decodes::<rbac::ClusterRoleBinding>
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "role",
        "Role",
        ns = true,
        crd = false,
        status = false,
        short = &[],
        fields = Some(NONE),
        decodes::<rbac::Role>
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        ns = true,
        crd = false,
        status = false,
        short = &[],
        fields = Some(NONE),
        decodes::<rbac::RoleBinding>
    ),
    res!(
        "karpenter.sh",
        "v1alpha1",
        "nodeoverlays",
        "nodeoverlay",
        "NodeOverlay",
        ns = false,
        crd = true,
        status = true,
        short = &["overlays"],
        fields = Some(NONE),
        any_object
    ),
    // Claims, volumes and classes: where a pod with a claim may run (the scheduler's
    // VolumeBinding filter here, nodewright's volume topology in the functions).
    res!(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        ns = true,
        crd = false,
        status = true,
        short = &["pvc"],
        fields = Some(NONE),
        decodes::<core::PersistentVolumeClaim>
    ),
    res!(
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        ns = false,
        crd = false,
        status = true,
        short = &["pv"],
        fields = Some(NONE),
        decodes::<core::PersistentVolume>
    ),
    res!(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "storageclass",
        "StorageClass",
        ns = false,
        crd = false,
        status = false,
        short = &["sc"],
        fields = Some(NONE),
        decodes::<storage::StorageClass>
    ),
];

/// Index into [`RESOURCES`] of the resource at `group/version/plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Index of the resource whose objects have this `apiVersion` and `kind`.
pub fn find_kind(api_version: &str, kind: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.api_version() == api_version && r.kind == kind)
}

// Positions in RESOURCES of the kinds the simulations touch (checked by a unit test).
pub const PODS: usize = 0;
pub const NODES: usize = 1;
pub const NAMESPACES: usize = 2;
pub const REPLICASETS: usize = 6;
pub const DEPLOYMENTS: usize = 5;
pub const DAEMONSETS: usize = 7;
pub const PDBS: usize = 8;
pub const EVENTS: usize = 4;
pub const EVENTS_V1: usize = 9;
pub const LEASES: usize = 14;
pub const NODEPOOLS: usize = 10;
pub const CLAIMS: usize = 20;
pub const VOLUMES: usize = 21;
pub const STORAGE_CLASSES: usize = 22;

fn served(r: &ResourceType, crds: bool) -> bool {
    !r.crd || crds
}

/// `/api`: the core group's versions.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1" }],
    })
}

fn group_versions(crds: bool) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| !r.group.is_empty() && served(r, crds))
    {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) if !vs.contains(&r.version) => vs.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
        .collect();
    // Every group here lists its stable version first, which is the preferred one.
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    json!({ "name": group, "versions": vs, "preferredVersion": preferred })
}

/// `/apis`: the named groups, without the Karpenter groups when the CRDs are absent.
pub fn group_list(crds: bool) -> Value {
    let groups: Vec<Value> = group_versions(crds)
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/apis/{group}`.
pub fn group(name: &str, crds: bool) -> Option<Value> {
    let gv = group_versions(crds);
    let (g, vs) = gv.iter().find(|(g, _)| *g == name)?;
    let mut doc = group_doc(g, vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` or `/apis/{group}/{version}`: an APIResourceList, or `None` if not served.
pub fn resource_list(group: &str, version: &str, crds: bool) -> Option<Value> {
    let mut resources = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && served(r, crds))
    {
        let mut verbs = vec![
            "create", "delete", "get", "list", "patch", "update", "watch",
        ];
        if r.plural != "pods" {
            verbs.push("deletecollection");
        }
        resources.push(json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": verbs, "shortNames": r.short_names,
        }));
        if r.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": r.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        if r.plural == "pods" {
            resources.push(json!({
                "name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy",
                "version": "v1", "kind": "Eviction", "verbs": ["create"],
            }));
        }
        if matches!(r.plural, "deployments" | "replicasets" | "nodepools") {
            resources.push(json!({
                "name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_constants_name_the_resources_they_claim() {
        for (i, plural) in [
            (PODS, "pods"),
            (NODES, "nodes"),
            (NAMESPACES, "namespaces"),
            (DEPLOYMENTS, "deployments"),
            (REPLICASETS, "replicasets"),
            (DAEMONSETS, "daemonsets"),
            (PDBS, "poddisruptionbudgets"),
            (EVENTS, "events"),
            (EVENTS_V1, "events"),
            (LEASES, "leases"),
            (NODEPOOLS, "nodepools"),
            (CLAIMS, "persistentvolumeclaims"),
            (VOLUMES, "persistentvolumes"),
            (STORAGE_CLASSES, "storageclasses"),
        ] {
            assert_eq!(RESOURCES[i].plural, plural);
        }
        assert_eq!(RESOURCES[EVENTS].group, "");
        assert_eq!(RESOURCES[EVENTS_V1].group, "events.k8s.io");
    }

    #[test]
    fn discovery_hides_karpenter_groups_without_crds() {
        let names = |crds| {
            group_list(crds)["groups"]
                .as_array()
                .map(|g| {
                    g.iter()
                        .filter_map(|g| g["name"].as_str().map(str::to_string))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        };
        assert!(!names(false).iter().any(|n| n.starts_with("karpenter")));
        assert!(names(true).contains(&"karpenter.sh".to_string()));
        assert!(resource_list("karpenter.sh", "v1", false).is_none());
        assert!(resource_list("karpenter.k8s.aws", "v1", true).is_some());
    }
}
