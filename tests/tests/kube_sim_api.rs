//! The unmodified `kube::Client`, configured from the simulated cluster's kubeconfig,
//! against the simulated API server.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use nodewright_world::kube_sim::{Fault, SimCluster, SimConfig};
use serde_json::{Value, json};

/// A cluster and a kube::Client from its kubeconfig, with kube's automatic retry of 429 /
/// 503 / 504 turned off so that a refused eviction or an injected 429 reaches the caller.
async fn cluster() -> (SimCluster, kube::Client) {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("sim starts");
    let mut config = sim.config().await.expect("config from kubeconfig");
    config.default_retry = false;
    let client = kube::Client::try_from(config).expect("client");
    (sim, client)
}

fn node_json(name: &str, zone: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
        "spec": {"providerID": format!("aws:///{zone}/i-{name}")},
        "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                   "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

/// A Running, Ready pod bound to `node`.
fn pod_json(name: &str, app: &str, node: &str, ready: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx",
                 "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
    })
}

fn pdb_json(name: &str, app: &str, budget: (&str, Value)) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, budget.0: budget.1}
    })
}

fn api_code(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason),
        other => panic!("expected kube::Error::Api, got {other:?}"),
    }
}

fn names<K: kube::ResourceExt>(items: &[K]) -> Vec<String> {
    let mut n: Vec<String> = items.iter().map(|i| i.name_any()).collect();
    n.sort();
    n
}

#[tokio::test]
async fn kube_client_lists_pods_with_label_and_field_selectors() {
    let (sim, client) = cluster().await;
    sim.apply_json(node_json("n1", "us-east-1a")).unwrap();
    sim.apply_json(pod_json("web-1", "web", "n1", true))
        .unwrap();
    sim.apply_json(pod_json("db-1", "db", "n1", true)).unwrap();
    let mut pending = pod_json("web-2", "web", "", false);
    pending["spec"].as_object_mut().unwrap().remove("nodeName");
    pending["status"] = json!({"phase": "Pending"});
    sim.apply_json(pending).unwrap();
    let mut other_ns = pod_json("web-3", "web", "n1", true);
    other_ns["metadata"]["namespace"] = json!("team-a");
    sim.apply_json(other_ns).unwrap();

    let all: Api<Pod> = Api::all(client.clone());
    let lp = |l: &str, f: &str| ListParams::default().labels(l).fields(f);
    assert_eq!(
        names(&all.list(&lp("app=web", "")).await.unwrap().items),
        ["web-1", "web-2", "web-3"]
    );
    assert_eq!(
        names(
            &all.list(&lp("app in (web,db)", "spec.nodeName=n1"))
                .await
                .unwrap()
                .items
        ),
        ["db-1", "web-1", "web-3"]
    );
    assert_eq!(
        names(&all.list(&lp("app!=web", "")).await.unwrap().items),
        ["db-1"]
    );
    assert_eq!(
        names(&all.list(&lp("", "spec.nodeName=")).await.unwrap().items),
        ["web-2"]
    );
    assert_eq!(
        names(
            &all.list(&lp("", "status.phase=Pending"))
                .await
                .unwrap()
                .items
        ),
        ["web-2"]
    );
    assert_eq!(
        names(
            &all.list(&lp("app notin (db),!missing", "spec.nodeName!=n1"))
                .await
                .unwrap()
                .items
        ),
        ["web-2"]
    );
    let default_ns: Api<Pod> = Api::namespaced(client.clone(), "default");
    let listed = default_ns
        .list(&lp("", "metadata.name=web-1,metadata.namespace=default"))
        .await
        .unwrap();
    assert_eq!(names(&listed.items), ["web-1"]);
    assert!(
        listed
            .metadata
            .resource_version
            .is_some_and(|rv| !rv.is_empty())
    );
    let err = all.list(&lp("", "spec.bogus=x")).await.unwrap_err();
    assert_eq!(api_code(err).0, 400);
}

/// JSON patch through `kube::Client::request` (kube's `Patch::Json` needs its `jsonpatch`
/// feature, which the workspace does not enable); same client, same wire format.
async fn json_patch_node(
    client: &kube::Client,
    name: &str,
    ops: Value,
) -> Result<Node, kube::Error> {
    let req = axum::http::Request::patch(format!("/api/v1/nodes/{name}"))
        .header("content-type", "application/json-patch+json")
        .body(serde_json::to_vec(&ops).unwrap())
        .unwrap();
    client.request::<Node>(req).await
}

