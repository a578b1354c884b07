//! From an instance type's hardware to what pods may request on it: capacity, minus
//! kube-reserved, system-reserved and the hard eviction threshold, as Karpenter computes
//! it (karpenter-provider-aws `pkg/providers/instancetype/types.go`: `computeCapacity`,
//! `kubeReservedResources`, `systemReservedResources`, `evictionThreshold`, `pods`).
//!
//! Every amount in a [`Resources`] is in milli-units (110 pods is `110_000`).

use crate::api::{EC2NodeClassSpec, KubeletConfiguration};
use crate::resources::Resources;

use super::kubelet::{MEMORY_AVAILABLE, NODEFS_AVAILABLE, eviction_hard, reservations};
use super::{CatalogError, InstanceType};

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;
const MILLI: i64 = 1000;
/// Largest memory (in MiB) whose milli-bytes still fit an i64: about 8 EiB.
const MAX_MIB: i64 = i64::MAX / MI / MILLI;
/// Largest local NVMe size (in GB) whose milli-bytes still fit an i64.
const MAX_GB: i64 = i64::MAX / 1_000_000_000 / MILLI;

/// Share of nominal memory the OS of a VM does not report (firmware, kernel, hypervisor
/// structures). Karpenter's `VM_MEMORY_OVERHEAD_PERCENT` setting, default 0.075
/// (karpenter-provider-aws `pkg/operator/options`); it subtracts
/// `ceil(memory_mib * 0.075)` MiB from capacity.
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;
/// The same ratio in thousandths, so the arithmetic stays in integers.
const VM_MEMORY_OVERHEAD_PER_MILLE: i64 = 75;

/// Gravitons reserve 64 MiB of contiguous memory (CMA) the kernel cannot hand out;
/// Karpenter subtracts it from arm64 capacity (`memory()` in types.go).
pub const GRAVITON_CMA_RESERVED_MIB: i64 = 64;

/// Ephemeral storage when the EC2NodeClass does not size the root volume: the 20Gi gp3
/// root volume Karpenter's AL2/AL2023 AMI families map by default (`DefaultEBS` in
/// karpenter-provider-aws `pkg/providers/amifamily`).
pub const DEFAULT_EPHEMERAL_STORAGE_BYTES: i64 = 20 * GI;

/// kube-reserved ephemeral storage, the 1Gi that Karpenter and the EKS AMIs reserve.
pub const KUBE_RESERVED_EPHEMERAL_STORAGE_BYTES: i64 = GI;

/// Default hard eviction threshold `memory.available<100Mi` (kubelet default, kept by the
/// EKS AMIs and assumed by Karpenter's `evictionThreshold`).
pub const EVICTION_HARD_MEMORY_BYTES: i64 = 100 * MI;

/// Default hard eviction threshold `nodefs.available<10%` (kubelet default; Karpenter's
/// `evictionThreshold` reserves 10% of ephemeral storage).
pub const EVICTION_HARD_NODEFS_PERCENT: i64 = 10;

/// Device of the root volume on the AL2/AL2023 AMIs (Karpenter's `EphemeralBlockDevice`).
const AL_ROOT_DEVICE: &str = "/dev/xvda";

pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
pub const RESOURCE_HABANA_GAUDI: &str = "habana.ai/gaudi";
pub const RESOURCE_AWS_NEURON: &str = "aws.amazon.com/neuron";
pub const RESOURCE_AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";

/// kube-reserved CPU in millicores: 6% of the first core, 1% of the second, 0.5% of the
/// third and fourth, 0.25% of every further core (1 vCPU: 60m, 2: 70m, 4: 80m, 8: 90m).
/// Karpenter `kubeReservedResources`, itself from Bottlerocket PR #1388 and the EKS AMI
/// bootstrap; each band truncates to whole millicores as Karpenter's `int64(...)` does.
pub fn kube_reserved_cpu_millis(vcpu: u32) -> i64 {
    // (band start, band end, share in 1/10000)
    const BANDS: [(i64, i64, i64); 4] = [
        (0, 1000, 600),
        (1000, 2000, 100),
        (2000, 4000, 50),
        (4000, i64::MAX, 25),
    ];
    let millis = i64::from(vcpu) * MILLI;
    BANDS
        .iter()
        .filter(|(start, _, _)| millis > *start)
        .map(|(start, end, share)| (millis.min(*end) - start) * share / 10_000)
        .sum()
}

/// kube-reserved memory in MiB for a node that runs `pods` pods: 11 MiB per pod plus
/// 255 MiB (Karpenter `kubeReservedResources`; the EKS AMI bootstrap formula).
pub fn kube_reserved_memory_mib(pods: i64) -> i64 {
    11 * pods.max(0) + 255
}

impl InstanceType {
    /// Pods the VPC CNI can give an address without prefix delegation:
    /// `ENIs * (IPv4 per ENI - 1) + 2` (amazon-eks-ami `eni-max-pods.txt`; the two extra
    /// are host-network pods such as aws-node and kube-proxy).
    pub fn eni_limited_pods(&self) -> i64 {
        if self.max_enis == 0 {
            return 0;
        }
        i64::from(self.max_enis) * (i64::from(self.ipv4_per_eni) - 1).max(0) + 2
    }

