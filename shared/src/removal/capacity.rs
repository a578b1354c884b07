//! What a removal asks of the provisioning core: capacity for the pods of one or more nodes
//! being removed (none of which counts as capacity), keeping away from the offerings their
//! removals name. A batch of interruptions asks once, for all its nodes.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;

use super::record::Avoid;
use crate::aws::Cloud;
use crate::catalog::CapacityType;
use crate::kube::Cluster;
use crate::provision::{Offering, ProvisionError, Provisioner, ReplaceReport};

pub trait Capacity: Send + Sync {
    fn replace_for(
        &self,
        nodes: &[String],
        pods: &[Pod],
        avoid: &[Avoid],
        now: SystemTime,
    ) -> impl Future<Output = Result<ReplaceReport, ProvisionError>> + Send;
}

/// The provisioning core's offering for a record's `avoid`; `None` when its capacity type
/// is not one nodewright launches.
pub fn offering(a: &Avoid) -> Option<Offering> {
    let capacity_type = match a.capacity_type.as_str() {
        crate::api::labels::SPOT => CapacityType::Spot,
        crate::api::labels::ON_DEMAND => CapacityType::OnDemand,
        _ => return None,
    };
    Some(Offering {
        instance_type: a.instance_type.clone(),
        zone: a.zone.clone(),
        capacity_type,
    })
}

impl<K, A> Capacity for tokio::sync::Mutex<Provisioner<K, A>>
where
    K: Cluster,
    A: Cloud + Send,
{
    async fn replace_for(
        &self,
        nodes: &[String],
        pods: &[Pod],
        avoid: &[Avoid],
        now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        let offerings: Vec<Offering> = avoid.iter().filter_map(offering).collect();
        self.lock()
            .await
            .replace_nodes(nodes, pods, &offerings, None, now)
            .await
    }
}

impl<T: Capacity> Capacity for &T {
    async fn replace_for(
        &self,
        nodes: &[String],
        pods: &[Pod],
        avoid: &[Avoid],
        now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        (**self).replace_for(nodes, pods, avoid, now).await
    }
}
