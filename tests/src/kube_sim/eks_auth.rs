//! Bearer-token authentication as EKS does it (aws-iam-authenticator): the token is
//! `k8s-aws-v1.` + base64url of a presigned STS GetCallerIdentity URL with the header
//! `x-k8s-aws-id: <cluster>` signed in. The server checks the URL's shape, that
//! `x-k8s-aws-id` is among the signed headers, that it has not expired (15 minutes after
//! its `X-Amz-Date`, whatever a lower `X-Amz-Expires` says; an `X-Amz-Expires` over 15
//! minutes is refused), then replays it against STS with `x-k8s-aws-id` set to its own
//! cluster: STS answers with the caller's ARN, or refuses (a token signed for another
//! cluster no longer matches its signature). Every refusal is a 401.
//!
//! The caller's ARN then meets the cluster's access entries as EKS's do: an assumed role's
//! ARN names the role's entry; the entry's Kubernetes groups (and `system:masters` for
//! `AmazonEKSClusterAdminPolicy`) are the identity RBAC judges ([`super::authz`]); an ARN
//! without an entry is refused with 401. Until access entries are given, every
//! authenticated caller is an administrator. With [`EksAuth::trusting_the_harness`], a
//! request with no `Authorization` header is the world's own harness (kubectl, the tests'
//! clients), standing in for the cluster creator's entry: kubectl sends no bearer token
//! over plain HTTP, and a function's kubeconfig always carries its exec plugin (kube fails
//! the request when the plugin fails, it never sends it bare).
//!
//! Real: moto's STS verifies the presigned signature (`moto/launch.py`, change 10).
//! Emulated: the access entries (read from the deployed template, see `world.rs`), and a
//! token verified once is remembered until it expires instead of asking STS again.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use jiff::Timestamp;
use reqwest::Url;

use super::authz::Identity;

/// aws-iam-authenticator's `presignedURLExpiration`.
pub const TOKEN_VALIDITY: Duration = Duration::from_secs(15 * 60);
const PREFIX: &str = "k8s-aws-v1.";
const CLUSTER_HEADER: &str = "x-k8s-aws-id";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    #[error("no bearer token")]
    Missing,
    #[error("the bearer token is not an EKS token: {0}")]
    Malformed(String),
    #[error("the token expired at {0}")]
    Expired(Timestamp),
    #[error("STS refused the presigned GetCallerIdentity (HTTP {status}): {body}")]
    StsRefused { status: u16, body: String },
    #[error("STS could not be reached: {0}")]
    Sts(String),
    #[error("{0} has no access entry in this cluster")]
    NoAccessEntry(String),
}

/// An EKS access entry: the IAM principal, its Kubernetes groups, and whether it carries
/// `AmazonEKSClusterAdminPolicy` (cluster scope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessEntry {
    pub principal_arn: String,
    pub groups: Vec<String>,
    pub cluster_admin: bool,
}

/// The identity EKS gives `arn` (a caller's ARN as STS answers it) under `entries`.
pub fn identity_for(
    arn: &str,
    entries: &BTreeMap<String, AccessEntry>,
) -> Result<Identity, Refused> {
    let entry = entries
        .get(&principal_of(arn))
        .ok_or_else(|| Refused::NoAccessEntry(arn.to_string()))?;
    let mut groups = entry.groups.clone();
    if entry.cluster_admin {
        groups.push(super::authz::MASTERS.to_string());
    }
    groups.push("system:authenticated".to_string());
    Ok(Identity {
        user: arn.to_string(),
        groups,
    })
}

/// `arn:aws:sts::<account>:assumed-role/<role>/<session>` is the role's
/// `arn:aws:iam::<account>:role/<role>`; any other ARN is its own principal.
fn principal_of(arn: &str) -> String {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    match parts.as_slice() {
        [_, partition, "sts", _, account, rest] => match rest.split('/').collect::<Vec<_>>()[..] {
            ["assumed-role", role, _session] => {
                format!("arn:{partition}:iam::{account}:role/{role}")
            }
            _ => arn.to_string(),
        },
        _ => arn.to_string(),
    }
}

/// Authenticates the API server's requests for `cluster` against STS at `sts_url`.
#[derive(Debug, Clone)]
pub struct EksAuth {
    cluster: String,
    sts_url: String,
    http: reqwest::Client,
    /// `None` until given: every authenticated caller is an administrator.
    entries: Arc<RwLock<Option<BTreeMap<String, AccessEntry>>>>,
    /// Tokens STS has vouched for, and the ARN it answered.
    verified: Arc<Mutex<HashMap<String, String>>>,
    /// A request without credentials is the harness, an administrator.
    harness: bool,
}

impl EksAuth {
    /// `sts_url`: where STS answers (moto's URL); the token's own host is sent as `Host`.
    pub fn new(cluster: impl Into<String>, sts_url: impl Into<String>) -> EksAuth {
        EksAuth {
            cluster: cluster.into(),
            sts_url: sts_url.into().trim_end_matches('/').to_string(),
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap_or_default(),
            entries: Arc::default(),
            verified: Arc::default(),
            harness: false,
        }
    }

