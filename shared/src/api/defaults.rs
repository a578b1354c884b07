//! The defaults Karpenter's v1 CRDs apply when an object is created, applied on load so that
//! every later decision sees concrete values.
//!
//! Values come from the `+kubebuilder:default` markers of `karpenter.sh/v1` NodePool and
//! `karpenter.k8s.aws/v1` EC2NodeClass. Block device mappings are deliberately not defaulted
//! here: the root volume depends on the AMI family, which is resolved when launching.

use super::{Duration, EC2NodeClass, MetadataOptions, NillableDuration, NodePool};

pub const NODE_CLASS_GROUP: &str = "karpenter.k8s.aws";
pub const NODE_CLASS_KIND: &str = "EC2NodeClass";
/// `spec.template.spec.expireAfter` default in Karpenter v1: 30 days.
pub const DEFAULT_EXPIRE_AFTER: Duration = Duration::from_secs(720 * 3600);

/// Fills in what Karpenter would: nodeClassRef group and kind, and expireAfter. The
/// disruption block (WhenEmptyOrUnderutilized, consolidateAfter 0s, budgets [10%]) is
/// already defaulted field by field when it is deserialized.
pub fn default_node_pool(np: &mut NodePool) {
    let spec = &mut np.spec.template.spec;
    if spec.node_class_ref.group.is_empty() {
        spec.node_class_ref.group = NODE_CLASS_GROUP.into();
    }
    if spec.node_class_ref.kind.is_empty() {
        spec.node_class_ref.kind = NODE_CLASS_KIND.into();
    }
    if spec.expire_after.is_none() {
        spec.expire_after = Some(NillableDuration::After(DEFAULT_EXPIRE_AFTER));
    }
}

/// Karpenter v1's instance metadata defaults: IMDS on, IPv6 endpoint off, IMDSv2 required and
/// a hop limit of 1 so that pods cannot reach the node's credentials (v1beta1 used 2).
pub fn default_metadata_options() -> MetadataOptions {
    MetadataOptions {
        http_endpoint: Some("enabled".into()),
        http_protocol_ipv6: Some("disabled".into()),
        http_put_response_hop_limit: Some(1),
        http_tokens: Some("required".into()),
    }
}

/// Fills each unset metadata option with Karpenter's default.
pub fn default_node_class(nc: &mut EC2NodeClass) {
    let defaults = default_metadata_options();
    let options = nc
        .spec
        .metadata_options
        .get_or_insert_with(|| defaults.clone());
    options.http_endpoint = options.http_endpoint.take().or(defaults.http_endpoint);
    options.http_protocol_ipv6 = options
        .http_protocol_ipv6
        .take()
        .or(defaults.http_protocol_ipv6);
    options.http_put_response_hop_limit = options
        .http_put_response_hop_limit
        .take()
        .or(defaults.http_put_response_hop_limit);
    options.http_tokens = options.http_tokens.take().or(defaults.http_tokens);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ConsolidationPolicy, load::parse};

    fn pool(yaml: &str) -> NodePool {
        let value: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
        parse(value).unwrap()
    }

    #[test]
    fn a_minimal_node_pool_gets_karpenters_v1_defaults() {
        let mut np = pool("spec: {template: {spec: {nodeClassRef: {name: default}}}}");
        default_node_pool(&mut np);
        let spec = &np.spec.template.spec;
        assert_eq!(spec.node_class_ref.group, "karpenter.k8s.aws");
        assert_eq!(spec.node_class_ref.kind, "EC2NodeClass");
        assert_eq!(
            spec.expire_after.map(|d| d.to_string()).as_deref(),
            Some("720h")
        );
        let d = &np.spec.disruption;
        assert_eq!(
            d.consolidation_policy,
            ConsolidationPolicy::WhenEmptyOrUnderutilized
        );
        assert_eq!(d.consolidate_after.to_string(), "0s");
        assert_eq!(d.budgets.len(), 1);
        assert_eq!(d.budgets[0].nodes, "10%");
    }

    #[test]
    fn values_the_user_wrote_are_kept() {
        let mut np = pool(
            "spec:
               template: {spec: {nodeClassRef: {group: example.com, kind: Other, name: x}, expireAfter: Never}}
               disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s, budgets: []}",
        );
        default_node_pool(&mut np);
        let spec = &np.spec.template.spec;
        assert_eq!(
            (
                spec.node_class_ref.group.as_str(),
                spec.node_class_ref.kind.as_str()
            ),
            ("example.com", "Other")
        );
        assert_eq!(spec.expire_after, Some(NillableDuration::Never));
        assert_eq!(np.spec.disruption.consolidate_after.to_string(), "30s");
        assert!(
            np.spec.disruption.budgets.is_empty(),
            "an explicit empty list stays empty"
        );
    }

    #[test]
    fn metadata_options_are_filled_field_by_field() {
        let value = serde_json::json!({"metadata": {"name": "c"}, "spec": {"metadataOptions": {"httpPutResponseHopLimit": 2}}});
        let mut nc: EC2NodeClass = parse(value).unwrap();
        default_node_class(&mut nc);
        let o = nc.spec.metadata_options.unwrap();
        assert_eq!(o.http_put_response_hop_limit, Some(2));
        assert_eq!(o.http_endpoint.as_deref(), Some("enabled"));
        assert_eq!(o.http_protocol_ipv6.as_deref(), Some("disabled"));
        assert_eq!(o.http_tokens.as_deref(), Some("required"));
    }
}
