//! AMIs for `amiSelectorTerms`: aliases through AWS's public SSM parameters, everything
//! else through DescribeImages; the newest image per architecture wins.
//!
//! Parameter paths follow Karpenter's `pkg/providers/amifamily/{al2023,al2,bottlerocket}.go`
//! and the EKS user guide ("Retrieve recommended Amazon Linux AMI IDs", "Retrieve
//! recommended Bottlerocket AMI IDs"). Only the standard variants are resolved (no
//! NVIDIA/Neuron AMIs).

use std::collections::BTreeMap;

use aws_sdk_ec2::types::ImageState;

use crate::api::AmiSelectorTerm;

use super::convert::{filter, kubernetes_arch};
use super::errors::{AwsError, api};
use super::ports::ImageResolver;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    pub name: String,
    /// `amd64` or `arm64`, as the `kubernetes.io/arch` label spells it.
    pub arch: String,
    /// As EC2 reports it (`2024-08-07T12:00:00.000Z`); same-format strings order by time.
    pub creation_date: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmiFamily {
    Al2023,
    Al2,
    Bottlerocket,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AliasVersion {
    Latest,
    /// A release, as written after the `@` (`v20240807`, `v1.20.0`).
    Pinned(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmiAlias {
    pub family: AmiFamily,
    pub version: AliasVersion,
}

impl AmiAlias {
    /// Parses `family@version` (`al2023@latest`, `bottlerocket@v1.20.0`).
    pub fn parse(alias: &str) -> Result<AmiAlias, AwsError> {
        let invalid = |reason: &str| AwsError::InvalidAlias {
            alias: alias.to_string(),
            reason: reason.to_string(),
        };
        let (family, version) = alias
            .split_once('@')
            .ok_or_else(|| invalid("expected family@version, for example al2023@latest"))?;
        let family = match family {
            "al2023" => AmiFamily::Al2023,
            "al2" => AmiFamily::Al2,
            "bottlerocket" => AmiFamily::Bottlerocket,
            _ => return Err(invalid("family must be one of al2023, al2, bottlerocket")),
        };
        let version = match version {
            "latest" => AliasVersion::Latest,
            "" => {
                return Err(invalid(
                    "the version after @ is empty; use latest or a release",
                ));
            }
            v => AliasVersion::Pinned(v.to_string()),
        };
        Ok(AmiAlias { family, version })
    }
}

/// EC2 architectures an alias resolves, in EC2's spelling.
pub const ALIAS_ARCHES: [&str; 2] = ["x86_64", "arm64"];

/// The public SSM parameter holding the image id of an alias for a Kubernetes
/// `major.minor` and an EC2 architecture (`x86_64`, `arm64`); None for other
/// architectures.
pub fn ssm_parameter_path(
    alias: &AmiAlias,
    kubernetes_version: &str,
    arch: &str,
) -> Option<String> {
    if !ALIAS_ARCHES.contains(&arch) {
        return None;
    }
    let k = kubernetes_version;
    let eks = format!("/aws/service/eks/optimized-ami/{k}");
    Some(match (&alias.family, &alias.version) {
        (AmiFamily::Al2023, AliasVersion::Latest) => {
            format!("{eks}/amazon-linux-2023/{arch}/standard/recommended/image_id")
        }
        (AmiFamily::Al2023, AliasVersion::Pinned(v)) => format!(
            "{eks}/amazon-linux-2023/{arch}/standard/amazon-eks-node-al2023-{arch}-standard-{k}-{v}/image_id"
        ),
        (AmiFamily::Al2, version) => {
            let (dir, node) = if arch == "arm64" {
                ("amazon-linux-2-arm64", "amazon-eks-arm64-node")
            } else {
                ("amazon-linux-2", "amazon-eks-node")
            };
            match version {
                AliasVersion::Latest => format!("{eks}/{dir}/recommended/image_id"),
                AliasVersion::Pinned(v) => format!("{eks}/{dir}/{node}-{k}-{v}/image_id"),
            }
        }
        (AmiFamily::Bottlerocket, version) => {
            // Bottlerocket releases are written v1.20.0 but the path carries 1.20.0.
            let v = match version {
                AliasVersion::Latest => "latest",
                AliasVersion::Pinned(v) => v.trim_start_matches('v'),
            };
            format!("/aws/service/bottlerocket/aws-k8s-{k}/{arch}/{v}/image_id")
        }
    })
}

/// The newest image (by creation date, then id) of each architecture.
pub fn newest_per_arch(images: impl IntoIterator<Item = Image>) -> Vec<Image> {
    let mut newest: BTreeMap<String, Image> = BTreeMap::new();
    for image in images {
        match newest.get(&image.arch) {
            Some(kept) if (&kept.creation_date, &kept.id) >= (&image.creation_date, &image.id) => {}
            _ => {
                newest.insert(image.arch.clone(), image);
            }
        }
    }
    newest.into_values().collect()
}

/// Default AMI owners when a term names neither an id nor an owner (Karpenter's
/// defaulting: the account's own images and Amazon's).
const DEFAULT_OWNERS: [&str; 2] = ["self", "amazon"];
/// GetParameters accepts at most 10 names per call (SSM API reference).
const GET_PARAMETERS_MAX: usize = 10;

/// Resolves AMIs through EC2 and SSM.
#[derive(Debug, Clone)]
pub struct ImageAdapter {
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
}

impl ImageAdapter {
    pub fn new(ec2: aws_sdk_ec2::Client, ssm: aws_sdk_ssm::Client) -> ImageAdapter {
        ImageAdapter { ec2, ssm }
    }

    /// Image ids named by SSM parameters; parameters that do not exist are skipped.
    async fn parameter_values(&self, names: &[String]) -> Result<Vec<String>, AwsError> {
        let mut values = Vec::new();
        for chunk in names.chunks(GET_PARAMETERS_MAX) {
            let out = self
                .ssm
                .get_parameters()
                .set_names(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(api(|source| AwsError::GetParameters { source }))?;
            values.extend(out.parameters().iter().filter_map(|p| p.value.clone()));
        }
        Ok(values)
    }

    async fn describe(
        &self,
        ids: Vec<String>,
        owners: Vec<String>,
        filters: Vec<(String, Vec<String>)>,
    ) -> Result<Vec<Image>, AwsError> {
        let items = self
            .ec2
            .describe_images()
            .set_image_ids((!ids.is_empty()).then_some(ids))
            .set_owners((!owners.is_empty()).then_some(owners))
            .set_filters(Some(filters.iter().map(|(n, v)| filter(n, v)).collect()))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(api(|source| AwsError::DescribeImages { source }))?;
        Ok(items
            .into_iter()
            .filter(|i| i.state.as_ref().is_none_or(|s| *s == ImageState::Available))
            .filter_map(|i| {
                Some(Image {
                    id: i.image_id?,
                    name: i.name.unwrap_or_default(),
                    arch: kubernetes_arch(i.architecture?.as_str())?.to_string(),
                    creation_date: i.creation_date.unwrap_or_default(),
                })
            })
            .collect())
    }

    async fn resolve_term(
        &self,
        term: &AmiSelectorTerm,
        kubernetes_version: &str,
    ) -> Result<Vec<Image>, AwsError> {
        if let Some(alias) = &term.alias {
            let alias = AmiAlias::parse(alias)?;
            let paths: Vec<String> = ALIAS_ARCHES
                .iter()
                .filter_map(|arch| ssm_parameter_path(&alias, kubernetes_version, arch))
                .collect();
            let ids = self.parameter_values(&paths).await?;
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            return self.describe(ids, Vec::new(), Vec::new()).await;
        }
        let mut ids = Vec::new();
        if let Some(id) = &term.id {
            ids.push(id.clone());
        }
        if let Some(parameter) = &term.ssm_parameter {
            let values = self
                .parameter_values(std::slice::from_ref(parameter))
                .await?;
            if values.is_empty() {
                return Ok(Vec::new());
            }
            ids.extend(values);
        }
        let mut filters = Vec::new();
        if let Some(name) = &term.name {
            filters.push(("name".to_string(), vec![name.clone()]));
        }
        for (key, value) in &term.tags {
            if value == "*" {
                filters.push(("tag-key".to_string(), vec![key.clone()]));
            } else {
                filters.push((format!("tag:{key}"), vec![value.clone()]));
            }
        }
        if ids.is_empty() && filters.is_empty() && term.owner.is_none() {
            // An empty term would select every image visible to the account.
            return Ok(Vec::new());
        }
        let owners = match &term.owner {
            Some(owner) => vec![owner.clone()],
            None if ids.is_empty() => DEFAULT_OWNERS.iter().map(|o| o.to_string()).collect(),
            None => Vec::new(),
        };
        self.describe(ids, owners, filters).await
    }
}

impl ImageResolver for ImageAdapter {
    async fn resolve(
        &self,
        terms: &[AmiSelectorTerm],
        kubernetes_version: &str,
    ) -> Result<Vec<Image>, AwsError> {
        let mut images = Vec::new();
        for term in terms {
            images.extend(self.resolve_term(term, kubernetes_version).await?);
        }
        Ok(newest_per_arch(images))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_map_to_the_public_ssm_parameters_aws_publishes() {
        let table = [
            (
                "al2023@latest",
                "x86_64",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/recommended/image_id",
            ),
            (
                "al2023@v20240807",
                "arm64",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.30-v20240807/image_id",
            ),
            (
                "al2@latest",
                "x86_64",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id",
            ),
            (
                "al2@latest",
                "arm64",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id",
            ),
            (
                "al2@v20240807",
                "arm64",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20240807/image_id",
            ),
            (
                "bottlerocket@latest",
                "arm64",
                "/aws/service/bottlerocket/aws-k8s-1.30/arm64/latest/image_id",
            ),
            (
                "bottlerocket@v1.20.0",
                "x86_64",
                "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/1.20.0/image_id",
            ),
        ];
        for (alias, arch, path) in table {
            let parsed = AmiAlias::parse(alias).expect(alias);
            assert_eq!(
                ssm_parameter_path(&parsed, "1.30", arch).as_deref(),
                Some(path),
                "{alias} {arch}"
            );
        }
    }

    #[test]
    fn malformed_aliases_are_refused_with_the_alias_named() {
        for alias in ["al2023", "windows@latest", "al2@"] {
            let err = AmiAlias::parse(alias).unwrap_err();
            assert!(err.to_string().contains(alias), "{err}");
        }
    }

    fn image(id: &str, arch: &str, date: &str) -> Image {
        Image {
            id: id.into(),
            name: String::new(),
            arch: arch.into(),
            creation_date: date.into(),
        }
    }

    #[test]
    fn the_newest_image_of_each_architecture_wins() {
        let newest = newest_per_arch(vec![
            image("ami-old", "amd64", "2024-01-01T00:00:00.000Z"),
            image("ami-new", "amd64", "2024-06-01T00:00:00.000Z"),
            image("ami-arm", "arm64", "2023-01-01T00:00:00.000Z"),
        ]);
        let ids: Vec<&str> = newest.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["ami-new", "ami-arm"]);
    }
}
