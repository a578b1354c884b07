use super::*;
use crate::api::{BlockDevice, BlockDeviceMapping, Quantity};
use crate::catalog::{Accelerator, Gpu};

const MIB_MILLI: i64 = MI * MILLI;

/// A hand-written instance type, independent of the bundled data.
fn instance(
    name: &str,
    vcpu: u32,
    memory_mib: u64,
    enis: u32,
    ips: u32,
    arch: &str,
) -> InstanceType {
    InstanceType {
        name: name.to_string(),
        vcpu,
        memory_mib,
        max_enis: enis,
        ipv4_per_eni: ips,
        arch: arch.to_string(),
        hypervisor: "nitro".to_string(),
        ..InstanceType::default()
    }
}

fn m5_large() -> InstanceType {
    instance("m5.large", 2, 8192, 3, 10, "amd64")
}

fn c5_xlarge() -> InstanceType {
    instance("c5.xlarge", 4, 8192, 4, 15, "amd64")
}

fn kubelet(f: impl FnOnce(&mut KubeletConfiguration)) -> KubeletConfiguration {
    let mut k = KubeletConfiguration::default();
    f(&mut k);
    k
}

#[test]
fn kube_reserved_cpu_follows_the_per_core_bands() {
    // 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% of the rest, in millicores.
    let cases: &[(u32, i64)] = &[
        (1, 60),
        (2, 60 + 10),
        (4, 60 + 10 + 5 + 5),
        (8, 80 + 10),   // four more cores at 2.5m each
        (48, 80 + 110), // 44 cores * 2.5m
        (96, 80 + 230), // 92 cores * 2.5m
    ];
    for (vcpu, want) in cases {
        assert_eq!(kube_reserved_cpu_millis(*vcpu), *want, "{vcpu} vCPU");
    }
}

#[test]
fn kube_reserved_memory_is_11_mib_per_pod_plus_255() {
    // 574Mi for 29 pods is the value EKS users see on an m5.large.
    for (pods, want) in [(0, 255), (29, 574), (58, 893), (110, 1465), (737, 8362)] {
        assert_eq!(kube_reserved_memory_mib(pods), want, "{pods} pods");
    }
}

#[test]
fn max_pods_follow_the_eni_formula_and_kubelet_overrides() {
    let cases: Vec<(InstanceType, Option<KubeletConfiguration>, i64)> = vec![
        (m5_large(), None, 3 * 9 + 2),
        (c5_xlarge(), None, 4 * 14 + 2),
        (c5_xlarge(), Some(kubelet(|k| k.max_pods = Some(110))), 110),
        // podsPerCore caps at 10 * 4 vCPU = 40 < 58
        (
            c5_xlarge(),
            Some(kubelet(|k| k.pods_per_core = Some(10))),
            40,
        ),
        // podsPerCore above the ENI limit leaves the ENI limit
        (
            c5_xlarge(),
            Some(kubelet(|k| k.pods_per_core = Some(50))),
            58,
        ),
        // both: the smaller wins
        (
            c5_xlarge(),
            Some(kubelet(|k| {
                k.max_pods = Some(20);
                k.pods_per_core = Some(10);
            })),
            20,
        ),
        (
            c5_xlarge(),
            Some(kubelet(|k| k.pods_per_core = Some(0))),
            58,
        ),
        (instance("none.large", 2, 1024, 0, 10, "amd64"), None, 0),
    ];
    for (it, k, want) in cases {
        assert_eq!(it.max_pods(k.as_ref()), want, "{} {:?}", it.name, k);
    }
    assert_eq!(m5_large().max_pods(None), 29);
    assert_eq!(c5_xlarge().max_pods(None), 58);
}

#[test]
fn c5_xlarge_keeps_3920m_so_three_one_cpu_pods_fit_beside_a_small_daemonset() {
    let alloc = c5_xlarge().allocatable(None);
    assert_eq!(alloc.cpu, 4000 - kube_reserved_cpu_millis(4));
    assert_eq!(alloc.cpu, 3920);
    let daemonset = 100;
    assert!(3 * 1000 + daemonset <= alloc.cpu);
    assert!(4 * 1000 > alloc.cpu);
}

