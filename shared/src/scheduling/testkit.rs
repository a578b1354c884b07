//! Builders that keep solver tests short (like Karpenter's `test.NodePool(...)`).

use std::collections::BTreeMap;

use super::pod::{AffinityTerm, PodDemand, Spread, TopologyKey};
use super::requirements::Requirement;
use super::selector::Selector;
use super::taints::Toleration;
use crate::api::*;
use crate::catalog::{CapacityType, Catalog, CatalogEntry, InstanceType, Offering};
use crate::resources::Resources;

pub const GI: i64 = (1 << 30) * 1000;
pub const MI: i64 = (1 << 20) * 1000;

/// An instance type with EC2-like ENI limits: (enis, ips per eni) grow with size.
pub fn itype(name: &str, vcpu: u32, memory_gib: u64) -> InstanceType {
    let (family, size) = name.split_once('.').unwrap_or((name, ""));
    let (enis, ips) = match vcpu {
        0..=2 => (3, 10),
        3..=4 => (4, 15),
        5..=16 => (4, 15),
        17..=32 => (8, 30),
        _ => (15, 50),
    };
    InstanceType {
        name: name.into(),
        family: family.into(),
        category: family.chars().take(1).collect(),
        generation: family
            .chars()
            .find(|c| c.is_ascii_digit())
            .and_then(|c| c.to_digit(10))
            .unwrap_or(5),
        size: size.into(),
        vcpu,
        memory_mib: memory_gib * 1024,
        arch: if family.contains('g') && family.len() > 2 {
            "arm64".into()
        } else {
            "amd64".into()
        },
        hypervisor: "nitro".into(),
        bare_metal: false,
        burstable: false,
        max_enis: enis,
        ipv4_per_eni: ips,
        gpu: None,
        local_nvme_gb: 0,
        network_bandwidth_mbps: 10_000,
        ..InstanceType::default()
    }
}

/// A catalog where each (type, on-demand price) is offered in every zone, spot at 40%.
pub fn catalog(types: &[(InstanceType, f64)], zones: &[&str]) -> Catalog {
    Catalog {
        entries: types
            .iter()
            .map(|(it, price)| CatalogEntry {
                instance_type: it.clone(),
                offerings: zones
                    .iter()
                    .flat_map(|z| {
                        [
                            Offering {
                                zone: z.to_string(),
                                capacity_type: CapacityType::OnDemand,
                                price: *price,
                                available: true,
                            },
                            Offering {
                                zone: z.to_string(),
                                capacity_type: CapacityType::Spot,
                                price: price * 0.4,
                                available: true,
                            },
                        ]
                    })
                    .collect(),
            })
            .collect(),
        spot_prices_estimated: true,
        reservations: Default::default(),
    }
}

/// A c/m/r family ladder priced like us-east-1 (c5 $0.0425, m5 $0.048, r5 $0.063 per vCPU-hour).
pub fn standard_catalog(zones: &[&str]) -> Catalog {
    let mut types = vec![];
    for (family, gib_per_cpu, per_cpu) in [("c5", 2, 0.0425), ("m5", 4, 0.048), ("r5", 8, 0.063)] {
        for (size, cpu) in [
            ("large", 2),
            ("xlarge", 4),
            ("2xlarge", 8),
            ("4xlarge", 16),
            ("8xlarge", 32),
            ("12xlarge", 48),
        ] {
            types.push((
                itype(&format!("{family}.{size}"), cpu, (cpu * gib_per_cpu) as u64),
                per_cpu * cpu as f64,
            ));
        }
    }
    catalog(&types, zones)
}

/// `pods` planned on `pools` over the standard catalog in `zones`, nothing running yet.
pub fn solve_with(
    zones: &[&str],
    pods: Vec<PodDemand>,
    pools: &[crate::api::NodePool],
) -> super::ProvisioningPlan {
    super::solve(
        &super::Snapshot {
            pods,
            ..Default::default()
        },
        &standard_catalog(zones),
        pools,
        &[class("default")],
    )
}

pub fn class(name: &str) -> EC2NodeClass {
    EC2NodeClass {
        metadata: Meta {
            name: name.into(),
            ..Default::default()
        },
        spec: EC2NodeClassSpec::default(),
    }
}

pub struct PoolBuilder(pub NodePool);

pub fn pool(name: &str) -> PoolBuilder {
    PoolBuilder(NodePool {
        metadata: Meta {
            name: name.into(),
            ..Default::default()
        },
        spec: NodePoolSpec {
            template: NodeClaimTemplate {
                metadata: TemplateMeta::default(),
                spec: NodeClaimTemplateSpec {
                    node_class_ref: NodeClassRef {
                        group: "karpenter.k8s.aws".into(),
                        kind: "EC2NodeClass".into(),
                        name: "default".into(),
                    },
                    ..Default::default()
                },
            },
            ..Default::default()
        },
    })
}

