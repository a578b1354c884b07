//! Amazon Linux 2: `/etc/eks/bootstrap.sh` in the last MIME part, custom parts before it.
//!
//! Follows Karpenter's `eksbootstrap.go` (`eksBootstrapScript`, `mergeCustomUserData`) and
//! its `al2_userdata_merged.golden`: bootstrap.sh takes no `=` in its own options, each
//! option on a continued line, the kubelet flags inside one single-quoted
//! `--kubelet-extra-args`.

use super::mime::{MimeArchive, MimePart, SHELL_CONTENT_TYPE};
use super::{NodeBootstrap, UserDataError, cluster_dns, kubelet, looks_like_mime, max_pods};

pub(super) fn render(input: &NodeBootstrap, custom: Option<&str>) -> Result<String, UserDataError> {
    let mut archive = MimeArchive::default();
    if let Some(custom) = custom {
        if looks_like_mime(custom) {
            archive.parts.extend(MimeArchive::parse(custom)?.parts);
        } else {
            archive
                .parts
                .push(MimePart::new(SHELL_CONTENT_TYPE, custom));
        }
    }
    archive
        .parts
        .push(MimePart::new(SHELL_CONTENT_TYPE, bootstrap_script(input)));
    Ok(archive.serialize())
}

fn bootstrap_script(input: &NodeBootstrap) -> String {
    let mut s = String::from("#!/bin/bash -xe\n");
    // Karpenter's line: the bootstrap log goes to a file, the journal and the console.
    s.push_str("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n");
    s.push_str(&format!(
        "/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}' --b64-cluster-ca '{}'",
        input.cluster_name, input.endpoint, input.ca_bundle_base64
    ));
    let dns = cluster_dns(input);
    if let Some(first) = dns.first() {
        if first.parse::<std::net::Ipv6Addr>().is_ok() {
            s.push_str(" \\\n--ip-family ipv6");
        }
        s.push_str(&format!(" \\\n--dns-cluster-ip '{first}'"));
    }
    // bootstrap.sh would otherwise compute max pods from its ENI table and ignore ours.
    if max_pods(input).is_some() {
        s.push_str(" \\\n--use-max-pods false");
    }
    let args = kubelet::extra_args(input);
    if !args.is_empty() {
        s.push_str(&format!(" \\\n--kubelet-extra-args '{}'", args.join(" ")));
    }
    // No trailing newline, as Karpenter's `al2_userdata_merged.golden`.
    s
}
