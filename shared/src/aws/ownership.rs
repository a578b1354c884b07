//! Which instances are this cluster's, asked of EC2 just before acting: unlike
//! [`super::InstanceInventory::list_owned`], terminated instances are included (EC2 keeps
//! describing them for about an hour), so a `terminated` notification can still be checked.

use super::Ec2Adapter;
use super::errors::AwsError;
use super::instances::OwnedInstance;

pub trait InstanceOwnership: Send + Sync {
    /// The instances among `ids` that EC2 describes, whatever their state and tags; an id
    /// EC2 does not know is simply absent.
    fn describe_ids(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<OwnedInstance>, AwsError>> + Send;
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
}

/// Whether `instance` carries `nodewright.io/cluster=<cluster>`.
pub fn is_owned(instance: &OwnedInstance, cluster: &str) -> bool {
    instance
        .tags
        .get(crate::api::labels::OWNERSHIP_TAG)
        .is_some_and(|c| c == cluster)
}
