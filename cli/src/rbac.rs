//! `nodewright rbac`: each function's ClusterRole, Role and bindings, and the state objects
//! they keep, for the stack's default least-privilege mode (parameter
//! `KubernetesAccess=rbac`), where the access entries map each function's IAM role to a
//! Kubernetes group of its own: `<prefix>-provisioner`, `<prefix>-interruption`,
//! `<prefix>-sweeper`.

use clap::Args as ClapArgs;
use serde::Deserialize as _;

use crate::exit::Exit;

/// The manifests, with `GROUP` where the groups' prefix goes.
const MANIFESTS: &str = include_str!("rbac.yaml");

/// The prefix of the groups the stack's access entries name in least-privilege mode
/// (`template.yaml`, `KubernetesGroups`).
pub const DEFAULT_GROUP_PREFIX: &str = "nodewright";

/// Manifests print as YAML documents or as one JSON `List`, both for `kubectl apply -f -`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ManifestOutput {
    Yaml,
    Json,
}

#[derive(ClapArgs)]
pub struct Args {
    /// The prefix of the Kubernetes groups the functions' access entries map to
    /// (`<prefix>-provisioner`, `<prefix>-interruption`, `<prefix>-sweeper`).
    #[arg(long, default_value = DEFAULT_GROUP_PREFIX)]
    pub group_prefix: String,
    #[arg(short, long, value_enum, default_value_t = ManifestOutput::Yaml)]
    pub output: ManifestOutput,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RbacError {
    #[error(
        "--group-prefix {0:?} does not begin Kubernetes groups an EKS access entry can \
         name (non-empty, no \"system:\" prefix, letters, digits and -_.:@ only)"
    )]
    Group(String),
}

/// The manifests for the groups `<prefix>-<function>`.
pub fn manifests(prefix: &str) -> Result<String, RbacError> {
    let valid = !prefix.is_empty()
        && !prefix.starts_with("system:")
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:@".contains(c));
    if !valid {
        return Err(RbacError::Group(prefix.to_string()));
    }
    Ok(MANIFESTS.replace("GROUP-", &format!("{prefix}-")))
}

/// The manifests as one `kind: List`, for `-o json`.
pub fn as_list(yaml: &str) -> Result<serde_json::Value, serde_yaml::Error> {
    let items = serde_yaml::Deserializer::from_str(yaml)
        .map(serde_json::Value::deserialize)
        .filter(|v| !matches!(v, Ok(serde_json::Value::Null)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}))
}

pub fn run(args: &Args) -> Exit {
    let text = match manifests(&args.group_prefix) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Usage;
        }
    };
    match args.output {
        ManifestOutput::Yaml => print!("{text}"),
        ManifestOutput::Json => match as_list(&text).map(|l| serde_json::to_string_pretty(&l)) {
            Ok(Ok(json)) => println!("{json}"),
            Ok(Err(e)) => {
                eprintln!("error: the manifests could not be written as JSON: {e}");
                return Exit::Usage;
            }
            Err(e) => {
                eprintln!("error: the manifests could not be read: {e}");
                return Exit::Usage;
            }
        },
    }
    Exit::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_function_s_group_is_named_in_its_two_bindings_and_no_placeholder_is_left() {
        let text = manifests("platform").unwrap();
        for function in ["provisioner", "interruption", "sweeper"] {
            let subject = format!("kind: Group, name: platform-{function}}}");
            assert_eq!(text.matches(&subject).count(), 2, "{function}");
        }
        assert!(!text.contains("GROUP"), "{text}");
    }

    #[test]
    fn as_json_the_manifests_are_one_list_of_every_document() {
        let text = manifests(DEFAULT_GROUP_PREFIX).unwrap();
        let documents = text.matches("\nkind: ").count() + usize::from(text.starts_with("kind: "));
        let list = as_list(&text).unwrap();
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"].as_array().unwrap().len(), documents);
    }

    #[test]
    fn a_group_eks_refuses_is_an_error_naming_it() {
        for bad in ["", "system:masters", "a b", "x\ny"] {
            assert_eq!(manifests(bad), Err(RbacError::Group(bad.to_string())));
        }
    }
}
