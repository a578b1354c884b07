//! The RBAC of least-privilege mode (`nodewright rbac`, `cli/src/rbac.yaml`) applied with a
//! real kubectl to the simulated cluster, which decodes every object as its Kubernetes type
//! and refuses unknown fields (strict field validation): what is read back is what an API
//! server would store. The group it binds is the one the stack's access entries name.
//! (`cli/tests/cli/main.rs` checks that `nodewright rbac` prints this file with the group filled
//! in.)

use nodewright_world::kube_sim::{SimCluster, SimConfig};
use nodewright_world::kubectl::Kubectl;
use serde_json::Value;

fn manifests() -> String {
    let path = nodewright_world::moto::workspace_root().join("cli/src/rbac.yaml");
    let text = std::fs::read_to_string(&path).expect("cli/src/rbac.yaml is readable");
    text.replace("name: GROUP", &format!("name: {}", stack_group()))
}

/// The group in the access entries' `KubernetesGroups` of `template.yaml`.
fn stack_group() -> String {
    let path = nodewright_world::moto::workspace_root().join("template.yaml");
    let text = std::fs::read_to_string(&path).expect("template.yaml");
    let t: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
    let mut groups = Vec::new();
    for (name, r) in t["Resources"].as_mapping().expect("Resources") {
        if r["Type"].as_str() != Some("AWS::EKS::AccessEntry") {
            continue;
        }
        let entry = &r["Properties"]["KubernetesGroups"];
        // `!If [ClusterAdminAccess, !Ref AWS::NoValue, [group]]`: the group of rbac mode.
        let serde_yaml::Value::Tagged(when) = entry else {
            continue;
        };
        let list = when.value[2].as_sequence().unwrap_or_else(|| {
            panic!("{name:?}: KubernetesGroups is !If [cond, NoValue, [group]]")
        });
        groups.extend(list.iter().filter_map(|g| g.as_str().map(str::to_string)));
    }
    groups.sort();
    groups.dedup();
    assert_eq!(groups.len(), 1, "one group for the functions: {groups:?}");
    groups.remove(0)
}

async fn get(kubectl: &Kubectl, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    let out = kubectl.run(&args).await.expect("kubectl runs");
    assert!(out.success, "kubectl {args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).expect("JSON")
}

/// (apiGroup, resource, verbs) of each rule.
fn rules(role: &Value) -> Vec<(String, String, Vec<String>)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                out.push((group.clone(), resource, strings(&rule["verbs"])));
            }
        }
    }
    out
}

fn allows(
    rules: &[(String, String, Vec<String>)],
    group: &str,
    resource: &str,
    verb: &str,
) -> bool {
    rules
        .iter()
        .any(|(g, r, v)| g == group && r == resource && v.iter().any(|x| x == verb || x == "*"))
}