    /// Takes a request without credentials for the world's harness (see the module).
    pub fn trusting_the_harness(mut self) -> EksAuth {
        self.harness = true;
        self
    }

    /// From now on callers are who `entries` say, principals without one refused.
    pub fn set_access_entries(&self, entries: impl IntoIterator<Item = AccessEntry>) {
        let map = entries
            .into_iter()
            .map(|e| (e.principal_arn.clone(), e))
            .collect();
        *self.entries.write().unwrap_or_else(|p| p.into_inner()) = Some(map);
    }

    /// Who sends `authorization`, at `now`: the harness, or an EKS token's caller as the
    /// access entries map it.
    pub async fn identify(
        &self,
        authorization: Option<&str>,
        now: SystemTime,
    ) -> Result<Identity, Refused> {
        if authorization.is_none() && self.harness {
            return Ok(Identity::admin("kubernetes-admin"));
        }
        let arn = self.remembered_or_verified(authorization, now).await?;
        match &*self.entries.read().unwrap_or_else(|p| p.into_inner()) {
            None => Ok(Identity::admin(&arn)),
            Some(entries) => identity_for(&arn, entries),
        }
    }

    /// The ARN STS answered for this token, asked once; the token's expiry is checked on
    /// every use.
    async fn remembered_or_verified(
        &self,
        authorization: Option<&str>,
        now: SystemTime,
    ) -> Result<String, Refused> {
        let header = authorization.ok_or(Refused::Missing)?;
        check_unexpired(&presigned_url(header)?, now)?;
        let known = self
            .verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(header)
            .cloned();
        if let Some(arn) = known {
            return Ok(arn);
        }
        let arn = self.authenticate(authorization, now).await?;
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        verified.insert(header.to_string(), arn.clone());
        Ok(arn)
    }

    /// The caller's ARN for the `Authorization` header `authorization`, at `now`.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        now: SystemTime,
    ) -> Result<String, Refused> {
        let presigned = presigned_url(authorization.ok_or(Refused::Missing)?)?;
        check_unexpired(&presigned, now)?;
        let host = presigned.host_str().unwrap_or_default().to_string();
        let answer = self
            .http
            .get(format!(
                "{}/?{}",
                self.sts_url,
                presigned.query().unwrap_or("")
            ))
            .header(reqwest::header::HOST, host)
            .header(CLUSTER_HEADER, &self.cluster)
            .send()
            .await
            .map_err(|e| Refused::Sts(e.to_string()))?;
        let status = answer.status().as_u16();
        let body = answer
            .text()
            .await
            .map_err(|e| Refused::Sts(e.to_string()))?;
        if status != 200 {
            return Err(Refused::StsRefused { status, body });
        }
        between(&body, "<Arn>", "</Arn>")
            .map(str::to_string)
            .ok_or(Refused::StsRefused { status, body })
    }
}

/// Axum middleware: the request goes on, carrying its [`Identity`], only with a token
/// [`EksAuth`] accepts; else 401 with a Kubernetes `Status`, as the API server answers an
/// unauthenticated request.
pub async fn require_token(
    axum::extract::State(auth): axum::extract::State<std::sync::Arc<EksAuth>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let header = request
        .headers()
        .get(reqwest::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match auth.identify(header.as_deref(), SystemTime::now()).await {
        Ok(identity) => {
            tracing::debug!(user = identity.user, "EKS token accepted");
            request.extensions_mut().insert(identity);
            next.run(request).await
        }
        Err(refused) => {
            tracing::info!(%refused, "EKS token refused");
            let status = serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized",
                "code": 401
            });
            (
                axum::http::StatusCode::UNAUTHORIZED,
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                status.to_string(),
            )
                .into_response()
        }
    }
}

/// The presigned URL inside `Bearer k8s-aws-v1.<base64url>`, if its shape is EKS's.
fn presigned_url(authorization: &str) -> Result<Url, Refused> {
    let bad = |why: &str| Refused::Malformed(why.to_string());
    let token = authorization
        .strip_prefix("Bearer ")
        .ok_or_else(|| bad("not a bearer token"))?
        .strip_prefix(PREFIX)
        .ok_or_else(|| bad("no k8s-aws-v1. prefix"))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad("not base64url"))?;
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
    let url = Url::parse(&text).map_err(|_| bad("not a URL"))?;
    let host = url.host_str().unwrap_or_default();
    let sts_host = host == "sts.amazonaws.com"
        || (host.starts_with("sts.") && host.ends_with(".amazonaws.com"));
    if url.scheme() != "https" || !sts_host || url.path() != "/" {
        return Err(bad("not an STS endpoint URL"));
    }
    if param(&url, "Action").as_deref() != Some("GetCallerIdentity") {
        return Err(bad("not a GetCallerIdentity request"));
    }
    let signed = param(&url, "X-Amz-SignedHeaders").unwrap_or_default();
    if !signed.split(';').any(|h| h == CLUSTER_HEADER) {
        return Err(bad("x-k8s-aws-id is not signed"));
    }
    Ok(url)
}