#[tokio::test]
async fn kube_client_cordons_and_taints_a_node_with_merge_strategic_and_json_patches() {
    let (sim, client) = cluster().await;
    sim.apply_json(node_json("n1", "us-east-1a")).unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let before = nodes.get("n1").await.unwrap();

    let cordon = json!({"spec": {"unschedulable": true}});
    let n = nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&cordon))
        .await
        .unwrap();
    assert_eq!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true));
    assert_ne!(
        n.metadata.resource_version,
        before.metadata.resource_version
    );

    let taint =
        json!({"spec": {"taints": [{"key": "nodewright.io/disrupted", "effect": "NoSchedule"}]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .unwrap();
    let add = json!([{"op": "add", "path": "/spec/taints/-", "value": {"key": "b", "value": "1", "effect": "NoExecute"}},
                     {"op": "add", "path": "/metadata/labels/extra", "value": "yes"}]);
    let n: Node = json_patch_node(&client, "n1", add).await.unwrap();
    let keys: Vec<String> = n
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(keys, ["nodewright.io/disrupted", "b"]);
    assert_eq!(
        n.metadata.labels.unwrap().get("extra").map(String::as_str),
        Some("yes")
    );

    // Strategic merge replaces the taint list, as upstream (taints have no merge strategy).
    let smp = json!({"spec": {"taints": [{"key": "only", "effect": "NoSchedule"}]}});
    let n = nodes
        .patch("n1", &PatchParams::default(), &Patch::Strategic(&smp))
        .await
        .unwrap();
    assert_eq!(n.spec.unwrap().taints.unwrap().len(), 1);

    // A main-resource patch cannot change status; the status subresource can.
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    let n = nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(n.status.unwrap().conditions.unwrap()[0].status, "True");
    let n = nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(n.status.unwrap().conditions.unwrap()[0].status, "False");

    // A failing JSON patch test is 422, a stale resourceVersion is 409.
    let failing = json!([{"op": "test", "path": "/spec/unschedulable", "value": false}]);
    let err = json_patch_node(&client, "n1", failing).await.unwrap_err();
    assert_eq!(api_code(err).0, 422);
    let mut stale = before.clone();
    stale
        .metadata
        .labels
        .get_or_insert_default()
        .insert("x".into(), "y".into());
    let err = nodes
        .replace("n1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(api_code(err), (409, "Conflict".to_string()));
}

#[tokio::test]
async fn kube_client_deletes_a_node_and_gets_404_and_409_as_api_errors() {
    let (sim, client) = cluster().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(node_json("n1", "us-east-1a")).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let err = nodes
        .create(&PostParams::default(), &node)
        .await
        .unwrap_err();
    assert_eq!(api_code(err), (409, "AlreadyExists".to_string()));
    nodes.delete("n1", &DeleteParams::default()).await.unwrap();
    assert!(sim.get_json("v1", "Node", "", "n1").is_none());
    let err = nodes.get("n1").await.unwrap_err();
    assert_eq!(api_code(err), (404, "NotFound".to_string()));
    let err = nodes
        .delete("n1", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(api_code(err).0, 404);

    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut nameless: Pod = serde_json::from_value(pod_json("x", "a", "n1", true)).unwrap();
    nameless.metadata.name = None;
    let err = pods
        .create(&PostParams::default(), &nameless)
        .await
        .unwrap_err();
    assert_eq!(api_code(err), (422, "Invalid".to_string()));
}

#[tokio::test]
async fn kube_client_creates_a_pod_that_starts_pending_with_defaults() {
    let (_sim, client) = cluster().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": "worker-"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    assert!(name.starts_with("worker-") && name.len() == "worker-".len() + 5);
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        created.spec.unwrap().scheduler_name.as_deref(),
        Some("default-scheduler")
    );
    pods.delete(
        &name,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(pods.get_opt(&name).await.unwrap().is_none());
}

/// Three ready `web` pods, a budget, and an eviction of one of them.
async fn evict_with_budget(budget: (&str, Value)) -> Result<(), (u16, String, String)> {
    let (sim, client) = cluster().await;
    sim.apply_json(node_json("n1", "us-east-1a")).unwrap();
    for i in 0..3 {
        sim.apply_json(pod_json(&format!("web-{i}"), "web", "n1", true))
            .unwrap();
    }
    sim.apply_json(pdb_json("web", "web", budget)).unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    match pods.evict("web-0", &EvictParams::default()).await {
        Ok(_) => {
            // Deleted gracefully: Terminating until its grace period has run out.
            let evicted = pods.get_opt("web-0").await.unwrap();
            assert!(
                evicted.is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
                "evicted pod is Terminating"
            );
            Ok(())
        }
        Err(kube::Error::Api(s)) => {
            assert!(
                pods.get_opt("web-0").await.unwrap().is_some(),
                "refused eviction keeps the pod"
            );
            Err((s.code, s.reason, s.message))
        }
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

#[tokio::test]
async fn eviction_succeeds_when_every_kind_of_budget_allows_one_disruption() {
    for budget in [
        ("minAvailable", json!(2)),
        ("minAvailable", json!("50%")),
        ("maxUnavailable", json!(1)),
        ("maxUnavailable", json!("34%")),
    ] {
        assert_eq!(
            evict_with_budget(budget.clone()).await,
            Ok(()),
            "{budget:?}"
        );
    }
}

#[tokio::test]
async fn eviction_is_refused_with_429_when_a_budget_would_be_violated() {
    let refused = (
        429,
        "TooManyRequests".to_string(),
        "Cannot evict pod as it would violate the pod's disruption budget.".to_string(),
    );
    for budget in [
        ("minAvailable", json!(3)),
        ("minAvailable", json!("100%")),
        ("maxUnavailable", json!(0)),
        ("maxUnavailable", json!("0%")),
    ] {
        assert_eq!(
            evict_with_budget(budget.clone()).await,
            Err(refused.clone()),
            "{budget:?}"
        );
    }
}

#[tokio::test]
async fn a_step_writes_each_budgets_status_as_the_disruption_controller_does() {
    for (budget, allowed) in [
        (("maxUnavailable", json!(0)), 0),
        (("maxUnavailable", json!(1)), 1),
        (("minAvailable", json!(1)), 2),
        (("minAvailable", json!("100%")), 0),
    ] {
        let (sim, _client) = cluster().await;
        sim.apply_json(node_json("n1", "us-east-1a")).unwrap();
        for i in 0..3 {
            sim.apply_json(pod_json(&format!("web-{i}"), "web", "n1", true))
                .unwrap();
        }
        sim.apply_json(pdb_json("web", "web", budget.clone()))
            .unwrap();
        sim.step().await;
        let pdb = sim
            .get_json("policy/v1", "PodDisruptionBudget", "default", "web")
            .unwrap();
        assert_eq!(
            pdb["status"]["disruptionsAllowed"], allowed,
            "{budget:?}: {pdb}"
        );
        assert_eq!(pdb["status"]["currentHealthy"], 3, "{budget:?}: {pdb}");
        assert_eq!(pdb["status"]["expectedPods"], 3, "{budget:?}: {pdb}");
    }
}

#[tokio::test]
async fn evicting_a_pod_that_is_gone_is_404_and_budgets_are_listed_in_all_namespaces() {
    let (sim, client) = cluster().await;
    sim.apply_json(pdb_json("web", "web", ("minAvailable", json!(1))))
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let err = pods
        .evict("nope", &EvictParams::default())
        .await
        .unwrap_err();
    assert_eq!(api_code(err), (404, "NotFound".to_string()));
    let pdbs: Api<PodDisruptionBudget> = Api::all(client);
    assert_eq!(
        names(&pdbs.list(&ListParams::default()).await.unwrap().items),
        ["web"]
    );
}

fn nodepool_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    )
}

#[tokio::test]
async fn nodepools_are_404_without_the_crds_and_come_back_with_them() {
    let (sim, client) = cluster().await;
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &nodepool_resource());
    let err = pools.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(err).0, 404);
    assert!(
        kube::discovery::group(&client, "karpenter.sh")
            .await
            .is_err()
    );

    sim.set_crds_installed(true);
    sim.apply_json(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}}}
    }))
    .unwrap();
    let listed = pools.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&listed.items), ["default"]);
    assert_eq!(
        listed.items[0].data["spec"]["template"]["spec"]["requirements"][0]["values"],
        json!(["spot"])
    );
    let group = kube::discovery::group(&client, "karpenter.sh")
        .await
        .unwrap();
    assert!(group.recommended_kind("NodePool").is_some());
}

