//! `sam deploy` into moto: the project's own `template.yaml`, transformed by the SAM
//! translator and created as a CloudFormation stack (`moto/deploy.py` does both, with the
//! venv's Python, as the SAM CLI does). The world's queue, rules, roles and instance
//! profile are the stack's; nothing the template creates is seeded by hand.
//!
//! What moto's CloudFormation records without modelling (the stack lists them, GetTemplate
//! returns them, nothing exists behind them): `AWS::EKS::AccessEntry`,
//! `AWS::SQS::QueuePolicy`, `AWS::Scheduler::Schedule`, `AWS::Logs::MetricFilter`,
//! `AWS::SNS::Subscription`; it also lists, empty, a resource whose `Condition` is false.
//! Tests read those from the deployed template
//! (`tests/tests/stack_deploy.rs`). What `moto/launch.py` changes so the stack deploys and
//! behaves as in AWS is listed in its docstring (alarms, role policies, list defaults).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

use super::{Moto, REGION, venv_dir, workspace_root};

const DEPLOYER: &str = include_str!("deploy.py");

#[derive(Debug, thiserror::Error)]
pub enum StackError {
    #[error("cannot run {python} for the deploy script")]
    Spawn {
        python: PathBuf,
        source: std::io::Error,
    },
    #[error("the deploy script failed ({action} of stack {stack}): {stderr}")]
    Failed {
        action: &'static str,
        stack: String,
        stderr: String,
    },
    #[error("the deploy script's answer for stack {stack} is not the expected JSON")]
    Answer {
        stack: String,
        source: serde_json::Error,
    },
    #[error("stack {stack} has no output {output} (template.yaml's Outputs)")]
    NoOutput { stack: String, output: String },
    #[error("stack {stack} has no function {function}")]
    NoFunction { stack: String, function: String },
    #[error("the Makefile has no `deploy` recipe with a `sam deploy --capabilities` line")]
    Makefile,
    #[error("the deploy script did not finish")]
    Join(#[from] tokio::task::JoinError),
}

/// One resource as DescribeStackResources lists it. moto lists a resource of a type it
/// does not model with no id, no type and no physical id.
#[derive(Debug, Clone, Deserialize)]
pub struct StackResource {
    pub logical_id: Option<String>,
    #[serde(rename = "type")]
    pub resource_type: Option<String>,
    pub physical_id: Option<String>,
    pub status: Option<String>,
}

/// A function of the stack as Lambda holds it (GetFunctionConfiguration).
#[derive(Debug, Clone, Deserialize)]
pub struct DeployedFunction {
    pub name: String,
    /// The execution role's ARN.
    pub role: String,
    pub environment: BTreeMap<String, String>,
}

/// The stack after a deploy, or as `describe` read it.
#[derive(Debug, Clone, Deserialize)]
pub struct Deployed {
    pub stack: String,
    pub status: String,
    pub outputs: BTreeMap<String, String>,
    pub parameters: BTreeMap<String, String>,
    pub resources: Vec<StackResource>,
    /// By logical id (`ProvisionerFunction`).
    pub functions: BTreeMap<String, DeployedFunction>,
    /// The deployed template (GetTemplate, after the transform).
    #[serde(default)]
    pub template: Option<Value>,
    /// Wall time of the deploy, transform included; `deploy` only.
    #[serde(default)]
    pub seconds: f64,
    #[serde(default)]
    pub translate_seconds: f64,
    #[serde(default)]
    pub translation_cached: bool,
}

impl Deployed {
    pub fn output(&self, key: &str) -> Result<&str, StackError> {
        self.outputs
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| StackError::NoOutput {
                stack: self.stack.clone(),
                output: key.to_string(),
            })
    }

    pub fn function(&self, logical_id: &str) -> Result<&DeployedFunction, StackError> {
        self.functions
            .get(logical_id)
            .ok_or_else(|| StackError::NoFunction {
                stack: self.stack.clone(),
                function: logical_id.to_string(),
            })
    }

    /// Logical ids of the resources moto modelled (those it lists with an id).
    pub fn modelled(&self) -> Vec<(&str, &str)> {
        self.resources
            .iter()
            .filter_map(|r| Some((r.logical_id.as_deref()?, r.resource_type.as_deref()?)))
            .collect()
    }
}

/// The stack's outputs the world hands to the functions, read once.
#[derive(Debug, Clone)]
pub struct Stack {
    pub deployed: Deployed,
    pub node_role_name: String,
    pub instance_profile_name: String,
    pub queue_url: String,
    pub queue_arn: String,
    pub dead_letter_queue_url: String,
}

