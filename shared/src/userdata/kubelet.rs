//! Kubelet flags and settings shared by the AL2 and AL2023 renderers.
//!
//! Flag spelling follows Karpenter's `bootstrap.go` (`nodeLabelArg`, `nodeTaintArg`,
//! `kubeletExtraArgs`): values are double-quoted (`--node-labels="a=b,c=d"`), which both
//! bootstrap.sh (a systemd `Environment=` line) and nodeadm (a systemd environment file)
//! unquote before kubelet sees them. Maps are sorted, unlike Karpenter's Go map iteration.

use std::collections::BTreeMap;

use crate::api::{KubeletConfiguration, Taint, TaintEffect};

use super::{NodeBootstrap, UserDataError, max_pods, sorted_taints};

pub(crate) fn effect_name(effect: TaintEffect) -> &'static str {
    match effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// `key=value:Effect`, or `key:Effect` without a value (corev1 `Taint.ToString`).
pub(crate) fn taint_string(t: &Taint) -> String {
    match t.value.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => format!("{}={}:{}", t.key, v, effect_name(t.effect)),
        None => format!("{}:{}", t.key, effect_name(t.effect)),
    }
}

/// `--node-labels="k=v,..."`, sorted by key; `None` without labels.
pub(crate) fn node_labels_flag(labels: &BTreeMap<String, String>) -> Option<String> {
    if labels.is_empty() {
        return None;
    }
    let joined: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Some(format!("--node-labels=\"{}\"", joined.join(",")))
}

/// `--register-with-taints="k=v:Effect,..."`, sorted; `None` without taints.
pub(crate) fn register_with_taints_flag(taints: &[Taint]) -> Option<String> {
    if taints.is_empty() {
        return None;
    }
    let joined: Vec<String> = sorted_taints(taints)
        .into_iter()
        .map(taint_string)
        .collect();
    Some(format!("--register-with-taints=\"{}\"", joined.join(",")))
}

/// The kubelet arguments bootstrap.sh passes through `--kubelet-extra-args`, in Karpenter's
/// order: labels, taints, max pods, pods per core, reservations, eviction, image GC, CFS quota.
pub(crate) fn extra_args(input: &NodeBootstrap) -> Vec<String> {
    let mut args: Vec<String> = [
        node_labels_flag(&input.labels),
        register_with_taints_flag(&input.taints),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some(n) = max_pods(input) {
        args.push(format!("--max-pods={n}"));
    }
    let Some(k) = input.kubelet.as_ref() else {
        return args;
    };
    if let Some(n) = k.pods_per_core {
        args.push(format!("--pods-per-core={n}"));
    }
    args.extend(joined_map_flag(
        "--system-reserved",
        &k.system_reserved,
        "=",
    ));
    args.extend(joined_map_flag("--kube-reserved", &k.kube_reserved, "="));
    args.extend(joined_map_flag("--eviction-hard", &k.eviction_hard, "<"));
    args.extend(joined_map_flag("--eviction-soft", &k.eviction_soft, "<"));
    args.extend(joined_map_flag(
        "--eviction-soft-grace-period",
        &k.eviction_soft_grace_period,
        "=",
    ));
    if let Some(n) = k.image_gc_high_threshold_percent {
        args.push(format!("--image-gc-high-threshold={n}"));
    }
    if let Some(n) = k.image_gc_low_threshold_percent {
        args.push(format!("--image-gc-low-threshold={n}"));
    }
    if let Some(b) = k.cpu_cfs_quota {
        args.push(format!("--cpu-cfs-quota={b}"));
    }
    args
}

fn joined_map_flag(name: &str, map: &BTreeMap<String, String>, sep: &str) -> Option<String> {
    if map.is_empty() {
        return None;
    }
    let joined: Vec<String> = map.iter().map(|(k, v)| format!("{k}{sep}{v}")).collect();
    Some(format!("{name}=\"{}\"", joined.join(",")))
}

/// Refuses kubelet map entries that could break out of shell, YAML or TOML quoting;
/// kubelet's own syntax (`memory.available`, `100Mi`, `10%`, `1m30s`) needs none of that.
pub(crate) fn validate_kubelet(k: &KubeletConfiguration) -> Result<(), UserDataError> {
    let maps = [
        ("kubelet.systemReserved", &k.system_reserved),
        ("kubelet.kubeReserved", &k.kube_reserved),
        ("kubelet.evictionHard", &k.eviction_hard),
        ("kubelet.evictionSoft", &k.eviction_soft),
        (
            "kubelet.evictionSoftGracePeriod",
            &k.eviction_soft_grace_period,
        ),
    ];
    let ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-%/".contains(&b))
    };
    for (field, map) in maps {
        for (key, value) in map {
            for s in [key, value] {
                if !ok(s) {
                    return Err(UserDataError::InvalidField {
                        field,
                        value: s.clone(),
                        allowed: "letters, digits and . _ - % / (e.g. memory.available, 100Mi, 10%)",
                    });
                }
            }
        }
    }
    Ok(())
}
