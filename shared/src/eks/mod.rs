//! Talking to EKS: the cluster's description, the bearer token `aws eks get-token` would
//! mint, and a Kubernetes client that uses it.

pub mod cluster;
pub mod kube_client;
pub mod token;
pub mod token_source;

#[cfg(test)]
mod tests;

pub use cluster::{
    CaError, ClusterError, EksCluster, decode_certificate_authority, describe_cluster,
};
pub use kube_client::{
    KubeClientError, client_with_tokens, eks_client, function_client, install_crypto_provider,
    without_client_retries,
};
pub use token::{Token, TokenError, presign};
pub use token_source::TokenSource;
