//! `KubeCluster` (the shared crate's Kubernetes adapters) against the simulated cluster
//! (`kube_sim`) over HTTP: what the adapters send (selectors, pagination, patches, events),
//! read from the cluster's request log, and how they react to its answers and to injected
//! faults. These tests live in the world crate because the simulated cluster does, and it
//! depends on the shared crate.

mod setup;

use nodewright::api::{Taint, TaintEffect};
use nodewright::kube::{
    ConfigOrigin, ConfigSource, EventSink, EventType, NodeOps, NodeSource, ObjectKind, PdbSource,
    PodRef, PodSource, usable,
};
use nodewright_world::kube_sim::Fault;
use serde_json::{Value, json};
use setup::*;

/// Fails every matching request for the rest of a test.
const ALWAYS: u32 = 1000;

// ---------------------------------------------------------------- pods and nodes

#[tokio::test]
async fn pending_pods_are_filtered_by_the_api_server_read_page_by_page_and_checked_client_side() {
    let server = Adapters::start(false, 2).await.with([
        pending_pod("web-1", "Unschedulable"),
        pending_pod("gated", "SchedulingGated"),
        pending_pod("web-2", "Unschedulable"),
    ]);
    let pods = server.cluster.pending_pods().await.expect("pending pods");
    let names: Vec<_> = pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["web-1", "web-2"]);

    let lists = server.requests_to("GET", "/api/v1/pods");
    assert_eq!(lists.len(), 2, "three pods in pages of two");
    for r in &lists {
        assert_eq!(
            r.query("fieldSelector"),
            Some("spec.nodeName=,status.phase=Pending")
        );
        assert_eq!(r.query("limit"), Some("2"));
    }
    assert_eq!(lists[0].query("continue"), None);
    // The token is the server's own (opaque); the second page is asked with it.
    assert!(
        lists[1].query("continue").is_some_and(|t| !t.is_empty()),
        "{:?}",
        lists[1].query
    );
}

#[tokio::test]
async fn bound_pods_are_listed_with_the_bound_selector_and_grouped_by_node() {
    let server = Adapters::start(false, 500).await.with([
        bound_pod("a1", "node-a"),
        bound_pod("b1", "node-b"),
        bound_pod("a2", "node-a"),
        pending_pod("web-1", "Unschedulable"),
    ]);
    let by_node = server
        .cluster
        .bound_pods_by_node()
        .await
        .expect("bound pods");
    assert_eq!(by_node.get("node-a").map(Vec::len), Some(2));
    assert_eq!(by_node.get("node-b").map(Vec::len), Some(1));
    let lists = server.requests_to("GET", "/api/v1/pods");
    assert_eq!(
        lists[0].query("fieldSelector"),
        Some("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
    );
}

#[tokio::test]
async fn namespaces_are_listed_page_by_page_for_their_labels() {
    let namespace = |name: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": name, "labels": labels}})
    };
    let server = Adapters::start(false, 2).await.with([
        namespace("data", json!({"team": "storage"})),
        namespace("web", json!({"team": "front"})),
    ]);
    let labels = server
        .cluster
        .namespace_labels()
        .await
        .expect("namespace labels");
    assert_eq!(labels["data"]["team"], "storage");
    assert_eq!(labels["web"]["team"], "front");
    // The cluster's own namespaces are there too (default, kube-system, ...).
    assert!(labels.contains_key("default"), "{labels:?}");
    let lists = server.requests_to("GET", "/api/v1/namespaces");
    assert!(lists.len() >= 2, "in pages of two: {lists:?}");
    assert!(lists.iter().all(|r| r.query("limit") == Some("2")));
}

