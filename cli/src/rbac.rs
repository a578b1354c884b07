//! `nodewright rbac`: the ClusterRole, Role and bindings the functions need when the stack
//! maps their IAM roles to a Kubernetes group instead of granting cluster-admin
//! (parameter `KubernetesAccess=rbac`).

use std::process::ExitCode;

use clap::Args as ClapArgs;

/// The manifests, with `GROUP` where the group's name goes.
const MANIFESTS: &str = include_str!("rbac.yaml");

/// The group the stack's access entries name in least-privilege mode (`template.yaml`,
/// `KubernetesGroups`).
pub const DEFAULT_GROUP: &str = "nodewright";

#[derive(ClapArgs)]
pub struct Args {
    /// The Kubernetes group the functions' access entries map to.
    #[arg(long, default_value = DEFAULT_GROUP)]
    pub group: String,
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

pub fn run(args: &Args) -> ExitCode {
    match manifests(&args.group) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
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
    fn a_group_eks_refuses_is_an_error_naming_it() {
        for bad in ["", "system:masters", "a b", "x\ny"] {
            assert_eq!(manifests(bad), Err(RbacError::Group(bad.to_string())));
        }
    }
}
