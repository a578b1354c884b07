//! Reading the EC2NodeClass `kubelet` settings that change allocatable: reservations and
//! hard eviction thresholds, as quantities or percentages.

use std::collections::BTreeMap;

use crate::api::KubeletConfiguration;
use crate::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, parse_milli};

use super::CatalogError;

/// Eviction signal that reserves memory (kubelet `evictionHard` key).
pub const MEMORY_AVAILABLE: &str = "memory.available";
/// Eviction signal that reserves ephemeral storage (kubelet `evictionHard` key).
pub const NODEFS_AVAILABLE: &str = "nodefs.available";

/// Keys the EC2NodeClass CRD accepts in `kubeReserved` / `systemReserved`. Only the first
/// three are schedulable resources; `pid` limits processes and never reduces allocatable.
const RESERVED_KEYS: [&str; 4] = [CPU, MEMORY, EPHEMERAL_STORAGE, "pid"];

/// Keys the EC2NodeClass CRD accepts in `evictionHard` / `evictionSoft`.
const EVICTION_KEYS: [&str; 6] = [
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];

/// Checks every kubelet setting this module reads, so a bad value is reported once, with
/// its field, when the EC2NodeClass is loaded. The allocatable arithmetic itself skips an
/// entry it cannot read (it keeps the default for that resource) rather than failing a
/// whole provisioning round.
pub fn validate_kubelet(kubelet: &KubeletConfiguration) -> Result<(), CatalogError> {
    if let Some(max_pods) = kubelet.max_pods.filter(|v| *v < 0) {
        return Err(field_error(
            "maxPods",
            max_pods.to_string(),
            "must not be negative",
        ));
    }
    if let Some(ppc) = kubelet.pods_per_core.filter(|v| *v < 0) {
        return Err(field_error(
            "podsPerCore",
            ppc.to_string(),
            "must not be negative",
        ));
    }
    for (field, map) in [
        ("kubeReserved", &kubelet.kube_reserved),
        ("systemReserved", &kubelet.system_reserved),
    ] {
        for (key, value) in map {
            if !RESERVED_KEYS.contains(&key.as_str()) {
                return Err(field_error(
                    &format!("{field}.{key}"),
                    value.clone(),
                    "is not a reservable resource (allowed: cpu, memory, ephemeral-storage, pid)",
                ));
            }
            reservation(field, key, value)?;
        }
    }
    for (field, map) in [
        ("evictionHard", &kubelet.eviction_hard),
        ("evictionSoft", &kubelet.eviction_soft),
    ] {
        for (key, value) in map {
            if !EVICTION_KEYS.contains(&key.as_str()) {
                return Err(field_error(
                    &format!("{field}.{key}"),
                    value.clone(),
                    "is not an eviction signal (allowed: memory.available, nodefs.available, \
                     nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available)",
                ));
            }
            // Any capacity will do to check the syntax.
            eviction_signal(field, key, value, 1)?;
        }
    }
    Ok(())
}

/// The schedulable reservations (`cpu`, `memory`, `ephemeral-storage`) a map sets, in
/// milli-units; entries that do not parse are skipped (see [`validate_kubelet`]).
pub(crate) fn reservations(
    field: &str,
    map: &BTreeMap<String, String>,
) -> Vec<(&'static str, i64)> {
    [CPU, MEMORY, EPHEMERAL_STORAGE]
        .into_iter()
        .filter_map(|name| {
            let value = map.get(name)?;
            match reservation(field, name, value) {
                Ok(milli) => Some((name, milli)),
                Err(e) => {
                    tracing::warn!(error = %e, "ignoring kubelet reservation");
                    None
                }
            }
        })
        .collect()
}

fn reservation(field: &str, key: &str, value: &str) -> Result<i64, CatalogError> {
    let milli = parse_milli(value)
        .map_err(|e| field_error(&format!("{field}.{key}"), value.to_string(), e.reason))?;
    if milli < 0 {
        return Err(field_error(
            &format!("{field}.{key}"),
            value.to_string(),
            "must not be negative",
        ));
    }
    Ok(milli)
}

/// The `evictionHard` threshold for `signal` in milli-units, or `None` when unset or
/// unreadable. Percentages are of `capacity_milli`.
pub(crate) fn eviction_hard(
    kubelet: Option<&KubeletConfiguration>,
    signal: &str,
    capacity_milli: i64,
) -> Option<i64> {
    let value = kubelet?.eviction_hard.get(signal)?;
    match eviction_signal("evictionHard", signal, value, capacity_milli) {
        Ok(milli) => Some(milli),
        Err(e) => {
            tracing::warn!(error = %e, "ignoring kubelet eviction threshold");
            None
        }
    }
}

