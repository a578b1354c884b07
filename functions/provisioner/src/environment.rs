//! The functions' configuration, read from the environment once, in each function's
//! `main.rs`: [`FunctionEnv`] is what all three read (the cluster, the stack's node role
//! and profile, the default NodePool, the container's name), [`ProvisionerEnv`] adds the
//! provisioner's own. Unset means the production default; a bad value is an error that
//! names the variable. Nothing below `main.rs` reads the environment.

use nodewright::kube::DefaultPoolParams;
use nodewright::provision::BatchWindow;
use nodewright::scheduling::{MinValuesPolicy, PreferencePolicy};

use std::time::Duration;

use crate::batching::batch_window_from_lookup;
use crate::coverage::CoverageConfig;

/// `POLL_INTERVAL`: time between polls. Five seconds keeps a pending pod's wait short
/// while making about ten polls (a few list calls each) per invocation.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// `INVOCATION_BUDGET`: the most one invocation keeps polling, whatever its deadline. In
/// Lambda the deadline less `DEADLINE_MARGIN` ends it sooner (see [`crate::deadline`]); fifty
/// seconds is for runs without a deadline (in-process tests, a runtime that sends none).
pub const DEFAULT_INVOCATION_BUDGET: Duration = Duration::from_secs(50);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerConfig {
    pub poll_interval: Duration,
    pub budget: Duration,
}

impl Default for HandlerConfig {
    fn default() -> Self {
        HandlerConfig {
            poll_interval: DEFAULT_POLL_INTERVAL,
            budget: DEFAULT_INVOCATION_BUDGET,
        }
    }
}

impl HandlerConfig {
    /// `POLL_INTERVAL` and `INVOCATION_BUDGET`, each a duration such as `5`, `5s`, `0.5`,
    /// `500ms`; unset means the default. A poll interval under [`MIN_POLL_INTERVAL`] (zero
    /// included) is refused rather than left to spin on the API server, and so is a budget
    /// of zero or past Lambda's 15-minute limit.
    pub fn from_lookup(env: impl Fn(&str) -> Option<String>) -> Result<HandlerConfig, String> {
        let read = |name: &str, default: Duration| match env(name) {
            Some(v) => parse_duration(&v).ok_or_else(|| {
                format!("{name}={v:?}: expected seconds (5, 0.5, 5s) or milliseconds (500ms)")
            }),
            None => Ok(default),
        };
        let config = HandlerConfig {
            poll_interval: read("POLL_INTERVAL", DEFAULT_POLL_INTERVAL)?,
            budget: read("INVOCATION_BUDGET", DEFAULT_INVOCATION_BUDGET)?,
        };
        if config.poll_interval < MIN_POLL_INTERVAL {
            return Err(format!(
                "POLL_INTERVAL={:?} is shorter than {MIN_POLL_INTERVAL:?}: each poll lists pods \
                 cluster-wide, so a shorter interval only loads the API server",
                config.poll_interval
            ));
        }
        if config.budget.is_zero() || config.budget > MAX_INVOCATION_BUDGET {
            return Err(format!(
                "INVOCATION_BUDGET={:?} must be more than zero and at most {MAX_INVOCATION_BUDGET:?} \
                 (Lambda's limit is 15 minutes)",
                config.budget
            ));
        }
        Ok(config)
    }
}

/// The shortest `POLL_INTERVAL` accepted. The pod watch already wakes a poll within about a
/// second of a pod turning pending, so shorter intervals buy nothing; the tests' 100 ms is
/// the floor.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// The longest `INVOCATION_BUDGET` accepted: under Lambda's 15-minute maximum timeout.
pub const MAX_INVOCATION_BUDGET: Duration = Duration::from_secs(14 * 60);

