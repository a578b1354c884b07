//! The EKS bearer token, minted in-process exactly as `aws eks get-token` mints it.
//!
//! aws-cli (`awscli/customizations/eks/get_token.py`) presigns an STS `GetCallerIdentity`
//! GET request on the regional STS endpoint with SigV4 in the query string, with the header
//! `x-k8s-aws-id: <cluster>` among the signed headers, for 60 seconds; the token is
//! `k8s-aws-v1.` + base64url-without-padding(url). The EKS authenticator replays the URL
//! against STS to learn who the caller is. The URL produced here is byte-for-byte the one
//! botocore produces (`shared/src/eks/tests.rs` checks it against `scripts/botocore_eks_token.py`).

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use base64::Engine as _;
use jiff::Timestamp;

/// Lifetime of the presigned URL (awscli get_token.py `URL_TIMEOUT = 60`).
pub const URL_TIMEOUT: Duration = Duration::from_secs(60);
/// Expiry aws-cli reports in `status.expirationTimestamp` (get_token.py
/// `TOKEN_EXPIRATION_MINS = 14`): STS accepts the presigned URL for 15 minutes whatever
/// `X-Amz-Expires` says, and client-go re-runs the plugin after the reported expiry.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(14 * 60);
/// get_token.py `TOKEN_PREFIX`.
pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// get_token.py `K8S_AWS_ID_HEADER`: names the cluster the token is meant for.
pub const K8S_AWS_ID_HEADER: &str = "x-k8s-aws-id";
/// The query string botocore builds for `sts.get_caller_identity` (API version 2011-06-15).
const STS_QUERY: &str = "Action=GetCallerIdentity&Version=2011-06-15";
/// botocore appends `X-Amz-Signature` after every other auth parameter; aws-sigv4 hands the
/// security token back after the signature, so the order is fixed here to match botocore.
const SIGNATURE_PARAM: &str = "X-Amz-Signature";
/// EKS cluster names: 1-100 characters, letters, digits, `-` and `_` (EKS CreateCluster).
const MAX_CLUSTER_NAME: usize = 100;

/// A bearer token for the EKS API server.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// `k8s-aws-v1.<base64url(presigned url)>`.
    pub value: String,
    /// When aws-cli would report the token expired: signing time + 14 minutes, whole seconds.
    pub expires_at: Timestamp,
}

impl std::fmt::Debug for Token {
    // The token is a credential: never print it whole.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("value", &"k8s-aws-v1.** redacted **")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "EKS cluster name {name:?} is not valid: use 1-{MAX_CLUSTER_NAME} characters, letters, digits, '-' and '_'"
    )]
    InvalidClusterName { name: String },
    #[error(
        "AWS region {region:?} is not valid: use lowercase letters, digits and '-' (e.g. eu-west-1)"
    )]
    InvalidRegion { region: String },
    #[error("signing time {0:?} cannot be represented as a timestamp")]
    InvalidTime(SystemTime),
    #[error("no AWS credentials to sign the EKS token with")]
    Credentials(#[source] aws_credential_types::provider::error::CredentialsError),
    #[error("SigV4 presigning of STS GetCallerIdentity failed")]
    Signing(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Mints the token for `cluster` in `region` with `creds`, signed at `now`.
pub fn presign(
    cluster: &str,
    region: &str,
    creds: &Credentials,
    now: SystemTime,
) -> Result<Token, TokenError> {
    let url = presigned_url(cluster, region, creds, now)?;
    let issued = Timestamp::try_from(now).map_err(|_| TokenError::InvalidTime(now))?;
    // aws-cli formats `utcnow() + 14 min` with `%S`: fractional seconds are dropped.
    let whole =
        Timestamp::from_second(issued.as_second()).map_err(|_| TokenError::InvalidTime(now))?;
    let expires_at = whole
        .checked_add(
            jiff::SignedDuration::try_from(TOKEN_LIFETIME)
                .map_err(|_| TokenError::InvalidTime(now))?,
        )
        .map_err(|_| TokenError::InvalidTime(now))?;
    Ok(Token {
        value: token_from_url(&url),
        expires_at,
    })
}

/// `k8s-aws-v1.` + base64url without padding, as get_token.py `TokenGenerator.get_token`.
pub fn token_from_url(url: &str) -> String {
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url.as_bytes());
    format!("{TOKEN_PREFIX}{encoded}")
}

/// The presigned STS URL inside the token.
pub fn presigned_url(
    cluster: &str,
    region: &str,
    creds: &Credentials,
    now: SystemTime,
) -> Result<String, TokenError> {
    validate_cluster_name(cluster)?;
    validate_region(region)?;
    let base = format!("https://{}/?{STS_QUERY}", sts_host(region));

    let identity: Identity = creds.clone().into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(URL_TIMEOUT);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| TokenError::Signing(Box::new(e)))?
        .into();
    let request = SignableRequest::new(
        "GET",
        base.as_str(),
        [(K8S_AWS_ID_HEADER, cluster)].into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| TokenError::Signing(Box::new(e)))?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|e| TokenError::Signing(Box::new(e)))?
        .into_parts();
    let (_headers, mut query) = instructions.into_parts();
    // Stable sort: only the signature moves, to the end.
    query.sort_by_key(|(name, _)| *name == SIGNATURE_PARAM);
    Ok(append_query(base, &query))
}

fn append_query(mut url: String, params: &[(&'static str, Cow<'static, str>)]) -> String {
    for (name, value) in params {
        url.push('&');
        url.push_str(name);
        url.push('=');
        url.push_str(&percent_encode(value));
    }
    url
}

/// botocore's `percent_encode`: `urllib.parse.quote(value, safe='-_.~')` over UTF-8.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The regional STS endpoint botocore resolves (`sts_regional_endpoints = regional`, the
/// default in current botocore): `sts.<region>.amazonaws.com`, `.com.cn` in the China partition.
fn sts_host(region: &str) -> String {
    let suffix = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    format!("sts.{region}.{suffix}")
}

fn validate_cluster_name(name: &str) -> Result<(), TokenError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_CLUSTER_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(TokenError::InvalidClusterName {
            name: name.to_owned(),
        })
    }
}

fn validate_region(region: &str) -> Result<(), TokenError> {
    let ok = !region.is_empty()
        && !region.starts_with('-')
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(TokenError::InvalidRegion {
            region: region.to_owned(),
        })
    }
}
