//! RBAC as the API server's authorizer applies it, for the identities [`super::eks_auth`]
//! resolves: the request's attributes read from its method and path as Kubernetes'
//! `RequestInfoFactory` reads them, then the ClusterRoleBindings and the namespace's
//! RoleBindings that name the user or one of its groups, and their roles' rules matched as
//! `rbac/v1` helpers match them (verbs, API groups, `resource/subresource` and `*/sub`,
//! resource names; a rule with names never allows list, watch or create).
//!
//! Emulated and simplified: `system:masters` is allowed everything (EKS's
//! `AmazonEKSClusterAdminPolicy` is mapped to it); non-resource URLs (discovery, version,
//! OpenAPI, health) are allowed to every authenticated identity, as the default
//! `system:discovery` and `system:public-info-viewer` bindings allow them; aggregated
//! ClusterRoles and ServiceAccount subjects are not modelled.

use serde_json::Value;

/// Who a request is from, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

pub const MASTERS: &str = "system:masters";

impl Identity {
    pub fn admin(user: &str) -> Identity {
        Identity {
            user: user.to_string(),
            groups: vec![MASTERS.to_string(), "system:authenticated".to_string()],
        }
    }
}

/// What RBAC judges of a resource request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// The attributes of `method path?query`, or `None` for a non-resource URL.
pub fn attributes(method: &str, path: &str, watching: bool) -> Option<Attributes> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => (String::new(), rest),
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => (group.to_string(), rest),
        _ => return None,
    };
    // `namespaces/<ns>/<resource>...` addresses a namespaced resource; `namespaces/<ns>`
    // alone (or with a subresource) is the Namespace object itself.
    let (namespace, rest) = match rest {
        ["namespaces", ns, resource, tail @ ..] if !["status", "finalize"].contains(resource) => {
            (Some(ns.to_string()), {
                let mut v = vec![*resource];
                v.extend_from_slice(tail);
                v
            })
        }
        other => (None, other.to_vec()),
    };
    let resource = rest.first()?.to_string();
    let name = rest.get(1).map(|s| s.to_string());
    let subresource = rest.get(2).map(|s| s.to_string());
    let verb = match (method, name.is_some()) {
        ("GET" | "HEAD", _) if watching => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    };
    Some(Attributes {
        verb,
        group,
        resource,
        subresource,
        namespace,
        name,
    })
}

/// The RBAC objects the store holds, as JSON.
#[derive(Debug, Default)]
pub struct Policy<'a> {
    pub cluster_roles: Vec<&'a Value>,
    pub cluster_role_bindings: Vec<&'a Value>,
    pub roles: Vec<&'a Value>,
    pub role_bindings: Vec<&'a Value>,
}

/// Whether `who` may do `what` under `policy`; `Err` carries the API server's message.
pub fn authorize(policy: &Policy, who: &Identity, what: &Attributes) -> Result<(), String> {
    if who.groups.iter().any(|g| g == MASTERS) {
        return Ok(());
    }
    let by_cluster = policy
        .cluster_role_bindings
        .iter()
        .filter(|b| names(b, who))
        .filter_map(|b| cluster_role(policy, b));
    let by_namespace = what.namespace.iter().flat_map(|ns| {
        policy
            .role_bindings
            .iter()
            .filter(move |b| b["metadata"]["namespace"].as_str() == Some(ns))
            .filter(|b| names(b, who))
            .filter_map(move |b| match b["roleRef"]["kind"].as_str() {
                Some("Role") => named(&policy.roles, b["roleRef"]["name"].as_str(), Some(ns)),
                _ => cluster_role(policy, b),
            })
    });
    if by_cluster
        .chain(by_namespace)
        .flat_map(|role| role["rules"].as_array().into_iter().flatten())
        .any(|rule| allows(rule, what))
    {
        return Ok(());
    }
    Err(refusal(who, what))
}

