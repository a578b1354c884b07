//! `nodewright rbac`: the ClusterRole, Role and bindings the functions need when the stack
//! maps their IAM roles to a Kubernetes group instead of granting cluster-admin
//! (parameter `KubernetesAccess=rbac`).

use clap::Args as ClapArgs;
use serde::Deserialize as _;

use crate::exit::Exit;

/// The manifests, with `GROUP` where the group's name goes.
const MANIFESTS: &str = include_str!("rbac.yaml");

/// The group the stack's access entries name in least-privilege mode (`template.yaml`,
/// `KubernetesGroups`).
pub const DEFAULT_GROUP: &str = "nodewright";

/// Manifests print as YAML documents or as one JSON `List`, both for `kubectl apply -f -`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ManifestOutput {
    Yaml,
    Json,
}

#[derive(ClapArgs)]
pub struct Args {
    /// The Kubernetes group the functions' access entries map to.
    #[arg(long, default_value = DEFAULT_GROUP)]
    pub group: String,
    #[arg(short, long, value_enum, default_value_t = ManifestOutput::Yaml)]
    pub output: ManifestOutput,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RbacError {
    #[error(
        "--group {0:?} is not a Kubernetes group an EKS access entry can name \
         (non-empty, no \"system:\" prefix, letters, digits and -_.:@ only)"
    )]
    Group(String),
}

/// The manifests for `group`.
pub fn manifests(group: &str) -> Result<String, RbacError> {
    let valid = !group.is_empty()
        && !group.starts_with("system:")
        && group
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:@".contains(c));
    if !valid {
        return Err(RbacError::Group(group.to_string()));
    }
    Ok(MANIFESTS.replace("name: GROUP", &format!("name: {group}")))
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
    let text = match manifests(&args.group) {
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
    fn the_group_is_named_in_both_bindings_and_nowhere_else_is_the_placeholder_left() {
        let text = manifests("platform-nodewright").unwrap();
        assert_eq!(text.matches("name: platform-nodewright").count(), 2);
        assert!(!text.contains("GROUP"), "{text}");
    }

    #[test]
    fn as_json_the_manifests_are_one_list_of_every_document() {
        let text = manifests(DEFAULT_GROUP).unwrap();
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