#[test]
fn memory_loses_vm_overhead_kube_reserved_and_the_eviction_threshold() {
    let it = c5_xlarge();
    // 7.5% of 8192 MiB is 614.4, rounded up to 615 MiB.
    let reported_mib = 8192 - 615;
    assert_eq!(it.capacity(None).memory, reported_mib * MIB_MILLI);
    let overhead_mib = (11 * 58 + 255) + 100;
    assert_eq!(it.overhead(None).memory, overhead_mib * MIB_MILLI);
    assert_eq!(
        it.allocatable(None).memory,
        (reported_mib - overhead_mib) * MIB_MILLI
    );
}

#[test]
fn graviton_memory_also_loses_the_64_mib_cma_reservation() {
    let it = instance("m6g.large", 2, 8192, 3, 10, "arm64");
    // (8192 - 64) * 7.5% = 609.6, rounded up to 610.
    assert_eq!(it.memory_capacity_mib(), 8192 - 64 - 610);
}

#[test]
fn ephemeral_storage_keeps_what_kube_reserved_and_nodefs_eviction_leave() {
    let alloc = c5_xlarge().allocatable(None);
    let root = 20 * GI;
    let nodefs_eviction = ceil_div(root * 10, 100);
    assert_eq!(
        alloc.ephemeral_storage,
        (root - GI - nodefs_eviction) * MILLI
    );
    let bigger = c5_xlarge().allocatable_with_storage(None, 100 * GI);
    assert_eq!(bigger.ephemeral_storage, (100 * GI - GI - 10 * GI) * MILLI);
}

#[test]
fn pods_capacity_is_in_milli_units() {
    assert_eq!(m5_large().capacity(None).pods, 29_000);
    assert_eq!(m5_large().allocatable(None).pods, 29_000);
}

#[test]
fn kubelet_reservations_replace_the_defaults_per_resource() {
    let it = c5_xlarge();
    let k = kubelet(|k| {
        k.kube_reserved.insert("cpu".into(), "500m".into());
        k.system_reserved.insert("memory".into(), "1Gi".into());
        k.system_reserved.insert("cpu".into(), "100m".into());
    });
    let overhead = it.overhead(Some(&k));
    assert_eq!(overhead.cpu, 500 + 100);
    // kube-reserved memory keeps its default; system-reserved adds 1Gi.
    assert_eq!(overhead.memory, (11 * 58 + 255 + 1024 + 100) * MIB_MILLI);
    assert_eq!(it.allocatable(Some(&k)).cpu, 4000 - 600);
}

#[test]
fn kube_reserved_memory_keeps_the_eni_pod_count_when_max_pods_is_set() {
    // The AL2/AL2023 AMIs size kube-reserved from the ENI table, not from maxPods.
    let k = kubelet(|k| k.max_pods = Some(110));
    let overhead = c5_xlarge().overhead(Some(&k));
    assert_eq!(
        overhead.memory,
        (kube_reserved_memory_mib(58) + 100) * MIB_MILLI
    );
}

#[test]
fn eviction_hard_overrides_take_quantities_or_percentages_of_capacity() {
    let it = c5_xlarge();
    let capacity_mib = it.memory_capacity_mib();
    let kube_mib = 11 * 58 + 255;
    let cases: &[(&str, i64)] = &[
        ("500Mi", 500 * MIB_MILLI),
        ("10%", ceil_div(capacity_mib * MI, 10) * MILLI),
        ("100%", 0),
    ];
    for (value, eviction) in cases {
        let k = kubelet(|k| {
            k.eviction_hard
                .insert("memory.available".into(), value.to_string());
        });
        assert_eq!(
            it.overhead(Some(&k)).memory,
            kube_mib * MIB_MILLI + eviction,
            "{value}"
        );
    }
    let k = kubelet(|k| {
        k.eviction_hard
            .insert("nodefs.available".into(), "5Gi".into());
    });
    assert_eq!(
        it.overhead(Some(&k)).ephemeral_storage,
        (GI + 5 * GI) * MILLI
    );
}

#[test]
fn unreadable_kubelet_entries_fall_back_to_the_defaults() {
    let k = kubelet(|k| {
        k.kube_reserved.insert("cpu".into(), "a lot".into());
        k.eviction_hard
            .insert("memory.available".into(), "many%".into());
    });
    assert_eq!(c5_xlarge().overhead(Some(&k)), c5_xlarge().overhead(None));
}

