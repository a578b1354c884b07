//! Finding drifted nodes: for each of nodewright's nodes, what its instance was launched
//! with (its tags) against what a launch of its NodePool and EC2NodeClass would use now
//! ([`nodewright::disruption::drift`] decides), its labels against its NodePool's
//! requirements ([`requirements_drift`]) and its subnet against the class's subnets now
//! ([`subnet_drift`]). What a launch would use now is asked of
//! the provisioning core through [`LaunchResolver`], the AMI and security-group
//! resolution its launches use; a class that cannot be resolved this sweep is not
//! compared (never drift on a guess), and says so in the logs.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Node;
use nodewright::api::{EC2NodeClass, NodePool};
use nodewright::aws::{AwsError, ImageResolver, NetworkDiscovery, OwnedInstance};
use nodewright::disruption::{
    CurrentLaunch, Snapshot, drift, nodeclass_hash, nodepool_hash, requirements_drift,
    security_groups_hash, subnet_drift,
};
use nodewright::provision::Provisioner;

use super::NoReplacement;

/// What a launch of an EC2NodeClass would be given now.
pub trait LaunchResolver: Send + Sync {
    /// The image ids the class's `amiSelectorTerms` select now (one per architecture).
    fn images(
        &self,
        class: &EC2NodeClass,
    ) -> impl Future<Output = Result<Vec<String>, AwsError>> + Send;
    /// The security group ids the class's `securityGroupSelectorTerms` select now.
    fn security_groups(
        &self,
        class: &EC2NodeClass,
    ) -> impl Future<Output = Result<Vec<String>, AwsError>> + Send;
    /// The subnet ids the class's `subnetSelectorTerms` select now.
    fn subnets(
        &self,
        class: &EC2NodeClass,
    ) -> impl Future<Output = Result<Vec<String>, AwsError>> + Send;
}

impl<K, A> LaunchResolver for tokio::sync::Mutex<Provisioner<K, A>>
where
    K: Send + Sync,
    A: ImageResolver + NetworkDiscovery + Send + Sync,
{
    async fn images(&self, class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        let core = self.lock().await;
        let version = core.cluster().kubernetes_version.clone();
        let images = core
            .aws()
            .resolve(&class.spec.ami_selector_terms, &version)
            .await?;
        Ok(images.into_iter().map(|i| i.id).collect())
    }

    async fn security_groups(&self, class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        let core = self.lock().await;
        let groups = core
            .aws()
            .security_groups(&class.spec.security_group_selector_terms)
            .await?;
        Ok(groups.into_iter().map(|g| g.id).collect())
    }

    async fn subnets(&self, class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        let core = self.lock().await;
        let subnets = core
            .aws()
            .subnets(&class.spec.subnet_selector_terms)
            .await?;
        Ok(subnets.into_iter().map(|s| s.id).collect())
    }
}

impl<T: LaunchResolver> LaunchResolver for &T {
    async fn images(&self, class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        (**self).images(class).await
    }

    async fn security_groups(&self, class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        (**self).security_groups(class).await
    }

    async fn subnets(&self, class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        (**self).subnets(class).await
    }
}

impl LaunchResolver for NoReplacement {
    async fn images(&self, _class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        match *self {}
    }

    async fn security_groups(&self, _class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        match *self {}
    }

    async fn subnets(&self, _class: &EC2NodeClass) -> Result<Vec<String>, AwsError> {
        match *self {}
    }
}

/// Sets `drifted` on the snapshot's nodes whose instance no longer matches, or whose
/// labels (`nodes`) its NodePool's requirements now exclude.
pub(crate) async fn mark_drifted<L: LaunchResolver>(
    snapshot: &mut Snapshot,
    nodes: &[Node],
    pools: &[NodePool],
    classes: &[EC2NodeClass],
    instances: &[OwnedInstance],
    resolver: &L,
) {
    let mut current: HashMap<&str, CurrentLaunch> = HashMap::new();
    let mut subnets: HashMap<&str, Vec<String>> = HashMap::new();
    for class in classes {
        let name = class.metadata.name.as_str();
        let images = resolver.images(class).await;
        let groups = resolver.security_groups(class).await;
        let selected = resolver.subnets(class).await;
        for (what, e) in [
            ("AMIs", images.as_ref().err()),
            ("security groups", groups.as_ref().err()),
            ("subnets", selected.as_ref().err()),
        ] {
            if let Some(e) = e {
                tracing::warn!(class = name, what, error = %nodewright::error_chain(e), "not resolved: not compared for drift this sweep");
            }
        }
        if let Ok(selected) = selected {
            subnets.insert(name, selected);
        }
        current.insert(
            name,
            CurrentLaunch {
                nodepool_hash: None,
                nodeclass_hash: Some(nodeclass_hash(class)),
                images: images.ok(),
                security_groups_hash: groups.ok().map(|g| security_groups_hash(&g)),
            },
        );
    }
    let tags: HashMap<&str, &OwnedInstance> =
        instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let labels: HashMap<&str, &BTreeMap<String, String>> = nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n.metadata.labels.as_ref()?)))
        .collect();
    for node in &mut snapshot.nodes {
        let Some(pool) = pools
            .iter()
            .find(|p| Some(p.metadata.name.as_str()) == node.pool.as_deref())
        else {
            continue;
        };
        let class = pool.spec.template.spec.node_class_ref.name.as_str();
        let (Some(instance), Some(now)) = (
            node.instance_id.as_deref().and_then(|id| tags.get(id)),
            current.get(class),
        ) else {
            continue;
        };
        let now = CurrentLaunch {
            nodepool_hash: Some(nodepool_hash(pool)),
            ..now.clone()
        };
        node.drifted = drift(&instance.tags, &now)
            .or_else(|| {
                let labels = labels.get(node.name.as_str())?;
                requirements_drift(labels, &pool.spec.template.spec.requirements)
            })
            .or_else(|| {
                subnet_drift(
                    instance.subnet_id.as_deref(),
                    subnets.get(class).map(Vec::as_slice),
                )
            });
        if let Some(why) = &node.drifted {
            tracing::info!(node = node.name, why, "drifted");
        }
    }
}