impl PoolBuilder {
    pub fn req(mut self, key: &str, op: Operator, values: &[&str]) -> Self {
        self.0
            .spec
            .template
            .spec
            .requirements
            .push(NodeSelectorRequirement {
                key: key.into(),
                operator: op,
                values: values.iter().map(|s| s.to_string()).collect(),
                min_values: None,
            });
        self
    }
    pub fn min_values(mut self, key: &str, op: Operator, values: &[&str], min: u32) -> Self {
        self = self.req(key, op, values);
        self.0
            .spec
            .template
            .spec
            .requirements
            .last_mut()
            .unwrap()
            .min_values = Some(min);
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .spec
            .template
            .metadata
            .labels
            .insert(k.into(), v.into());
        self
    }
    pub fn taint(mut self, k: &str, v: &str) -> Self {
        self.0.spec.template.spec.taints.push(Taint {
            key: k.into(),
            value: Some(v.into()),
            effect: TaintEffect::NoSchedule,
        });
        self
    }
    pub fn limit(mut self, k: &str, v: &str) -> Self {
        self.0.spec.limits.insert(k.into(), Quantity(v.into()));
        self
    }
    pub fn weight(mut self, w: i32) -> Self {
        self.0.spec.weight = Some(w);
        self
    }
    pub fn replicas(mut self, n: i64) -> Self {
        self.0.spec.replicas = Some(n);
        self
    }
    pub fn build(self) -> NodePool {
        self.0
    }
}

pub struct PodBuilder(pub PodDemand);

pub fn pod(name: &str, cpu_milli: i64, memory: i64) -> PodBuilder {
    PodBuilder(PodDemand::simple(
        "default",
        name,
        Resources {
            cpu: cpu_milli,
            memory,
            ..Default::default()
        },
    ))
}

impl PodBuilder {
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(k.into(), v.into());
        self
    }
    pub fn select(mut self, k: &str, v: &str) -> Self {
        for alt in &mut self.0.requirements {
            alt.add(k, Requirement::in_values([v.to_string()]));
        }
        self
    }
    pub fn require(mut self, k: &str, op: Operator, values: &[&str]) -> Self {
        let values: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        for alt in &mut self.0.requirements {
            alt.add(k, Requirement::from_api(op, &values, None));
        }
        self
    }
    /// A preferred node-affinity term lighter than every one added before it.
    pub fn prefer(mut self, k: &str, values: &[&str]) -> Self {
        let mut term = super::requirements::Requirements::new();
        term.add(
            k,
            Requirement::in_values(values.iter().map(|v| v.to_string())),
        );
        self.0.preferred.push(term);
        self
    }
    pub fn tolerate(mut self, k: &str, v: &str) -> Self {
        self.0.tolerations.push(Toleration {
            key: k.into(),
            exists: false,
            value: v.into(),
            effect: None,
        });
        self
    }
    pub fn gpu(mut self, n: i64) -> Self {
        self.0.requests.set("nvidia.com/gpu", n * 1000);
        self
    }
    pub fn extended(mut self, name: &str, n: i64) -> Self {
        self.0.requests.set(name, n * 1000);
        self
    }
    fn selector(app: &str) -> Selector {
        let mut labels = BTreeMap::new();
        labels.insert("app".to_string(), app.to_string());
        Selector::from_k8s(
            &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(labels),
                match_expressions: None,
            },
        )
        .unwrap()
    }
    pub fn spread(mut self, key: TopologyKey, skew: u32, app: &str) -> Self {
        self.0
            .spread
            .push(Spread::new(key, skew, Self::selector(app)));
        self
    }
    /// A `whenUnsatisfiable: ScheduleAnyway` spread.
    pub fn spread_anyway(mut self, key: TopologyKey, skew: u32, app: &str) -> Self {
        self.0
            .soft_spread
            .push(Spread::new(key, skew, Self::selector(app)));
        self
    }
    /// Changes the last required spread added (`minDomains`, the policies).
    pub fn with_spread(mut self, f: impl FnOnce(&mut Spread)) -> Self {
        f(self.0.spread.last_mut().expect("a spread to change"));
        self
    }
    pub fn anti(mut self, key: TopologyKey, app: &str) -> Self {
        self.0.anti_affinity.push(AffinityTerm {
            key,
            selector: Self::selector(app),
            namespaces: vec!["default".into()],
            namespace_selector: None,
        });
        self
    }
    pub fn affinity(mut self, key: TopologyKey, app: &str) -> Self {
        self.0.affinity.push(AffinityTerm {
            key,
            selector: Self::selector(app),
            namespaces: vec!["default".into()],
            namespace_selector: None,
        });
        self
    }
    /// A preferred pod anti-affinity term, lighter than those added before it.
    pub fn prefer_anti(mut self, key: TopologyKey, app: &str) -> Self {
        self.0.soft_anti_affinity.push(AffinityTerm {
            key,
            selector: Self::selector(app),
            namespaces: vec!["default".into()],
            namespace_selector: None,
        });
        self
    }
    /// A preferred pod affinity term, lighter than those added before it.
    pub fn prefer_affinity(mut self, key: TopologyKey, app: &str) -> Self {
        self.0.soft_affinity.push(AffinityTerm {
            key,
            selector: Self::selector(app),
            namespaces: vec!["default".into()],
            namespace_selector: None,
        });
        self
    }
    pub fn build(self) -> PodDemand {
        self.0
    }
}

pub fn pods(
    prefix: &str,
    n: usize,
    f: impl Fn(PodBuilder) -> PodBuilder,
    cpu: i64,
    mem: i64,
) -> Vec<PodDemand> {
    (0..n)
        .map(|i| f(pod(&format!("{prefix}-{i}"), cpu, mem)).build())
        .collect()
}
