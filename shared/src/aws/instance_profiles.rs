//! Instance profiles for EC2NodeClasses that name a `role`, as Karpenter's
//! `pkg/providers/instanceprofile` does: one profile per (cluster, role), created on first
//! use and given the role. The name is derived from the cluster and role, so every
//! invocation, container and function finds the same profile without remembering it.
//!
//! Differences from Karpenter, on purpose: Karpenter names profiles per EC2NodeClass and
//! removes a role it does not expect; nodewright names them per role (two classes with one
//! role share a profile) and never takes a role out of a profile, because a profile holding
//! another role than its name says was changed by hand and a person should look at it.

use aws_sdk_iam::types::{InstanceProfile, Tag};
use sha2::{Digest, Sha256};

use crate::api::labels::OWNERSHIP_TAG;

use super::errors::{AwsError, api};
use super::ports::InstanceProfiles;

/// The IAM path of every profile nodewright creates; the IAM policy allows creating and
/// changing profiles under it only.
pub const INSTANCE_PROFILE_PATH: &str = "/nodewright/";

/// IAM's limit on an instance profile name (IAM API reference, `InstanceProfileName`:
/// 1-128 characters of `[\w+=,.@-]`).
const MAX_PROFILE_NAME: usize = 128;
/// Hex digits of the (cluster, role) hash in the name: 64 bits, as for launch templates.
const HASH_HEX_LEN: usize = 16;
const NAME_PREFIX: &str = "nodewright_";

/// The role name in what an EC2NodeClass `role` says: a name, or a path or ARN whose last
/// `/` segment is the name (AddRoleToInstanceProfile takes the bare name; Karpenter strips
/// the path the same way).
pub fn role_name(role: &str) -> &str {
    let role = role.trim();
    role.rsplit('/').next().unwrap_or(role)
}

/// `nodewright_<cluster>_<16 hex digits of sha256(cluster, role name)>`. EKS cluster names
/// are at most 100 characters, which fits IAM's 128 exactly; a longer one is cut, and the
/// hash, taken over the whole name, still tells clusters apart.
pub fn instance_profile_name(cluster: &str, role: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(cluster.as_bytes());
    // A separator no cluster name contains, so ("a", "bc") and ("ab", "c") differ.
    hasher.update(b"\n");
    hasher.update(role_name(role).as_bytes());
    let hash = hex::encode(hasher.finalize());
    format!("{}{}", profile_name_prefix(cluster), &hash[..HASH_HEX_LEN])
}

/// What every profile name of `cluster` starts with: `nodewright_<cluster>_`, the cluster
/// cut to what IAM's length limit leaves. Another cluster's names may share it (cluster
/// `a` and cluster `a_b`), so the ownership tag decides, never the name alone.
pub fn profile_name_prefix(cluster: &str) -> String {
    let room = MAX_PROFILE_NAME - NAME_PREFIX.len() - 1 - HASH_HEX_LEN;
    let cluster: String = cluster
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "+=,.@-_".contains(*c))
        .take(room)
        .collect();
    format!("{NAME_PREFIX}{cluster}_")
}

/// The IAM adapter of one cluster: implements [`InstanceProfiles`].
#[derive(Debug, Clone)]
pub struct IamAdapter {
    client: aws_sdk_iam::Client,
    cluster: String,
}

impl IamAdapter {
    pub fn new(client: aws_sdk_iam::Client, cluster: impl Into<String>) -> IamAdapter {
        IamAdapter {
            client,
            cluster: cluster.into(),
        }
    }