#[test]
fn allocatable_is_never_negative() {
    let tiny = instance("t4g.nano", 2, 512, 2, 2, "arm64");
    let k = kubelet(|k| {
        k.kube_reserved.insert("memory".into(), "64Gi".into());
        k.kube_reserved.insert("cpu".into(), "64".into());
        k.system_reserved
            .insert("ephemeral-storage".into(), "100Gi".into());
    });
    let alloc = tiny.allocatable(Some(&k));
    assert_eq!(
        (alloc.cpu, alloc.memory, alloc.ephemeral_storage),
        (0, 0, 0)
    );
}

#[test]
fn accelerators_are_advertised_by_manufacturer() {
    let gpu = |manufacturer: &str, count| Gpu {
        count,
        name: "X".into(),
        manufacturer: manufacturer.into(),
        memory_mib: 16384,
    };
    let mut g5 = instance("g5.xlarge", 4, 16384, 4, 15, "amd64");
    g5.gpu = Some(gpu("NVIDIA", 1));
    let mut g4ad = instance("g4ad.xlarge", 4, 16384, 2, 4, "amd64");
    g4ad.gpu = Some(gpu("AMD", 1));
    let mut inf2 = instance("inf2.xlarge", 4, 16384, 4, 15, "amd64");
    inf2.accelerator = Some(Accelerator {
        count: 1,
        name: "Inferentia2".into(),
        manufacturer: "AWS".into(),
        memory_mib: 32768,
        cores: 2,
    });
    let cases: Vec<(InstanceType, Vec<(&str, i64)>)> = vec![
        (g5, vec![(RESOURCE_NVIDIA_GPU, 1000)]),
        (g4ad, vec![(RESOURCE_AMD_GPU, 1000)]),
        (
            inf2,
            vec![
                (RESOURCE_AWS_NEURON, 1000),
                (RESOURCE_AWS_NEURON_CORE, 2000),
            ],
        ),
        (c5_xlarge(), vec![]),
    ];
    for (it, want) in cases {
        let alloc = it.allocatable(None);
        let got: Vec<(&str, i64)> = alloc
            .extended
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(got, want, "{}", it.name);
    }
}

#[test]
fn ephemeral_storage_comes_from_the_root_volume_or_raid0_instance_store() {
    let mapping = |device: Option<&str>, root: Option<bool>, size: &str| BlockDeviceMapping {
        device_name: device.map(str::to_string),
        root_volume: root,
        ebs: Some(BlockDevice {
            volume_size: Some(Quantity(size.into())),
            ..BlockDevice::default()
        }),
    };
    let mut m5d = instance("m5d.large", 2, 8192, 3, 10, "amd64");
    m5d.local_nvme_gb = 75;
    let spec = |mappings: Vec<BlockDeviceMapping>, policy: Option<&str>| EC2NodeClassSpec {
        block_device_mappings: mappings,
        instance_store_policy: policy.map(str::to_string),
        ..EC2NodeClassSpec::default()
    };
    let cases: Vec<(InstanceType, EC2NodeClassSpec, i64)> = vec![
        (m5_large(), spec(vec![], None), 20 * GI),
        (
            m5_large(),
            spec(vec![mapping(Some("/dev/xvda"), None, "50Gi")], None),
            50 * GI,
        ),
        (
            m5_large(),
            spec(
                vec![
                    mapping(Some("/dev/xvda"), None, "50Gi"),
                    mapping(Some("/dev/xvdb"), Some(true), "100Gi"),
                ],
                None,
            ),
            100 * GI,
        ),
        (
            m5_large(),
            spec(vec![mapping(Some("/dev/xvdb"), None, "80Gi")], None),
            20 * GI,
        ),
        (m5d.clone(), spec(vec![], Some("RAID0")), 75_000_000_000),
        // RAID0 on a type without local disks keeps the root volume.
        (m5_large(), spec(vec![], Some("RAID0")), 20 * GI),
    ];
    for (it, spec, want) in cases {
        assert_eq!(
            it.ephemeral_storage_bytes(&spec).ok(),
            Some(want),
            "{} {:?}",
            it.name,
            spec
        );
    }
    let bad = spec(vec![mapping(None, Some(true), "big")], None);
    match m5_large().ephemeral_storage_bytes(&bad) {
        Err(CatalogError::Field { field, .. }) => {
            assert_eq!(field, "blockDeviceMappings[0].ebs.volumeSize")
        }
        other => panic!("expected a field error, got {other:?}"),
    }
}
