//! Property tests: for random mixes of pods and constraints, the plan never breaks a rule.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::testkit::*;
use super::*;
use crate::catalog::Catalog;
use crate::resources::Resources;

const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];
const ZONE_LABEL: &str = crate::api::labels::ZONE;

#[derive(Debug, Clone, Copy)]
enum Kind {
    Free,
    ZoneSpread,
    HostSpread,
    ZoneAffinity,
    HostAnti,
    /// Prefers us-east-1b, which the NodePool offers: the preference must be met.
    PreferZone,
    /// Prefers a zone no offering has, then us-east-1c: the first is relaxed, the second met.
    PreferUnmet,
    /// A `ScheduleAnyway` zone spread this NodePool can meet: it must be met.
    SoftZoneSpread,
    /// A preferred hostname anti-affinity to its own app, which new nodes always meet.
    SoftHostAnti,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Free),
        Just(Kind::ZoneSpread),
        Just(Kind::HostSpread),
        Just(Kind::ZoneAffinity),
        Just(Kind::HostAnti),
        Just(Kind::PreferZone),
        Just(Kind::PreferUnmet),
        Just(Kind::SoftZoneSpread),
        Just(Kind::SoftHostAnti)
    ]
}

fn workload() -> impl Strategy<Value = Vec<(Kind, i64, i64, usize)>> {
    let cpu = prop::sample::select(vec![100i64, 250, 500, 1000, 1500, 3000]);
    let mem = prop::sample::select(vec![100i64, 512, 1024, 2048, 4096, 16384]);
    prop::collection::vec((kind(), cpu, mem, 1usize..12), 1..6)
}

fn build(workloads: &[(Kind, i64, i64, usize)]) -> Vec<PodDemand> {
    let mut out = vec![];
    for (w, (k, cpu, mem, n)) in workloads.iter().enumerate() {
        let app = format!("app{w}");
        for i in 0..*n {
            let b = pod(&format!("{app}-{i}"), *cpu, mem * MI).label("app", &app);
            let b = match k {
                Kind::Free => b,
                Kind::ZoneSpread => b.spread(TopologyKey::Zone, 1, &app),
                Kind::HostSpread => b.spread(TopologyKey::Hostname, 1, &app),
                Kind::ZoneAffinity => b.affinity(TopologyKey::Zone, &app),
                Kind::HostAnti => b.anti(TopologyKey::Hostname, &app),
                Kind::SoftZoneSpread => b.spread_anyway(TopologyKey::Zone, 1, &app),
                Kind::SoftHostAnti => b.prefer_anti(TopologyKey::Hostname, &app),
                Kind::PreferZone => b.prefer(ZONE_LABEL, &["us-east-1b"]),
                Kind::PreferUnmet => b
                    .prefer(ZONE_LABEL, &["nowhere-1a"])
                    .prefer(ZONE_LABEL, &["us-east-1c"]),
            };
            out.push(b.build());
        }
    }
    out
}

fn check(workloads: &[(Kind, i64, i64, usize)], cat: &Catalog) {
    let pods = build(workloads);
    let plan = solve(
        &Snapshot {
            pods: pods.clone(),
            ..Default::default()
        },
        cat,
        &[pool("default").build()],
        &[class("default")],
    );
    let by_key: HashMap<String, &PodDemand> = pods.iter().map(|p| (p.key(), p)).collect();

    // Every pod is accounted for exactly once.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for c in &plan.node_claims {
        for p in &c.pods {
            *seen.entry(p.clone()).or_default() += 1;
        }
    }
    for u in &plan.unschedulable {
        *seen.entry(u.pod.clone()).or_default() += 1;
    }
    assert_eq!(seen.len(), pods.len(), "some pod is missing from the plan");
    assert!(
        seen.values().all(|&n| n == 1),
        "a pod is placed twice or both placed and unschedulable"
    );

    let mut zone_members: BTreeMap<(String, String), u32> = BTreeMap::new();
    for c in &plan.node_claims {
        // Every listed type holds every pod of the claim.
        let mut sum = Resources::default();
        for p in &c.pods {
            sum.add(&by_key[p].requests);
        }
        assert_eq!(sum, c.requests);
        assert!(c.instance_types.len() <= MAX_INSTANCE_TYPES && !c.instance_types.is_empty());
        for name in &c.instance_types {
            let it = &cat
                .entries
                .iter()
                .find(|e| &e.instance_type.name == name)
                .unwrap()
                .instance_type;
            assert!(
                sum.fits_in(&it.allocatable(None)),
                "{name} cannot hold {sum}"
            );
        }
        assert!(c.zones.contains(&c.zone));
        // Per-node topology rules.
        let mut per_app: BTreeMap<&str, u32> = BTreeMap::new();
        for p in &c.pods {
            *per_app.entry(by_key[p].labels["app"].as_str()).or_default() += 1;
        }
        for (w, (k, ..)) in workloads.iter().enumerate() {
            let app = format!("app{w}");
            let n = per_app.get(app.as_str()).copied().unwrap_or(0);
            match k {
                Kind::HostAnti | Kind::HostSpread | Kind::SoftHostAnti => {
                    assert!(n <= 1, "{n} pods of {app} ({k:?}) share a node")
                }
                Kind::ZoneSpread | Kind::SoftZoneSpread | Kind::ZoneAffinity if n > 0 => {
                    assert_eq!(
                        c.zones.len(),
                        1,
                        "{app} ({k:?}) on a claim not pinned to a zone"
                    );
                    *zone_members
                        .entry((app.clone(), c.zone.clone()))
                        .or_default() += n;
                }
                Kind::PreferZone if n > 0 => {
                    assert_eq!(c.zones, vec!["us-east-1b"], "{app} off its preferred zone")
                }
                Kind::PreferUnmet if n > 0 => {
                    assert_eq!(c.zones, vec!["us-east-1c"], "{app} off its met preference")
                }
                _ => {}
            }
        }
    }
    // A preference never leaves a pod pending: this NodePool can hold every pod.
    for u in &plan.unschedulable {
        let k = by_key[&u.pod].labels["app"].trim_start_matches("app");
        let k = workloads[k.parse::<usize>().unwrap()].0;
        assert!(
            !matches!(
                k,
                Kind::PreferZone | Kind::PreferUnmet | Kind::SoftZoneSpread | Kind::SoftHostAnti
            ),
            "{} ({k:?}) left pending: {}",
            u.pod,
            u.reason
        );
    }
    for (w, (k, ..)) in workloads.iter().enumerate() {
        let app = format!("app{w}");
        let counts: Vec<u32> = ZONES
            .iter()
            .map(|z| {
                zone_members
                    .get(&(app.clone(), z.to_string()))
                    .copied()
                    .unwrap_or(0)
            })
            .collect();
        match k {
            Kind::ZoneSpread | Kind::SoftZoneSpread => {
                let (max, min) = (counts.iter().max().unwrap(), counts.iter().min().unwrap());
                assert!(max - min <= 1, "{app} zone spread {counts:?}");
            }
            Kind::ZoneAffinity => assert!(
                counts.iter().filter(|&&c| c > 0).count() <= 1,
                "{app} split {counts:?}"
            ),
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_plan_keeps_every_constraint(workloads in workload()) {
        check(&workloads, &standard_catalog(ZONES));
    }
}
