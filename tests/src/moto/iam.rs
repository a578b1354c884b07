//! IAM in the local world: moto is started with `INITIAL_NO_AUTH_ACTION_COUNT`, so it
//! authenticates and authorizes every call after the first few. Those few create the
//! world's administrator (the harness, the seed and the simulated kubelet act as it); each
//! function then gets an identity of its own whose policy comes from `template.yaml`.
//!
//! What moto 5 enforces: the signature, that the access key exists, and that some policy
//! allows the action (`ec2:CreateFleet`). What it does not: resources (every request is
//! checked against `*`) and conditions. Those are asserted by reading the template
//! (`tests/tests/template_policy.rs`).

use aws_config::SdkConfig;
use aws_credential_types::Credentials;

use super::seed::SeedError;
use crate::template::RolePolicies;

/// Calls moto answers without authentication: exactly the three of [`bootstrap_admin`].
pub const UNAUTHENTICATED_CALLS: u32 = 3;

const ADMIN_USER: &str = "nodewright-world-admin";
const ADMIN_POLICY: &str =
    r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;

fn at<E: std::error::Error + Send + Sync + 'static>(
    step: &'static str,
) -> impl FnOnce(E) -> SeedError {
    move |e| SeedError {
        step,
        source: Box::new(e),
    }
}

fn key_of(
    step: &'static str,
    out: aws_sdk_iam::operation::create_access_key::CreateAccessKeyOutput,
    provider: &'static str,
) -> Result<Credentials, SeedError> {
    let key = out.access_key.ok_or_else(|| SeedError {
        step,
        source: "moto's answer has no AccessKey".into(),
    })?;
    Ok(Credentials::new(
        key.access_key_id,
        key.secret_access_key,
        None,
        None,
        provider,
    ))
}

/// Creates the administrator with moto's unauthenticated calls (`config` carries any
/// credentials) and returns its access key.
pub async fn bootstrap_admin(config: &SdkConfig) -> Result<Credentials, SeedError> {
    let iam = aws_sdk_iam::Client::new(config);
    iam.create_user()
        .user_name(ADMIN_USER)
        .send()
        .await
        .map_err(at("CreateUser (admin)"))?;
    iam.put_user_policy()
        .user_name(ADMIN_USER)
        .policy_name("everything")
        .policy_document(ADMIN_POLICY)
        .send()
        .await
        .map_err(at("PutUserPolicy (admin)"))?;
    let out = iam
        .create_access_key()
        .user_name(ADMIN_USER)
        .send()
        .await
        .map_err(at("CreateAccessKey (admin)"))?;
    key_of("CreateAccessKey (admin)", out, "moto-admin")
}

/// Creates the IAM user `name` holding `policies` as moto can enforce them
/// ([`RolePolicies::actions_only`]) and returns its access key. A Lambda function runs as
/// a role; an IAM user with the role's policies stands in for it because moto cannot let
/// the Lambda service assume the role.
pub async fn function_identity(
    admin: &SdkConfig,
    name: &str,
    policies: &RolePolicies,
) -> Result<Credentials, SeedError> {
    let iam = aws_sdk_iam::Client::new(admin);
    iam.create_user()
        .user_name(name)
        .send()
        .await
        .map_err(at("CreateUser (function)"))?;
    for (policy, doc) in policies.actions_only() {
        iam.put_user_policy()
            .user_name(name)
            .policy_name(policy)
            .policy_document(doc.to_string())
            .send()
            .await
            .map_err(at("PutUserPolicy (function)"))?;
    }
    for arn in &policies.managed {
        iam.attach_user_policy()
            .user_name(name)
            .policy_arn(arn)
            .send()
            .await
            .map_err(at("AttachUserPolicy (function)"))?;
    }
    let out = iam
        .create_access_key()
        .user_name(name)
        .send()
        .await
        .map_err(at("CreateAccessKey (function)"))?;
    key_of("CreateAccessKey (function)", out, "moto-function")
}