/// An eviction threshold as an amount: an absolute quantity (`500Mi`) or a percentage of
/// capacity (`10%`), rounded up to a whole unit as Karpenter's `computeEvictionSignal`
/// does. `100%` disables the threshold (kubelet-config.v1beta1 docs), so it reserves 0.
fn eviction_signal(
    field: &str,
    key: &str,
    value: &str,
    capacity_milli: i64,
) -> Result<i64, CatalogError> {
    let name = || format!("{field}.{key}");
    if let Some(number) = value.trim().strip_suffix('%') {
        let percent: f64 = number.trim().parse().map_err(|_| {
            field_error(&name(), value.to_string(), "is not a number followed by %")
        })?;
        if !(0.0..=100.0).contains(&percent) {
            return Err(field_error(
                &name(),
                value.to_string(),
                "must be between 0% and 100%",
            ));
        }
        if percent == 100.0 {
            return Ok(0);
        }
        let units = (capacity_milli as f64 / 1000.0 / 100.0 * percent).ceil();
        return Ok(units as i64 * 1000);
    }
    reservation(field, key, value)
}

fn field_error(field: &str, value: String, reason: &str) -> CatalogError {
    CatalogError::Field {
        field: format!("kubelet.{field}"),
        value,
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceil_div(n: i64, d: i64) -> i64 {
        (n + d - 1) / d
    }

    fn kubelet_with(f: impl FnOnce(&mut KubeletConfiguration)) -> KubeletConfiguration {
        let mut k = KubeletConfiguration::default();
        f(&mut k);
        k
    }

    #[test]
    fn eviction_thresholds_accept_quantities_and_percentages_of_capacity() {
        const MI: i64 = 1 << 20;
        let capacity = 1000 * MI * 1000; // 1000Mi in milli-bytes
        let cases: &[(&str, i64)] = &[
            ("500Mi", 500 * MI * 1000),
            ("10%", ceil_div(1000 * MI, 10) * 1000),
            ("0.5%", ceil_div(1000 * MI * 5, 1000) * 1000),
            ("100%", 0),
            ("0%", 0),
        ];
        for (value, want) in cases {
            let got = eviction_signal("evictionHard", MEMORY_AVAILABLE, value, capacity);
            assert_eq!(got.ok(), Some(*want), "{value}");
        }
    }

    #[test]
    fn unreadable_settings_are_rejected_naming_the_field() {
        let cases: Vec<(KubeletConfiguration, &str)> = vec![
            (kubelet_with(|k| k.max_pods = Some(-1)), "kubelet.maxPods"),
            (
                kubelet_with(|k| k.pods_per_core = Some(-4)),
                "kubelet.podsPerCore",
            ),
            (
                kubelet_with(|k| {
                    k.kube_reserved.insert("memory".into(), "lots".into());
                }),
                "kubelet.kubeReserved.memory",
            ),
            (
                kubelet_with(|k| {
                    k.system_reserved
                        .insert("nvidia.com/gpu".into(), "1".into());
                }),
                "kubelet.systemReserved.nvidia.com/gpu",
            ),
            (
                kubelet_with(|k| {
                    k.eviction_hard
                        .insert(MEMORY_AVAILABLE.into(), "150%".into());
                }),
                "kubelet.evictionHard.memory.available",
            ),
            (
                kubelet_with(|k| {
                    k.eviction_soft.insert("memory.free".into(), "1Gi".into());
                }),
                "kubelet.evictionSoft.memory.free",
            ),
        ];
        for (kubelet, want_field) in cases {
            match validate_kubelet(&kubelet) {
                Err(CatalogError::Field { field, .. }) => assert_eq!(field, want_field),
                other => panic!("{want_field}: expected a field error, got {other:?}"),
            }
        }
    }

    #[test]
    fn well_formed_settings_validate() {
        let k = kubelet_with(|k| {
            k.max_pods = Some(110);
            k.pods_per_core = Some(10);
            k.kube_reserved.insert("cpu".into(), "200m".into());
            k.kube_reserved.insert("pid".into(), "1000".into());
            k.system_reserved.insert("memory".into(), "1Gi".into());
            k.eviction_hard.insert(MEMORY_AVAILABLE.into(), "5%".into());
            k.eviction_hard
                .insert(NODEFS_AVAILABLE.into(), "15%".into());
            k.eviction_soft
                .insert("imagefs.available".into(), "20%".into());
        });
        assert!(validate_kubelet(&k).is_ok());
    }

    #[test]
    fn reservations_keep_the_schedulable_resources_and_skip_bad_entries() {
        let map: BTreeMap<String, String> = [("cpu", "250m"), ("memory", "nope"), ("pid", "100")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(reservations("kubeReserved", &map), vec![(CPU, 250)]);
    }
}
