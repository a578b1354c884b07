//! EKS token, token cache, cluster description and client tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::cluster::{CaError, ClusterError, cluster_from_sdk, decode_certificate_authority};
use super::token::{TokenError, presign, presigned_url, token_from_url};
use super::token_source::TokenSource;
use crate::clock::Clock;

const AKID: &str = "AKIDEXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
/// 2026-11-28T21:14:00Z.
const SIGNED_AT: u64 = 1_795_900_440;

/// One presigning case: the inputs, and what botocore produced for them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Vector {
    cluster: String,
    region: String,
    session_token: Option<String>,
    unix_time: u64,
    url: String,
    token: String,
}

fn cases() -> Vec<(String, String, Option<String>)> {
    vec![
        ("my-cluster".into(), "us-east-1".into(), None),
        (
            "test-cluster".into(),
            "ap-northeast-2".into(),
            // '/', '+' and '=' must be percent-encoded exactly as botocore does.
            Some("IQoJb3JpZ2luX2VjEXAMPLE/+=token".into()),
        ),
        ("prod_eks-01".into(), "cn-north-1".into(), None),
    ]
}

fn creds(session_token: Option<&str>) -> Credentials {
    Credentials::new(AKID, SECRET, session_token.map(str::to_owned), None, "test")
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/eks/testdata/botocore_tokens.json")
}

fn workspace_root() -> PathBuf {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR"));
    shared.parent().unwrap_or(shared).to_path_buf()
}

fn venv_python() -> PathBuf {
    let venv = std::env::var_os("NODEWRIGHT_VENV")
        .map_or_else(|| workspace_root().join(".venv"), PathBuf::from);
    venv.join("bin/python")
}

/// Runs scripts/botocore_eks_token.py (aws-cli's get-token steps on botocore) for one case.
fn botocore_vector(cluster: &str, region: &str, session_token: Option<&str>) -> Vector {
    let python = venv_python();
    assert!(
        python.exists(),
        "{} does not exist: run `make setup` to create the project venv with botocore \
         (or point NODEWRIGHT_VENV at a venv that has botocore)",
        python.display()
    );
    let script = workspace_root().join("scripts/botocore_eks_token.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&script)
        .args(["--cluster", cluster, "--region", region])
        .args(["--access-key-id", AKID, "--secret-access-key", SECRET])
        .args(["--unix-time", &SIGNED_AT.to_string()]);
    if let Some(t) = session_token {
        cmd.args(["--session-token", t]);
    }
    // Nothing from the developer's AWS setup may change botocore's endpoint or signing.
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", std::env::temp_dir())
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "botocore script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    #[derive(Deserialize)]
    struct Out {
        url: String,
        token: String,
    }
    let parsed: Out = serde_json::from_slice(&out.stdout).expect("script prints JSON");
    Vector {
        cluster: cluster.into(),
        region: region.into(),
        session_token: session_token.map(str::to_owned),
        unix_time: SIGNED_AT,
        url: parsed.url,
        token: parsed.token,
    }
}

#[test]
fn presigned_url_and_token_equal_botocore_byte_for_byte() {
    let mut vectors = Vec::new();
    for (cluster, region, session_token) in cases() {
        let expected = botocore_vector(&cluster, &region, session_token.as_deref());
        let creds = creds(session_token.as_deref());
        let url = presigned_url(&cluster, &region, &creds, at(SIGNED_AT)).unwrap();
        assert_eq!(url, expected.url, "{cluster} in {region}");
        let token = presign(&cluster, &region, &creds, at(SIGNED_AT)).unwrap();
        assert_eq!(token.value, expected.token, "{cluster} in {region}");
        vectors.push(expected);
    }
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let json = serde_json::to_string_pretty(&vectors).unwrap() + "\n";
        std::fs::write(golden_path(), json).unwrap();
    }
}

#[test]
fn presigned_url_and_token_equal_the_committed_botocore_vectors() {
    let text = std::fs::read_to_string(golden_path()).unwrap();
    let vectors: Vec<Vector> = serde_json::from_str(&text).unwrap();
    assert_eq!(vectors.len(), cases().len());
    for v in vectors {
        let creds = creds(v.session_token.as_deref());
        let token = presign(&v.cluster, &v.region, &creds, at(v.unix_time)).unwrap();
        assert_eq!(
            presigned_url(&v.cluster, &v.region, &creds, at(v.unix_time)).unwrap(),
            v.url
        );
        assert_eq!(token.value, v.token);
    }
}