#[tokio::test]
async fn pod_disruption_budgets_are_listed_in_every_namespace_page_by_page() {
    let pdb = |namespace: &str, name: &str| {
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": name}}}})
    };
    let server = Adapters::start(false, 2).await.with([
        pdb("shop", "web"),
        pdb("shop", "db"),
        pdb("billing", "ledger"),
    ]);
    let pdbs = server
        .cluster
        .pod_disruption_budgets()
        .await
        .expect("budgets");
    let mut names: Vec<String> = pdbs
        .iter()
        .map(|b| {
            format!(
                "{}/{}",
                b.metadata.namespace.as_deref().unwrap_or_default(),
                b.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect();
    names.sort();
    assert_eq!(names, ["billing/ledger", "shop/db", "shop/web"]);
    let lists = server.requests_to("GET", "/apis/policy/v1/poddisruptionbudgets");
    assert_eq!(lists.len(), 2, "three budgets in pages of two: {lists:?}");
    assert!(lists.iter().all(|r| r.query("limit") == Some("2")));
    assert!(lists[1].query("continue").is_some_and(|t| !t.is_empty()));
}

#[tokio::test]
async fn a_throttled_list_is_retried_and_succeeds() {
    let server = Adapters::start(false, 500).await.with([node("node-a")]);
    server
        .sim
        .inject(Fault::resource("nodes", 429).method("GET"));
    let nodes = server.cluster.nodes().await.expect("nodes after one 429");
    assert_eq!(nodes.len(), 1);
    assert_eq!(
        server.requests_to("GET", "/api/v1/nodes").len(),
        2,
        "one 429, then the answer"
    );
}

// ---------------------------------------------------------------- configuration

#[tokio::test]
async fn without_karpenter_crds_the_configmap_is_the_configuration() {
    let server = Adapters::start(false, 500).await.with([config_map()]);
    let load = server.cluster.load().await.expect("config");
    assert_eq!(
        load.source,
        ConfigOrigin::ConfigMap {
            namespace: "kube-system".into(),
            name: "nodewright".into()
        }
    );
    assert_eq!(load.problems, vec![]);
    let (pools, classes, dropped) = usable(&load.inputs, &load.problems);
    assert_eq!(
        pools
            .iter()
            .map(|p| p.metadata.name.as_str())
            .collect::<Vec<_>>(),
        ["from-configmap"]
    );
    assert_eq!(classes.len(), 1);
    assert!(dropped.is_empty());
    assert_eq!(
        load.inputs.node_pool_sources[0].file,
        "configmap/kube-system/nodewright/pools.yaml"
    );
    // Every Karpenter kind was asked for (each answered 404) before the ConfigMap was read.
    let crd_lists: Vec<String> = server
        .requests_to("GET", "/apis/karpenter")
        .into_iter()
        .map(|r| r.path)
        .collect();
    for path in [
        "/apis/karpenter.sh/v1/nodepools",
        "/apis/karpenter.sh/v1beta1/nodepools",
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
        "/apis/karpenter.sh/v1alpha5/provisioners",
        "/apis/karpenter.k8s.aws/v1alpha1/awsnodetemplates",
        "/apis/karpenter.sh/v1alpha1/nodeoverlays",
    ] {
        assert!(
            crd_lists.iter().any(|p| p == path),
            "{path} in {crd_lists:?}"
        );
    }
}

#[tokio::test]
async fn karpenter_objects_in_the_cluster_take_priority_over_the_configmap() {
    // The cluster sets resourceVersion, uid, creationTimestamp and generation itself.
    let node_pool = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "general", "managedFields": [{"manager": "kubectl"}]},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "standard"}}}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    });
    let node_class: Value = serde_yaml::from_str(NODE_CLASS_YAML).expect("yaml");
    let server = Adapters::start(true, 500)
        .await
        .with([node_pool, node_class, config_map()]);
    let load = server.cluster.load().await.expect("config");
    assert_eq!(load.source, ConfigOrigin::Crds);
    assert_eq!(
        load.problems,
        vec![],
        "status and server-set metadata are not configuration"
    );
    let (pools, classes, _) = usable(&load.inputs, &load.problems);
    assert_eq!((pools.len(), classes.len()), (1, 1));
    assert_eq!(pools[0].metadata.name, "general");
    assert!(
        server.requests_to("GET", "/api/v1/namespaces").is_empty(),
        "the ConfigMap is not read"
    );
}

