//! What keeps a node the sweeper would otherwise remove, end to end: a PodDisruptionBudget
//! allowing no disruption (read by the sweeper's plan, so the node is never tainted),
//! `karpenter.sh/do-not-disrupt` on the Node, and a pod that lands on an empty node while
//! it is being tainted (the removal is called off).
//!
//! Emulated besides moto and the simulated cluster: a PodDisruptionBudget's status is the
//! simulated disruption controller's (computed as the eviction check computes it), and the
//! pod that lands during the taint is stored by the simulated API server just before it
//! serves the sweeper's first write to that node (`SimCluster::apply_before`), which is
//! where a real scheduler's binding can fall.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams};
use nodewright_world::kube_sim::FaultTarget;

use super::*;

fn events_about(world: &World, node: &str) -> Vec<String> {
    let mut events = world.sim.list_json("v1", "Event");
    events.extend(world.sim.list_json("events.k8s.io/v1", "Event"));
    events
        .iter()
        .map(Value::to_string)
        .filter(|e| e.contains(node))
        .collect()
}

fn tainted(world: &World, node: &str) -> bool {
    world
        .sim
        .get_json("v1", "Node", "", node)
        .and_then(|n| n["spec"]["taints"].as_array().cloned())
        .is_some_and(|ts| ts.iter().any(|t| t["key"] == "nodewright.io/disrupted"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_allowing_no_disruption_keeps_its_nodes_untainted_with_an_event_until_it_is_deleted()
{
    let world = start("sweep-pdb").await;
    let (_provisioner, nodes) = two_half_empty_nodes(&world).await;
    // Without the budget one node's pod fits on the other: that node would go (see
    // `a_node_whose_pod_fits_on_the_other_goes_and_the_pod_moves_there`).
    world
        .sim
        .apply_json(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["inflate", "second"]}]}}
        }))
        .unwrap();
    world.sim.step().await;
    let pdb = world
        .sim
        .get_json("policy/v1", "PodDisruptionBudget", "default", "web")
        .unwrap();
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");

    let sweeper = sweeper(&world).await;
    for _ in 0..3 {
        let r = sweep(&sweeper).await;
        assert_eq!(r["commands"], json!([]), "{r}");
        assert!(names(&r["started"]).is_empty(), "{r}");
        let kept = r["kept"].to_string();
        for node in &nodes {
            assert!(kept.contains(node.as_str()), "{node} kept: {r}");
        }
        assert_eq!(
            kept.matches("PodDisruptionBudget default/web allows no disruption of pod default/")
                .count(),
            2,
            "{r}"
        );
        for node in &nodes {
            assert!(!tainted(&world, node), "{node} is never tainted");
        }
        step(&world, 30).await;
    }
    for node in &nodes {
        let told: Vec<String> = events_about(&world, node)
            .into_iter()
            .filter(|e| e.contains("DisruptionBlocked"))
            .collect();
        assert_eq!(told.len(), 1, "one Event per node (rate-limited): {told:?}");
        assert!(
            told[0].contains("PodDisruptionBudget default/web"),
            "{told:?}"
        );
    }

    // The budget deleted: the next sweep consolidates, and the node goes.
    let pdbs: Api<PodDisruptionBudget> =
        Api::namespaced(world.sim.client().await.unwrap(), "default");
    pdbs.delete("web", &DeleteParams::default()).await.unwrap();
    let first = sweep(&sweeper).await;
    let commands = first["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{first}");
    assert_eq!(commands[0]["reason"], "underutilized", "{first}");
    let gone = names(&commands[0]["nodes"]);
    assert_eq!(names(&first["started"]), gone, "{first}");
    for _ in 0..3 {
        step(&world, 5).await;
    }
    let second = sweep(&sweeper).await;
    assert_eq!(names(&second["removed"]), gone, "{second}");
    assert!(!node_names(&world).contains(&gone[0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_not_disrupt_on_the_node_keeps_it_empty_past_consolidate_after_until_it_is_taken_off() {
    let world = start("sweep-node-do-not-disrupt").await;
    running(&world, 1, &[]).await;
    let nodes = node_names(&world);
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let node = nodes[0].clone();
    let set_annotation = |value: Option<&str>| {
        let mut n = world.sim.get_json("v1", "Node", "", &node).unwrap();
        match value {
            Some(v) => n["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = json!(v),
            None => {
                if let Some(a) = n["metadata"]["annotations"].as_object_mut() {
                    a.remove("karpenter.sh/do-not-disrupt");
                }
            }
        }
        world.sim.apply_json(n).unwrap();
    };
    set_annotation(Some("true"));
    scale_inflate(&world, 0);
    step(&world, 5).await;
    step(&world, 5).await;
    let sweeper = sweeper(&world).await;
    let marked = sweep(&sweeper).await;
    assert_eq!(
        names(&marked["marked_empty"]),
        vec![node.clone()],
        "{marked}"
    );
    // consolidateAfter is 1m: well past it, twice.
    for _ in 0..2 {
        step(&world, 90).await;
        let r = sweep(&sweeper).await;
        assert!(names(&r["removed"]).is_empty(), "{r}");
        assert_eq!(r["commands"], json!([]), "{r}");
        assert!(
            r["kept"]
                .to_string()
                .contains("the node has karpenter.sh/do-not-disrupt"),
            "{r}"
        );
        assert!(node_names(&world).contains(&node));
    }
    assert!(
        events_about(&world, &node)
            .iter()
            .any(|e| e.contains("DisruptionBlocked") && e.contains("karpenter.sh/do-not-disrupt")),
        "the Event says why"
    );
    // Taken off: the empty node goes at the next sweep.
    set_annotation(None);
    let r = sweep(&sweeper).await;
    assert_eq!(names(&r["removed"]), vec![node.clone()], "{r}");
    assert!(!node_names(&world).contains(&node));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_lands_on_an_empty_node_while_it_is_tainted_calls_the_removal_off() {
    let world = start("sweep-call-off").await;
    running(&world, 1, &[]).await;
    let nodes = node_names(&world);
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let node = nodes[0].clone();
    scale_inflate(&world, 0);
    step(&world, 5).await;
    step(&world, 5).await;
    let sweeper = sweeper(&world).await;
    let marked = sweep(&sweeper).await;
    assert_eq!(
        names(&marked["marked_empty"]),
        vec![node.clone()],
        "{marked}"
    );
    step(&world, 61).await;

    // The race: the sweeper has re-read the node's pods (none) and now writes its removal
    // marker, then the taint; a pod is bound to the node just before that first write.
    let now = world.clock().now().to_string();
    world.sim.apply_before(
        "PATCH",
        FaultTarget::PathPrefix(format!("/api/v1/nodes/{node}")),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "late", "namespace": "default", "labels": {"app": "late"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause",
                     "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running", "startTime": now,
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }),
    );
    world.sim.log_requests();
    let r = sweep(&sweeper).await;
    let commands = r["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "the plan saw an empty node: {r}");
    assert_eq!(commands[0]["reason"], "empty", "{r}");
    assert!(names(&r["removed"]).is_empty(), "{r}");
    // Taken, its pods read again: one landed, so the removal is given up at once.
    assert_eq!(
        r["given_up"],
        json!([[node, "a pod was scheduled on it"]]),
        "{r}"
    );
    assert!(!tainted(&world, &node), "the taint is taken off");
    let n = world.sim.get_json("v1", "Node", "", &node).unwrap();
    assert!(
        n["metadata"]["annotations"]["nodewright.io/removal"].is_null(),
        "the removal record is cleared: {n}"
    );
    // Taken out of external load balancers with the taint, put back with it.
    let lb = "node.kubernetes.io/exclude-from-external-load-balancers";
    let label_writes: Vec<Value> = world
        .sim
        .logged_requests("PATCH", &format!("/api/v1/nodes/{node}"))
        .into_iter()
        .filter_map(|p| p.body["metadata"]["labels"].get(lb).cloned())
        .collect();
    assert_eq!(
        label_writes,
        [json!("true"), Value::Null],
        "{label_writes:?}"
    );
    assert!(n["metadata"]["labels"].get(lb).is_none(), "{n}");
    let late = world.sim.get_json("v1", "Pod", "default", "late").unwrap();
    assert!(
        late["metadata"]["deletionTimestamp"].is_null(),
        "the pod is not evicted: {late}"
    );
    assert!(
        events_about(&world, &node)
            .iter()
            .any(|e| e.contains("RemovalGivenUp") && e.contains("a pod was scheduled on it")),
        "an Event on the node says why"
    );
    // The next sweep sees a busy node: no longer marked empty, not removed.
    let next = sweep(&sweeper).await;
    assert_eq!(names(&next["unmarked"]), vec![node.clone()], "{next}");
    assert!(names(&next["started"]).is_empty(), "{next}");
    assert!(node_names(&world).contains(&node));
}
