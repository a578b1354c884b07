//! Node user data per AMI family: what a new instance runs to join the cluster with the
//! NodePool's labels and taints.
//!
//! The formats follow Karpenter's bootstrappers (karpenter-provider-aws
//! `pkg/providers/amifamily/bootstrap/`: `eksbootstrap.go` for AL2, `nodeadm.go` for AL2023,
//! `bottlerocket.go`, `custom.go`) and its golden files
//! (`pkg/providers/launchtemplate/testdata/*.golden`). Everything is sorted so the same
//! input always renders the same bytes (the launch template is keyed by a hash of them).

mod al2;
mod al2023;
mod bottlerocket;
mod kubelet;
mod mime;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::api::{KubeletConfiguration, Taint};

pub use mime::{MimeArchive, MimePart};

/// Which bootstrap the AMI expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AmiFamily {
    /// Amazon Linux 2023: nodeadm reads `NodeConfig` documents from MIME parts.
    Al2023,
    /// Amazon Linux 2: `/etc/eks/bootstrap.sh` from a shell part.
    Al2,
    /// Bottlerocket: TOML settings.
    Bottlerocket,
    /// The user's own AMI: their user data, untouched.
    Custom,
}

/// What a node needs to join: the cluster and the NodePool's node identity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeBootstrap {
    pub cluster_name: String,
    /// The API server URL from DescribeCluster.
    pub endpoint: String,
    /// `certificateAuthority.data` from DescribeCluster (base64 of the PEM bundle).
    pub ca_bundle_base64: String,
    /// The cluster's IPv4 service CIDR (nodeadm requires it as `spec.cluster.cidr`).
    pub service_cidr: String,
    /// DNS server IPs for pods; empty = the EC2NodeClass `kubelet.clusterDNS`, else the
    /// AMI's own default.
    pub cluster_dns: Vec<String>,
    /// Node labels, already including `karpenter.sh/nodepool`, `karpenter.sh/capacity-type`,
    /// `nodewright.io/nodeclaim` and the NodePool's labels.
    pub labels: BTreeMap<String, String>,
    /// NodePool taints followed by its startupTaints.
    pub taints: Vec<Taint>,
    /// Resolved max pods (wins over `kubelet.maxPods`); `None` = the AMI's default.
    pub max_pods: Option<i64>,
    /// The EC2NodeClass `kubelet` block.
    pub kubelet: Option<KubeletConfiguration>,
}

#[derive(Debug, thiserror::Error)]
pub enum UserDataError {
    #[error("{field} {value:?} is not valid for user data: {allowed}")]
    InvalidField {
        field: &'static str,
        value: String,
        allowed: &'static str,
    },
    #[error(
        "EC2NodeClass userData looks like MIME (starts with MIME-Version:/Content-Type:) but {0}"
    )]
    BadMime(String),
    #[error("EC2NodeClass userData for Bottlerocket is not valid TOML")]
    BadToml(#[source] Box<toml::de::Error>),
    #[error("EC2NodeClass userData for Bottlerocket: {0}")]
    BadBottlerocketSettings(String),
    #[error("rendering user data failed: {0}")]
    Render(String),
}

/// Renders the user data for `family`, merging the EC2NodeClass `userData` (`custom`).
pub fn render_user_data(
    family: AmiFamily,
    input: &NodeBootstrap,
    custom: Option<&str>,
) -> Result<String, UserDataError> {
    let custom = custom.filter(|c| !c.trim().is_empty());
    match family {
        // Karpenter's Custom family passes the user's user data through unchanged.
        AmiFamily::Custom => Ok(custom.unwrap_or_default().to_owned()),
        AmiFamily::Al2 => {
            validate(input)?;
            al2::render(input, custom)
        }
        AmiFamily::Al2023 => {
            validate(input)?;
            al2023::render(input, custom)
        }
        AmiFamily::Bottlerocket => {
            validate(input)?;
            bottlerocket::render(input, custom)
        }
    }
}

/// True when user data is a MIME document (Karpenter's test in `eksbootstrap.go` `mimeify`).
pub(crate) fn looks_like_mime(user_data: &str) -> bool {
    let t = user_data.trim_start();
    t.starts_with("MIME-Version:") || t.starts_with("Content-Type:")
}

