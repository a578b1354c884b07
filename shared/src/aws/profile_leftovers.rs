//! The IAM and EC2 side of collecting instance profiles nodewright created and nothing uses
//! any more ([`InstanceProfileLeftovers`]); which ones is `disruption::leftovers`'s
//! decision. Ownership is read from IAM on every call (path, name and the ownership tag),
//! never assumed from a name: another cluster's names may share this cluster's prefix.

use std::collections::BTreeSet;

use crate::api::labels::OWNERSHIP_TAG;

use super::errors::{AwsError, ErrorClass, api};
use super::instance_profiles::{INSTANCE_PROFILE_PATH, profile_name_prefix, roles};
use super::ports::{InstanceProfileLeftovers, OwnInstanceProfile};

/// The IAM and EC2 clients of one cluster's profile collection.
#[derive(Debug, Clone)]
pub struct ProfileLeftoversAdapter {
    iam: aws_sdk_iam::Client,
    ec2: aws_sdk_ec2::Client,
    cluster: String,
}

impl ProfileLeftoversAdapter {
    pub fn new(
        iam: aws_sdk_iam::Client,
        ec2: aws_sdk_ec2::Client,
        cluster: impl Into<String>,
    ) -> ProfileLeftoversAdapter {
        ProfileLeftoversAdapter {
            iam,
            ec2,
            cluster: cluster.into(),
        }
    }

    fn named_ours(&self, name: &str, path: &str) -> bool {
        path == INSTANCE_PROFILE_PATH && name.starts_with(&profile_name_prefix(&self.cluster))
    }

    /// The profile as IAM has it now, if it is this cluster's (None: gone). ListInstanceProfiles
    /// does not return tags, GetInstanceProfile does.
    async fn read_own(&self, name: &str) -> Result<Option<OwnInstanceProfile>, AwsError> {
        let answer = self
            .iam
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await;
        let out = match answer {
            Ok(out) => out,
            Err(e) => {
                let err = api(|source| AwsError::GetInstanceProfile {
                    name: name.to_string(),
                    source,
                })(e);
                return match err.class() {
                    ErrorClass::NotFound => Ok(None),
                    _ => Err(err),
                };
            }
        };
        let Some(profile) = out.instance_profile() else {
            return Ok(None);
        };
        let tagged = profile
            .tags()
            .iter()
            .any(|t| t.key() == OWNERSHIP_TAG && t.value() == self.cluster);
        if !tagged || !self.named_ours(profile.instance_profile_name(), profile.path()) {
            return Err(self.not_ours(name));
        }
        Ok(Some(OwnInstanceProfile {
            name: profile.instance_profile_name().to_string(),
            roles: roles(profile),
            created: jiff::Timestamp::from_second(profile.create_date().secs()).ok(),
        }))
    }

    fn not_ours(&self, name: &str) -> AwsError {
        AwsError::NotOurInstanceProfile {
            name: name.to_string(),
            prefix: profile_name_prefix(&self.cluster),
            path: INSTANCE_PROFILE_PATH,
        }
    }
}

/// Already gone is done.
fn gone_is_fine(err: AwsError) -> Result<(), AwsError> {
    match err.class() {
        ErrorClass::NotFound => Ok(()),
        _ => Err(err),
    }
}

impl InstanceProfileLeftovers for ProfileLeftoversAdapter {
    async fn own_instance_profiles(&self) -> Result<Vec<OwnInstanceProfile>, AwsError> {
        let mut names = Vec::new();
        let mut pages = self
            .iam
            .list_instance_profiles()
            .path_prefix(INSTANCE_PROFILE_PATH)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api(|source| AwsError::ListInstanceProfiles { source }))?;
            // The path prefix is checked again: it is what scopes the listing, and a
            // listing that ignored it would otherwise reach every profile in the account.
            names.extend(
                page.instance_profiles()
                    .iter()
                    .filter(|p| self.named_ours(p.instance_profile_name(), p.path()))
                    .map(|p| p.instance_profile_name().to_string()),
            );
        }
        let mut own = Vec::with_capacity(names.len());
        for name in names {
            match self.read_own(&name).await {
                Ok(Some(profile)) => own.push(profile),
                Ok(None) => {}
                // Named like ours, not tagged as ours: another cluster's, left alone.
                Err(AwsError::NotOurInstanceProfile { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(own)
    }

    async fn instance_profiles_in_use(&self) -> Result<BTreeSet<String>, AwsError> {
        let mut in_use = BTreeSet::new();
        let mut pages = self
            .ec2
            .describe_iam_instance_profile_associations()
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api(|source| {
                AwsError::DescribeIamInstanceProfileAssociations { source }
            }))?;
            for association in page.iam_instance_profile_associations() {
                // Every state counts (associating, associated, disassociating): a profile
                // on its way on or off an instance is still in use.
                if let Some(arn) = association.iam_instance_profile().and_then(|p| p.arn()) {
                    in_use.insert(arn.rsplit('/').next().unwrap_or(arn).to_string());
                }
            }
        }
        Ok(in_use)
    }

    async fn delete_instance_profile(&self, name: &str) -> Result<(), AwsError> {
        if !name.starts_with(&profile_name_prefix(&self.cluster)) {
            return Err(self.not_ours(name));
        }
        // Read again: the tag, the path and the roles as IAM has them now.
        let Some(profile) = self.read_own(name).await? else {
            return Ok(());
        };
        for role in &profile.roles {
            let removed = self
                .iam
                .remove_role_from_instance_profile()
                .instance_profile_name(name)
                .role_name(role)
                .send()
                .await;
            if let Err(e) = removed {
                gone_is_fine(api(|source| AwsError::RemoveRoleFromInstanceProfile {
                    name: name.to_string(),
                    source,
                })(e))?;
            }
        }
        let deleted = self
            .iam
            .delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(e) => gone_is_fine(api(|source| AwsError::DeleteInstanceProfile {
                name: name.to_string(),
                source,
            })(e)),
        }
    }
}
