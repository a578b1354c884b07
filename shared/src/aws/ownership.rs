//! Which instances are this cluster's, asked of EC2 just before acting: unlike
//! [`super::InstanceInventory::list_owned`], terminated instances are included (EC2 keeps
//! describing them for about an hour), so a `terminated` notification can still be checked.

use super::Ec2Adapter;
use super::convert::filter;
use super::errors::AwsError;
use super::instances::OwnedInstance;

pub trait InstanceOwnership: Send + Sync {
    /// The instances among `ids` that EC2 describes, whatever their state and tags; an id
    /// EC2 does not know is simply absent.
    fn describe_ids(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<OwnedInstance>, AwsError>> + Send;
    /// The instances Karpenter launched for this cluster (its NodePool and EC2NodeClass tags
    /// and `eks:eks-cluster-name=<cluster>`, as Karpenter lists them) that are pending or
    /// running, adopted or not (see [`crate::takeover`]).
    fn list_karpenter(&self) -> impl Future<Output = Result<Vec<OwnedInstance>, AwsError>> + Send;
}

impl InstanceOwnership for Ec2Adapter {
    async fn describe_ids(&self, ids: &[String]) -> Result<Vec<OwnedInstance>, AwsError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let filter = aws_sdk_ec2::types::Filter::builder()
            .name("instance-id")
            .set_values(Some(ids.to_vec()))
            .build();
        self.describe(vec![filter]).await
    }

    async fn list_karpenter(&self) -> Result<Vec<OwnedInstance>, AwsError> {
        self.describe(vec![
            filter(
                &format!("tag:{}", crate::provision::launch::EKS_CLUSTER_NAME_TAG),
                std::slice::from_ref(&self.cluster),
            ),
            filter(
                "tag-key",
                &[crate::takeover::KARPENTER_NODEPOOL_TAG.to_string()],
            ),
            filter(
                "tag-key",
                &[crate::takeover::KARPENTER_NODECLASS_TAG.to_string()],
            ),
            filter(
                "instance-state-name",
                &["pending".to_string(), "running".to_string()],
            ),
        ])
        .await
    }
}

/// Whether `instance` carries `nodewright.io/cluster=<cluster>`.
pub fn is_owned(instance: &OwnedInstance, cluster: &str) -> bool {
    instance
        .tags
        .get(crate::api::labels::OWNERSHIP_TAG)
        .is_some_and(|c| c == cluster)
}
