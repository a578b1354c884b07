//! The environment any function of the deployed stack runs with in the local world, for
//! running its release binary as Lambda runs it (see `lambda_api`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::world::World;

impl World {
    /// What Lambda gives `function` (a logical id of `template.yaml`): every variable the
    /// deployed function holds, as moto's stack resolved it, and its execution role's
    /// temporary credentials; plus what only the local world needs: the AWS SDK through
    /// [`World::front`] and a kubeconfig for the simulated cluster (written into `dir`).
    pub fn deployed_env(&self, function: &str, dir: &Path) -> anyhow::Result<Vec<(&str, String)>> {
        let kubeconfig = self.function_kubeconfig(function, dir)?;
        let credentials = self
            .function_credentials
            .get(function)
            .with_context(|| format!("the stack has no {function}"))?;
        let deployed = self.stack.deployed.function(function)?;
        let mut env: Vec<(&str, String)> = deployed
            .environment
            .iter()
            .map(|(name, value)| (name.as_str(), value.clone()))
            .collect();
        env.extend(crate::moto::sdk_env(self.front.url(), credentials));
        env.push(("KUBECONFIG", kubeconfig.display().to_string()));
        Ok(env)
    }

    /// A kubeconfig in `dir` that signs in as `function`'s role: its user mints an EKS token
    /// with `nodewright eks-token` (an exec plugin, as `aws eks update-kubeconfig` writes
    /// one) from the credentials the function's environment holds, so the simulated API
    /// server knows the function by its access entry and RBAC judges what it asks.
    pub fn function_kubeconfig(&self, function: &str, dir: &Path) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let cli = crate::kit::debug_binary("nodewright")?;
        let user = format!(
            "{{exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: {}, \
             args: [eks-token, --cluster, {}, --region, {}], interactiveMode: Never}}}}",
            cli.display(),
            self.sim.cluster_name(),
            crate::moto::REGION
        );
        let path = dir.join(format!("kubeconfig-{function}"));
        std::fs::write(&path, self.sim.kubeconfig_with_user(&user))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// [`World::deployed_env`] as owned pairs, plus the world's clock when the world keeps
    /// its own time (`NODEWRIGHT_CLOCK=world <pace file>`), so the binary keeps it too.
    pub fn binary_env(&self, function: &str, dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
        let mut env: Vec<(String, String)> = self
            .deployed_env(function, dir)?
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        // Reading a function's own story in a failing world: its log level, overridden.
        if let Ok(level) = std::env::var("NODEWRIGHT_WORLD_RUST_LOG") {
            env.retain(|(k, _)| k != "RUST_LOG");
            env.push(("RUST_LOG".to_string(), level));
        }
        if let Some(time) = self.clock().world_time() {
            env.push((
                nodewright::clock::CLOCK_VARIABLE.to_string(),
                nodewright::clock::world_setting(time.path()),
            ));
        }
        Ok(env)
    }
}
