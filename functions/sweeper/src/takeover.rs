//! The sweep's adoption pass (the template's `TakeOverFromKarpenter`): the instances
//! Karpenter launched for this cluster get nodewright's tags before the sweep acts, and
//! those adopted now join the sweep's own list of this cluster's instances, so the sweep
//! that adopts them also acts on them. Only the sweeper knows the NodePools and
//! EC2NodeClasses and what their AMI selectors resolve to, so only it stamps those for
//! drift (the interruption function adopts an instance it is warned about without them).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use nodewright::api::{EC2NodeClass, NodePool};
use nodewright::aws::{OwnedInstance, OwnedInstances};
use nodewright::disruption::{IMAGE_TAG, nodeclass_hash, nodepool_hash};
use nodewright::kube::{EventSink, KarpenterLeader};
use nodewright::takeover::{Hashes, KARPENTER_NODEPOOL_TAG, take_over};

use super::{LaunchResolver, State};

/// The NodePools and EC2NodeClasses nodewright can use, as this sweep read them.
pub(crate) struct Config<'a> {
    pub pools: &'a [NodePool],
    pub classes: &'a [EC2NodeClass],
}

/// What one adoption pass did.
#[derive(Debug, Default)]
pub(crate) struct Pass {
    /// Adopted now, tagged as EC2 now tags them.
    pub adopted: Vec<OwnedInstance>,
    /// Why nothing was adopted, when Karpenter still runs or its Lease cannot be read.
    pub paused: Option<String>,
}

/// Adopts what is left to adopt. A failure is logged: adoption waits for the next sweep,
/// the rest of this one goes on.
pub(crate) async fn adopt_karpenters<K, E, R>(
    state: &State<K, E, R>,
    nodes: &[Node],
    config: Config<'_>,
) -> Pass
where
    K: EventSink + KarpenterLeader,
    E: OwnedInstances,
    R: LaunchResolver,
{
    if !state.take_over_karpenter {
        return Pass::default();
    }
    let mut found = match state.ec2.list_karpenter().await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(
                error = nodewright::error_chain(&e),
                "listing Karpenter's instances failed; none adopted this sweep"
            );
            return Pass::default();
        }
    };
    let images = images_of_classes(state, &found, &config).await;
    let hashes = |i: &OwnedInstance| {
        let (pool, class) = pool_and_class(i, &config);
        Hashes {
            nodepool: pool.map(nodepool_hash),
            nodeclass: class.map(nodeclass_hash),
            images: class.and_then(|c| images.get(c.metadata.name.as_str()).cloned()),
        }
    };
    let adopted = take_over(
        &state.ec2,
        &state.kube,
        &state.cluster,
        nodes,
        &mut found,
        hashes,
        state.clock.now(),
    )
    .await;
    match adopted {
        Ok(done) => {
            found.retain(|i| done.adopted.contains(&i.id));
            Pass {
                adopted: found,
                paused: None,
            }
        }
        Err(why) => {
            tracing::warn!(why, "not adopting Karpenter's nodes this sweep");
            Pass {
                adopted: Vec::new(),
                paused: Some(why),
            }
        }
    }
}

/// The NodePool the instance was launched for and that pool's class, when nodewright can
/// use them.
fn pool_and_class<'a>(
    instance: &OwnedInstance,
    config: &Config<'a>,
) -> (Option<&'a NodePool>, Option<&'a EC2NodeClass>) {
    let pool = instance
        .tags
        .get(KARPENTER_NODEPOOL_TAG)
        .and_then(|name| config.pools.iter().find(|p| &p.metadata.name == name));
    let class = pool.and_then(|p| {
        let name = &p.spec.template.spec.node_class_ref.name;
        config.classes.iter().find(|c| &c.metadata.name == name)
    });
    (pool, class)
}

/// What each class's AMI selector resolves to now, for the classes of instances whose
/// AMI is not recorded yet (resolved once per class; one that fails is left out).
async fn images_of_classes<K, E, R: LaunchResolver>(
    state: &State<K, E, R>,
    found: &[OwnedInstance],
    config: &Config<'_>,
) -> HashMap<String, Vec<String>> {
    let mut images = HashMap::new();
    let Some(resolver) = &state.replacer else {
        return images;
    };
    for instance in found.iter().filter(|i| !i.tags.contains_key(IMAGE_TAG)) {
        let Some(class) = pool_and_class(instance, config).1 else {
            continue;
        };
        let name = class.metadata.name.clone();
        if images.contains_key(&name) {
            continue;
        }
        match resolver.images(class).await {
            Ok(resolved) => {
                images.insert(name, resolved);
            }
            Err(e) => tracing::warn!(
                class = name,
                error = nodewright::error_chain(&e),
                "AMIs not resolved: adopted instances' AMIs not recorded this sweep"
            ),
        }
    }
    images
}
