//! Bottlerocket: TOML settings; the custom user data is the base, nodewright's keys win.
//!
//! Follows Karpenter's `bottlerocket.go`: cluster name, API server and CA are overwritten;
//! node labels are merged with ours winning; node taints are replaced by the NodePool's;
//! kubelet settings are set when the EC2NodeClass gives them; `autoscaling.should-wait` is
//! forced false because these nodes never join an Auto Scaling group. Setting names:
//! Karpenter's `bottlerocketsettings.go` (Bottlerocket `settings.kubernetes.*`).

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::kubelet::effect_name;
use super::{NodeBootstrap, UserDataError, cluster_dns, max_pods, sorted_taints};

pub(super) fn render(input: &NodeBootstrap, custom: Option<&str>) -> Result<String, UserDataError> {
    let mut root: Table = match custom {
        Some(text) => text
            .parse::<Table>()
            .map_err(|e| UserDataError::BadToml(Box::new(e)))?,
        None => Table::new(),
    };
    let settings = sub_table(&mut root, "settings", "settings")?;
    if let Some(autoscaling) = settings.get_mut("autoscaling") {
        let Value::Table(autoscaling) = autoscaling else {
            return Err(not_a_table("settings.autoscaling"));
        };
        if autoscaling.contains_key("should-wait") {
            autoscaling.insert("should-wait".into(), Value::Boolean(false));
        }
    }
    let k8s = sub_table(settings, "kubernetes", "settings.kubernetes")?;
    k8s.insert("cluster-name".into(), input.cluster_name.clone().into());
    k8s.insert("api-server".into(), input.endpoint.clone().into());
    k8s.insert(
        "cluster-certificate".into(),
        input.ca_bundle_base64.clone().into(),
    );
    match cluster_dns(input) {
        [] => {}
        [one] => {
            k8s.insert("cluster-dns-ip".into(), one.clone().into());
        }
        many => {
            let list = many.iter().map(|s| Value::from(s.clone())).collect();
            k8s.insert("cluster-dns-ip".into(), Value::Array(list));
        }
    }
    if let Some(n) = max_pods(input) {
        k8s.insert("max-pods".into(), n.into());
    }

    let labels = sub_table(k8s, "node-labels", "settings.kubernetes.node-labels")?;
    for (k, v) in &input.labels {
        labels.insert(k.clone(), v.clone().into());
    }

    let mut taints: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for t in sorted_taints(&input.taints) {
        let value = format!(
            "{}:{}",
            t.value.as_deref().unwrap_or(""),
            effect_name(t.effect)
        );
        taints.entry(t.key.clone()).or_default().push(value.into());
    }
    if taints.is_empty() {
        k8s.remove("node-taints");
    } else {
        let table: Table = taints
            .into_iter()
            .map(|(k, v)| (k, Value::Array(v)))
            .collect();
        k8s.insert("node-taints".into(), Value::Table(table));
    }

    if let Some(k) = input.kubelet.as_ref() {
        for (name, m) in [
            ("system-reserved", &k.system_reserved),
            ("kube-reserved", &k.kube_reserved),
            ("eviction-hard", &k.eviction_hard),
            ("eviction-soft", &k.eviction_soft),
            ("eviction-soft-grace-period", &k.eviction_soft_grace_period),
        ] {
            if !m.is_empty() {
                let table: Table = m
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into()))
                    .collect();
                k8s.insert(name.into(), Value::Table(table));
            }
        }
        // Karpenter writes the image GC thresholds as strings.
        if let Some(n) = k.image_gc_high_threshold_percent {
            k8s.insert(
                "image-gc-high-threshold-percent".into(),
                n.to_string().into(),
            );
        }
        if let Some(n) = k.image_gc_low_threshold_percent {
            k8s.insert(
                "image-gc-low-threshold-percent".into(),
                n.to_string().into(),
            );
        }
        if let Some(b) = k.cpu_cfs_quota {
            k8s.insert("cpu-cfs-quota-enforced".into(), b.into());
        }
    }
    toml::to_string(&root).map_err(|e| UserDataError::Render(e.to_string()))
}

/// The table under `key`, created when absent; an error naming `path` when it is not a table.
fn sub_table<'a>(
    parent: &'a mut Table,
    key: &str,
    path: &'static str,
) -> Result<&'a mut Table, UserDataError> {
    let entry = parent
        .entry(key.to_owned())
        .or_insert_with(|| Value::Table(Table::new()));
    match entry {
        Value::Table(t) => Ok(t),
        _ => Err(not_a_table(path)),
    }
}

fn not_a_table(path: &str) -> UserDataError {
    UserDataError::BadBottlerocketSettings(format!("`{path}` must be a table"))
}