#[tokio::test]
async fn with_karpenters_crds_installed_and_no_nodepool_there_is_no_nodepool() {
    // As in Karpenter: deleting every NodePool stops provisioning; the stack's default
    // pool is not a fallback for an empty set of CRDs (issue 8, finding 8).
    let server = Adapters::start(true, 500).await;
    let load = server.cluster.load().await.expect("config");
    assert_eq!(load.source, ConfigOrigin::Crds);
    let (pools, classes, dropped) = usable(&load.inputs, &load.problems);
    assert_eq!((pools.len(), classes.len(), dropped.len()), (0, 0, 0));
}

#[tokio::test]
async fn with_neither_the_crds_nor_the_configmap_the_stack_default_pool_is_used() {
    let server = Adapters::start(false, 500).await;
    let load = server.cluster.load().await.expect("config");
    assert_eq!(load.source, ConfigOrigin::Default);
    let (pools, classes, dropped) = usable(&load.inputs, &load.problems);
    assert_eq!((pools.len(), classes.len(), dropped.len()), (1, 1, 0));
    assert_eq!(pools[0].metadata.name, "default");
    assert_eq!(classes[0].spec.role.as_deref(), Some("nodewright-node"));
}

#[tokio::test]
async fn a_server_error_on_a_crd_list_fails_the_load_instead_of_falling_back() {
    // Falling back to the ConfigMap or the default pool because the API server had a bad
    // moment would launch nodes the user never asked for; the load fails and the next poll
    // tries again.
    let server = Adapters::start(true, 500).await.with([config_map()]);
    server
        .sim
        .inject(Fault::path("/apis/karpenter", 500).times(ALWAYS));
    let err = server
        .cluster
        .load()
        .await
        .expect_err("a 500 that persists fails the load");
    assert_eq!(err.status_code(), Some(500));
    assert!(
        err.to_string()
            .starts_with("list awsnodetemplates.karpenter.k8s.aws/v1alpha1"),
        "{err}"
    );
    assert_eq!(
        server.requests_to("GET", "/apis/karpenter").len(),
        3,
        "three tries, then the error"
    );
    assert!(
        server.requests_to("GET", "/api/v1/namespaces").is_empty(),
        "the ConfigMap is not read"
    );
}

#[tokio::test]
async fn a_configmap_that_cannot_be_read_fails_the_load_instead_of_falling_back() {
    // The ConfigMap exists but the server keeps failing to give it: the stack's default pool
    // is not a fallback for a configuration the adapters could not see. (An API server
    // validates what it stores, so an undecodable ConfigMap cannot be served here.)
    let server = Adapters::start(false, 500).await.with([config_map()]);
    server.sim.inject(
        Fault::path("/api/v1/namespaces/kube-system/configmaps/nodewright", 500).times(ALWAYS),
    );
    let err = server
        .cluster
        .load()
        .await
        .expect_err("a ConfigMap read that keeps failing");
    assert_eq!(err.status_code(), Some(500));
    assert!(
        err.to_string()
            .starts_with("get configmaps/kube-system/nodewright"),
        "{err}"
    );
}

// ---------------------------------------------------------------- events

