//! Hygiene end to end: a Node of nodewright's whose instance was terminated behind its back
//! is deleted, and Nodes that only look like nodewright's are not.
//!
//! Emulated besides moto and the simulated cluster: the simulated cloud node lifecycle
//! controller is not stepped after the termination, so the orphan Node stays as it does
//! on EKS while that controller lags or is gone.

use super::*;

async fn terminate(world: &World, id: &str) {
    aws_sdk_ec2::Client::new(&world.sdk)
        .terminate_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("TerminateInstances");
}

/// A Ready Node in front of instance `id`, with `labels`.
fn node_for(world: &World, name: &str, id: &str, labels: Value) {
    let zone = &world.seeded.subnets[0].zone;
    let now = world.clock().now().to_string();
    world
        .sim
        .apply_json(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": format!("aws:///{zone}/{id}")},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": now, "lastTransitionTime": now}]}
        }))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_node_is_deleted_once_its_instance_is_gone_and_look_alikes_are_kept() {
    let world = start("sweep-orphan").await;
    running(&world, 1, &[]).await;
    let ours = node_names(&world);
    assert_eq!(ours.len(), 1, "{ours:?}");
    let orphan = ours[0].clone();
    let orphan_id = instance_of(&world, &orphan);
    // A look-alike (nodewright's labels) in front of someone else's running instance.
    let foreign_id = run_foreign_instance(&world, &[("Name", "not-ours")]).await;
    node_for(
        &world,
        "look-alike",
        &foreign_id,
        json!({"karpenter.sh/nodepool": "default", "nodewright.io/nodeclaim": "look-alike"}),
    );
    // A Node that is not nodewright's (no node claim label) whose instance is gone too:
    // whoever made it cleans it up.
    let gone_id = run_foreign_instance(&world, &[("Name", "not-ours")]).await;
    node_for(
        &world,
        "someone-elses",
        &gone_id,
        json!({"karpenter.sh/nodepool": "default"}),
    );
    terminate(&world, &gone_id).await;
    // The sweeper labels the nodes of this cluster's instances with their node claim,
    // whether or not a provisioner poll has (none came after this node registered): that
    // label is what makes a Node nodewright's once its instance is gone. Look-alikes in
    // front of instances that are not this cluster's get none.
    // As if it registered while no pod was pending: no poll read it, so no label.
    let mut n = world.sim.get_json("v1", "Node", "", &orphan).unwrap();
    if let Some(labels) = n["metadata"]["labels"].as_object_mut() {
        labels.remove("nodewright.io/nodeclaim");
    }
    world.sim.apply_json(n).unwrap();
    let sweeper = sweeper(&world).await;
    let _ = sweep(&sweeper).await;
    let label = |node: &str| {
        world.sim.get_json("v1", "Node", "", node).unwrap()["metadata"]["labels"]
            ["nodewright.io/nodeclaim"]
            .clone()
    };
    assert!(label(&orphan).is_string(), "{:?}", label(&orphan));
    assert!(label("someone-elses").is_null());
    assert_eq!(label("look-alike"), json!("look-alike"));
    // Terminated behind nodewright's back (a person in the console, a stray script).
    terminate(&world, &orphan_id).await;

    // Every Node is now older than the 2 minutes' grace for instances EC2 does not list
    // yet (the cluster is not stepped).
    world.clock().advance(Duration::from_secs(3 * 60));
    let r = sweep(&sweeper).await;
    assert_eq!(
        names(&r["orphans_deleted"]),
        vec![orphan.clone()],
        "{r}\nnode: {:?}\ninstance {orphan_id}: {}\nnow: {}",
        world.sim.get_json("v1", "Node", "", &orphan),
        state_of(&world, &orphan_id).await,
        world.clock().now()
    );
    let left = node_names(&world);
    assert!(!left.contains(&orphan), "{left:?}");
    assert!(left.contains(&"look-alike".to_string()), "{left:?}");
    assert!(left.contains(&"someone-elses".to_string()), "{left:?}");
    assert_eq!(state_of(&world, &foreign_id).await, "running");
    // Nothing more to do: the next sweep deletes nothing.
    let again = sweep(&sweeper).await;
    assert!(names(&again["orphans_deleted"]).is_empty(), "{again}");
}
