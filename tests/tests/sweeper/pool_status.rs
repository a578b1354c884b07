//! A NodePool's status conditions end to end: the sweeper writes `ValidationSucceeded`,
//! `NodeClassReady` and `Ready` as Karpenter's controllers do, the real kubectl's READY
//! column reads them through the CRD's printer column, and a condition's time moves only
//! when its status does.

use nodewright_world::kubectl::Kubectl;

use super::*;

/// The READY column of `kubectl get nodepools` for `pool`.
async fn ready_column(kubectl: &Kubectl, pool: &str) -> Option<String> {
    let listed = kubectl
        .run(&["get", "nodepools"])
        .await
        .expect("kubectl runs");
    assert!(listed.success, "{}", listed.stderr);
    listed
        .rows()
        .into_iter()
        .find(|r| r.first().map(String::as_str) == Some(pool))
        .and_then(|r| r.get(3).cloned())
}

/// (status, reason, lastTransitionTime) of `pool`'s condition `kind`.
fn condition(world: &World, pool: &str, kind: &str) -> (String, String, String) {
    let object = world
        .sim
        .get_json("karpenter.sh/v1", "NodePool", "", pool)
        .unwrap();
    let c = object["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or_else(|| panic!("{pool} has no {kind} condition: {object}"));
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("status"), s("reason"), s("lastTransitionTime"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodepool_is_ready_while_its_class_exists_and_says_why_not_when_it_is_gone() {
    let world = start("sweep-pool-conditions").await;
    running(&world, 0, &[]).await;
    let kubectl = Kubectl::for_cluster(&world.sim).expect("kubectl is installed in .venv");
    let sweeper = sweeper(&world).await;
    sweep(&sweeper).await;
    assert_eq!(
        ready_column(&kubectl, "default").await.as_deref(),
        Some("True")
    );
    let validated = condition(&world, "default", "ValidationSucceeded");
    assert_eq!(validated.0, "True");
    assert_eq!(condition(&world, "default", "NodeClassReady").0, "True");

    // The class goes; a minute later the sweeper says so, and only the conditions that
    // changed move.
    let deleted = kubectl
        .run(&["delete", "ec2nodeclass", "default"])
        .await
        .expect("kubectl runs");
    assert!(deleted.success, "{}", deleted.stderr);
    step(&world, 60).await;
    sweep(&sweeper).await;
    assert_eq!(
        ready_column(&kubectl, "default").await.as_deref(),
        Some("False")
    );
    let class = condition(&world, "default", "NodeClassReady");
    assert_eq!(
        (class.0.as_str(), class.1.as_str()),
        ("False", "NodeClassNotFound")
    );
    let ready = condition(&world, "default", "Ready");
    assert_eq!(
        (ready.0.as_str(), ready.1.as_str()),
        ("False", "UnhealthyDependents")
    );
    assert_ne!(
        class.2, validated.2,
        "NodeClassReady changed: its time moved"
    );
    assert_eq!(
        condition(&world, "default", "ValidationSucceeded"),
        validated,
        "ValidationSucceeded did not change: nor did its time"
    );
}