#[tokio::test]
async fn the_rbac_manifests_apply_with_kubectl_and_grant_what_the_functions_call_and_no_more() {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("the simulated cluster starts");
    let kubectl = Kubectl::for_cluster(&sim).expect("kubectl is installed in .venv");
    let file = kubectl
        .write_file("rbac.yaml", &manifests())
        .expect("written");
    let out = kubectl
        .run(&["apply", "-f", file.to_str().expect("utf-8 path")])
        .await
        .expect("kubectl runs");
    assert!(out.success, "kubectl apply: {}\n{}", out.stdout, out.stderr);
    for created in [
        "clusterrole.rbac.authorization.k8s.io/nodewright created",
        "clusterrolebinding.rbac.authorization.k8s.io/nodewright created",
        "role.rbac.authorization.k8s.io/nodewright created",
        "rolebinding.rbac.authorization.k8s.io/nodewright created",
    ] {
        assert!(
            out.stdout.contains(created),
            "{created:?} in {}",
            out.stdout
        );
    }

    let cluster_role = rules(&get(&kubectl, &["clusterrole", "nodewright"]).await);
    for (group, resource, verb) in [
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods", "delete"),
        ("", "pods/eviction", "create"),
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("", "nodes", "patch"),
        ("", "nodes", "delete"),
        ("policy", "poddisruptionbudgets", "list"),
        ("apps", "daemonsets", "list"),
        ("", "configmaps", "get"),
        ("", "events", "create"),
        ("events.k8s.io", "events", "create"),
        ("karpenter.sh", "nodepools", "list"),
        ("karpenter.sh", "nodepools", "watch"),
        ("karpenter.sh", "provisioners", "list"),
        ("karpenter.sh", "nodeoverlays", "list"),
        ("karpenter.k8s.aws", "ec2nodeclasses", "list"),
        ("karpenter.k8s.aws", "awsnodetemplates", "list"),
        ("karpenter.sh", "nodepools/status", "patch"),
        ("karpenter.k8s.aws", "ec2nodeclasses/status", "patch"),
    ] {
        assert!(
            allows(&cluster_role, group, resource, verb),
            "the ClusterRole allows {verb} {group}/{resource}: {cluster_role:?}"
        );
    }
    // Cluster-wide, nothing is written but what the functions write: no wildcard, no
    // secrets, no writes to configuration or workloads.
    for (group, resource, verb) in [
        ("", "secrets", "get"),
        ("", "configmaps", "update"),
        ("", "configmaps", "create"),
        ("", "pods", "create"),
        ("", "pods", "patch"),
        ("karpenter.sh", "nodepools", "update"),
        ("apps", "daemonsets", "delete"),
        ("coordination.k8s.io", "leases", "update"),
    ] {
        assert!(
            !allows(&cluster_role, group, resource, verb),
            "the ClusterRole must not allow {verb} {group}/{resource}"
        );
    }
    assert!(
        cluster_role
            .iter()
            .all(|(g, r, v)| g != "*" && r != "*" && !v.iter().any(|x| x == "*")),
        "no wildcards: {cluster_role:?}"
    );

    let role = get(&kubectl, &["role", "nodewright", "-n", "kube-system"]).await;
    let role_rules = rules(&role);
    assert!(allows(
        &role_rules,
        "coordination.k8s.io",
        "leases",
        "update"
    ));
    assert!(allows(&role_rules, "", "configmaps", "update"));
    for rule in role["rules"].as_array().expect("rules") {
        let verbs = rule["verbs"].as_array().expect("verbs");
        let writes_existing = verbs.iter().any(|v| v != "create");
        assert!(
            !writes_existing
                || rule["resourceNames"]
                    .as_array()
                    .is_some_and(|n| !n.is_empty()),
            "a kube-system rule that changes existing objects names them: {rule}"
        );
    }

    for binding in [
        get(&kubectl, &["clusterrolebinding", "nodewright"]).await,
        get(
            &kubectl,
            &["rolebinding", "nodewright", "-n", "kube-system"],
        )
        .await,
    ] {
        assert_eq!(binding["roleRef"]["name"], "nodewright", "{binding}");
        assert_eq!(binding["subjects"][0]["kind"], "Group");
        assert_eq!(binding["subjects"][0]["name"], stack_group().as_str());
    }
}

#[tokio::test]
async fn a_misspelt_field_in_a_role_is_refused_so_the_apply_test_can_fail() {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("the simulated cluster starts");
    let kubectl = Kubectl::for_cluster(&sim).expect("kubectl is installed in .venv");
    let bad = manifests().replacen("verbs:", "verb:", 1);
    let file = kubectl.write_file("bad.yaml", &bad).expect("written");
    let out = kubectl
        .run(&["apply", "-f", file.to_str().expect("utf-8 path")])
        .await
        .expect("kubectl runs");
    assert!(
        !out.success,
        "applied a misspelt ClusterRole: {}",
        out.stdout
    );
    assert!(out.stderr.contains("verb"), "{}", out.stderr);
}
