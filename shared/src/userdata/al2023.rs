//! Amazon Linux 2023: a nodeadm `NodeConfig` in the last MIME part, custom parts before it.
//!
//! Follows Karpenter's `nodeadm.go`: nodeadm merges every `application/node.eks.aws` part
//! in order, so ours comes last and its fields win; a non-MIME custom user data becomes a
//! NodeConfig part when it parses as a YAML mapping, a shell part otherwise. Unlike
//! Karpenter (which puts taints in `kubelet.config.registerWithTaints`), taints go in
//! `kubelet.flags` as `--register-with-taints=`, next to `--node-labels=`, so every family
//! carries node identity the same way. NodeConfig schema: nodeadm `node.eks.aws/v1alpha1`
//! (awslabs/amazon-eks-ami `nodeadm/api/v1alpha1`).

use std::collections::BTreeMap;

use serde_yaml::{Mapping, Value};

use super::mime::{MimeArchive, MimePart, NODE_CONFIG_CONTENT_TYPE, SHELL_CONTENT_TYPE};
use super::{NodeBootstrap, UserDataError, cluster_dns, kubelet, looks_like_mime, max_pods};

pub(super) fn render(input: &NodeBootstrap, custom: Option<&str>) -> Result<String, UserDataError> {
    if input.service_cidr.is_empty() {
        return Err(UserDataError::InvalidField {
            field: "service CIDR",
            value: String::new(),
            allowed: "the cluster's service IPv4 CIDR, required by nodeadm (spec.cluster.cidr)",
        });
    }
    let mut archive = MimeArchive::default();
    if let Some(custom) = custom {
        if looks_like_mime(custom) {
            archive.parts.extend(MimeArchive::parse(custom)?.parts);
        } else if serde_yaml::from_str::<Mapping>(custom).is_ok() {
            archive
                .parts
                .push(MimePart::new(NODE_CONFIG_CONTENT_TYPE, custom));
        } else {
            archive
                .parts
                .push(MimePart::new(SHELL_CONTENT_TYPE, custom));
        }
    }
    archive
        .parts
        .push(MimePart::new(NODE_CONFIG_CONTENT_TYPE, node_config(input)?));
    Ok(archive.serialize())
}

fn node_config(input: &NodeBootstrap) -> Result<String, UserDataError> {
    let mut cluster = Mapping::new();
    cluster.insert("name".into(), input.cluster_name.clone().into());
    cluster.insert("apiServerEndpoint".into(), input.endpoint.clone().into());
    // nodeadm's certificateAuthority is []byte, which YAML carries as base64: the
    // DescribeCluster value as it is (Karpenter decodes then re-encodes it).
    cluster.insert(
        "certificateAuthority".into(),
        input.ca_bundle_base64.clone().into(),
    );
    cluster.insert("cidr".into(), input.service_cidr.clone().into());

    let mut kubelet_map = Mapping::new();
    let config = kubelet_config(input);
    if !config.is_empty() {
        let config: Mapping = config
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect();
        kubelet_map.insert("config".into(), Value::Mapping(config));
    }
    let flags: Vec<Value> = [
        kubelet::node_labels_flag(&input.labels),
        kubelet::register_with_taints_flag(&input.taints),
    ]
    .into_iter()
    .flatten()
    .map(Value::from)
    .collect();
    if !flags.is_empty() {
        kubelet_map.insert("flags".into(), Value::Sequence(flags));
    }

    let mut spec = Mapping::new();
    spec.insert("cluster".into(), Value::Mapping(cluster));
    if !kubelet_map.is_empty() {
        spec.insert("kubelet".into(), Value::Mapping(kubelet_map));
    }
    let mut doc = Mapping::new();
    doc.insert("apiVersion".into(), "node.eks.aws/v1alpha1".into());
    doc.insert("kind".into(), "NodeConfig".into());
    doc.insert("spec".into(), Value::Mapping(spec));
    let yaml = serde_yaml::to_string(&doc).map_err(|e| UserDataError::Render(e.to_string()))?;
    Ok(format!("# nodewright generated NodeConfig\n{yaml}"))
}

/// `spec.kubelet.config`: a KubeletConfiguration fragment in kubelet's own field names,
/// sorted by name (as Karpenter's JSON round trip sorts them).
fn kubelet_config(input: &NodeBootstrap) -> BTreeMap<&'static str, Value> {
    let mut c = BTreeMap::new();
    let dns = cluster_dns(input);
    if !dns.is_empty() {
        c.insert(
            "clusterDNS",
            Value::Sequence(dns.iter().map(|s| s.clone().into()).collect()),
        );
    }
    if let Some(n) = max_pods(input) {
        c.insert("maxPods", Value::Number(n.into()));
    }
    let Some(k) = input.kubelet.as_ref() else {
        return c;
    };
    let map = |m: &BTreeMap<String, String>| -> Value {
        Value::Mapping(
            m.iter()
                .map(|(k, v)| (k.clone().into(), v.clone().into()))
                .collect(),
        )
    };
    if let Some(n) = k.pods_per_core {
        c.insert("podsPerCore", Value::Number(n.into()));
    }
    for (name, m) in [
        ("systemReserved", &k.system_reserved),
        ("kubeReserved", &k.kube_reserved),
        ("evictionHard", &k.eviction_hard),
        ("evictionSoft", &k.eviction_soft),
        ("evictionSoftGracePeriod", &k.eviction_soft_grace_period),
    ] {
        if !m.is_empty() {
            c.insert(name, map(m));
        }
    }
    if let Some(n) = k.image_gc_high_threshold_percent {
        c.insert("imageGCHighThresholdPercent", Value::Number(n.into()));
    }
    if let Some(n) = k.image_gc_low_threshold_percent {
        c.insert("imageGCLowThresholdPercent", Value::Number(n.into()));
    }
    if let Some(b) = k.cpu_cfs_quota {
        c.insert("cpuCFSQuota", Value::Bool(b));
    }
    c
}
