//! Hygiene end to end: a Node of nodewright's whose instance was terminated behind its back
//! is deleted, and Nodes that only look like nodewright's are not.
//!
//! Emulated besides moto and the simulated cluster: the simulated cloud node lifecycle
//! controller is not stepped after the termination, so the orphan Node stays as it does
//! on EKS while that controller lags or is gone; and the Node's `nodewright.io/nodeclaim`
//! label is copied from its instance's tag by the test when no provisioner poll has done
//! it yet (the provisioner writes it from the tag on a poll that reads nodes, which in this
//! scenario's few invocations may not come after the node registered).

use super::*;

fn instance_of(world: &World, node: &str) -> String {
    let n = world.sim.get_json("v1", "Node", "", node).unwrap();
    n["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string()
}

/// Labels `node` with its instance's `nodewright.io/nodeclaim` tag unless it has the label,
/// as the provisioner's poll does.
async fn label_nodeclaim(world: &World, node: &str, id: &str) {
    let out = aws_sdk_ec2::Client::new(&world.sdk)
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("DescribeInstances");
    let claim = out.reservations()[0].instances()[0]
        .tags()
        .iter()
        .find(|t| t.key() == Some("nodewright.io/nodeclaim"))
        .and_then(|t| t.value())
        .expect("nodewright tags its launches")
        .to_string();
    let mut n = world.sim.get_json("v1", "Node", "", node).unwrap();
    if n["metadata"]["labels"]["nodewright.io/nodeclaim"].is_null() {
        n["metadata"]["labels"]["nodewright.io/nodeclaim"] = json!(claim);
        world.sim.apply_json(n).unwrap();
    }
}

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
    label_nodeclaim(&world, &orphan, &orphan_id).await;
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
    // Terminated behind nodewright's back (a person in the console, a stray script).
    terminate(&world, &orphan_id).await;

    let sweeper = sweeper(&world).await;
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
