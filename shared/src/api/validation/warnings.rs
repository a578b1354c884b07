//! Fields nodewright reads and accepts but does not act on (or acts on only in part), and
//! `nodewright.io/` annotations it does not know: said as warnings, never silently dropped.
//! A warning does not make a document unusable.

use crate::api::annotations::{NODEPOOL_ANNOTATIONS, PREFIX};
use crate::api::diagnostics::FieldError;
use crate::api::{EC2NodeClass, NodePool};

use super::launchable;

fn warn(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// What a NodePool asks that nodewright does not carry out.
pub fn node_pool_warnings(np: &NodePool) -> Vec<FieldError> {
    let mut out = Vec::new();
    if !np.spec.template.metadata.annotations.is_empty() {
        out.push(warn(
            "spec.template.metadata.annotations",
            "ignored: nodes get the template's labels and taints through kubelet flags, which \
             cannot carry annotations (a change still counts as drift)",
        ));
    }
    if np.spec.replicas.is_some() && np.spec.disruption.consolidation_policy != Default::default() {
        out.push(warn(
            "spec.disruption.consolidationPolicy",
            "ignored: a static NodePool (replicas set) is never consolidated",
        ));
    }
    if np.spec.replicas.is_some()
        && np.spec.disruption.consolidate_after
            != crate::api::Disruption::default().consolidate_after
    {
        out.push(warn(
            "spec.disruption.consolidateAfter",
            "ignored: a static NodePool (replicas set) is never consolidated",
        ));
    }
    for (i, r) in np.spec.template.spec.requirements.iter().enumerate() {
        for (suffix, m) in launchable::requirement_findings(r).warnings {
            out.push(warn(
                format!("spec.template.spec.requirements[{i}]{suffix}"),
                m,
            ));
        }
    }
    for key in np.metadata.annotations.keys() {
        if key.starts_with(PREFIX) && !NODEPOOL_ANNOTATIONS.contains(&key.as_str()) {
            out.push(warn(
                format!("metadata.annotations[{key}]"),
                format!(
                    "ignored: not an annotation nodewright reads on a NodePool; it reads {}",
                    NODEPOOL_ANNOTATIONS.join(", ")
                ),
            ));
        }
    }
    out
}

/// What an EC2NodeClass asks that nodewright does not carry out.
pub fn node_class_warnings(nc: &EC2NodeClass) -> Vec<FieldError> {
    let s = &nc.spec;
    let mut out = Vec::new();
    if s.context.is_some() {
        out.push(warn(
            "spec.context",
            "ignored: nodewright does not send a context with CreateFleet",
        ));
    }
    if s.instance_store_policy.is_some() {
        out.push(warn(
            "spec.instanceStorePolicy",
            "partly ignored: the instance store counts as the node's ephemeral storage when \
             planning, but nodewright's user data does not build the RAID0 array; set it up in \
             userData",
        ));
    }
    if s.kubelet
        .as_ref()
        .is_some_and(|k| k.eviction_max_pod_grace_period.is_some())
    {
        out.push(warn(
            "spec.kubelet.evictionMaxPodGracePeriod",
            "ignored: nodewright does not pass it to the kubelet",
        ));
    }
    out
}