    /// The profile's role names, or None if there is no such profile.
    async fn roles_of(&self, name: &str) -> Result<Option<Vec<String>>, AwsError> {
        let result = self
            .client
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await;
        match result {
            Ok(out) => Ok(Some(out.instance_profile().map(roles).unwrap_or_default())),
            Err(e) => {
                let err = api(|source| AwsError::GetInstanceProfile {
                    name: name.to_string(),
                    source,
                })(e);
                if err.class() == super::ErrorClass::NotFound {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Creates the profile; Ok(None) if another caller created it first.
    async fn create(&self, name: &str) -> Result<Option<Vec<String>>, AwsError> {
        let tag = Tag::builder()
            .key(OWNERSHIP_TAG)
            .value(&self.cluster)
            .build()
            .map_err(|source| AwsError::BuildRequest {
                request: "CreateInstanceProfile",
                source,
            })?;
        let result = self
            .client
            .create_instance_profile()
            .instance_profile_name(name)
            .path(INSTANCE_PROFILE_PATH)
            .tags(tag)
            .send()
            .await;
        match result {
            Ok(out) => Ok(Some(out.instance_profile().map(roles).unwrap_or_default())),
            Err(e) => {
                let err = api(|source| AwsError::CreateInstanceProfile {
                    name: name.to_string(),
                    source,
                })(e);
                if code_of(&err) == Some("EntityAlreadyExists") {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Adds the role; a concurrent caller having added it first is success.
    async fn add_role(&self, name: &str, role: &str) -> Result<(), AwsError> {
        let result = self
            .client
            .add_role_to_instance_profile()
            .instance_profile_name(name)
            .role_name(role)
            .send()
            .await;
        let Err(e) = result else {
            return Ok(());
        };
        let err = api(|source| AwsError::AddRoleToInstanceProfile {
            name: name.to_string(),
            source,
        })(e);
        // A profile holds at most one role: LimitExceeded means one is in it already
        // (another invocation won the race, or someone put another role there).
        if !matches!(code_of(&err), Some("LimitExceeded" | "EntityAlreadyExists")) {
            return Err(err);
        }
        match self.roles_of(name).await?.as_deref() {
            Some(held) if held.iter().any(|r| r == role) => Ok(()),
            Some([holds, ..]) => Err(AwsError::InstanceProfileHoldsOtherRole {
                name: name.to_string(),
                role: role.to_string(),
                holds: holds.clone(),
            }),
            _ => Err(err),
        }
    }
}

pub(crate) fn roles(p: &InstanceProfile) -> Vec<String> {
    p.roles()
        .iter()
        .map(|r| r.role_name().to_string())
        .collect()
}

pub(crate) fn code_of(err: &AwsError) -> Option<&str> {
    match err {
        AwsError::CreateInstanceProfile { source, .. }
        | AwsError::AddRoleToInstanceProfile { source, .. } => source.code.as_deref(),
        _ => None,
    }
}

impl InstanceProfiles for IamAdapter {
    async fn ensure_instance_profile(&self, role: &str) -> Result<String, AwsError> {
        let role = role_name(role);
        if role.is_empty() {
            return Err(AwsError::InvalidSelector {
                field: "spec.role",
                reason: "empty; name an IAM role".into(),
            });
        }
        let name = instance_profile_name(&self.cluster, role);
        let held = match self.roles_of(&name).await? {
            Some(held) => held,
            None => match self.create(&name).await? {
                Some(held) => held,
                // Created by someone else between our Get and Create: read theirs.
                None => self
                    .roles_of(&name)
                    .await?
                    .ok_or_else(|| AwsError::InstanceProfileVanished { name: name.clone() })?,
            },
        };
        match held.as_slice() {
            [] => self.add_role(&name, role).await?,
            held if held.iter().any(|r| r == role) => {}
            [holds, ..] => {
                return Err(AwsError::InstanceProfileHoldsOtherRole {
                    name,
                    role: role.to_string(),
                    holds: holds.clone(),
                });
            }
        }
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_is_named_by_its_last_path_segment() {
        let cases = [
            ("nodes", "nodes"),
            ("  nodes ", "nodes"),
            ("team/nodes", "nodes"),
            ("arn:aws:iam::123456789012:role/nodewright/nodes", "nodes"),
            ("", ""),
        ];
        for (given, want) in cases {
            assert_eq!(role_name(given), want, "{given:?}");
        }
    }

    #[test]
    fn profile_names_are_stable_per_cluster_and_role_and_fit_iam() {
        let name = instance_profile_name("demo", "nodes");
        assert!(name.starts_with("nodewright_demo_"), "{name}");
        assert_eq!(name.len(), "nodewright_demo_".len() + HASH_HEX_LEN);
        // The same role however it is spelt, the same profile.
        assert_eq!(
            instance_profile_name("demo", "arn:aws:iam::1:role/x/nodes"),
            name
        );
        assert_ne!(instance_profile_name("demo", "other"), name);
        assert_ne!(instance_profile_name("demo2", "nodes"), name);
        assert_ne!(
            instance_profile_name("ab", "c"),
            instance_profile_name("a", "bc")
        );

        let longest = "c".repeat(100);
        let long = instance_profile_name(&longest, "nodes");
        assert_eq!(long.len(), MAX_PROFILE_NAME, "{long}");
        let too_long = instance_profile_name(&"c".repeat(140), "nodes");
        assert!(too_long.len() <= MAX_PROFILE_NAME);
        assert_ne!(too_long, long);
        assert!(
            long.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+=,.@-_".contains(c))
        );
    }
}
