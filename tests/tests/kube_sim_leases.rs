//! `coordination.k8s.io/v1` Leases on the simulated cluster, through the unmodified
//! `kube::Client`: optimistic concurrency as the API server does it, which leader election
//! builds on — an update or delete carrying a stale resourceVersion is a 409 Conflict.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use nodewright_world::kube_sim::{SimCluster, SimConfig};
use serde_json::json;

async fn leases() -> (SimCluster, Api<Lease>) {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("sim starts");
    let client = sim.client().await.expect("client");
    (sim, Api::namespaced(client, "nodewright"))
}

fn lease(holder: &str) -> Lease {
    serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "nodewright-sweeper", "namespace": "nodewright"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60,
                 "renewTime": "2025-01-01T00:00:00.000000Z"}
    }))
    .expect("a Lease")
}

fn code(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_second_holder_updating_from_a_stale_read_gets_a_conflict() {
    let (_sim, api) = leases().await;
    let created = api
        .create(&PostParams::default(), &lease("a"))
        .await
        .expect("created");
    let read_by_b = api.get("nodewright-sweeper").await.expect("read");

    let mut renewed = created.clone();
    renewed.spec.as_mut().expect("spec").holder_identity = Some("a".into());
    renewed.spec.as_mut().expect("spec").lease_transitions = Some(0);
    let renewed = api
        .replace("nodewright-sweeper", &PostParams::default(), &renewed)
        .await
        .expect("the holder renews with the current resourceVersion");
    assert_ne!(
        renewed.metadata.resource_version,
        created.metadata.resource_version
    );

    let mut taken = read_by_b;
    taken.spec.as_mut().expect("spec").holder_identity = Some("b".into());
    let err = api
        .replace("nodewright-sweeper", &PostParams::default(), &taken)
        .await
        .expect_err("a stale resourceVersion must not win");
    assert_eq!(code(err), (409, "Conflict".to_string()));
    let now = api.get("nodewright-sweeper").await.expect("read");
    assert_eq!(
        now.spec.and_then(|s| s.holder_identity),
        Some("a".to_string())
    );
}

#[tokio::test]
async fn a_delete_with_a_stale_resource_version_precondition_conflicts() {
    let (_sim, api) = leases().await;
    let created = api
        .create(&PostParams::default(), &lease("a"))
        .await
        .expect("created");
    let mut changed = created.clone();
    changed.spec.as_mut().expect("spec").holder_identity = Some("b".into());
    api.replace("nodewright-sweeper", &PostParams::default(), &changed)
        .await
        .expect("replaced");
    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: created.metadata.resource_version.clone(),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    let err = api
        .delete("nodewright-sweeper", &stale)
        .await
        .expect_err("stale precondition");
    assert_eq!(code(err), (409, "Conflict".to_string()));
    assert!(
        api.get_opt("nodewright-sweeper")
            .await
            .expect("get")
            .is_some()
    );
    let current = api.get("nodewright-sweeper").await.expect("read");
    let fresh = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: current.metadata.resource_version,
            uid: current.metadata.uid,
        }),
        ..DeleteParams::default()
    };
    api.delete("nodewright-sweeper", &fresh)
        .await
        .expect("deleted");
    assert!(
        api.get_opt("nodewright-sweeper")
            .await
            .expect("get")
            .is_none()
    );
}
