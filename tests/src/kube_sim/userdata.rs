//! Reads, from an instance's user data, what its kubelet registers with: node labels,
//! taints and max pods.
//!
//! Understood forms (also inside MIME multipart user data, which is scanned as text):
//! - kubelet flags anywhere in the text: AL2 `bootstrap.sh --kubelet-extra-args
//!   '--node-labels=a=b,c=d --register-with-taints=k=v:NoSchedule --max-pods=29'`, AL2023
//!   nodeadm `NodeConfig` `kubelet: flags: ["--node-labels=…"]` (flow or block list);
//! - AL2023 `NodeConfig` `kubelet: config: maxPods: N`;
//! - Bottlerocket TOML tables `[settings.kubernetes.node-labels]`,
//!   `[settings.kubernetes.node-taints]` (`key = ["value:Effect"]` or `key = "value:Effect"`)
//!   and `max-pods = N` under `[settings.kubernetes]`.
//!
//! Not understood: base64-encoded MIME parts, gzip, TOML inline tables.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

/// What the kubelet registers the Node with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegistrationFlags {
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub max_pods: Option<u32>,
}

/// Parses user data (already base64-decoded). Unknown content yields empty flags.
pub fn parse_user_data(text: &str) -> RegistrationFlags {
    let mut out = RegistrationFlags::default();
    for value in flag_values(text, "--node-labels=") {
        for pair in value.split(',').filter(|p| !p.is_empty()) {
            if let Some((k, v)) = pair.split_once('=') {
                out.labels
                    .insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    for value in flag_values(text, "--register-with-taints=") {
        out.taints.extend(value.split(',').filter_map(parse_taint));
    }
    if let Some(n) = flag_values(text, "--max-pods=")
        .last()
        .and_then(|v| v.parse().ok())
    {
        out.max_pods = Some(n);
    }
    for line in text.lines() {
        if let Some(n) = line
            .trim()
            .strip_prefix("maxPods:")
            .and_then(|v| v.trim().parse().ok())
        {
            out.max_pods = Some(n);
        }
    }
    bottlerocket(text, &mut out);
    out
}

/// Values of `--flag=value` occurrences. A plain value ends at whitespace, a quote or `]`;
/// a quoted one (`--node-labels="a=b,c=d"`, as Karpenter and nodewright write them for
/// systemd, possibly escaped as `\"` inside a YAML string) ends at its closing quote.
fn flag_values<'a>(text: &'a str, flag: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(flag) {
        let mut tail = &rest[i + flag.len()..];
        let quote = ["\\\"", "\""].into_iter().find(|q| tail.starts_with(q));
        let end = match quote {
            Some(q) => {
                tail = &tail[q.len()..];
                tail.find(q).unwrap_or(tail.len())
            }
            None => tail
                .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | ']'))
                .unwrap_or(tail.len()),
        };
        out.push(&tail[..end]);
        rest = &tail[end..];
    }
    out
}

/// `key=value:Effect` or `key:Effect`.
fn parse_taint(spec: &str) -> Option<Taint> {
    let (kv, effect) = spec.trim().rsplit_once(':')?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return None;
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string()).filter(|v| !v.is_empty())),
        None => (kv, None),
    };
    if key.is_empty() {
        return None;
    }
    Some(Taint {
        key: key.to_string(),
        value,
        effect: effect.to_string(),
        time_added: None,
    })
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(s)
}

