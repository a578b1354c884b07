//! A `kube::Client` for an EKS cluster, authenticated with a [`TokenSource`].
//!
//! Why a tower layer and not `AuthInfo`: kube 5 refreshes a token only for `exec` plugins
//! (a child process per refresh, and `aws` would have to be on the Lambda image), OIDC/OAuth
//! providers, or a `token_file` re-read once a minute; a static `AuthInfo::token` is never
//! refreshed. kube's documented way to customise the stack is `ClientBuilder` (see kube's
//! `custom_client` examples): we keep kube's default stack (base URI, TLS with the cluster
//! CA, timeouts, tracing) and put one layer in front that asks the [`TokenSource`] for the
//! current token on every request — a cache hit costs a mutex lock, a re-mint is pure
//! SigV4 work, no process and no file.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{HeaderValue, Request, header::AUTHORIZATION};
use kube::client::{Body, ClientBuilder};
use tower::BoxError;
use tower::buffer::BufferLayer;
use tower::filter::{AsyncFilterLayer, AsyncPredicate};

use super::cluster::{CaError, EksCluster, decode_certificate_authority};
use super::token_source::TokenSource;

/// Requests that may wait for the inner service; kube's own `Client` buffers 1024.
const BUFFER: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    #[error("EKS cluster {cluster:?}: bad certificate authority")]
    CertificateAuthority {
        cluster: String,
        #[source]
        source: CaError,
    },
    #[error("EKS cluster endpoint {endpoint:?} is not a URL")]
    Endpoint {
        endpoint: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("building the Kubernetes client failed")]
    Kube(#[source] kube::Error),
    #[error("the AWS configuration has no {0}, needed to sign EKS tokens")]
    MissingAws(&'static str),
}

/// The Kubernetes client a function uses: from `KUBECONFIG` when `kubeconfig` says the
/// function's environment sets it (local runs against the simulated cluster), else tokens for `cluster` minted from the function's
/// own AWS credentials in its own region, as `aws eks get-token` would.
pub async fn function_client(
    aws: &aws_config::SdkConfig,
    cluster: &EksCluster,
    kubeconfig: bool,
) -> Result<kube::Client, KubeClientError> {
    if kubeconfig {
        let config = kube::Config::infer()
            .await
            .map_err(|e| KubeClientError::Kube(kube::Error::InferConfig(e)))?;
        return kube::Client::try_from(without_client_retries(config))
            .map_err(KubeClientError::Kube);
    }
    let credentials = aws
        .credentials_provider()
        .ok_or(KubeClientError::MissingAws("credentials"))?;
    let region = aws.region().ok_or(KubeClientError::MissingAws("region"))?;
    let tokens = Arc::new(TokenSource::new(
        credentials,
        cluster.name.clone(),
        region.to_string(),
    ));
    eks_client(cluster, tokens)
}

/// A client for `cluster`, trusting only the cluster's CA, with tokens from `tokens`.
pub fn eks_client(
    cluster: &EksCluster,
    tokens: Arc<TokenSource>,
) -> Result<kube::Client, KubeClientError> {
    let roots =
        decode_certificate_authority(&cluster.certificate_authority_data).map_err(|source| {
            KubeClientError::CertificateAuthority {
                cluster: cluster.name.clone(),
                source,
            }
        })?;
    client_with_tokens(&cluster.endpoint, Some(roots), tokens)
}

/// A client for `endpoint` (root certificates in DER; `None` = the platform's roots).
/// Must be called inside a tokio runtime (the buffer spawns its worker, as kube's own does).
pub fn client_with_tokens(
    endpoint: &str,
    root_certs: Option<Vec<Vec<u8>>>,
    tokens: Arc<TokenSource>,
) -> Result<kube::Client, KubeClientError> {
    install_crypto_provider();
    let url: http::Uri = endpoint
        .parse()
        .map_err(|source| KubeClientError::Endpoint {
            endpoint: endpoint.to_owned(),
            source,
        })?;
    let mut config = kube::Config::new(url);
    config.root_cert = root_certs;
    let builder =
        ClientBuilder::try_from(without_client_retries(config)).map_err(KubeClientError::Kube)?;
    // The default stack is a BoxService (not Clone); AsyncFilter needs a Clone inner
    // service to call after its predicate resolves, so it sits on a Buffer.
    let client = builder
        .with_layer(&BufferLayer::<Request<Body>>::new(BUFFER))
        .with_layer(&AsyncFilterLayer::new(BearerToken { tokens }))
        .build();
    Ok(client)
}

/// `config` without kube's own retry layer. That layer retries every 429, 503 and 504
/// up to 15 times with back-off growing from 5 ms (minutes in all), on the wall clock and
/// inside one call: an eviction a PodDisruptionBudget refuses (429) would hold a spot
/// warning's drain for longer than the warning lasts, and a Lambda invocation past its
/// timeout. nodewright retries where it knows the budget: `kube::error::RetryPolicy` for
/// throttling, the drain's next look for a refused eviction.
pub fn without_client_retries(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}

/// Sets `Authorization: Bearer <token>` from the [`TokenSource`] on each request.
#[derive(Clone)]
pub struct BearerToken {
    tokens: Arc<TokenSource>,
}

impl AsyncPredicate<Request<Body>> for BearerToken {
    type Future = Pin<Box<dyn Future<Output = Result<Request<Body>, BoxError>> + Send>>;
    type Request = Request<Body>;

    fn check(&mut self, mut request: Request<Body>) -> Self::Future {
        let tokens = Arc::clone(&self.tokens);
        Box::pin(async move {
            let token = tokens.token().await?;
            let mut value = HeaderValue::try_from(format!("Bearer {}", token.value))?;
            value.set_sensitive(true);
            request.headers_mut().insert(AUTHORIZATION, value);
            Ok(request)
        })
    }
}

/// kube builds a rustls connector for every client, and with both of rustls's crypto back
/// ends in the dependency graph (aws-lc-rs from the AWS SDK, ring from others) rustls
/// cannot pick one by itself and panics. Installing aws-lc-rs, the SDK's, once per process
/// settles it; a second call is a no-op.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
