//! A static NodePool end to end (Karpenter's static capacity, `spec.replicas`): the sweeper
//! launches the pool's count with no pod asking, the provisioner launches nothing in it for
//! pending pods, its empty nodes are never consolidated, `kubectl scale nodepool` (the real
//! kubectl, through the CRD's scale subresource) takes the surplus away, and the CRD refuses
//! to turn a dynamic NodePool static.

use nodewright_world::kubectl::Kubectl;

use super::*;

/// The getting-started NodePool made static at `replicas`: only `limits.nodes` is allowed
/// on one, and `inflate` starts at zero.
async fn static_pool(world: &World, replicas: u32, edits: &[(&str, &str)]) -> ProvisionerState {
    let spec = format!("spec:\n  replicas: {replicas}\n  template:");
    let mut all = vec![
        ("spec:\n  template:", spec.as_str()),
        ("  limits:\n    cpu: 1000", "  limits:\n    nodes: 10"),
    ];
    all.extend_from_slice(edits);
    running(world, 0, &all).await
}

async fn scale(kubectl: &Kubectl, pool: &str, replicas: u32) -> nodewright_world::kubectl::Output {
    let to = format!("--replicas={replicas}");
    kubectl
        .run(&["scale", "nodepool", pool, &to])
        .await
        .expect("kubectl runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_nodepool_keeps_its_count_without_pods_and_kubectl_scale_takes_the_surplus() {
    let world = start("sweep-static").await;
    let provisioner = static_pool(&world, 3, &[]).await;
    assert!(node_names(&world).is_empty(), "no sweep yet, no node");
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());

    // The count is launched with no pod asking, once.
    let first = sweep_and_join(&sweeper, &world).await;
    assert_eq!(names(&first["floor_launched"]).len(), 3, "{first}");
    assert_eq!(node_names(&world).len(), 3);
    let again = sweep(&sweeper).await;
    assert!(names(&again["floor_launched"]).is_empty(), "{again}");
    // The NodePool's status counts them, as Karpenter's does: what `kubectl get nodepools`
    // shows and `kubectl scale` reads.
    let pool = world
        .sim
        .get_json("karpenter.sh/v1", "NodePool", "", "default")
        .unwrap();
    assert_eq!(pool["status"]["nodes"], 3, "{pool}");
    assert_eq!(pool["status"]["resources"]["nodes"], "3", "{pool}");
    let kubectl = Kubectl::for_cluster(&world.sim).expect("kubectl is installed in .venv");
    let listed = kubectl
        .run(&["get", "nodepools"])
        .await
        .expect("kubectl runs");
    let row = listed
        .rows()
        .into_iter()
        .find(|r| r.first().map(String::as_str) == Some("default"));
    assert_eq!(
        row.as_ref().and_then(|r| r.get(2)).map(String::as_str),
        Some("3"),
        "{}",
        listed.stdout
    );

    // Empty far past consolidateAfter (1m): kept, not even a candidate.
    world.clock().advance(Duration::from_secs(30 * 60));
    world.sim.step().await;
    let idle = sweep(&sweeper).await;
    assert!(names(&idle["started"]).is_empty(), "{idle}");
    assert_eq!(world.instances().await.unwrap().len(), 3);

    // More pods than the three nodes hold: the provisioner launches nothing in a static pool.
    scale_inflate(&world, 40);
    world.sim.step().await;
    invoke(&provisioner).await.unwrap();
    step(&world, 10).await;
    assert_eq!(
        world.instances().await.unwrap().len(),
        3,
        "nothing launched for pods"
    );
    scale_inflate(&world, 0);
    step(&world, 10).await;

    // kubectl scale: two nodes go, unreplaced, outside the budgets.
    let out = scale(&kubectl, "default", 1).await;
    assert!(out.success, "{}", out.stderr);
    let mut removed = Vec::new();
    for _ in 0..4 {
        let r = sweep(&sweeper).await;
        assert!(names(&r["floor_launched"]).is_empty(), "{r}");
        assert!(names(&r["replacements_launched"]).is_empty(), "{r}");
        removed.extend(names(&r["removed"]));
        step(&world, 5).await;
    }
    assert_eq!(removed.len(), 2, "{removed:?}");
    assert_eq!(node_names(&world).len(), 1);
    assert_eq!(world.instances().await.unwrap().len(), 1, "terminated");

    // Scaled up again: the shortfall is launched.
    let out = scale(&kubectl, "default", 2).await;
    assert!(out.success, "{}", out.stderr);
    let up = sweep(&sweeper).await;
    assert_eq!(names(&up["floor_launched"]).len(), 1, "{up}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_nodepool_cannot_be_scaled_or_made_static() {
    let world = start("sweep-static-crd").await;
    running(&world, 0, &[]).await;
    let kubectl = Kubectl::for_cluster(&world.sim).expect("kubectl is installed in .venv");
    let out = scale(&kubectl, "default", 2).await;
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("Cannot transition NodePool between static (replicas set) and dynamic"),
        "{}",
        out.stderr
    );
    let patch = r#"{"spec":{"replicas":2}}"#;
    let out = kubectl
        .run(&["patch", "nodepool", "default", "--type=merge", "-p", patch])
        .await
        .expect("kubectl runs");
    assert!(!out.success, "{}", out.stdout);
    assert!(out.stderr.contains("Cannot transition"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_static_node_is_replaced_by_one_node_of_its_pool_before_it_drains() {
    let world = start("sweep-static-drift").await;
    // Nodes of four CPUs, so that the inflate pods (one CPU each) run on them.
    let xlarge = (
        "      nodeClassRef:",
        "        - key: karpenter.k8s.aws/instance-size\n          operator: In\n          values: [\"xlarge\"]\n      nodeClassRef:",
    );
    let provisioner = static_pool(&world, 2, &[xlarge]).await;
    let sweeper = sweeper(&world)
        .await
        .with_replacer(provisioner.provisioner());
    let first = sweep_and_join(&sweeper, &world).await;
    assert_eq!(names(&first["floor_launched"]).len(), 2, "{first}");
    let old = node_names(&world);
    assert_eq!(old.len(), 2, "{old:?}");
    // Work on them, placed by the scheduler: the provisioner launched nothing for it.
    scale_inflate(&world, 2);
    for _ in 0..3 {
        step(&world, 10).await;
    }
    assert_eq!(inflate_running(&world), 2);

    let old_ami = amis(&world).await[0].clone();
    let new_ami = publish_newer_al2023(&world).await;
    assert_ne!(new_ami, old_ami);
    let mut launched = Vec::new();
    for _ in 0..30 {
        if !node_names(&world).iter().any(|n| old.contains(n)) {
            break;
        }
        let r = sweep(&sweeper).await;
        let reasons: Vec<&str> = r["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["reason"].as_str())
            .collect();
        assert!(reasons.iter().all(|r| *r == "drifted"), "{r}");
        launched.extend(names(&r["replacements_launched"]));
        launched.extend(names(&r["floor_launched"]));
        // Never fewer instances than the count, and at most one more while one is replaced.
        let pool = world.instances().await.unwrap().len();
        assert!((2..=3).contains(&pool), "{pool} instances: {r}");
        for _ in 0..3 {
            step(&world, 10).await;
        }
    }
    assert!(
        !node_names(&world).iter().any(|n| old.contains(n)),
        "both old nodes rolled"
    );
    assert_eq!(
        launched.len(),
        2,
        "one node of the pool for each: {launched:?}"
    );
    for id in &launched {
        let tags = world
            .instances()
            .await
            .unwrap()
            .into_iter()
            .find(|i| &i.id == id)
            .map(|i| i.tags)
            .unwrap_or_default();
        assert_eq!(
            tags.get("nodewright.io/nodepool").map(String::as_str),
            Some("default"),
            "{id}: {tags:?}"
        );
    }
    assert!(amis(&world).await.iter().all(|a| *a == new_ami));
    assert_eq!(inflate_running(&world), 2);
}
