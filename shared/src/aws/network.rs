//! Subnets and security groups by selector terms (EC2 DescribeSubnets,
//! DescribeSecurityGroups), and the choice of one subnet per zone.

use std::collections::BTreeMap;

use crate::api::{CapacityReservationSelectorTerm, SelectorTerm};
use crate::catalog::Reservation;

use super::Ec2Adapter;
use super::convert::{filter, tag_map};
use super::errors::{AwsError, api};
use super::ports::NetworkDiscovery;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    pub zone_id: String,
    pub available_ips: u32,
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecurityGroup {
    pub id: String,
    pub name: String,
}

/// Which resource a term selects; decides what `id` and `name` filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorKind {
    Subnet,
    SecurityGroup,
}

/// EC2 filters as (name, values) pairs.
pub type Filters = Vec<(String, Vec<String>)>;

/// The EC2 filters (name, values) of one selector term, ANDed by EC2. A tag value `*`
/// means "has the key" (filter `tag-key`). A term with no field selects nothing (None):
/// an empty filter list would select every subnet of the account.
pub fn term_filters(kind: SelectorKind, term: &SelectorTerm) -> Result<Option<Filters>, AwsError> {
    let field = match kind {
        SelectorKind::Subnet => "subnetSelectorTerms",
        SelectorKind::SecurityGroup => "securityGroupSelectorTerms",
    };
    let mut filters = Vec::new();
    if let Some(id) = &term.id {
        let name = match kind {
            SelectorKind::Subnet => "subnet-id",
            SelectorKind::SecurityGroup => "group-id",
        };
        filters.push((name.to_string(), vec![id.clone()]));
    }
    if let Some(name) = &term.name {
        if kind == SelectorKind::Subnet {
            return Err(AwsError::InvalidSelector {
                field,
                reason: format!(
                    "`name` ({name:?}) selects security groups only; use `id` or `tags`"
                ),
            });
        }
        filters.push(("group-name".to_string(), vec![name.clone()]));
    }
    for (key, value) in &term.tags {
        if value == "*" {
            filters.push(("tag-key".to_string(), vec![key.clone()]));
        } else {
            filters.push((format!("tag:{key}"), vec![value.clone()]));
        }
    }
    Ok((!filters.is_empty()).then_some(filters))
}

/// One subnet per zone: the one with the most free addresses (ties: the smallest id, so
/// the choice is stable).
pub fn pick_subnet_per_zone(subnets: &[Subnet]) -> BTreeMap<String, Subnet> {
    let mut picked: BTreeMap<String, Subnet> = BTreeMap::new();
    for s in subnets {
        let better = match picked.get(&s.zone) {
            None => true,
            Some(kept) => {
                (s.available_ips, std::cmp::Reverse(&s.id))
                    > (kept.available_ips, std::cmp::Reverse(&kept.id))
            }
        };
        if better {
            picked.insert(s.zone.clone(), s.clone());
        }
    }
    picked
}

fn sdk_filters(filters: &[(String, Vec<String>)]) -> Vec<aws_sdk_ec2::types::Filter> {
    filters.iter().map(|(n, v)| filter(n, v)).collect()
}

impl NetworkDiscovery for Ec2Adapter {
    async fn subnets(&self, terms: &[SelectorTerm]) -> Result<Vec<Subnet>, AwsError> {
        let mut found: BTreeMap<String, Subnet> = BTreeMap::new();
        for term in terms {
            let Some(filters) = term_filters(SelectorKind::Subnet, term)? else {
                continue;
            };
            let items = self
                .client
                .describe_subnets()
                .set_filters(Some(sdk_filters(&filters)))
                .into_paginator()
                .items()
                .send()
                .collect::<Result<Vec<_>, _>>()
                .await
                .map_err(api(|source| AwsError::DescribeSubnets { source }))?;
            for s in items {
                let (Some(id), Some(zone)) = (s.subnet_id.clone(), s.availability_zone.clone())
                else {
                    continue;
                };
                let subnet = Subnet {
                    id: id.clone(),
                    zone,
                    zone_id: s.availability_zone_id.clone().unwrap_or_default(),
                    available_ips: s
                        .available_ip_address_count
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                    tags: tag_map(s.tags()),
                };
                found.insert(id, subnet);
            }
        }
        Ok(found.into_values().collect())
    }

