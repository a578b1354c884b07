//! `plan --capacity-reservations FILE`: the output of `aws ec2 describe-capacity-reservations`
//! (JSON), matched offline against each EC2NodeClass's `capacityReservationSelectorTerms` as
//! EC2's filters match them for the functions: by id, or by every tag (a value `*` for any),
//! owner and match criteria; active reservations only.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use nodewright::api::{CapacityReservationSelectorTerm, EC2NodeClass};
use nodewright::catalog::{Catalog, Reservation, ReservationKind};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Output {
    capacity_reservations: Vec<Described>,
}

/// One reservation as the AWS CLI prints it (the fields a plan needs).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Described {
    capacity_reservation_id: String,
    instance_type: String,
    availability_zone: String,
    #[serde(default)]
    owner_id: String,
    #[serde(default)]
    available_instance_count: u32,
    #[serde(default)]
    state: String,
    #[serde(default)]
    instance_match_criteria: String,
    #[serde(default)]
    reservation_type: Option<String>,
    #[serde(default)]
    end_date: Option<jiff::Timestamp>,
    #[serde(default)]
    tags: Vec<Tag>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Tag {
    key: String,
    value: String,
}

/// The reservations in `path`, or what is wrong with the file, named.
pub fn read(path: &Path) -> Result<Vec<Described>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let out: Output = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: not the JSON output of `aws ec2 describe-capacity-reservations`: {e}",
            path.display()
        )
    })?;
    Ok(out.capacity_reservations)
}

/// Whether `term` selects `r`.
pub fn selects(term: &CapacityReservationSelectorTerm, r: &Described) -> bool {
    if r.state != "active" {
        return false;
    }
    if let Some(id) = &term.id {
        return *id == r.capacity_reservation_id;
    }
    if term.tags.is_empty() && term.instance_match_criteria.is_none() {
        return false;
    }
    let tags: BTreeMap<&str, &str> = r
        .tags
        .iter()
        .map(|t| (t.key.as_str(), t.value.as_str()))
        .collect();
    term.tags
        .iter()
        .all(|(k, v)| tags.get(k.as_str()).is_some_and(|got| v == "*" || got == v))
        && term.owner_id.as_ref().is_none_or(|o| *o == r.owner_id)
        && term
            .instance_match_criteria
            .as_ref()
            .is_none_or(|m| *m == r.instance_match_criteria)
}

fn reservation(r: &Described) -> Reservation {
    Reservation {
        id: r.capacity_reservation_id.clone(),
        instance_type: r.instance_type.clone(),
        zone: r.availability_zone.clone(),
        owner_id: r.owner_id.clone(),
        available: r.available_instance_count,
        kind: r
            .reservation_type
            .as_deref()
            .and_then(ReservationKind::parse)
            .unwrap_or(ReservationKind::Default),
        end: r.end_date.map(SystemTime::from),
    }
}

/// Adds to `catalog` the reservations each class selects; the number each selects.
pub fn add(
    catalog: &mut Catalog,
    classes: &[EC2NodeClass],
    described: &[Described],
    now: SystemTime,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for class in classes {
        let terms = &class.spec.capacity_reservation_selector_terms;
        if terms.is_empty() {
            continue;
        }
        let selected: Vec<Reservation> = described
            .iter()
            .filter(|r| terms.iter().any(|t| selects(t, r)))
            .map(reservation)
            .collect();
        counts.insert(class.metadata.name.clone(), selected.len());
        catalog.add_reservations(&class.metadata.name, selected, now);
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use CapacityReservationSelectorTerm as Term;

    fn described(json: &str) -> Described {
        serde_json::from_str(json).expect("valid")
    }

    #[test]
    fn terms_select_active_reservations_by_id_or_every_tag_owner_and_criteria() {
        let r = described(
            r#"{"CapacityReservationId": "cr-0aa", "InstanceType": "p5.48xlarge",
                "AvailabilityZone": "us-east-1a", "OwnerId": "111122223333",
                "AvailableInstanceCount": 2, "State": "active",
                "InstanceMatchCriteria": "targeted", "ReservationType": "capacity-block",
                "EndDate": "2026-12-01T11:30:00+00:00",
                "Tags": [{"Key": "team", "Value": "ml"}, {"Key": "env", "Value": "prod"}]}"#,
        );
        let targeted = Term {
            instance_match_criteria: Some("targeted".into()),
            ..Term::new(None, None, &[("team", "ml")])
        };
        let open = Term {
            instance_match_criteria: Some("open".into()),
            ..Term::new(None, None, &[("team", "ml")])
        };
        let cases = [
            (Term::new(Some("cr-0aa"), None, &[]), true),
            (Term::new(Some("cr-0bb"), None, &[]), false),
            (Term::new(None, None, &[("team", "ml")]), true),
            (Term::new(None, None, &[("team", "ml"), ("env", "*")]), true),
            (Term::new(None, None, &[("team", "web")]), false),
            (Term::new(None, None, &[("owner", "*")]), false),
            (
                Term::new(None, Some("111122223333"), &[("team", "ml")]),
                true,
            ),
            (
                Term::new(None, Some("444455556666"), &[("team", "ml")]),
                false,
            ),
            (targeted, true),
            (open, false),
            (Term::new(None, None, &[]), false),
        ];
        for (t, want) in cases {
            assert_eq!(selects(&t, &r), want, "{t:?}");
        }
        let cancelled = Described {
            state: "cancelled".into(),
            ..r.clone()
        };
        assert!(!selects(&Term::new(Some("cr-0aa"), None, &[]), &cancelled));
        let read = reservation(&r);
        assert_eq!(read.kind, ReservationKind::CapacityBlock);
        assert_eq!(read.available, 2);
        assert!(read.end.is_some());
    }
}