fn cluster_role<'a>(policy: &Policy<'a>, binding: &Value) -> Option<&'a Value> {
    (binding["roleRef"]["kind"].as_str() == Some("ClusterRole"))
        .then(|| {
            named(
                &policy.cluster_roles,
                binding["roleRef"]["name"].as_str(),
                None,
            )
        })
        .flatten()
}

fn named<'a>(objects: &[&'a Value], name: Option<&str>, ns: Option<&str>) -> Option<&'a Value> {
    objects.iter().copied().find(|o| {
        o["metadata"]["name"].as_str() == name
            && ns.is_none_or(|ns| o["metadata"]["namespace"].as_str() == Some(ns))
    })
}

/// Whether a binding's subjects name the user or one of its groups.
fn names(binding: &Value, who: &Identity) -> bool {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| match (s["kind"].as_str(), s["name"].as_str()) {
            (Some("User"), Some(n)) => n == who.user,
            (Some("Group"), Some(n)) => who.groups.iter().any(|g| g == n),
            _ => false,
        })
}

fn allows(rule: &Value, what: &Attributes) -> bool {
    let list = |key: &str| -> Vec<&str> {
        rule[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    };
    let verbs = list("verbs");
    let groups = list("apiGroups");
    let resources = list("resources");
    let names = list("resourceNames");
    let combined = match &what.subresource {
        Some(sub) => format!("{}/{sub}", what.resource),
        None => what.resource.clone(),
    };
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == combined
            || what
                .subresource
                .as_ref()
                .is_some_and(|sub| r.strip_prefix("*/") == Some(sub.as_str()))
    });
    let name_ok = names.is_empty()
        || what
            .name
            .as_ref()
            .is_some_and(|n| names.contains(&n.as_str()));
    verbs.iter().any(|v| *v == "*" || *v == what.verb)
        && groups.iter().any(|g| *g == "*" || *g == what.group)
        && resource_ok
        && name_ok
}

