//! `nodewright eks-token`: prints the ExecCredential `aws eks get-token` prints, so a
//! kubeconfig can use nodewright instead of the AWS CLI as its exec plugin.
//!
//! Output shape from aws-cli `awscli/customizations/eks/get_token.py` (`full_object`: keys
//! kind, apiVersion, spec, status{expirationTimestamp, token}) written by aws-cli's JSON
//! formatter (`json.dump(..., indent=4)` + newline), timestamp `%Y-%m-%dT%H:%M:%SZ`. The API
//! version follows `KUBERNETES_EXEC_INFO` as aws-cli's `discover_api_version` does.

use anyhow::Context as _;
use nodewright::eks::{Token, TokenSource};
use serde::Serialize;

/// get_token.py `BETA_API`: what aws-cli answers when the client does not say.
const BETA_API: &str = "client.authentication.k8s.io/v1beta1";
const V1_API: &str = "client.authentication.k8s.io/v1";
const ALPHA_API: &str = "client.authentication.k8s.io/v1alpha1";

#[derive(Debug, Clone, clap::Args)]
pub struct EksTokenArgs {
    /// The EKS cluster name the token is for (signed as the `x-k8s-aws-id` header).
    #[arg(long, alias = "cluster-name")]
    pub cluster: String,
    /// The region of the cluster's STS endpoint; defaults to the AWS config chain's region.
    #[arg(long)]
    pub region: Option<String>,
    /// What kubectl says of the client (`KUBERNETES_EXEC_INFO`, set by kubectl for its
    /// exec plugins): selects the ExecCredential's API version.
    #[arg(long, env = "KUBERNETES_EXEC_INFO", hide = true)]
    pub exec_info: Option<String>,
}

/// Mints a token with the default AWS credential chain and prints the ExecCredential.
pub async fn run(args: EksTokenArgs) -> anyhow::Result<()> {
    let (config, region) = crate::aws::aws_config(args.region.as_deref()).await?;
    let credentials = config
        .credentials_provider()
        .context("no AWS credentials provider in the default chain")?;
    let token = TokenSource::new(credentials, &args.cluster, &region)
        .token()
        .await
        .with_context(|| format!("minting an EKS token for cluster {:?}", args.cluster))?;
    let (api_version, warning) = discover_api_version(args.exec_info.as_deref());
    if let Some(warning) = warning {
        eprintln!("{warning}");
    }
    print!("{}", exec_credential_json(&token, api_version)?);
    Ok(())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredential<'a> {
    kind: &'static str,
    api_version: &'a str,
    spec: Empty,
    status: Status<'a>,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    expiration_timestamp: String,
    token: &'a str,
}

/// The ExecCredential as aws-cli prints it: 4-space indented JSON and a trailing newline.
pub fn exec_credential_json(token: &Token, api_version: &str) -> anyhow::Result<String> {
    let doc = ExecCredential {
        kind: "ExecCredential",
        api_version,
        spec: Empty {},
        status: Status {
            expiration_timestamp: token.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            token: &token.value,
        },
    };
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    doc.serialize(&mut ser)?;
    let mut text = String::from_utf8(out)?;
    text.push('\n');
    Ok(text)
}

/// aws-cli's `discover_api_version`: the apiVersion in `KUBERNETES_EXEC_INFO` when it is one
/// aws-cli supports, otherwise v1beta1; with the stderr message aws-cli would print.
pub fn discover_api_version(exec_info: Option<&str>) -> (&'static str, Option<String>) {
    let Some(raw) = exec_info.filter(|s| !s.is_empty()) else {
        return (BETA_API, None);
    };
    let Ok(info) = serde_json::from_str::<serde_json::Value>(raw) else {
        return (
            BETA_API,
            Some(format!(
                "Error parsing KUBERNETES_EXEC_INFO, defaulting to {BETA_API}. This is likely a \
                 bug in your Kubernetes client. Please update your Kubernetes client."
            )),
        );
    };
    match info.get("apiVersion").and_then(|v| v.as_str()) {
        Some(V1_API) => (V1_API, None),
        Some(BETA_API) => (BETA_API, None),
        Some(ALPHA_API) => (
            ALPHA_API,
            Some(format!(
                "Kubeconfig user entry is using deprecated API version {ALPHA_API}. Run \
                 'aws eks update-kubeconfig' to update."
            )),
        ),
        _ => (
            BETA_API,
            Some(format!(
                "Unrecognized API version in KUBERNETES_EXEC_INFO, defaulting to {BETA_API}."
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::Credentials;
    use std::time::{Duration, UNIX_EPOCH};

    fn token() -> Token {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        nodewright::eks::presign(
            "my-cluster",
            "us-east-1",
            &creds,
            UNIX_EPOCH + Duration::from_secs(1_795_900_440),
        )
        .unwrap()
    }

    #[test]
    fn exec_credential_is_printed_like_aws_cli_with_four_space_indent_and_key_order() {
        let t = token();
        let expected = format!(
            "{{\n    \"kind\": \"ExecCredential\",\n    \"apiVersion\": \"client.authentication.k8s.io/v1beta1\",\n    \"spec\": {{}},\n    \"status\": {{\n        \"expirationTimestamp\": \"2026-11-28T21:28:00Z\",\n        \"token\": \"{}\"\n    }}\n}}\n",
            t.value
        );
        assert_eq!(exec_credential_json(&t, BETA_API).unwrap(), expected);
    }

    #[test]
    fn api_version_follows_kubernetes_exec_info_like_aws_cli() {
        assert_eq!(discover_api_version(None), (BETA_API, None));
        let v1 = r#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#;
        assert_eq!(discover_api_version(Some(v1)), (V1_API, None));
        let (version, warning) = discover_api_version(Some("{not json"));
        assert_eq!(version, BETA_API);
        assert!(
            warning
                .unwrap()
                .starts_with("Error parsing KUBERNETES_EXEC_INFO")
        );
        let (version, warning) = discover_api_version(Some(
            r#"{"apiVersion":"client.authentication.k8s.io/v1alpha1"}"#,
        ));
        assert_eq!(version, ALPHA_API);
        assert!(warning.unwrap().contains("deprecated"));
    }
}
