//! The well-known labels a node of an instance type carries, with the values Karpenter
//! sets (karpenter-provider-aws `computeRequirements` in
//! `pkg/providers/instancetype/types.go`). Zone and capacity type are per offering and
//! are not here.

use std::collections::BTreeMap;

use crate::api::labels::{
    ARCH, INSTANCE_CATEGORY, INSTANCE_CPU, INSTANCE_FAMILY, INSTANCE_GENERATION,
    INSTANCE_HYPERVISOR, INSTANCE_MEMORY, INSTANCE_SIZE, INSTANCE_TYPE, OS,
};

use super::InstanceType;

pub const INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
pub const INSTANCE_ACCELERATOR_MANUFACTURER: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// nodewright launches Linux nodes only.
pub const OS_LINUX: &str = "linux";

impl InstanceType {
    /// Labels every node of this type carries. Values as Karpenter writes them: numbers in
    /// decimal (`instance-memory` in MiB, `instance-network-bandwidth` in Mbit/s,
    /// `instance-local-nvme` in GB, `instance-gpu-memory` in MiB per GPU), names of GPUs
    /// and accelerators in lower kebab case (`A10G` -> `a10g`, `NVIDIA` -> `nvidia`).
    /// The hypervisor label is present even when empty (bare metal), as in Karpenter.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            out.insert(k.to_string(), v);
        };
        put(INSTANCE_TYPE, self.name.clone());
        put(ARCH, self.arch.clone());
        put(OS, OS_LINUX.to_string());
        put(INSTANCE_FAMILY, self.family.clone());
        put(INSTANCE_CATEGORY, self.category.clone());
        put(INSTANCE_GENERATION, self.generation.to_string());
        put(INSTANCE_SIZE, self.size.clone());
        put(INSTANCE_CPU, self.vcpu.to_string());
        put(INSTANCE_MEMORY, self.memory_mib.to_string());
        put(INSTANCE_HYPERVISOR, self.hypervisor.clone());
        put(
            INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
            self.encryption_in_transit.to_string(),
        );
        if self.local_nvme_gb > 0 {
            put(INSTANCE_LOCAL_NVME, self.local_nvme_gb.to_string());
        }
        if self.network_bandwidth_mbps > 0 {
            put(
                INSTANCE_NETWORK_BANDWIDTH,
                self.network_bandwidth_mbps.to_string(),
            );
        }
        if let Some(gpu) = &self.gpu {
            put(INSTANCE_GPU_NAME, lower_kebab(&gpu.name));
            put(INSTANCE_GPU_MANUFACTURER, lower_kebab(&gpu.manufacturer));
            put(INSTANCE_GPU_COUNT, gpu.count.to_string());
            put(INSTANCE_GPU_MEMORY, gpu.memory_mib.to_string());
        }
        if let Some(acc) = &self.accelerator {
            put(INSTANCE_ACCELERATOR_NAME, lower_kebab(&acc.name));
            put(
                INSTANCE_ACCELERATOR_MANUFACTURER,
                lower_kebab(&acc.manufacturer),
            );
            put(INSTANCE_ACCELERATOR_COUNT, acc.count.to_string());
        }
        out
    }
}

/// Karpenter's `lowerKabobCase`: lower case, spaces to dashes.
fn lower_kebab(s: &str) -> String {
    s.to_lowercase().replace(' ', "-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Gpu, parse_name};

    fn named(name: &str) -> InstanceType {
        let (family, category, generation, size) = parse_name(name).unwrap_or_default();
        InstanceType {
            name: name.into(),
            family,
            category,
            generation,
            size,
            vcpu: 4,
            memory_mib: 16384,
            arch: "amd64".into(),
            hypervisor: "nitro".into(),
            ..InstanceType::default()
        }
    }

    #[test]
    fn labels_carry_the_parsed_name_parts_and_the_hardware() {
        let mut it = named("g5.xlarge");
        it.gpu = Some(Gpu {
            count: 1,
            name: "A10G".into(),
            manufacturer: "NVIDIA".into(),
            memory_mib: 22888,
        });
        it.local_nvme_gb = 250;
        it.network_bandwidth_mbps = 2500;
        it.encryption_in_transit = true;
        let want: BTreeMap<String, String> = [
            (INSTANCE_TYPE, "g5.xlarge"),
            (ARCH, "amd64"),
            (OS, "linux"),
            (INSTANCE_FAMILY, "g5"),
            (INSTANCE_CATEGORY, "g"),
            (INSTANCE_GENERATION, "5"),
            (INSTANCE_SIZE, "xlarge"),
            (INSTANCE_CPU, "4"),
            (INSTANCE_MEMORY, "16384"),
            (INSTANCE_HYPERVISOR, "nitro"),
            (INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, "true"),
            (INSTANCE_LOCAL_NVME, "250"),
            (INSTANCE_NETWORK_BANDWIDTH, "2500"),
            (INSTANCE_GPU_NAME, "a10g"),
            (INSTANCE_GPU_MANUFACTURER, "nvidia"),
            (INSTANCE_GPU_COUNT, "1"),
            (INSTANCE_GPU_MEMORY, "22888"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(it.labels(), want);
    }

    #[test]
    fn optional_labels_are_absent_without_the_hardware() {
        let labels = named("m7i-flex.large").labels();
        assert_eq!(labels.get(INSTANCE_CATEGORY).map(String::as_str), Some("m"));
        assert_eq!(
            labels.get(INSTANCE_GENERATION).map(String::as_str),
            Some("7")
        );
        assert_eq!(
            labels.get(INSTANCE_FAMILY).map(String::as_str),
            Some("m7i-flex")
        );
        for absent in [
            INSTANCE_LOCAL_NVME,
            INSTANCE_NETWORK_BANDWIDTH,
            INSTANCE_GPU_NAME,
            INSTANCE_ACCELERATOR_NAME,
        ] {
            assert!(!labels.contains_key(absent), "{absent}");
        }
    }

    #[test]
    fn gpu_and_accelerator_names_become_lower_kebab_case() {
        assert_eq!(lower_kebab("Radeon Pro V520"), "radeon-pro-v520");
        assert_eq!(lower_kebab("Inferentia2"), "inferentia2");
    }
}