/// The message of the API server's 403, e.g. `pods "p" is forbidden: User "u" cannot
/// create resource "pods/eviction" in API group "" in the namespace "default"`.
fn refusal(who: &Identity, what: &Attributes) -> String {
    let resource = match &what.subresource {
        Some(sub) => format!("{}/{sub}", what.resource),
        None => what.resource.clone(),
    };
    let object = match &what.name {
        Some(name) => format!("{} {name:?}", what.resource),
        None => what.resource.clone(),
    };
    let scope = match &what.namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_string(),
    };
    format!(
        "{object} is forbidden: User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        who.user, what.verb, what.group
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(method: &str, path: &str) -> Attributes {
        attributes(method, path, false).expect("a resource request")
    }

    #[test]
    fn request_attributes_are_read_from_method_and_path() {
        let cases = [
            ("GET", "/api/v1/pods", "list", "", "pods", None, None, None),
            (
                "GET",
                "/api/v1/namespaces/a/pods/p",
                "get",
                "",
                "pods",
                None,
                Some("a"),
                Some("p"),
            ),
            (
                "POST",
                "/api/v1/namespaces/a/pods/p/eviction",
                "create",
                "",
                "pods",
                Some("eviction"),
                Some("a"),
                Some("p"),
            ),
            (
                "PATCH",
                "/apis/karpenter.sh/v1/nodepools/x/status",
                "patch",
                "karpenter.sh",
                "nodepools",
                Some("status"),
                None,
                Some("x"),
            ),
            (
                "GET",
                "/api/v1/namespaces/kube-system",
                "get",
                "",
                "namespaces",
                None,
                None,
                Some("kube-system"),
            ),
            (
                "DELETE",
                "/api/v1/nodes/n",
                "delete",
                "",
                "nodes",
                None,
                None,
                Some("n"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/pods",
                "deletecollection",
                "",
                "pods",
                None,
                Some("a"),
                None,
            ),
            (
                "PUT",
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
                "update",
                "coordination.k8s.io",
                "leases",
                None,
                Some("kube-system"),
                Some("l"),
            ),
        ];
        for (method, path, verb, group, resource, sub, ns, name) in cases {
            let a = attrs(method, path);
            assert_eq!(
                (
                    a.verb,
                    a.group.as_str(),
                    a.resource.as_str(),
                    a.subresource.as_deref(),
                    a.namespace.as_deref(),
                    a.name.as_deref()
                ),
                (verb, group, resource, sub, ns, name),
                "{method} {path}"
            );
        }
        assert_eq!(
            attributes("GET", "/api/v1/pods", true).unwrap().verb,
            "watch"
        );
        for path in [
            "/api",
            "/apis",
            "/apis/karpenter.sh",
            "/api/v1",
            "/apis/karpenter.sh/v1",
            "/version",
            "/openapi/v3",
        ] {
            assert_eq!(
                attributes("GET", path, false),
                None,
                "{path} is a non-resource URL"
            );
        }
    }

    fn policy_objects() -> Vec<Value> {
        vec![
            json!({"kind": "ClusterRole", "metadata": {"name": "reader"}, "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
                {"apiGroups": ["karpenter.sh"], "resources": ["*/status"], "verbs": ["patch"]},
            ]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "reader"},
                "roleRef": {"kind": "ClusterRole", "name": "reader"},
                "subjects": [{"kind": "Group", "name": "g"}]}),
            json!({"kind": "Role", "metadata": {"name": "state", "namespace": "kube-system"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["mine"], "verbs": ["get", "update", "create"]},
            ]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "state", "namespace": "kube-system"},
                "roleRef": {"kind": "Role", "name": "state"},
                "subjects": [{"kind": "User", "name": "u"}]}),
        ]
    }

    #[test]
    fn rules_allow_what_they_name_and_nothing_else() {
        let objects = policy_objects();
        let policy = Policy {
            cluster_roles: vec![&objects[0]],
            cluster_role_bindings: vec![&objects[1]],
            roles: vec![&objects[2]],
            role_bindings: vec![&objects[3]],
        };
        let in_group = Identity {
            user: "x".into(),
            groups: vec!["g".into()],
        };
        let user = Identity {
            user: "u".into(),
            groups: vec![],
        };
        let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
        let cases: [(&Identity, &str, String, bool); 12] = [
            (&in_group, "GET", "/api/v1/pods".into(), true),
            (
                &in_group,
                "DELETE",
                "/api/v1/namespaces/a/pods/p".into(),
                false,
            ),
            (
                &in_group,
                "POST",
                "/api/v1/namespaces/a/pods/p/eviction".into(),
                true,
            ),
            (
                &in_group,
                "PATCH",
                "/apis/karpenter.sh/v1/nodepools/x/status".into(),
                true,
            ),
            (
                &in_group,
                "PATCH",
                "/apis/karpenter.sh/v1/nodepools/x".into(),
                false,
            ),
            (&in_group, "GET", "/api/v1/nodes".into(), false),
            (&user, "GET", format!("{lease}/mine"), true),
            (&user, "PUT", format!("{lease}/other"), false),
            // a rule with resource names never allows create or list: the name is not
            // part of those requests
            (&user, "POST", lease.into(), false),
            (&user, "GET", lease.into(), false),
            // a RoleBinding grants only in its own namespace
            (
                &user,
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/default/leases/mine".into(),
                false,
            ),
            (
                &Identity::admin("root"),
                "DELETE",
                "/api/v1/nodes/n".into(),
                true,
            ),
        ];
        for (who, method, path, allowed) in cases {
            let got = authorize(&policy, who, &attrs(method, &path));
            assert_eq!(
                got.is_ok(),
                allowed,
                "{} {method} {path}: {got:?}",
                who.user
            );
        }
        let refused = authorize(
            &policy,
            &in_group,
            &attrs("DELETE", "/api/v1/namespaces/a/pods/p"),
        );
        assert_eq!(
            refused.unwrap_err(),
            "pods \"p\" is forbidden: User \"x\" cannot delete resource \"pods\" in API group \"\" in the namespace \"a\""
        );
    }
}
