//! From Kubernetes objects to the snapshot: which pods a PodDisruptionBudget holds.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

use super::from_k8s::blocked_pods;

fn pod(namespace: &str, name: &str, app: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
    }))
    .unwrap()
}

/// A budget in `default` whose status allows `allowed` disruptions (`None`: no status yet,
/// as before the disruption controller has seen it).
fn pdb(name: &str, selector: Value, allowed: Option<i32>) -> PodDisruptionBudget {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": selector},
    });
    if let Some(n) = allowed {
        v["status"] = json!({"disruptionsAllowed": n, "currentHealthy": 1,
                             "desiredHealthy": 1, "expectedPods": 1});
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_budget_allowing_no_disruption_now_holds_the_pods_it_selects_in_its_namespace_only() {
    let web = || json!({"matchLabels": {"app": "web"}});
    let pods = [
        pod("default", "web-0", "web"),
        pod("default", "db-0", "db"),
        pod("other", "web-1", "web"),
    ];
    // (budgets, the pods held as "namespace/pod by budget", problems)
    let cases: Vec<(&str, Vec<PodDisruptionBudget>, Vec<&str>, usize)> = vec![
        (
            "none allowed: held",
            vec![pdb("web", web(), Some(0))],
            vec!["default/web-0 by web"],
            0,
        ),
        (
            "one allowed: not held",
            vec![pdb("web", web(), Some(1))],
            vec![],
            0,
        ),
        (
            "no status yet: not held (nothing known)",
            vec![pdb("web", web(), None)],
            vec![],
            0,
        ),
        (
            "a null selector selects no pod (policy/v1)",
            vec![pdb("none", Value::Null, Some(0))],
            vec![],
            0,
        ),
        (
            "an empty selector selects every pod of its namespace",
            vec![pdb("all", json!({}), Some(0))],
            vec!["default/db-0 by all", "default/web-0 by all"],
            0,
        ),
        (
            "match expressions",
            vec![pdb(
                "not-web",
                json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}),
                Some(0),
            )],
            vec!["default/db-0 by not-web"],
            0,
        ),
        (
            "two budgets over one pod: the first allowing none named",
            vec![pdb("first", web(), Some(1)), pdb("second", web(), Some(0))],
            vec!["default/web-0 by second"],
            0,
        ),
        (
            "two budgets over one pod, both allowing: the Eviction API refuses it",
            vec![pdb("first", web(), Some(1)), pdb("second", web(), Some(2))],
            vec!["default/web-0 by first and second"],
            0,
        ),
        (
            "one budget allowing holds nothing",
            vec![pdb("first", web(), Some(1))],
            vec![],
            0,
        ),
        (
            "a selector that cannot be read holds nothing and is a problem",
            vec![pdb(
                "bad",
                json!({"matchExpressions": [{"key": "app", "operator": "Near"}]}),
                Some(0),
            )],
            vec![],
            1,
        ),
    ];
    for (case, budgets, want, want_problems) in cases {
        let mut problems = Vec::new();
        let held = blocked_pods(&budgets, &pods, &mut problems);
        let mut got: Vec<String> = held
            .iter()
            .map(|((ns, pod), pdb)| format!("{ns}/{pod} by {pdb}"))
            .collect();
        got.sort();
        assert_eq!(got, want, "{case}");
        assert_eq!(problems.len(), want_problems, "{case}: {problems:?}");
        for p in &problems {
            assert!(
                p.contains("PodDisruptionBudget default/bad") && p.contains("spec.selector"),
                "{case}: {p}"
            );
        }
    }
}

#[test]
fn a_pod_moves_with_its_node_only_when_it_is_a_running_workload_not_already_leaving() {
    use super::from_k8s::pod_kind;
    use super::snapshot::PodKind;
    let deleting =
        json!({"deletionTimestamp": "2026-11-27T10:00:00Z", "deletionGracePeriodSeconds": 30});
    let daemon = json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                        "name": "ds", "uid": "u1"}]});
    let mirror = json!({"annotations": {"kubernetes.io/config.mirror": "x"}});
    // (metadata fields, phase, kind)
    let table = [
        (json!({}), "Running", PodKind::Workload),
        (json!({}), "Pending", PodKind::Workload),
        (json!({}), "Succeeded", PodKind::Finished),
        (json!({}), "Failed", PodKind::Finished),
        (deleting.clone(), "Running", PodKind::Terminating),
        (deleting.clone(), "Succeeded", PodKind::Finished),
        // A StatefulSet's pod comes back under its name: it needs room as before.
        (
            json!({"deletionTimestamp": "2026-11-27T10:00:00Z", "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "u2"}]}),
            "Running",
            PodKind::Workload,
        ),
        (daemon, "Running", PodKind::DaemonSet),
        (mirror, "Running", PodKind::Mirror),
    ];
    for (extra, phase, kind) in table {
        let mut p = json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": phase},
        });
        for (k, v) in extra.as_object().unwrap() {
            p["metadata"][k] = v.clone();
        }
        let pod: Pod = serde_json::from_value(p).unwrap();
        assert_eq!(pod_kind(&pod), kind, "{extra} {phase}");
    }
}

#[test]
fn an_always_allow_budget_lets_a_pod_that_is_not_ready_go_and_holds_a_ready_one() {
    let web = json!({"matchLabels": {"app": "web"}});
    let ready = |name: &str, status: &str| {
        let mut p = pod("default", name, "web");
        p.status = Some(
            serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": status}]}))
                .unwrap(),
        );
        p
    };
    let pods = [ready("up", "True"), ready("down", "False")];
    // (policy, pods held)
    let cases = [
        (Some("AlwaysAllow"), vec!["default/up"]),
        (Some("IfHealthyBudget"), vec!["default/down", "default/up"]),
        (None, vec!["default/down", "default/up"]),
    ];
    for (policy, want) in cases {
        let mut budget = pdb("web", web.clone(), Some(0));
        if let Some(spec) = budget.spec.as_mut() {
            spec.unhealthy_pod_eviction_policy = policy.map(str::to_string);
        }
        let held = blocked_pods(&[budget], &pods, &mut Vec::new());
        let mut got: Vec<String> = held.keys().map(|(ns, p)| format!("{ns}/{p}")).collect();
        got.sort();
        assert_eq!(got, want, "{policy:?}");
    }
}