/// `5`, `5s`, `0.5`, `500ms` -> a duration; anything else (negative, NaN, text) -> None.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let (number, scale) = if let Some(ms) = t.strip_suffix("ms") {
        (ms, 0.001)
    } else if let Some(s) = t.strip_suffix('s') {
        (s, 1.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = number.trim().parse().ok()?;
    Duration::try_from_secs_f64(value * scale).ok()
}

/// The default NodePool's parameters from the stack (`template.yaml` sets them): used only
/// when neither the Karpenter CRDs nor the ConfigMap hold a NodePool.
/// - `NODE_ROLE`: the nodes' IAM role;
/// - `DEFAULT_CAPACITY_TYPES`: `spot,on-demand` (comma-separated; empty or unset leaves
///   Karpenter's default, on-demand);
/// - `DEFAULT_CPU_LIMIT`: a CPU quantity such as `1000`; empty or unset is unlimited;
/// - `DEFAULT_AMI_ALIAS`: default `al2023@latest`.
///
/// The values are checked where every NodePool is: in validation, with the stack named as
/// the source.
pub fn default_pool_params(
    cluster_name: &str,
    env: impl Fn(&str) -> Option<String>,
) -> nodewright::kube::DefaultPoolParams {
    let list = |name: &str| nodewright::kube::comma_separated(&env(name).unwrap_or_default());
    let non_empty = |name: &str| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    nodewright::kube::DefaultPoolParams {
        cluster_name: cluster_name.to_string(),
        node_role: non_empty("NODE_ROLE").unwrap_or_default(),
        capacity_types: list("DEFAULT_CAPACITY_TYPES"),
        cpu_limit: non_empty("DEFAULT_CPU_LIMIT"),
        ami_alias: non_empty("DEFAULT_AMI_ALIAS").unwrap_or_else(|| "al2023@latest".into()),
        ..Default::default()
    }
}

/// What every nodewright function reads.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionEnv {
    /// `CLUSTER_NAME` (required): the EKS cluster.
    pub cluster_name: String,
    /// `NODE_INSTANCE_PROFILE`: the profile for EC2NodeClasses that name `NODE_ROLE` or
    /// neither a role nor an `instanceProfile` (empty when unset).
    pub node_instance_profile: String,
    /// `NODE_ROLE`: the nodes' role (empty when unset).
    pub node_role: String,
    /// The stack's default NodePool (see [`default_pool_params`]).
    pub default_pool: DefaultPoolParams,
    /// `AWS_LAMBDA_LOG_STREAM_NAME`: names this container in Events and Lease holder
    /// identities (one log stream per container in Lambda); `local` outside Lambda.
    pub container: String,
    /// `KUBECONFIG` is set: the Kubernetes client comes from it (local runs) instead of
    /// an EKS token.
    pub kubeconfig: bool,
    /// `PREFERENCE_POLICY`: `Respect` (unset or empty) or `Ignore`, Karpenter's values.
    pub preferences: PreferencePolicy,
    /// `MIN_VALUES_POLICY`: `Strict` (unset or empty) or `BestEffort`, Karpenter's values.
    pub min_values: MinValuesPolicy,
}

impl FunctionEnv {
    pub fn from_lookup(env: impl Fn(&str) -> Option<String>) -> Result<FunctionEnv, String> {
        let cluster_name = env("CLUSTER_NAME")
            .filter(|v| !v.trim().is_empty())
            .ok_or("CLUSTER_NAME is not set")?;
        Ok(FunctionEnv {
            preferences: policy(&env, "PREFERENCE_POLICY")?,
            min_values: policy(&env, "MIN_VALUES_POLICY")?,
            default_pool: default_pool_params(&cluster_name, &env),
            node_instance_profile: env("NODE_INSTANCE_PROFILE").unwrap_or_default(),
            node_role: env("NODE_ROLE").unwrap_or_default(),
            container: env("AWS_LAMBDA_LOG_STREAM_NAME").unwrap_or_else(|| "local".into()),
            kubeconfig: env("KUBECONFIG").is_some(),
            cluster_name,
        })
    }
}