    /// Pods a node of this type accepts (a plain count). `kubelet.maxPods` replaces the ENI
    /// formula; `kubelet.podsPerCore` then caps it at `podsPerCore * vCPU` (Karpenter
    /// `pods()` for the AL2/AL2023 families).
    pub fn max_pods(&self, kubelet: Option<&KubeletConfiguration>) -> i64 {
        let mut count = match kubelet.and_then(|k| k.max_pods) {
            Some(max_pods) => i64::from(max_pods.max(0)),
            None => self.eni_limited_pods(),
        };
        if let Some(per_core) = kubelet.and_then(|k| k.pods_per_core).filter(|p| *p > 0) {
            count = count.min(i64::from(per_core) * i64::from(self.vcpu));
        }
        count
    }

    /// Memory the node reports, in MiB: nominal memory, less the Graviton CMA reservation
    /// on arm64, less the VM overhead share.
    pub fn memory_capacity_mib(&self) -> i64 {
        // Saturate rather than wrap on nonsense input; real instances stay far below.
        let mut mib = i64::try_from(self.memory_mib)
            .unwrap_or(MAX_MIB)
            .min(MAX_MIB);
        if self.arch == "arm64" {
            mib -= GRAVITON_CMA_RESERVED_MIB;
        }
        let overhead = ceil_div(mib * VM_MEMORY_OVERHEAD_PER_MILLE, 1000);
        (mib - overhead).max(0)
    }

    /// Ephemeral storage, in bytes, of a node of this type launched from `spec`: the local
    /// NVMe disks when `instanceStorePolicy: RAID0` (decimal GB, as EC2 sizes them), else
    /// the root volume's `volumeSize` (the mapping marked `rootVolume: true`, or the one on
    /// `/dev/xvda`, the AL2/AL2023 root device), else [`DEFAULT_EPHEMERAL_STORAGE_BYTES`].
    /// Bottlerocket's separate data volume (`/dev/xvdb`) is not recognised.
    pub fn ephemeral_storage_bytes(&self, spec: &EC2NodeClassSpec) -> Result<i64, CatalogError> {
        if spec.instance_store_policy.as_deref() == Some("RAID0") && self.local_nvme_gb > 0 {
            let gb = i64::try_from(self.local_nvme_gb)
                .unwrap_or(MAX_GB)
                .min(MAX_GB);
            return Ok(gb * 1_000_000_000);
        }
        let root = spec
            .block_device_mappings
            .iter()
            .enumerate()
            .find(|(_, m)| m.root_volume == Some(true))
            .or_else(|| {
                spec.block_device_mappings
                    .iter()
                    .enumerate()
                    .find(|(_, m)| m.device_name.as_deref() == Some(AL_ROOT_DEVICE))
            });
        let Some((index, size)) =
            root.and_then(|(i, m)| Some((i, m.ebs.as_ref()?.volume_size.as_ref()?)))
        else {
            return Ok(DEFAULT_EPHEMERAL_STORAGE_BYTES);
        };
        let field = format!("blockDeviceMappings[{index}].ebs.volumeSize");
        let milli = size.milli().map_err(|e| CatalogError::Field {
            field: field.clone(),
            value: size.0.clone(),
            reason: e.reason.to_string(),
        })?;
        if milli <= 0 {
            return Err(CatalogError::Field {
                field,
                value: size.0.clone(),
                reason: "must be positive".into(),
            });
        }
        Ok(milli / MILLI)
    }

    /// Capacity with the default 20Gi root volume; see [`Self::capacity_with_storage`].
    pub fn capacity(&self, kubelet: Option<&KubeletConfiguration>) -> Resources {
        self.capacity_with_storage(kubelet, DEFAULT_EPHEMERAL_STORAGE_BYTES)
    }

    /// What the node advertises before reservations: vCPUs, reported memory, ephemeral
    /// storage, pods, and the accelerators as extended resources (`nvidia.com/gpu`,
    /// `amd.com/gpu`, `habana.ai/gaudi` by GPU manufacturer; `aws.amazon.com/neuron` and
    /// `aws.amazon.com/neuroncore` for Inferentia/Trainium).
    pub fn capacity_with_storage(
        &self,
        kubelet: Option<&KubeletConfiguration>,
        ephemeral_storage_bytes: i64,
    ) -> Resources {
        let mut out = Resources {
            cpu: i64::from(self.vcpu) * MILLI,
            memory: self.memory_capacity_mib() * MI * MILLI,
            ephemeral_storage: ephemeral_storage_bytes.clamp(0, i64::MAX / MILLI) * MILLI,
            pods: self.max_pods(kubelet) * MILLI,
            ..Resources::default()
        };
        if let Some(gpu) = &self.gpu {
            let resource = match gpu.manufacturer.as_str() {
                "NVIDIA" => Some(RESOURCE_NVIDIA_GPU),
                "AMD" => Some(RESOURCE_AMD_GPU),
                "Habana" => Some(RESOURCE_HABANA_GAUDI),
                _ => None,
            };
            if let Some(resource) = resource {
                out.set(resource, i64::from(gpu.count) * MILLI);
            }
        }
        if let Some(acc) = self
            .accelerator
            .as_ref()
            .filter(|a| a.manufacturer == "AWS")
        {
            out.set(RESOURCE_AWS_NEURON, i64::from(acc.count) * MILLI);
            out.set(RESOURCE_AWS_NEURON_CORE, i64::from(acc.cores) * MILLI);
        }
        out
    }