#[tokio::test]
async fn a_pod_event_is_an_events_k8s_io_event_from_the_provisioner() {
    let server = Adapters::start(false, 500).await;
    let pod = PodRef {
        namespace: "shop".into(),
        name: "web-1".into(),
        uid: "uid-web-1".into(),
    };
    server
        .cluster
        .pod_event(
            &pod,
            "Nominated",
            "will run on nodeclaim/nc-1",
            EventType::Normal,
        )
        .await;
    let posts = server.requests_to("POST", "/apis/events.k8s.io/v1/namespaces/shop/events");
    assert_eq!(posts.len(), 1);
    let e = &posts[0].body;
    assert_eq!(e["reportingController"], "nodewright.io/provisioner");
    assert_eq!(e["reportingInstance"], "provisioner-test");
    assert_eq!(e["action"], "Nominated");
    assert_eq!(e["reason"], "Nominated");
    assert_eq!(e["note"], "will run on nodeclaim/nc-1");
    assert_eq!(e["type"], "Normal");
    assert_eq!(
        e["regarding"],
        json!({"apiVersion": "v1", "kind": "Pod", "name": "web-1", "namespace": "shop", "uid": "uid-web-1"})
    );
    assert!(
        e["eventTime"].as_str().is_some_and(|t| t.contains('T')),
        "eventTime {}",
        e["eventTime"]
    );
    assert!(
        e["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("web-1."))
    );
}

#[tokio::test]
async fn without_events_k8s_io_events_fall_back_to_core_v1_and_stay_there() {
    let server = Adapters::start(false, 500).await;
    // A cluster that does not serve events.k8s.io answers 404 on its paths.
    server
        .sim
        .inject(Fault::path("/apis/events.k8s.io", 404).times(ALWAYS));
    let c = &server.cluster;
    c.object_event(
        ObjectKind::NodePool,
        "general",
        "InvalidNodePool",
        "spec.weight: must be 1..100",
        EventType::Warning,
    )
    .await;
    c.object_event(
        ObjectKind::NodePool,
        "general",
        "InvalidNodePool",
        "again",
        EventType::Warning,
    )
    .await;
    assert_eq!(
        server.requests_to("POST", "/apis/events.k8s.io").len(),
        1,
        "asked once, then remembered"
    );
    let core = server.requests_to("POST", "/api/v1/namespaces/default/events");
    assert_eq!(core.len(), 2);
    let e = &core[0].body;
    assert_eq!(
        e["involvedObject"],
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general"})
    );
    assert_eq!(
        (e["reason"].as_str(), e["type"].as_str()),
        (Some("InvalidNodePool"), Some("Warning"))
    );
    assert_eq!(e["source"]["component"], "nodewright.io/provisioner");
}

#[tokio::test]
async fn an_event_that_cannot_be_written_does_not_fail_the_caller_or_fall_back() {
    let server = Adapters::start(false, 500).await;
    server
        .sim
        .inject(Fault::path("/apis/events.k8s.io", 403).times(ALWAYS));
    let pod = PodRef {
        namespace: "shop".into(),
        name: "web-1".into(),
        uid: String::new(),
    };
    server
        .cluster
        .pod_event(&pod, "Nominated", "x", EventType::Normal)
        .await;
    assert_eq!(
        server.requests_to("POST", "/apis/events.k8s.io").len(),
        1,
        "403 is not retried"
    );
    assert!(
        server.requests_to("POST", "/api/v1").is_empty(),
        "403 is not a reason to try core/v1"
    );
}

// ---------------------------------------------------------------- node operations

fn disrupted() -> Taint {
    Taint {
        key: "nodewright.io/disrupted".into(),
        value: None,
        effect: TaintEffect::NoSchedule,
    }
}

#[tokio::test]
async fn tainting_keeps_existing_taints_guards_the_write_and_is_idempotent() {
    let server = Adapters::start(false, 500).await.with([node("node-a")]);
    let read_version = server
        .sim
        .get_json("v1", "Node", "", "node-a")
        .expect("node-a")["metadata"]["resourceVersion"]
        .clone();
    server
        .cluster
        .taint("node-a", &disrupted())
        .await
        .expect("taint");
    server
        .cluster
        .taint("node-a", &disrupted())
        .await
        .expect("taint again");
    let patches = server.requests_to("PATCH", "/api/v1/nodes/node-a");
    assert_eq!(
        patches.len(),
        1,
        "the second call finds the taint and writes nothing"
    );
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(patches[0].query("fieldManager"), Some("nodewright"));
    assert_eq!(
        patches[0].body,
        json!({"metadata": {"resourceVersion": read_version}, "spec": {"taints": [
            {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
            {"key": "nodewright.io/disrupted", "effect": "NoSchedule"}
        ]}})
    );
}

#[tokio::test]
async fn untainting_takes_off_only_that_key_guards_the_write_and_is_idempotent() {
    let server = Adapters::start(false, 500).await.with([node("node-a")]);
    server
        .cluster
        .taint("node-a", &disrupted())
        .await
        .expect("taint");
    let read_version = server
        .sim
        .get_json("v1", "Node", "", "node-a")
        .expect("node-a")["metadata"]["resourceVersion"]
        .clone();
    server
        .cluster
        .untaint("node-a", "nodewright.io/disrupted")
        .await
        .expect("untaint");
    server
        .cluster
        .untaint("node-a", "nodewright.io/disrupted")
        .await
        .expect("untaint again");
    let patches = server.requests_to("PATCH", "/api/v1/nodes/node-a");
    assert_eq!(
        patches.len(),
        2,
        "the taint, the untaint; the second untaint finds nothing to take off"
    );
    assert_eq!(
        patches[1].body,
        json!({"metadata": {"resourceVersion": read_version}, "spec": {"taints": [
            {"key": "dedicated", "value": "web", "effect": "NoSchedule"}
        ]}})
    );
    let taints = server
        .sim
        .get_json("v1", "Node", "", "node-a")
        .expect("node-a")["spec"]["taints"]
        .clone();
    assert_eq!(
        taints,
        json!([{"key": "dedicated", "value": "web", "effect": "NoSchedule"}])
    );
}

#[tokio::test]
async fn a_taint_that_conflicts_is_read_again_and_reapplied() {
    let server = Adapters::start(false, 500).await.with([node("node-a")]);
    server
        .sim
        .inject(Fault::resource("nodes", 409).method("PATCH"));
    server
        .cluster
        .taint("node-a", &disrupted())
        .await
        .expect("taint after a conflict");
    assert_eq!(server.requests_to("GET", "/api/v1/nodes/node-a").len(), 2);
    assert_eq!(server.requests_to("PATCH", "/api/v1/nodes/node-a").len(), 2);
}

#[tokio::test]
async fn cordon_and_label_are_merge_patches() {
    let server = Adapters::start(false, 500).await.with([node("node-a")]);
    server.cluster.cordon("node-a").await.expect("cordon");
    server
        .cluster
        .label("node-a", "nodewright.io/drifted", "true")
        .await
        .expect("label");
    let bodies: Vec<Value> = server
        .requests_to("PATCH", "/api/v1/nodes/node-a")
        .into_iter()
        .map(|r| r.body)
        .collect();
    assert_eq!(
        bodies,
        [
            json!({"spec": {"unschedulable": true}}),
            json!({"metadata": {"labels": {"nodewright.io/drifted": "true"}}})
        ]
    );
    let err = server
        .cluster
        .cordon("missing")
        .await
        .expect_err("no such node");
    assert_eq!(err.status_code(), Some(404));
    assert!(err.to_string().starts_with("patch nodes/missing"), "{err}");
}

#[tokio::test]
async fn with_a_config_ttl_the_configuration_is_read_once_and_reused_until_it_expires() {
    let server = Adapters::start(true, 500).await;
    let reads = || {
        server
            .requests_to("GET", "/apis/karpenter.sh/v1/nodepools")
            .len()
    };
    server.cluster.load().await.expect("config");
    server.cluster.load().await.expect("config");
    assert_eq!(reads(), 2, "without a TTL every load reads");

    let mut settings = server.cluster.settings().clone();
    settings.config_ttl = std::time::Duration::from_secs(3600);
    let cached = nodewright::kube::KubeCluster::new(server.cluster.client().clone(), settings);
    let first = cached.load().await.expect("config");
    let second = cached.load().await.expect("config");
    assert_eq!(
        reads(),
        3,
        "the second load within the TTL is served from memory"
    );
    assert_eq!(first.source, second.source);
    assert_eq!(first.inputs.documents, second.inputs.documents);
}

// ---------------------------------------------------------------- the functions' client

/// The client the functions build for EKS must not retry a 429 itself: kube's default
/// retry layer would ask fifteen times with back-off growing to minutes, and a refused
/// eviction (a PodDisruptionBudget's 429) would hold a spot warning's drain past its
/// deadline. The drain asks again at its next look instead.
#[tokio::test]
async fn the_functions_client_leaves_a_refused_eviction_to_the_drain() {
    use aws_credential_types::Credentials;
    use aws_credential_types::provider::SharedCredentialsProvider;
    use nodewright::eks::{TokenSource, client_with_tokens};
    use nodewright::kube::{Eviction, KubeCluster, PodEviction};

    let server = Adapters::start(false, 500)
        .await
        .with([node("node-a"), bound_pod("web-1", "node-a")]);
    server.sim.inject(
        Fault::resource("pods", 429)
            .subresource("eviction")
            .times(ALWAYS),
    );
    let credentials = SharedCredentialsProvider::new(Credentials::for_tests());
    let tokens = std::sync::Arc::new(TokenSource::new(credentials, "test", "us-east-1"));
    let client = client_with_tokens(&server.sim.url(), None, tokens).expect("the client");
    let cluster = KubeCluster::new(
        client,
        nodewright::kube::ClusterSettings::new(default_params(), "interruption-test"),
    );
    let pod = PodRef {
        namespace: "default".into(),
        name: "web-1".into(),
        uid: String::new(),
    };
    let started = std::time::Instant::now();
    let answer = cluster.evict(&pod, 30).await.expect("an answer");
    assert_eq!(answer, Eviction::Blocked);
    assert_eq!(
        server
            .requests_to("POST", "/api/v1/namespaces/default/pods/web-1/eviction")
            .len(),
        1,
        "asked once"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

/// A drain works from the pods it listed; by the time it evicts or deletes one, a
/// StatefulSet may have re-created it under the same name. The uid precondition makes the
/// API server refuse (409) to remove that other pod, and the adapter reads it as gone.
#[tokio::test]
async fn an_eviction_carries_its_grace_and_both_removals_go_by_uid_so_a_pod_re_created_under_the_same_name_is_left_alone()
 {
    use nodewright::kube::{Eviction, PodEviction};

    let server = Adapters::start(false, 500).await.with([
        node("node-a"),
        bound_pod("db-0", "node-a"),
        bound_pod("db-1", "node-a"),
    ]);
    let uid = |name: &str| {
        server.sim.get_json("v1", "Pod", "shop", name).unwrap()["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Gone, or on its way (graceful deletion).
    let removed = |name: &str| {
        server
            .sim
            .get_json("v1", "Pod", "shop", name)
            .is_none_or(|p| !p["metadata"]["deletionTimestamp"].is_null())
    };
    let stale = |name: &str| PodRef {
        namespace: "shop".into(),
        name: name.into(),
        uid: "uid-of-the-pod-that-was-listed".into(),
    };
    assert_eq!(
        server.cluster.evict(&stale("db-0"), 30).await.unwrap(),
        Eviction::Gone
    );
    server.cluster.delete_pod(&stale("db-1"), 30).await.unwrap();
    assert!(!removed("db-0") && !removed("db-1"), "the new pods stay");

    let current = |name: &str| PodRef {
        namespace: "shop".into(),
        name: name.into(),
        uid: uid(name),
    };
    let db0 = current("db-0");
    assert_eq!(
        server.cluster.evict(&db0, 7).await.unwrap(),
        Eviction::Evicted
    );
    // The Eviction as the API server decodes it: its options under `deleteOptions`.
    let sent = server.requests_to("POST", "/api/v1/namespaces/shop/pods/db-0/eviction");
    let options = &sent.last().expect("the eviction was logged").body["deleteOptions"];
    assert_eq!(options["gracePeriodSeconds"], 7, "{:?}", sent.last());
    assert_eq!(options["preconditions"]["uid"], db0.uid.as_str());
    server
        .cluster
        .delete_pod(&current("db-1"), 30)
        .await
        .unwrap();
    assert!(removed("db-0") && removed("db-1"));
}