#[test]
fn token_signs_the_cluster_header_and_a_sixty_second_lifetime() {
    let url = presigned_url("my-cluster", "eu-west-1", &creds(None), at(SIGNED_AT)).unwrap();
    assert!(url.starts_with(
        "https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"
    ));
    assert!(url.contains("&X-Amz-Expires=60&"));
    assert!(url.contains("&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&"));
    assert!(!url.contains("X-Amz-Security-Token"));
    let token = token_from_url(&url);
    let b64 = token.strip_prefix("k8s-aws-v1.").unwrap();
    assert!(!b64.contains('='), "no padding");
    let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(b64)
        .unwrap();
    assert_eq!(decoded, url.as_bytes());
}

#[test]
fn token_expires_fourteen_minutes_after_signing_in_whole_seconds() {
    let signed = at(SIGNED_AT) + Duration::from_millis(999);
    let token = presign("my-cluster", "us-east-1", &creds(None), signed).unwrap();
    assert_eq!(token.expires_at.to_string(), "2026-11-28T21:28:00Z");
}

#[test]
fn invalid_cluster_name_or_region_is_refused_with_what_is_allowed() {
    let c = creds(None);
    for bad in ["", "my cluster", "a/b", &"x".repeat(101)] {
        let err = presign(bad, "us-east-1", &c, at(SIGNED_AT)).unwrap_err();
        assert!(
            matches!(err, TokenError::InvalidClusterName { .. }),
            "{bad:?}"
        );
        assert!(err.to_string().contains("letters, digits, '-' and '_'"));
    }
    for bad in ["", "US-EAST-1", "us-east-1.evil.com/", "-x"] {
        let err = presign("c", bad, &c, at(SIGNED_AT)).unwrap_err();
        assert!(matches!(err, TokenError::InvalidRegion { .. }), "{bad:?}");
    }
}

#[test]
fn token_debug_output_does_not_leak_the_token() {
    let token = presign("my-cluster", "us-east-1", &creds(None), at(SIGNED_AT)).unwrap();
    let printed = format!("{token:?}");
    assert!(!printed.contains(&token.value));
}

// ---- TokenSource ----

#[derive(Debug)]
struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    fn set(&self, t: SystemTime) {
        *self.0.lock().unwrap() = t;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::try_from(*self.0.lock().unwrap()).unwrap()
    }
}

fn source_with(creds: Credentials) -> (TokenSource, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(Mutex::new(at(SIGNED_AT))));
    let source = TokenSource::new(
        SharedCredentialsProvider::new(creds),
        "my-cluster",
        "us-east-1",
    )
    .with_clock(clock.clone());
    (source, clock)
}

#[tokio::test]
async fn token_source_reuses_its_token_until_one_minute_before_the_fourteen_minute_expiry() {
    let (source, clock) = source_with(creds(None));
    let first = source.token().await.unwrap();
    clock.set(at(SIGNED_AT + 12 * 60 + 59));
    assert_eq!(source.token().await.unwrap(), first);
    clock.set(at(SIGNED_AT + 13 * 60));
    let second = source.token().await.unwrap();
    assert_ne!(second.value, first.value);
    assert_eq!(second.expires_at.to_string(), "2026-11-28T21:41:00Z");
    // The new token is cached in turn.
    clock.set(at(SIGNED_AT + 20 * 60));
    assert_eq!(source.token().await.unwrap(), second);
}

#[tokio::test]
async fn token_source_remints_before_the_signing_credentials_expire() {
    let expiring = Credentials::new(
        AKID,
        SECRET,
        Some("session".into()),
        Some(at(SIGNED_AT + 300)),
        "test",
    );
    let (source, clock) = source_with(expiring);
    let first = source.token().await.unwrap();
    clock.set(at(SIGNED_AT + 239));
    assert_eq!(source.token().await.unwrap(), first);
    clock.set(at(SIGNED_AT + 240));
    assert_ne!(source.token().await.unwrap().value, first.value);
}

// ---- cluster description and CA ----

fn test_ca_base64() -> String {
    let pem = include_str!("testdata/test-ca.pem");
    base64::engine::general_purpose::STANDARD.encode(pem)
}

#[test]
fn certificate_authority_decodes_to_the_der_of_the_pem_certificate() {
    let ders = decode_certificate_authority(&test_ca_base64()).unwrap();
    assert_eq!(ders.len(), 1);
    // `openssl x509 -in testdata/test-ca.pem -outform DER | sha256sum`
    assert_eq!(
        hex::encode(sha2::Sha256::digest(&ders[0])),
        "583a0e33c1658a6c679874de16598d56123182106814a1e70e77b9357eb8dbe3"
    );
}

