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
/// is not one nodewright launches. A reserved one keeps the replacement out of the
/// reservation its node was taken from, as Karpenter marks that reservation unavailable.
pub fn offering(a: &Avoid) -> Option<Offering> {
    let capacity_type = CapacityType::parse(&a.capacity_type)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_avoid_keeps_its_offering_out_for_every_capacity_type_nodewright_launches() {
        let avoid = |c: &str| Avoid {
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: c.into(),
        };
        let cases = [
            ("spot", Some(CapacityType::Spot)),
            ("on-demand", Some(CapacityType::OnDemand)),
            ("reserved", Some(CapacityType::Reserved)),
            ("", None),
            ("dedicated", None),
        ];
        for (c, want) in cases {
            assert_eq!(offering(&avoid(c)).map(|o| o.capacity_type), want, "{c:?}");
        }
    }
}