fn bottlerocket(text: &str, out: &mut RegistrationFlags) {
    let mut section = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with('[') && line.ends_with(']') {
            section = line
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (unquote(key), value.trim());
        match section.as_str() {
            "settings.kubernetes.node-labels" => {
                out.labels
                    .insert(key.to_string(), unquote(value).to_string());
            }
            "settings.kubernetes.node-taints" => {
                let items: Vec<&str> =
                    match value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                        Some(list) => list
                            .split(',')
                            .map(unquote)
                            .filter(|s| !s.is_empty())
                            .collect(),
                        None => vec![unquote(value)],
                    };
                for item in items {
                    out.taints.extend(parse_taint(&format!("{key}={item}")));
                }
            }
            "settings.kubernetes" if key == "max-pods" => {
                if let Ok(n) = value.parse() {
                    out.max_pods = Some(n);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(String::from),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn al2_bootstrap_kubelet_extra_args_give_labels_taints_and_max_pods() {
        let ud = "#!/bin/bash\n/etc/eks/bootstrap.sh 'c1' --apiserver-endpoint 'https://x' \
                  --kubelet-extra-args '--node-labels=karpenter.sh/nodepool=default,team=a \
                  --register-with-taints=dedicated=gpu:NoSchedule,spot:NoExecute --max-pods=29'\n";
        let f = parse_user_data(ud);
        assert_eq!(
            f.labels,
            labels(&[("karpenter.sh/nodepool", "default"), ("team", "a")])
        );
        assert_eq!(
            f.taints,
            vec![
                taint("dedicated", Some("gpu"), "NoSchedule"),
                taint("spot", None, "NoExecute")
            ]
        );
        assert_eq!(f.max_pods, Some(29));
    }

    #[test]
    fn al2023_node_config_flags_in_mime_multipart_are_read() {
        let ud = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n\
                  Content-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\n\
                  kind: NodeConfig\nspec:\n  cluster:\n    name: c1\n  kubelet:\n    config:\n      maxPods: 58\n\
                  \x20   flags:\n    - --node-labels=karpenter.sh/capacity-type=spot,nodewright.io/nodeclaim=abc\n\
                  \x20   - --register-with-taints=nodewright.io/disrupted=:NoSchedule\n--//--\n";
        let f = parse_user_data(ud);
        assert_eq!(
            f.labels,
            labels(&[
                ("karpenter.sh/capacity-type", "spot"),
                ("nodewright.io/nodeclaim", "abc")
            ])
        );
        assert_eq!(
            f.taints,
            vec![taint("nodewright.io/disrupted", None, "NoSchedule")]
        );
        assert_eq!(f.max_pods, Some(58));
        let quoted = "    - --node-labels=\"karpenter.sh/nodepool=default,nodeType=cpu-node\"\n    - --register-with-taints=\"cpuIntensive=true:NoSchedule\"\n";
        let q = parse_user_data(quoted);
        assert_eq!(
            q.labels.get("nodeType").map(String::as_str),
            Some("cpu-node"),
            "quoted values are read whole"
        );
        assert_eq!(
            q.labels.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
        assert_eq!(q.taints.len(), 1);
        let flow = "kubelet:\n  flags: [\"--node-labels=a=b\", \"--register-with-taints=k=v:NoExecute\"]\n";
        let f = parse_user_data(flow);
        assert_eq!(f.labels, labels(&[("a", "b")]));
        assert_eq!(f.taints, vec![taint("k", Some("v"), "NoExecute")]);
    }

    #[test]
    fn bottlerocket_toml_tables_are_read() {
        let ud = "[settings.kubernetes]\ncluster-name = \"c1\"\nmax-pods = 110\n\
                  [settings.kubernetes.node-labels]\n\"karpenter.sh/nodepool\" = \"default\"\n\
                  [settings.kubernetes.node-taints]\n\"dedicated\" = [\"gpu:NoSchedule\"]\nold = \"x:NoExecute\"\n";
        let f = parse_user_data(ud);
        assert_eq!(f.labels, labels(&[("karpenter.sh/nodepool", "default")]));
        assert_eq!(
            f.taints,
            vec![
                taint("dedicated", Some("gpu"), "NoSchedule"),
                taint("old", Some("x"), "NoExecute")
            ]
        );
        assert_eq!(f.max_pods, Some(110));
    }

    #[test]
    fn a_taint_with_an_unknown_effect_is_ignored() {
        assert_eq!(
            parse_user_data("--register-with-taints=a=b:Sometimes").taints,
            vec![]
        );
    }
}