#[test]
fn certificate_authority_that_is_not_pem_is_refused_saying_so() {
    // What moto returns: base64 of random bytes, not a PEM bundle.
    let random = base64::engine::general_purpose::STANDARD.encode([7u8, 200, 13, 99, 0, 255, 42]);
    let err = decode_certificate_authority(&random).unwrap_err();
    assert!(matches!(err, CaError::NotPem));
    assert!(err.to_string().contains("not a PEM certificate"));
    assert!(err.to_string().contains("moto"));

    let err = decode_certificate_authority("not base64 at all!").unwrap_err();
    assert!(matches!(err, CaError::NotBase64(_)));
}

#[test]
fn described_active_cluster_keeps_endpoint_ca_version_and_service_cidrs() {
    use aws_sdk_eks::types::{
        Certificate, Cluster, ClusterStatus, KubernetesNetworkConfigResponse,
    };
    let cluster = Cluster::builder()
        .name("test-cluster")
        .status(ClusterStatus::Active)
        .endpoint("https://ABC.gr7.ap-northeast-2.eks.amazonaws.com")
        .certificate_authority(Certificate::builder().data(test_ca_base64()).build())
        .version("1.35")
        .kubernetes_network_config(
            KubernetesNetworkConfigResponse::builder()
                .service_ipv4_cidr("172.20.0.0/16")
                .build(),
        )
        .build();
    let eks = cluster_from_sdk("test-cluster", &cluster).unwrap();
    assert_eq!(
        eks.endpoint,
        "https://ABC.gr7.ap-northeast-2.eks.amazonaws.com"
    );
    assert_eq!(eks.certificate_authority_data, test_ca_base64());
    assert_eq!(eks.kubernetes_version, "1.35");
    assert_eq!(eks.service_ipv4_cidr.as_deref(), Some("172.20.0.0/16"));
    assert_eq!(eks.service_ipv6_cidr, None);
}

#[test]
fn cluster_still_creating_without_endpoint_is_not_ready() {
    use aws_sdk_eks::types::{Cluster, ClusterStatus};
    let cluster = Cluster::builder()
        .name("new")
        .status(ClusterStatus::Creating)
        .build();
    let err = cluster_from_sdk("new", &cluster).unwrap_err();
    assert!(matches!(
        err,
        ClusterError::NotReady {
            field: "endpoint",
            ..
        }
    ));
    assert!(err.to_string().contains("CREATING"));
}

// ---- kube client ----

/// A loopback HTTP server that answers every request `200 ok` and records the request heads.
async fn recording_server() -> (String, Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            record
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .await;
        }
    });
    (format!("http://{addr}"), seen, task)
}

fn authorization(head: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("authorization")
            .then(|| value.trim().to_owned())
    })
}

#[tokio::test]
async fn kube_client_sends_the_current_eks_token_as_bearer_on_every_request() {
    let (url, seen, server) = recording_server().await;
    let (source, clock) = source_with(creds(None));
    let source = Arc::new(source);
    let client = super::client_with_tokens(&url, None, source.clone()).unwrap();

    let get = || http::Request::get("/healthz").body(Vec::new()).unwrap();
    assert_eq!(client.request_text(get()).await.unwrap(), "ok");
    clock.set(at(SIGNED_AT + 13 * 60));
    assert_eq!(client.request_text(get()).await.unwrap(), "ok");
    server.abort();

    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 2);
    let first = authorization(&heads[0]).expect("authorization header");
    let second = authorization(&heads[1]).expect("authorization header");
    let expected_first = presign("my-cluster", "us-east-1", &creds(None), at(SIGNED_AT)).unwrap();
    assert_eq!(first, format!("Bearer {}", expected_first.value));
    // After 13 minutes the client carries the re-minted token, not the first one.
    let expected_second = presign(
        "my-cluster",
        "us-east-1",
        &creds(None),
        at(SIGNED_AT + 13 * 60),
    )
    .unwrap();
    assert_eq!(second, format!("Bearer {}", expected_second.value));
}

#[tokio::test]
async fn eks_client_with_a_non_pem_certificate_authority_fails_naming_the_cluster() {
    let (source, _clock) = source_with(creds(None));
    let cluster = super::EksCluster {
        name: "moto-cluster".into(),
        endpoint: "https://127.0.0.1:1".into(),
        certificate_authority_data: base64::engine::general_purpose::STANDARD.encode([1u8, 2, 3]),
        kubernetes_version: "1.35".into(),
        service_ipv4_cidr: None,
        service_ipv6_cidr: None,
    };
    let err = super::eks_client(&cluster, Arc::new(source))
        .err()
        .expect("a non-PEM CA must be refused");
    assert!(err.to_string().contains("moto-cluster"));
    assert!(matches!(
        err,
        super::KubeClientError::CertificateAuthority {
            source: CaError::NotPem,
            ..
        }
    ));
}