#[tokio::test]
async fn injected_fault_returns_the_status_asked_for_then_recovers() {
    let (sim, client) = cluster().await;
    sim.apply_json(node_json("n1", "us-east-1a")).unwrap();
    let nodes: Api<Node> = Api::all(client);
    sim.inject(Fault::resource("nodes", 500).method("GET").times(2));
    assert_eq!(
        api_code(nodes.get("n1").await.unwrap_err()),
        (500, "InternalError".to_string())
    );
    assert_eq!(
        api_code(nodes.list(&ListParams::default()).await.unwrap_err()).0,
        500
    );
    assert!(nodes.get("n1").await.is_ok());
    sim.inject(Fault::path("/api/v1/nodes", 429));
    assert_eq!(
        api_code(nodes.get("n1").await.unwrap_err()),
        (429, "TooManyRequests".to_string())
    );
    assert!(nodes.get("n1").await.is_ok());
}

#[tokio::test]
async fn kube_default_client_retries_an_injected_503_and_succeeds() {
    let sim = SimCluster::start(SimConfig::default()).await.unwrap();
    sim.apply_json(node_json("n1", "us-east-1a")).unwrap();
    let nodes: Api<Node> = Api::all(sim.client().await.unwrap());
    sim.inject(Fault::resource("nodes", 503).times(2));
    assert!(nodes.get("n1").await.is_ok());
}