    async fn security_groups(
        &self,
        terms: &[SelectorTerm],
    ) -> Result<Vec<SecurityGroup>, AwsError> {
        let mut found: BTreeMap<String, SecurityGroup> = BTreeMap::new();
        for term in terms {
            let Some(filters) = term_filters(SelectorKind::SecurityGroup, term)? else {
                continue;
            };
            let items = self
                .client
                .describe_security_groups()
                .set_filters(Some(sdk_filters(&filters)))
                .into_paginator()
                .items()
                .send()
                .collect::<Result<Vec<_>, _>>()
                .await
                .map_err(api(|source| AwsError::DescribeSecurityGroups { source }))?;
            for g in items {
                let Some(id) = g.group_id.clone() else {
                    continue;
                };
                let name = g.group_name.clone().unwrap_or_default();
                found.insert(id.clone(), SecurityGroup { id, name });
            }
        }
        Ok(found.into_values().collect())
    }

    async fn capacity_reservations(
        &self,
        terms: &[CapacityReservationSelectorTerm],
    ) -> Result<Vec<Reservation>, AwsError> {
        self.describe_reservations(terms).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, zone: &str, ips: u32) -> Subnet {
        Subnet {
            id: id.into(),
            zone: zone.into(),
            zone_id: String::new(),
            available_ips: ips,
            tags: BTreeMap::new(),
        }
    }

    #[test]
    fn the_subnet_with_most_free_addresses_is_picked_in_each_zone() {
        type Case = (Vec<Subnet>, Vec<(&'static str, &'static str)>);
        let table: Vec<Case> = vec![
            (vec![], vec![]),
            (vec![subnet("subnet-a", "z1", 10)], vec![("z1", "subnet-a")]),
            (
                vec![subnet("subnet-a", "z1", 10), subnet("subnet-b", "z1", 200)],
                vec![("z1", "subnet-b")],
            ),
            (
                vec![
                    subnet("subnet-b", "z1", 50),
                    subnet("subnet-a", "z1", 50),
                    subnet("subnet-c", "z2", 0),
                ],
                vec![("z1", "subnet-a"), ("z2", "subnet-c")],
            ),
        ];
        for (subnets, expected) in table {
            let picked: Vec<(String, String)> = pick_subnet_per_zone(&subnets)
                .into_iter()
                .map(|(zone, s)| (zone, s.id))
                .collect();
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|(z, s)| (z.to_string(), s.to_string()))
                .collect();
            assert_eq!(picked, expected, "subnets {subnets:?}");
        }
    }

    fn term(id: Option<&str>, name: Option<&str>, tags: &[(&str, &str)]) -> SelectorTerm {
        SelectorTerm {
            id: id.map(str::to_string),
            name: name.map(str::to_string),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn pairs(f: Option<Filters>) -> Option<Vec<(String, String)>> {
        f.map(|v| v.into_iter().map(|(n, vals)| (n, vals.join(","))).collect())
    }

    #[test]
    fn selector_terms_become_ec2_filters_with_star_meaning_key_exists() {
        use SelectorKind::*;
        let table = [
            (
                Subnet,
                term(Some("subnet-1"), None, &[]),
                Some(vec![("subnet-id", "subnet-1")]),
            ),
            (
                SecurityGroup,
                term(Some("sg-1"), None, &[]),
                Some(vec![("group-id", "sg-1")]),
            ),
            (
                SecurityGroup,
                term(None, Some("nodes"), &[]),
                Some(vec![("group-name", "nodes")]),
            ),
            (
                Subnet,
                term(
                    None,
                    None,
                    &[("karpenter.sh/discovery", "demo"), ("tier", "*")],
                ),
                Some(vec![
                    ("tag:karpenter.sh/discovery", "demo"),
                    ("tag-key", "tier"),
                ]),
            ),
            (Subnet, term(None, None, &[]), None),
        ];
        for (kind, t, expected) in table {
            let expected = expected.map(|v| {
                v.into_iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect()
            });
            assert_eq!(
                pairs(term_filters(kind, &t).expect("valid term")),
                expected,
                "{t:?}"
            );
        }
    }

    #[test]
    fn a_subnet_term_with_a_name_is_refused_naming_the_field() {
        let err = term_filters(SelectorKind::Subnet, &term(None, Some("x"), &[])).unwrap_err();
        assert!(err.to_string().contains("subnetSelectorTerms"), "{err}");
    }
}