impl Stack {
    pub fn new(deployed: Deployed) -> Result<Stack, StackError> {
        Ok(Stack {
            node_role_name: deployed.output("NodeRoleName")?.to_string(),
            instance_profile_name: deployed.output("NodeInstanceProfileName")?.to_string(),
            queue_url: deployed.output("InterruptionQueueUrl")?.to_string(),
            queue_arn: deployed.output("InterruptionQueueArn")?.to_string(),
            dead_letter_queue_url: deployed
                .output("InterruptionDeadLetterQueueUrl")?
                .to_string(),
            deployed,
        })
    }

    pub fn name(&self) -> &str {
        &self.deployed.stack
    }
}

/// The stack name `sam deploy --stack-name` is given for a cluster in the README.
pub fn stack_name(cluster: &str) -> String {
    format!("nodewright-{cluster}")
}

/// Creates the stack `stack` from `template.yaml` with `parameters`, or updates it when it
/// exists, signed as the world's administrator, acknowledging the capabilities `make
/// deploy` acknowledges.
pub async fn deploy(
    moto: &Moto,
    stack: &str,
    parameters: &BTreeMap<String, String>,
) -> Result<Deployed, StackError> {
    let makefile = workspace_root().join("Makefile");
    let text = std::fs::read_to_string(&makefile).map_err(|_| StackError::Makefile)?;
    let capabilities = deploy_capabilities(&text).ok_or(StackError::Makefile)?;
    deploy_acknowledging(moto, stack, parameters, &capabilities).await
}

/// [`deploy`] acknowledging `capabilities` (CloudFormation's `--capabilities`).
pub async fn deploy_acknowledging(
    moto: &Moto,
    stack: &str,
    parameters: &BTreeMap<String, String>,
    capabilities: &[String],
) -> Result<Deployed, StackError> {
    let request = serde_json::json!({
        "action": "deploy",
        "template": workspace_root().join("template.yaml"),
        "stack": stack,
        "parameters": parameters,
        "cache": std::env::temp_dir().join("nodewright-sam-transform"),
        "capabilities": capabilities,
    });
    run(moto, "deploy", stack, request).await
}

/// The `--capabilities` of the `sam deploy` line in the Makefile's `deploy` recipe
/// (continuation lines joined); `None` when there is no such line.
pub fn deploy_capabilities(makefile: &str) -> Option<Vec<String>> {
    let recipe = makefile.split("\ndeploy:").nth(1)?;
    let lines: String = recipe
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with('\t'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let sam_deploy = lines.lines().find(|l| l.contains(" deploy "))?;
    let mut words = sam_deploy
        .split_whitespace()
        .skip_while(|w| *w != "--capabilities");
    words.next()?;
    Some(
        words
            .take_while(|w| !w.starts_with("--"))
            .map(str::to_string)
            .collect(),
    )
}

/// The deployed stack read back from moto, its template included.
pub async fn describe(moto: &Moto, stack: &str) -> Result<Deployed, StackError> {
    let request = serde_json::json!({"action": "describe", "stack": stack});
    run(moto, "describe", stack, request).await
}

async fn run(
    moto: &Moto,
    action: &'static str,
    stack: &str,
    request: Value,
) -> Result<Deployed, StackError> {
    let python = venv_dir().join("bin").join("python");
    let credentials = moto.admin_credentials();
    let mut command = Command::new(&python);
    command
        .arg("-c")
        .arg(DEPLOYER)
        .arg(request.to_string())
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env("AWS_ENDPOINT_URL", moto.url())
        .env("AWS_DEFAULT_REGION", REGION)
        .env("AWS_REGION", REGION)
        .env("AWS_ACCESS_KEY_ID", credentials.access_key_id())
        .env("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key())
        .env("NO_PROXY", "127.0.0.1,localhost");
    let out = tokio::task::spawn_blocking(move || command.output())
        .await?
        .map_err(|source| StackError::Spawn { python, source })?;
    if !out.status.success() {
        return Err(StackError::Failed {
            action,
            stack: stack.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|source| StackError::Answer {
        stack: stack.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capabilities_are_read_from_the_deploy_recipe_s_sam_deploy_line() {
        let makefile = "x:\n\techo deploy --capabilities NO\n\ndeploy: sam-build\n\
            \t$(SAM) deploy --guided --capabilities CAPABILITY_IAM CAPABILITY_NAMED_IAM \\\n\
            \t\t--parameter-overrides Architecture=$(ARCH)\n\
            \tcargo run -- rbac | kubectl apply -f -\n";
        assert_eq!(
            deploy_capabilities(makefile),
            Some(vec!["CAPABILITY_IAM".into(), "CAPABILITY_NAMED_IAM".into()])
        );
        let without = "deploy: sam-build\n\t$(SAM) deploy --guided\n";
        assert_eq!(deploy_capabilities(without), None);
        assert_eq!(deploy_capabilities("build:\n\tcargo build\n"), None);
    }
}