#[tokio::test]
async fn raw_eviction_refusal_carries_a_status_body_and_fault_429_a_retry_after_header() {
    let (sim, _client) = cluster().await;
    sim.inject(Fault::resource("pods", 429).subresource("eviction"));
    let url = format!("{}/api/v1/namespaces/default/pods/p/eviction", sim.url());
    let resp = reqwest::Client::new()
        .post(url)
        .json(&json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(
        resp.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        (body["kind"].as_str(), body["reason"].as_str()),
        (Some("Status"), Some("TooManyRequests"))
    );
}

#[tokio::test]
async fn kube_client_watches_pods_and_sees_them_added_changed_and_leave_its_field_selector() {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};

    let (sim, client) = cluster().await;
    sim.apply_json(node_json("n1", "us-east-1a")).unwrap();
    let pods: Api<Pod> = Api::all(client);
    let wp = WatchParams::default().fields("spec.nodeName=").timeout(5);
    let mut events = pods.watch(&wp, "0").await.expect("watch opens").boxed();
    let mut pending = pod_json("p1", "web", "", false);
    pending["spec"].as_object_mut().unwrap().remove("nodeName");
    pending["status"] = json!({"phase": "Pending"});
    sim.apply_json(pending.clone()).unwrap();
    let mut seen = vec![];
    let mut bound = pending.clone();
    bound["spec"]["nodeName"] = json!("n1");
    while let Some(event) = tokio::time::timeout(std::time::Duration::from_secs(5), events.next())
        .await
        .expect("an event within 5 s")
    {
        let kind = match event.expect("a watch event") {
            WatchEvent::Added(p) => ("ADDED", p.metadata.name),
            WatchEvent::Modified(p) => ("MODIFIED", p.metadata.name),
            WatchEvent::Deleted(p) => ("DELETED", p.metadata.name),
            other => panic!("unexpected {other:?}"),
        };
        seen.push((kind.0, kind.1.unwrap_or_default()));
        match seen.len() {
            1 => {
                pending["metadata"]["labels"]["tier"] = json!("front");
                sim.apply_json(pending.clone()).unwrap();
            }
            2 => {
                sim.apply_json(bound.clone()).unwrap();
            }
            _ => break,
        }
    }
    let want = [("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")];
    assert_eq!(seen, want.map(|(a, b)| (a, b.to_string())));
}

#[tokio::test]
async fn a_pod_applied_without_a_status_is_pending_as_the_api_server_defaults_it() {
    let (sim, client) = cluster().await;
    sim.apply_json(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bare", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "pause"}]}
    }))
    .unwrap();
    sim.apply_json(pod_json("running", "web", "n1", true))
        .unwrap();
    let pods: Api<Pod> = Api::all(client);
    let lp = ListParams::default().fields("spec.nodeName=,status.phase=Pending");
    let pending = pods.list(&lp).await.expect("list");
    assert_eq!(names(&pending.items), ["bare"]);
}

#[tokio::test]
async fn the_request_log_is_off_until_asked_then_holds_each_request_whole() {
    let (sim, client) = cluster().await;
    sim.apply_json(node_json("n1", "us-east-1a")).expect("node");
    let nodes: Api<Node> = Api::all(client);
    nodes.get("n1").await.expect("get before the log is on");
    assert_eq!(sim.logged_requests("GET", "/api/v1/nodes"), vec![]);

    sim.log_requests();
    let cordon = json!({"spec": {"unschedulable": true}});
    nodes
        .patch(
            "n1",
            &PatchParams {
                field_manager: Some("tester".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&cordon),
        )
        .await
        .expect("patch");
    let patches = sim.logged_requests("PATCH", "/api/v1/nodes/n1");
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(patches[0].query("fieldManager"), Some("tester"));
    assert_eq!(patches[0].body, cordon);
    assert_eq!(sim.logged_requests("GET", "/api/v1/nodes"), vec![]);
}