fn check_unexpired(url: &Url, now: SystemTime) -> Result<(), Refused> {
    let bad = |why: &str| Refused::Malformed(why.to_string());
    let date = param(url, "X-Amz-Date").ok_or_else(|| bad("no X-Amz-Date"))?;
    let signed = jiff::fmt::strtime::parse("%Y%m%dT%H%M%SZ", &date)
        .and_then(|t| t.to_datetime())
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC))
        .map(|z| z.timestamp())
        .map_err(|_| bad("X-Amz-Date is not a SigV4 time"))?;
    let expires: u64 = param(url, "X-Amz-Expires")
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| bad("no X-Amz-Expires"))?;
    if expires > TOKEN_VALIDITY.as_secs() {
        return Err(bad("X-Amz-Expires is over 15 minutes"));
    }
    let until = signed
        .checked_add(jiff::SignedDuration::from_secs(
            TOKEN_VALIDITY.as_secs() as i64
        ))
        .map_err(|_| bad("X-Amz-Date out of range"))?;
    let now = Timestamp::try_from(now).map_err(|_| bad("clock out of range"))?;
    if now > until {
        return Err(Refused::Expired(until));
    }
    Ok(())
}

fn param(url: &Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(&text[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(url: &str) -> String {
        format!(
            "Bearer {PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url)
        )
    }

    const GOOD: &str = "https://sts.us-east-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15\
        &X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20260301T100000Z&X-Amz-Expires=60\
        &X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&X-Amz-Signature=00";

    #[test]
    fn what_is_not_an_eks_token_is_refused_before_sts_is_asked() {
        let not_signed = GOOD.replace("host%3Bx-k8s-aws-id", "host");
        let other_action = GOOD.replace("GetCallerIdentity", "AssumeRole");
        let elsewhere = GOOD.replace("sts.us-east-1.amazonaws.com", "example.com");
        for (header, why) in [
            ("Basic abc".to_string(), "not a bearer token"),
            ("Bearer abc".to_string(), "no k8s-aws-v1. prefix"),
            (format!("Bearer {PREFIX}!!!"), "not base64url"),
            (token("not a url"), "not a URL"),
            (token(&elsewhere), "not an STS endpoint URL"),
            (token(&other_action), "not a GetCallerIdentity request"),
            (token(&not_signed), "x-k8s-aws-id is not signed"),
        ] {
            assert_eq!(
                presigned_url(&header).map(|_| ()),
                Err(Refused::Malformed(why.to_string())),
                "{header}"
            );
        }
        assert!(presigned_url(&token(GOOD)).is_ok());
    }

    #[test]
    fn a_token_is_good_for_fifteen_minutes_from_its_signing_whatever_a_lower_expiry_says() {
        let url = Url::parse(GOOD).unwrap();
        let signed: SystemTime = "2026-03-01T10:00:00Z".parse::<Timestamp>().unwrap().into();
        assert_eq!(check_unexpired(&url, signed + TOKEN_VALIDITY), Ok(()));
        assert!(matches!(
            check_unexpired(&url, signed + TOKEN_VALIDITY + Duration::from_secs(1)),
            Err(Refused::Expired(_))
        ));
        let too_long = Url::parse(&GOOD.replace("X-Amz-Expires=60", "X-Amz-Expires=901")).unwrap();
        assert_eq!(
            check_unexpired(&too_long, signed),
            Err(Refused::Malformed(
                "X-Amz-Expires is over 15 minutes".into()
            ))
        );
    }
}

#[cfg(test)]
mod access_entry_tests {
    use super::*;

    #[test]
    fn a_caller_is_who_its_access_entry_says() {
        let role = "arn:aws:iam::123456789012:role/prov";
        let entries: BTreeMap<String, AccessEntry> = [
            AccessEntry {
                principal_arn: role.into(),
                groups: vec!["g".into()],
                cluster_admin: false,
            },
            AccessEntry {
                principal_arn: "arn:aws:iam::123456789012:user/ops".into(),
                groups: vec![],
                cluster_admin: true,
            },
        ]
        .into_iter()
        .map(|e| (e.principal_arn.clone(), e))
        .collect();
        let assumed = "arn:aws:sts::123456789012:assumed-role/prov/ProvisionerFunction";
        assert_eq!(
            identity_for(assumed, &entries).unwrap().groups,
            ["g", "system:authenticated"]
        );
        assert_eq!(
            identity_for("arn:aws:iam::123456789012:user/ops", &entries)
                .unwrap()
                .groups,
            [crate::kube_sim::authz::MASTERS, "system:authenticated"]
        );
        for stranger in [
            "arn:aws:sts::123456789012:assumed-role/other/s",
            "arn:aws:sts::999999999999:assumed-role/prov/s",
            "arn:aws:iam::123456789012:user/dev",
        ] {
            assert_eq!(
                identity_for(stranger, &entries),
                Err(Refused::NoAccessEntry(stranger.to_string()))
            );
        }
    }
}