/// Taints in a stable order: by key, value, effect (the flag and the TOML table then do
/// not depend on how the NodePool listed them).
pub(crate) fn sorted_taints(taints: &[Taint]) -> Vec<&Taint> {
    let mut sorted: Vec<&Taint> = taints.iter().collect();
    sorted.sort_by(|a, b| (&a.key, &a.value, a.effect).cmp(&(&b.key, &b.value, b.effect)));
    sorted.dedup_by(|a, b| a == b);
    sorted
}

// Values end up inside single-quoted shell words, YAML and TOML; refusing anything outside
// the Kubernetes/EKS syntax keeps a label from ever breaking out of its quotes.

fn validate(input: &NodeBootstrap) -> Result<(), UserDataError> {
    let invalid = |field, value: &str, allowed| UserDataError::InvalidField {
        field,
        value: value.to_owned(),
        allowed,
    };
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !name_ok(&input.cluster_name) {
        return Err(invalid(
            "cluster name",
            &input.cluster_name,
            "letters, digits, '-' and '_'",
        ));
    }
    let url_ok = input.endpoint.starts_with("https://") || input.endpoint.starts_with("http://");
    if !url_ok
        || input
            .endpoint
            .bytes()
            .any(|b| !b.is_ascii_graphic() || b"'\"\\`$".contains(&b))
    {
        return Err(invalid(
            "cluster endpoint",
            &input.endpoint,
            "an http(s) URL without quotes",
        ));
    }
    let b64_ok = input
        .ca_bundle_base64
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
    if input.ca_bundle_base64.is_empty() || !b64_ok {
        return Err(invalid(
            "cluster CA bundle",
            &input.ca_bundle_base64,
            "standard base64",
        ));
    }
    if !input.service_cidr.is_empty() && !cidr_ok(&input.service_cidr) {
        return Err(invalid(
            "service CIDR",
            &input.service_cidr,
            "an IP network such as 10.100.0.0/16",
        ));
    }
    for ip in cluster_dns(input) {
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid("cluster DNS", ip, "an IP address"));
        }
    }
    for (k, v) in &input.labels {
        if !label_key_ok(k) {
            return Err(invalid(
                "label key",
                k,
                "an optional DNS prefix and '/', then 1-63 of [A-Za-z0-9._-]",
            ));
        }
        if !label_value_ok(v) {
            return Err(invalid(
                "label value",
                v,
                "0-63 of [A-Za-z0-9._-], starting and ending alphanumeric",
            ));
        }
    }
    if let Some(k) = &input.kubelet {
        kubelet::validate_kubelet(k)?;
    }
    for t in &input.taints {
        if !label_key_ok(&t.key) {
            return Err(invalid("taint key", &t.key, "a label key"));
        }
        if let Some(v) = &t.value
            && !label_value_ok(v)
        {
            return Err(invalid("taint value", v, "a label value"));
        }
    }
    Ok(())
}

/// The cluster DNS IPs in effect: the resolved list, else the EC2NodeClass kubelet's.
pub(crate) fn cluster_dns(input: &NodeBootstrap) -> &[String] {
    if input.cluster_dns.is_empty() {
        input
            .kubelet
            .as_ref()
            .map_or(&[][..], |k| k.cluster_dns.as_slice())
    } else {
        &input.cluster_dns
    }
}

/// The max pods in effect: the resolved value, else the EC2NodeClass kubelet's.
pub(crate) fn max_pods(input: &NodeBootstrap) -> Option<i64> {
    input.max_pods.or_else(|| {
        input
            .kubelet
            .as_ref()
            .and_then(|k| k.max_pods)
            .map(i64::from)
    })
}

fn cidr_ok(cidr: &str) -> bool {
    let Some((ip, bits)) = cidr.split_once('/') else {
        return false;
    };
    match (ip.parse::<std::net::IpAddr>(), bits.parse::<u8>()) {
        (Ok(std::net::IpAddr::V4(_)), Ok(b)) => b <= 32,
        (Ok(std::net::IpAddr::V6(_)), Ok(b)) => b <= 128,
        _ => false,
    }
}

fn name_segment_ok(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

fn label_key_ok(key: &str) -> bool {
    match key.rsplit_once('/') {
        Some((prefix, name)) => {
            prefix.len() <= 253
                && prefix.split('.').all(|seg| {
                    !seg.is_empty()
                        && seg
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                })
                && name_segment_ok(name)
        }
        None => name_segment_ok(key),
    }
}

fn label_value_ok(value: &str) -> bool {
    value.is_empty() || name_segment_ok(value)
}