/// A Karpenter-style policy variable: its default when unset or empty, an error naming the
/// variable for any other value.
fn policy<T>(env: impl Fn(&str) -> Option<String>, name: &str) -> Result<T, String>
where
    T: std::str::FromStr<Err = String> + Default,
{
    match env(name).as_deref().map(str::trim) {
        None | Some("") => Ok(T::default()),
        Some(value) => value.parse().map_err(|e| format!("{name}: {e}")),
    }
}

/// The provisioner's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvisionerEnv {
    pub function: FunctionEnv,
    /// `POLL_INTERVAL`, `INVOCATION_BUDGET`.
    pub handler: HandlerConfig,
    /// `DEADLINE_MARGIN`, `LEASE_DURATION`, `LEASE_NAME`, `LEASE_NAMESPACE`.
    pub coverage: CoverageConfig,
    /// `BATCH_IDLE_DURATION`, `BATCH_FIRST_IDLE_DURATION`, `BATCH_MAX_DURATION`.
    pub batch: BatchWindow,
}

impl ProvisionerEnv {
    pub fn from_lookup(env: impl Fn(&str) -> Option<String>) -> Result<ProvisionerEnv, String> {
        Ok(ProvisionerEnv {
            function: FunctionEnv::from_lookup(&env)?,
            handler: HandlerConfig::from_lookup(&env)?,
            coverage: CoverageConfig::from_lookup(&env)?,
            batch: batch_window_from_lookup(&env)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn only_the_cluster_name_is_required_and_the_rest_default_to_production() {
        let read = ProvisionerEnv::from_lookup(lookup(&[("CLUSTER_NAME", "demo")]));
        let Ok(read) = read else {
            panic!("{read:?}");
        };
        assert_eq!(read.function.cluster_name, "demo");
        assert_eq!(read.function.container, "local");
        assert!(!read.function.kubeconfig);
        assert_eq!(read.function.preferences, PreferencePolicy::Respect);
        assert_eq!(read.function.min_values, MinValuesPolicy::Strict);
        assert_eq!(read.function.default_pool.ami_alias, "al2023@latest");
        assert_eq!(read.handler, HandlerConfig::default());
        assert_eq!(read.coverage, CoverageConfig::default());
        assert_eq!(read.batch, BatchWindow::default());
    }

    #[test]
    fn a_missing_cluster_name_or_a_bad_value_is_an_error_naming_the_variable() {
        let missing = FunctionEnv::from_lookup(lookup(&[("NODE_ROLE", "nodes")]));
        assert_eq!(missing, Err("CLUSTER_NAME is not set".to_string()));
        let bad = ProvisionerEnv::from_lookup(lookup(&[
            ("CLUSTER_NAME", "demo"),
            ("BATCH_MAX_DURATION", "soon"),
        ]));
        assert!(
            matches!(&bad, Err(e) if e.starts_with("BATCH_MAX_DURATION=")),
            "{bad:?}"
        );
        let bad = FunctionEnv::from_lookup(lookup(&[
            ("CLUSTER_NAME", "demo"),
            ("PREFERENCE_POLICY", "ignore"),
        ]));
        assert!(
            matches!(&bad, Err(e) if e.starts_with("PREFERENCE_POLICY: ") && e.contains("Respect or Ignore")),
            "{bad:?}"
        );
        let bad = FunctionEnv::from_lookup(lookup(&[
            ("CLUSTER_NAME", "demo"),
            ("MIN_VALUES_POLICY", "Relaxed"),
        ]));
        assert!(
            matches!(&bad, Err(e) if e.starts_with("MIN_VALUES_POLICY: ")),
            "{bad:?}"
        );
    }

    #[test]
    fn the_stack_s_values_are_read_as_set() {
        let read = ProvisionerEnv::from_lookup(lookup(&[
            ("CLUSTER_NAME", "demo"),
            ("NODE_ROLE", "demo-nodes"),
            ("NODE_INSTANCE_PROFILE", "demo-profile"),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/24/[$LATEST]abc"),
            ("KUBECONFIG", "/tmp/kubeconfig"),
            ("POLL_INTERVAL", "2s"),
            ("PREFERENCE_POLICY", "Ignore"),
            ("MIN_VALUES_POLICY", "BestEffort"),
        ]));
        let Ok(read) = read else {
            panic!("{read:?}");
        };
        assert_eq!(read.function.node_role, "demo-nodes");
        assert_eq!(read.function.default_pool.node_role, "demo-nodes");
        assert_eq!(read.function.node_instance_profile, "demo-profile");
        assert_eq!(read.function.container, "2026/11/24/[$LATEST]abc");
        assert!(read.function.kubeconfig);
        assert_eq!(read.function.preferences, PreferencePolicy::Ignore);
        assert_eq!(read.function.min_values, MinValuesPolicy::BestEffort);
        assert_eq!(read.handler.poll_interval, Duration::from_secs(2));
    }
}

#[cfg(test)]
mod handler_config_tests {
    use super::*;

    #[test]
    fn the_default_pool_takes_the_stacks_parameters_and_leaves_unset_ones_to_defaults() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let stack = default_pool_params(
            "demo",
            env(&[
                ("NODE_ROLE", "demo-node"),
                ("DEFAULT_CAPACITY_TYPES", "spot, on-demand"),
                ("DEFAULT_CPU_LIMIT", "1000"),
            ]),
        );
        assert_eq!(stack.cluster_name, "demo");
        assert_eq!(stack.node_role, "demo-node");
        assert_eq!(stack.capacity_types, ["spot", "on-demand"]);
        assert_eq!(stack.cpu_limit.as_deref(), Some("1000"));
        assert_eq!(stack.ami_alias, "al2023@latest");

        let bare = default_pool_params(
            "demo",
            env(&[("DEFAULT_CAPACITY_TYPES", ""), ("DEFAULT_CPU_LIMIT", " ")]),
        );
        assert!(bare.capacity_types.is_empty());
        assert_eq!(bare.cpu_limit, None);
        let bottlerocket =
            default_pool_params("demo", env(&[("DEFAULT_AMI_ALIAS", "bottlerocket@latest")]));
        assert_eq!(bottlerocket.ami_alias, "bottlerocket@latest");
    }

    #[test]
    fn a_poll_interval_of_zero_or_an_empty_budget_is_refused_not_spun_on() {
        let lookup = |vars: &'static [(&'static str, &'static str)]| {
            HandlerConfig::from_lookup(move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            })
        };
        assert_eq!(lookup(&[]), Ok(HandlerConfig::default()));
        let tenth = lookup(&[("POLL_INTERVAL", "100ms"), ("INVOCATION_BUDGET", "2")]);
        assert_eq!(
            tenth,
            Ok(HandlerConfig {
                poll_interval: Duration::from_millis(100),
                budget: Duration::from_secs(2),
            })
        );
        for (vars, names) in [
            (&[("POLL_INTERVAL", "0")][..], "POLL_INTERVAL"),
            (&[("POLL_INTERVAL", "0.05")][..], "POLL_INTERVAL"),
            (&[("POLL_INTERVAL", "soon")][..], "POLL_INTERVAL"),
            (&[("INVOCATION_BUDGET", "0")][..], "INVOCATION_BUDGET"),
            (&[("INVOCATION_BUDGET", "900")][..], "INVOCATION_BUDGET"),
        ] {
            let err = lookup(vars).expect_err(names);
            assert!(err.starts_with(names), "{err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_environment_value_is_a_duration_or_none_never_a_panic(text in "\\PC{0,24}") {
            let _ = parse_duration(&text);
        }
    }

    #[test]
    fn durations_are_read_as_seconds_or_milliseconds() {
        let cases = [
            ("5", Some(Duration::from_secs(5))),
            ("5s", Some(Duration::from_secs(5))),
            ("0.5", Some(Duration::from_millis(500))),
            ("250ms", Some(Duration::from_millis(250))),
            (" 2 ", Some(Duration::from_secs(2))),
            ("-1", None),
            ("fast", None),
            ("NaN", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), want, "{text:?}");
        }
    }
}
