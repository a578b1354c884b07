//! Taking over from Karpenter: with the stack's `TakeOverFromKarpenter` on, the instances
//! Karpenter launched for this cluster are adopted, given the tags nodewright's own
//! launches carry, so that every path that acts only on this cluster's instances
//! (interruptions, expiry, drift, consolidation, hygiene) acts on them too. Nothing else
//! about them changes: Karpenter's own tags, labels and NodeClaims stay, so the rollback,
//! which takes nodewright's tags off again, hands them back (docs/migrate-from-karpenter.md).
//!
//! Karpenter's instances are known as Karpenter itself lists them: its NodePool and
//! EC2NodeClass tags and `eks:eks-cluster-name=<cluster>` (from v1.0 its tagging controller
//! writes that tag on every instance it runs). An instance of another cluster's nodewright
//! is never adopted. Only tags an instance lacks are written, so adoption repeats safely
//! and what it first recorded stays. Drift from then on is nodewright's: the NodePool and
//! EC2NodeClass hashes are stamped as the objects are at adoption (Karpenter kept its
//! nodes matching them until it stopped), the security groups as EC2 describes the
//! instance, and its AMI only when the class selects that AMI now.

mod adopt;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;

use crate::api::labels::OWNERSHIP_TAG;
use crate::aws::{InstanceState, OwnedInstance};
use crate::disruption::{IMAGE_TAG, NODECLASS_HASH_TAG, NODEPOOL_HASH_TAG, SECURITY_GROUPS_TAG};
use crate::provision::launch::{EKS_CLUSTER_NAME_TAG, NODECLAIM_TAG, NODEPOOL_TAG};

pub use adopt::{Adoption, adopt, announce, karpenter_stopped, take_over};

/// On an instance nodewright adopted: who launched it.
pub const ADOPTED_TAG: &str = "nodewright.io/adopted-from";
pub const KARPENTER_NODEPOOL_TAG: &str = "karpenter.sh/nodepool";
pub const KARPENTER_NODECLAIM_TAG: &str = "karpenter.sh/nodeclaim";
pub const KARPENTER_NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";
/// Karpenter's finalizer on the Nodes it launched: it removes it once the instance is gone.
/// With Karpenter stopped, nodewright does that for the nodes it removes.
pub const KARPENTER_TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// Karpenter's leader-election Lease (its default name, which its chart keeps).
pub const KARPENTER_LEASE: &str = "karpenter-leader-election";
/// Where Karpenter's chart is installed: kube-system (its getting-started guide) or its own
/// namespace.
pub const KARPENTER_NAMESPACES: [&str; 2] = ["kube-system", "karpenter"];

/// Why nothing may be adopted now, if Karpenter's controller still runs: a Lease of
/// [`KARPENTER_LEASE`] has a holder and was renewed within its duration. Two autoscalers
/// would act on the same nodes, and nodewright would take Karpenter's finalizer off nodes
/// Karpenter is still terminating.
pub fn karpenter_running(leases: &[Lease], now: Timestamp) -> Option<String> {
    leases.iter().find_map(|lease| {
        let spec = lease.spec.as_ref()?;
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
        let renewed = spec.renew_time.as_ref()?.0;
        let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
        let until = renewed + jiff::SignedDuration::from_secs(duration);
        (now < until).then(|| {
            format!(
                "Karpenter's controller {holder} holds {}/{KARPENTER_LEASE} (renewed at {renewed}): \
                 scale it to zero before nodewright adopts its nodes",
                lease.metadata.namespace.as_deref().unwrap_or_default()
            )
        })
    })
}

/// `TAKE_OVER_KARPENTER` as the template sets it: `true` or `false`; unset is off.
pub fn setting_from(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("") | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(format!(
            "TAKE_OVER_KARPENTER={other:?}: expected true or false"
        )),
    }
}

/// Whether Karpenter launched `instance` for `cluster`.
pub fn karpenters(instance: &OwnedInstance, cluster: &str) -> bool {
    instance.tags.contains_key(KARPENTER_NODEPOOL_TAG)
        && instance.tags.contains_key(KARPENTER_NODECLASS_TAG)
        && instance
            .tags
            .get(EKS_CLUSTER_NAME_TAG)
            .is_some_and(|v| v == cluster)
}

/// What a launch of an adopted instance's NodePool and EC2NodeClass would use now; `None`
/// where not known (the interruption function does not read them, the sweeper does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hashes {
    pub nodepool: Option<String>,
    pub nodeclass: Option<String>,
    /// The AMIs the class resolves to now. The instance's own AMI is recorded for drift
    /// only when it is among them: one nodewright would not select (an accelerated variant,
    /// an older AMI of a selector) would otherwise read as drift at the first sweep.
    pub images: Option<Vec<String>>,
}

/// The tags nodewright gives `instance` on adopting it that it does not carry yet; empty
/// when there is nothing to write or the instance is not one to adopt (not Karpenter's
/// for `cluster`, another cluster's, or on its way out).
pub fn missing_tags(
    instance: &OwnedInstance,
    cluster: &str,
    hashes: &Hashes,
) -> BTreeMap<String, String> {
    let live = matches!(
        instance.state,
        InstanceState::Pending | InstanceState::Running
    );
    let theirs = instance
        .tags
        .get(OWNERSHIP_TAG)
        .is_some_and(|c| c != cluster);
    if !live || theirs || !karpenters(instance, cluster) {
        return BTreeMap::new();
    }
    let pool = &instance.tags[KARPENTER_NODEPOOL_TAG];
    let claim = instance
        .tags
        .get(KARPENTER_NODECLAIM_TAG)
        .unwrap_or(&instance.id);
    let mut wanted = vec![
        (OWNERSHIP_TAG, Some(cluster.to_string())),
        (ADOPTED_TAG, Some("karpenter".to_string())),
        (NODEPOOL_TAG, Some(pool.clone())),
        (NODECLAIM_TAG, Some(claim.clone())),
        (IMAGE_TAG, selected_image(instance, hashes)),
        (NODEPOOL_HASH_TAG, hashes.nodepool.clone()),
        (NODECLASS_HASH_TAG, hashes.nodeclass.clone()),
    ];
    if !instance.security_groups.is_empty() {
        let hash = crate::disruption::security_groups_hash(&instance.security_groups);
        wanted.push((SECURITY_GROUPS_TAG, Some(hash)));
    }
    wanted
        .into_iter()
        .filter(|(k, _)| !instance.tags.contains_key(*k))
        .filter_map(|(k, v)| Some((k.to_string(), v?)))
        .collect()
}

/// The instance's AMI when the class selects it now.
fn selected_image(instance: &OwnedInstance, hashes: &Hashes) -> Option<String> {
    let image = instance.image_id.as_ref()?;
    hashes
        .images
        .as_ref()?
        .contains(image)
        .then(|| image.clone())
}
