//! [`CloudView`] over EC2: the instances tagged `nodewright.io/cluster=<cluster>`, and those
//! Karpenter launched for the cluster (a Karpenter-shaped fleet, for the takeover), with their
//! user data (from DescribeInstanceAttribute, or from the launch template they were launched
//! from when the instance itself reports none).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use aws_sdk_ec2::types::InstanceAttributeName;
use base64::Engine as _;
use futures::future::BoxFuture;
use jiff::Timestamp;

use super::cloud::{CloudView, CloudViewError, InstanceState, SimInstance};

/// Ownership tag nodewright puts on every instance it launches (DESIGN.md).
pub const CLUSTER_TAG: &str = "nodewright.io/cluster";
/// What Karpenter tags its instances with: the cluster's name and its NodePool.
const EKS_CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";
const KARPENTER_NODEPOOL_TAG: &str = "karpenter.sh/nodepool";
/// Tags EC2 adds to instances launched from a launch template (CreateFleet, RunInstances).
const LT_ID_TAG: &str = "aws:ec2launchtemplate:id";
const LT_VERSION_TAG: &str = "aws:ec2launchtemplate:version";

/// Lists the cluster's instances through an `aws_sdk_ec2::Client` (moto locally).
pub struct Ec2CloudView {
    client: aws_sdk_ec2::Client,
    cluster: String,
    /// User data never changes for an instance, so it is fetched once.
    user_data: Mutex<HashMap<String, Option<String>>>,
}

impl std::fmt::Debug for Ec2CloudView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ec2CloudView")
            .field("cluster", &self.cluster)
            .finish()
    }
}

fn failed(what: String, e: impl std::error::Error + Send + Sync + 'static) -> CloudViewError {
    CloudViewError {
        what,
        source: Some(Box::new(e)),
    }
}

fn decode(b64: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

impl Ec2CloudView {
    pub fn new(client: aws_sdk_ec2::Client, cluster: impl Into<String>) -> Ec2CloudView {
        Ec2CloudView {
            client,
            cluster: cluster.into(),
            user_data: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an instance with `tags` bootstraps into this cluster: nodewright's, or
    /// Karpenter's (its NodePool tag and the cluster's name).
    fn joins(&self, tags: &BTreeMap<String, String>) -> bool {
        let tag = |k: &str| tags.get(k).map(String::as_str);
        tag(CLUSTER_TAG) == Some(&self.cluster)
            || (tag(EKS_CLUSTER_NAME_TAG) == Some(&self.cluster)
                && tags.contains_key(KARPENTER_NODEPOOL_TAG))
    }

    /// The instances that join this cluster, read in one call (their tags decide).
    async fn list(&self) -> Result<Vec<SimInstance>, CloudViewError> {
        let mut out = Vec::new();
        let mut pages = self.client.describe_instances().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| failed("DescribeInstances failed".into(), e))?;
            for inst in page.reservations().iter().flat_map(|r| r.instances()) {
                let Some(id) = inst.instance_id() else {
                    continue;
                };
                let Some(state) = inst
                    .state()
                    .and_then(|s| s.name())
                    .and_then(|n| InstanceState::from_ec2(n.as_str()))
                else {
                    continue;
                };
                let tags: BTreeMap<String, String> = inst
                    .tags()
                    .iter()
                    .filter_map(|t| {
                        Some((t.key()?.to_string(), t.value().unwrap_or("").to_string()))
                    })
                    .collect();
                if !self.joins(&tags) {
                    continue;
                }
                let launch_time = inst
                    .launch_time()
                    .and_then(|t| Timestamp::from_second(t.secs()).ok())
                    .unwrap_or(Timestamp::UNIX_EPOCH);
                let lt = tags
                    .get(LT_ID_TAG)
                    .map(|id| (id.clone(), tags.get(LT_VERSION_TAG).cloned()));
                let user_data = self.user_data_of(id, lt).await?;
                out.push(SimInstance {
                    instance_id: id.to_string(),
                    instance_type: inst
                        .instance_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    zone: inst
                        .placement()
                        .and_then(|p| p.availability_zone())
                        .unwrap_or("")
                        .to_string(),
                    private_dns_name: inst.private_dns_name().unwrap_or("").to_string(),
                    private_ip: inst.private_ip_address().map(String::from),
                    state,
                    launch_time,
                    user_data,
                    tags,
                });
            }
        }
        Ok(out)
    }

    async fn user_data_of(
        &self,
        id: &str,
        lt: Option<(String, Option<String>)>,
    ) -> Result<Option<String>, CloudViewError> {
        if let Some(known) = self
            .user_data
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
        {
            return Ok(known.clone());
        }
        let attr = self
            .client
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(InstanceAttributeName::UserData)
            .send()
            .await
            .map_err(|e| {
                failed(
                    format!("DescribeInstanceAttribute userData of {id} failed"),
                    e,
                )
            })?;
        let mut text = attr
            .user_data()
            .and_then(|u| u.value())
            .filter(|v| !v.is_empty())
            .and_then(decode);
        if text.is_none()
            && let Some((lt_id, version)) = lt
        {
            let versions = self
                .client
                .describe_launch_template_versions()
                .launch_template_id(&lt_id)
                .versions(version.unwrap_or_else(|| "$Default".to_string()))
                .send()
                .await
                .map_err(|e| {
                    failed(
                        format!("DescribeLaunchTemplateVersions of {lt_id} failed"),
                        e,
                    )
                })?;
            text = versions
                .launch_template_versions()
                .first()
                .and_then(|v| v.launch_template_data())
                .and_then(|d| d.user_data())
                .and_then(decode);
        }
        self.user_data
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), text.clone());
        Ok(text)
    }
}

impl CloudView for Ec2CloudView {
    fn instances(&self) -> BoxFuture<'_, Result<Vec<SimInstance>, CloudViewError>> {
        Box::pin(self.list())
    }
}
