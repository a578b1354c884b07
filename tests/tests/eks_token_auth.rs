//! The real EKS token path: the simulated API server accepts only a bearer token it
//! validates as EKS does (a presigned STS GetCallerIdentity for this cluster, replayed
//! against moto's STS), and the production `TokenSource` + `client_with_tokens` (what a
//! function uses when `KUBECONFIG` is not set) gets through it.
//!
//! Real: the token minting (`nodewright::eks`), kube's client, moto's STS verifying the
//! presigned signature. Emulated: the API server (`kube_sim`, `kube_sim/eks_auth.rs`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::SharedCredentialsProvider;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use nodewright::eks::kube_client::client_with_tokens;
use nodewright::eks::token::presign;
use nodewright::eks::token_source::TokenSource;
use nodewright_world::kube_sim::eks_auth::EksAuth;
use nodewright_world::kube_sim::{SimCluster, SimConfig};
use nodewright_world::moto::Moto;

const CLUSTER: &str = "token-demo";
const REGION: &str = "us-east-1";

async fn guarded() -> (Moto, SimCluster) {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nodewright_world=info")
        .try_init();
    let moto = Moto::start().await.expect("moto starts");
    let sim = SimCluster::start(SimConfig {
        cluster_name: CLUSTER.to_string(),
        eks_auth: Some(EksAuth::new(CLUSTER, moto.url())),
        ..SimConfig::default()
    })
    .await
    .expect("the simulated cluster starts");
    (moto, sim)
}

/// The status of `GET /api/v1/namespaces` with `authorization`.
async fn status_with(sim: &SimCluster, authorization: Option<&str>) -> u16 {
    let mut request = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{}/api/v1/namespaces", sim.url()));
    if let Some(a) = authorization {
        request = request.header("authorization", a);
    }
    request
        .send()
        .await
        .expect("the API server answers")
        .status()
        .as_u16()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn the_production_token_source_is_let_in_and_lists_namespaces() {
    let (moto, sim) = guarded().await;
    let tokens = Arc::new(TokenSource::new(
        SharedCredentialsProvider::new(moto.admin_credentials()),
        CLUSTER,
        REGION,
    ));
    let client = client_with_tokens(&sim.url(), None, tokens).expect("a client");
    let namespaces = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .expect("a token minted by TokenSource is accepted");
    assert!(
        namespaces
            .items
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("default")),
        "{:?}",
        namespaces.items
    );
}

#[tokio::test]
async fn an_expired_token_a_token_for_another_cluster_and_garbage_get_401() {
    let (moto, sim) = guarded().await;
    let creds = moto.admin_credentials();
    let now = SystemTime::now();
    let fresh = presign(CLUSTER, REGION, &creds, now).unwrap();
    assert_eq!(status_with(&sim, Some(&bearer(&fresh.value))).await, 200);

    let old = presign(CLUSTER, REGION, &creds, now - Duration::from_secs(16 * 60)).unwrap();
    let other = presign("another-cluster", REGION, &creds, now).unwrap();
    let unknown_key =
        aws_credential_types::Credentials::new("AKIAUNKNOWN0000000000", "secret", None, None, "t");
    let stranger = presign(CLUSTER, REGION, &unknown_key, now).unwrap();
    for (what, header) in [
        ("expired", Some(bearer(&old.value))),
        ("for another cluster", Some(bearer(&other.value))),
        (
            "signed with a key STS does not know",
            Some(bearer(&stranger.value)),
        ),
        ("garbage", Some(bearer("k8s-aws-v1.bm90IGEgdXJs"))),
        ("not a bearer token", Some("Basic dXNlcjpwYXNz".to_string())),
        ("absent", None),
    ] {
        assert_eq!(status_with(&sim, header.as_deref()).await, 401, "{what}");
    }
}
