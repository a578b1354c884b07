//! Writing the adoption tags: one CreateTags per instance that lacks any (the tags name
//! its own node claim and hashes, so no two instances share a call).

use k8s_openapi::api::core::v1::Node;

use crate::api::labels::OWNERSHIP_TAG;
use crate::aws::{InstanceInventory, OwnedInstance};
use crate::kube::{EventSink, EventType, KarpenterLeader, ObjectKind, parse_provider_id};
use jiff::Timestamp;

use super::{Hashes, missing_tags};

/// What one adoption pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adoption {
    /// Instances that became this cluster's in this pass.
    pub adopted: Vec<String>,
    /// Instances whose tags could not be written (logged; the next pass tries again).
    pub failed: Vec<String>,
}

/// Gives each of `instances` the adoption tags it lacks, and records them in `instances`
/// too, so the caller acts on them as EC2 now tags them. `hashes` gives an instance's
/// NodePool and EC2NodeClass hashes where the caller knows them.
pub async fn adopt<E: InstanceInventory>(
    ec2: &E,
    cluster: &str,
    instances: &mut [OwnedInstance],
    hashes: impl Fn(&OwnedInstance) -> Hashes,
) -> Adoption {
    let mut done = Adoption::default();
    for instance in instances.iter_mut() {
        let missing = missing_tags(instance, cluster, &hashes(instance));
        if missing.is_empty() {
            continue;
        }
        match ec2
            .create_tags(std::slice::from_ref(&instance.id), &missing)
            .await
        {
            Ok(()) => {
                if missing.contains_key(OWNERSHIP_TAG) {
                    tracing::info!(
                        instance = instance.id,
                        nodepool = instance.tags.get(super::KARPENTER_NODEPOOL_TAG),
                        "adopted an instance Karpenter launched for this cluster"
                    );
                    done.adopted.push(instance.id.clone());
                }
                instance.tags.extend(missing);
            }
            Err(e) => {
                tracing::warn!(
                    instance = instance.id,
                    error = crate::error_chain(&e),
                    "tagging an instance Karpenter launched failed; it is not adopted yet"
                );
                done.failed.push(instance.id.clone());
            }
        }
    }
    done
}

/// An `Adopted` Event on the Node of each instance adopted in `done` (found by provider
/// id among `nodes`; an instance without a Node yet gets none).
pub async fn announce<K: EventSink>(
    kube: &K,
    nodes: &[Node],
    instances: &[OwnedInstance],
    done: &Adoption,
) {
    for id in &done.adopted {
        let Some(node) = nodes.iter().find(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(parse_provider_id)
                .is_some_and(|p| &p.instance_id == id)
        }) else {
            continue;
        };
        let pool = instances
            .iter()
            .find(|i| &i.id == id)
            .and_then(|i| i.tags.get(super::KARPENTER_NODEPOOL_TAG))
            .map_or("?", String::as_str);
        let note = format!(
            "instance {id}, launched by Karpenter for NodePool {pool}, is now nodewright's: \
             interruptions, expiry, drift and consolidation apply to it"
        );
        let name = node.metadata.name.as_deref().unwrap_or_default();
        kube.object_event(ObjectKind::Node, name, "Adopted", &note, EventType::Normal)
            .await;
    }
}

/// One adoption pass over `instances`: when any lacks an adoption tag and Karpenter's
/// controller has stopped, tags them ([`adopt`]) and posts each adopted node's Event
/// ([`announce`]). `Err` says why nothing was adopted ([`karpenter_stopped`]). With
/// nothing to adopt (a steady state) Karpenter's Lease is not read.
pub async fn take_over<E, K>(
    ec2: &E,
    kube: &K,
    cluster: &str,
    nodes: &[Node],
    instances: &mut [OwnedInstance],
    hashes: impl Fn(&OwnedInstance) -> Hashes,
    now: Timestamp,
) -> Result<Adoption, String>
where
    E: InstanceInventory,
    K: EventSink + KarpenterLeader,
{
    let lacking = |i: &OwnedInstance| !missing_tags(i, cluster, &hashes(i)).is_empty();
    if !instances.iter().any(lacking) {
        return Ok(Adoption::default());
    }
    karpenter_stopped(kube, now).await?;
    let done = adopt(ec2, cluster, instances, &hashes).await;
    announce(kube, nodes, instances, &done).await;
    Ok(done)
}

/// `Err` with why when nothing may be adopted now: Karpenter's controller still runs, or
/// whether it does cannot be read (then nothing is adopted either: a guess would risk two
/// autoscalers on the same nodes).
pub async fn karpenter_stopped<K: KarpenterLeader>(kube: &K, now: Timestamp) -> Result<(), String> {
    let leases = kube.karpenter_leases().await.map_err(|e| {
        format!(
            "cannot read Karpenter's leader-election Lease: {}",
            crate::error_chain(&e)
        )
    })?;
    match super::karpenter_running(&leases, now) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}
