//! IAM in the local world: moto is started with `INITIAL_NO_AUTH_ACTION_COUNT`, so it
//! authenticates and authorizes every call after the first few. Those few create the
//! world's administrator (the harness, the seed, the deploy and the simulated kubelet act
//! as it); each function then runs with temporary credentials of the role the deployed
//! stack gave it ([`function_credentials`], STS AssumeRole as the Lambda service does).
//!
//! What the world enforces: the signature, that the access key exists, and that some
//! policy of the role allows the action (`ec2:CreateFleet`). What it does not: resources
//! and conditions (`moto/launch.py`, 5). Those are asserted by reading the template
//! (`tests/tests/template_policy.rs`).

use aws_config::SdkConfig;
use aws_credential_types::Credentials;

use super::seed::SeedError;

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

/// Temporary credentials of the role `role_arn` (STS AssumeRole, signed as `admin`, who
/// stands for the Lambda service in `moto/launch.py`), as Lambda hands a function its
/// execution role's credentials.
pub async fn function_credentials(
    admin: &SdkConfig,
    role_arn: &str,
    session: &str,
) -> Result<Credentials, SeedError> {
    use aws_credential_types::provider::ProvideCredentials as _;
    let provider = aws_config::sts::AssumeRoleProvider::builder(role_arn)
        .session_name(session)
        .configure(admin)
        .build()
        .await;
    provider
        .provide_credentials()
        .await
        .map_err(at("AssumeRole"))
}