    /// Overhead with the default 20Gi root volume; see [`Self::overhead_with_storage`].
    pub fn overhead(&self, kubelet: Option<&KubeletConfiguration>) -> Resources {
        self.overhead_with_storage(kubelet, DEFAULT_EPHEMERAL_STORAGE_BYTES)
    }

    /// kube-reserved + system-reserved + hard eviction threshold.
    ///
    /// kube-reserved defaults to [`kube_reserved_cpu_millis`], [`kube_reserved_memory_mib`]
    /// of the ENI-limited pod count, and 1Gi of ephemeral storage. The memory uses the ENI
    /// count even when `maxPods` is set, because that is what the AL2/AL2023 AMIs reserve
    /// (Karpenter's `UsesENILimitedMemoryOverhead` flag for those families). Each
    /// `kubelet.kubeReserved` / `systemReserved` entry replaces the default of its resource;
    /// system-reserved is empty unless configured. The eviction threshold defaults to 100Mi
    /// of memory and 10% of ephemeral storage; `evictionHard` `memory.available` /
    /// `nodefs.available` replace them (absolute, or a percentage of capacity).
    /// `evictionSoft` is ignored, as Karpenter ignores it: it never reserves anything.
    pub fn overhead_with_storage(
        &self,
        kubelet: Option<&KubeletConfiguration>,
        ephemeral_storage_bytes: i64,
    ) -> Resources {
        let capacity = self.capacity_with_storage(kubelet, ephemeral_storage_bytes);

        let mut kube_reserved = Resources {
            cpu: kube_reserved_cpu_millis(self.vcpu),
            memory: kube_reserved_memory_mib(self.eni_limited_pods()) * MI * MILLI,
            ephemeral_storage: KUBE_RESERVED_EPHEMERAL_STORAGE_BYTES * MILLI,
            ..Resources::default()
        };
        let mut system_reserved = Resources::default();
        if let Some(k) = kubelet {
            for (name, milli) in reservations("kubeReserved", &k.kube_reserved) {
                kube_reserved.set(name, milli);
            }
            for (name, milli) in reservations("systemReserved", &k.system_reserved) {
                system_reserved.set(name, milli);
            }
        }

        let eviction = Resources {
            memory: eviction_hard(kubelet, MEMORY_AVAILABLE, capacity.memory)
                .unwrap_or(EVICTION_HARD_MEMORY_BYTES * MILLI),
            ephemeral_storage: eviction_hard(kubelet, NODEFS_AVAILABLE, capacity.ephemeral_storage)
                .unwrap_or_else(|| {
                    let bytes = capacity.ephemeral_storage / MILLI;
                    ceil_div(bytes * EVICTION_HARD_NODEFS_PERCENT, 100) * MILLI
                }),
            ..Resources::default()
        };

        // Saturating: the reservations are user-written and need not be sensible.
        let sum = |f: fn(&Resources) -> i64| {
            f(&kube_reserved)
                .saturating_add(f(&system_reserved))
                .saturating_add(f(&eviction))
        };
        Resources {
            cpu: sum(|r| r.cpu),
            memory: sum(|r| r.memory),
            ephemeral_storage: sum(|r| r.ephemeral_storage),
            ..Resources::default()
        }
    }

    /// Allocatable with the default 20Gi root volume; see [`Self::allocatable_with_storage`].
    pub fn allocatable(&self, kubelet: Option<&KubeletConfiguration>) -> Resources {
        self.allocatable_with_storage(kubelet, DEFAULT_EPHEMERAL_STORAGE_BYTES)
    }

    /// Capacity minus overhead, each resource floored at zero.
    pub fn allocatable_with_storage(
        &self,
        kubelet: Option<&KubeletConfiguration>,
        ephemeral_storage_bytes: i64,
    ) -> Resources {
        let mut out = self.capacity_with_storage(kubelet, ephemeral_storage_bytes);
        out.sub(&self.overhead_with_storage(kubelet, ephemeral_storage_bytes));
        out.cpu = out.cpu.max(0);
        out.memory = out.memory.max(0);
        out.ephemeral_storage = out.ephemeral_storage.max(0);
        out.pods = out.pods.max(0);
        out.extended.retain(|_, v| *v > 0);
        out
    }
}

/// `n / d` rounded up, for `n >= 0` and `d > 0` (`i64::div_ceil` is not stable yet).
fn ceil_div(n: i64, d: i64) -> i64 {
    (n + d - 1) / d
}

#[cfg(test)]
mod tests;
