//! Capacity reservations by an EC2NodeClass's `capacityReservationSelectorTerms`
//! (DescribeCapacityReservations), as karpenter-provider-aws queries them: a term with an id
//! asks for that reservation, a term with tags (and an owner, match criteria) filters; every
//! query asks for active reservations only.

use std::collections::BTreeMap;
use std::time::SystemTime;

use aws_sdk_ec2::types::CapacityReservation;

use super::Ec2Adapter;
use super::convert::filter;
use super::errors::{AwsError, ErrorClass, api};
use crate::api::CapacityReservationSelectorTerm;
use crate::catalog::{Reservation, ReservationKind};

/// One DescribeCapacityReservations query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    Id(String),
    /// EC2 filters, ANDed.
    Filters(Vec<(String, Vec<String>)>),
}

/// The queries of one term: by id, or by its tags (a value `*` means "has the key"), owner
/// and match criteria, each with `state=active`. A term with neither asks nothing (it
/// would select every reservation of the account); validation refuses such a term.
pub fn queries(term: &CapacityReservationSelectorTerm) -> Vec<Query> {
    let mut out = Vec::new();
    if let Some(id) = &term.id {
        out.push(Query::Id(id.clone()));
    }
    if !term.tags.is_empty() || term.instance_match_criteria.is_some() {
        let mut filters = vec![("state".to_string(), vec!["active".to_string()])];
        if let Some(owner) = &term.owner_id {
            filters.push(("owner-id".to_string(), vec![owner.clone()]));
        }
        for (k, v) in &term.tags {
            if v == "*" {
                filters.push(("tag-key".to_string(), vec![k.clone()]));
            } else {
                filters.push((format!("tag:{k}"), vec![v.clone()]));
            }
        }
        if let Some(m) = &term.instance_match_criteria {
            filters.push(("instance-match-criteria".to_string(), vec![m.clone()]));
        }
        out.push(Query::Filters(filters));
    }
    out
}

/// Our reservation from EC2's, if it names what a launch needs.
pub fn reservation(r: &CapacityReservation) -> Option<Reservation> {
    let kind = match r.reservation_type.as_ref().map(|t| t.as_str()) {
        Some("capacity-block") => ReservationKind::CapacityBlock,
        _ => ReservationKind::Default,
    };
    Some(Reservation {
        id: r.capacity_reservation_id.clone()?,
        instance_type: r.instance_type.clone()?,
        zone: r.availability_zone.clone()?,
        owner_id: r.owner_id.clone().unwrap_or_default(),
        available: r
            .available_instance_count
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        kind,
        end: r.end_date.and_then(|d| SystemTime::try_from(d).ok()),
    })
}

impl Ec2Adapter {
    /// Active reservations matching any of `terms`, each once, by id.
    pub(super) async fn describe_reservations(
        &self,
        terms: &[CapacityReservationSelectorTerm],
    ) -> Result<Vec<Reservation>, AwsError> {
        let mut found: BTreeMap<String, Reservation> = BTreeMap::new();
        for query in terms.iter().flat_map(queries) {
            for r in self.query_reservations(&query).await? {
                found.insert(r.id.clone(), r);
            }
        }
        Ok(found.into_values().collect())
    }

    async fn query_reservations(&self, query: &Query) -> Result<Vec<Reservation>, AwsError> {
        let call = match query {
            // EC2 refuses MaxResults with ids; the one answer is not paginated.
            Query::Id(id) => self
                .client
                .describe_capacity_reservations()
                .capacity_reservation_ids(id)
                .filters(filter("state", &["active".to_string()])),
            Query::Filters(filters) => self
                .client
                .describe_capacity_reservations()
                .set_filters(Some(filters.iter().map(|(n, v)| filter(n, v)).collect()))
                .max_results(1000),
        };
        let items = call
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(api(|source| AwsError::DescribeCapacityReservations {
                source,
            }));
        match items {
            Ok(items) => Ok(items.iter().filter_map(reservation).collect()),
            // A reservation selected by id that no longer exists selects nothing.
            Err(e) if matches!(query, Query::Id(_)) && e.class() == ErrorClass::NotFound => {
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CapacityReservationSelectorTerm as Term;

    fn f(name: &str, value: &str) -> (String, Vec<String>) {
        (name.to_string(), vec![value.to_string()])
    }

    #[test]
    fn each_term_asks_for_its_id_or_its_active_tagged_reservations() {
        let cases = [
            (
                Term::new(Some("cr-0aa"), None, &[]),
                vec![Query::Id("cr-0aa".into())],
            ),
            (
                Term::new(None, Some("111122223333"), &[("team", "ml")]),
                vec![Query::Filters(vec![
                    f("state", "active"),
                    f("owner-id", "111122223333"),
                    f("tag:team", "ml"),
                ])],
            ),
            (
                Term::new(None, None, &[("karpenter", "*")]),
                vec![Query::Filters(vec![
                    f("state", "active"),
                    f("tag-key", "karpenter"),
                ])],
            ),
            (Term::new(None, None, &[]), vec![]),
        ];
        for (t, want) in cases {
            assert_eq!(queries(&t), want, "{t:?}");
        }
        let targeted = Term {
            instance_match_criteria: Some("targeted".into()),
            ..Default::default()
        };
        assert_eq!(
            queries(&targeted),
            vec![Query::Filters(vec![
                f("state", "active"),
                f("instance-match-criteria", "targeted"),
            ])]
        );
    }

    #[test]
    fn a_reservation_needs_an_id_a_type_and_a_zone_and_reads_its_kind_and_room() {
        use aws_sdk_ec2::types::CapacityReservationType;
        let full = CapacityReservation::builder()
            .capacity_reservation_id("cr-0aa")
            .instance_type("p5.48xlarge")
            .availability_zone("us-east-1a")
            .owner_id("111122223333")
            .available_instance_count(2)
            .reservation_type(CapacityReservationType::CapacityBlock)
            .end_date(aws_smithy_types::DateTime::from_secs(2_000_000_000))
            .build();
        let r = reservation(&full).expect("complete");
        assert_eq!(r.kind, ReservationKind::CapacityBlock);
        assert_eq!(r.available, 2);
        assert_eq!(
            r.end,
            Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(2_000_000_000))
        );
        let odcr = CapacityReservation::builder()
            .capacity_reservation_id("cr-0bb")
            .instance_type("m5.large")
            .availability_zone("us-east-1b")
            .build();
        let r = reservation(&odcr).expect("complete");
        assert_eq!(
            (r.kind, r.available, r.end),
            (ReservationKind::Default, 0, None)
        );
        let no_zone = CapacityReservation::builder()
            .capacity_reservation_id("cr-0cc")
            .instance_type("m5.large")
            .build();
        assert_eq!(reservation(&no_zone), None);
    }
}
