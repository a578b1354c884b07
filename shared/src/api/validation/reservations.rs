//! An EC2NodeClass's `capacityReservationSelectorTerms`, checked as Karpenter's CRD checks
//! them: each term names a reservation id, or tags (with an optional owning account and
//! match criteria), never both, and at most 30 terms.

use super::nodeclass::err;
use crate::api::CapacityReservationSelectorTerm;
use crate::api::diagnostics::FieldError;

const FIELD: &str = "spec.capacityReservationSelectorTerms";
const MAX_TERMS: usize = 30;

/// Every problem of the class's reservation terms.
pub fn reservation_term_errors(terms: &[CapacityReservationSelectorTerm]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if terms.len() > MAX_TERMS {
        errors.push(err(
            FIELD,
            format!("{} terms; at most {MAX_TERMS}", terms.len()),
        ));
    }
    for (i, t) in terms.iter().enumerate() {
        term_errors(&format!("{FIELD}[{i}]"), t, &mut errors);
    }
    errors
}

fn term_errors(at: &str, t: &CapacityReservationSelectorTerm, errors: &mut Vec<FieldError>) {
    let selects = t.tags.is_empty() && t.instance_match_criteria.is_none();
    match &t.id {
        None if selects => errors.push(err(
            at,
            "expected id, or tags (with ownerID or instanceMatchCriteria if wanted)",
        )),
        Some(_) if !t.tags.is_empty() || t.owner_id.is_some() => errors.push(err(
            format!("{at}.id"),
            "id is mutually exclusive with tags and ownerID",
        )),
        Some(id) if !is_reservation_id(id) => errors.push(err(
            format!("{at}.id"),
            format!(
                "{id:?} is not a capacity reservation id (cr- then lowercase letters and digits)"
            ),
        )),
        _ => {}
    }
    if let Some(owner) = &t.owner_id
        && !(owner.len() == 12 && owner.bytes().all(|b| b.is_ascii_digit()))
    {
        errors.push(err(
            format!("{at}.ownerID"),
            format!("{owner:?} is not a 12-digit AWS account id"),
        ));
    }
    if let Some(m) = &t.instance_match_criteria
        && m != "open"
        && m != "targeted"
    {
        errors.push(err(
            format!("{at}.instanceMatchCriteria"),
            format!("{m:?} is not allowed; allowed: open, targeted"),
        ));
    }
    for (k, v) in &t.tags {
        if k.is_empty() || v.is_empty() {
            errors.push(err(
                format!("{at}.tags"),
                format!("empty tag keys or values are not allowed (use \"*\" to match any value), got {k:?}: {v:?}"),
            ));
        }
    }
}

/// `^cr-[0-9a-z]+$`, as Karpenter's CRD pattern.
fn is_reservation_id(id: &str) -> bool {
    id.strip_prefix("cr-").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(
        id: Option<&str>,
        owner: Option<&str>,
        tags: &[(&str, &str)],
        criteria: Option<&str>,
    ) -> CapacityReservationSelectorTerm {
        CapacityReservationSelectorTerm {
            instance_match_criteria: criteria.map(str::to_string),
            ..CapacityReservationSelectorTerm::new(id, owner, tags)
        }
    }

    #[test]
    fn each_term_names_an_id_or_tags_as_karpenters_crd_allows() {
        let at = "spec.capacityReservationSelectorTerms[0]";
        let cases: Vec<(CapacityReservationSelectorTerm, Vec<String>)> = vec![
            (term(Some("cr-0123456789abcdef0"), None, &[], None), vec![]),
            (
                term(None, Some("111122223333"), &[("team", "ml")], None),
                vec![],
            ),
            (term(None, None, &[("team", "*")], Some("targeted")), vec![]),
            (term(None, None, &[], Some("open")), vec![]),
            (term(None, None, &[], None), vec![at.to_string()]),
            (
                term(None, Some("111122223333"), &[], None),
                vec![at.to_string()],
            ),
            (
                term(Some("cr-0aa"), None, &[("team", "ml")], None),
                vec![format!("{at}.id")],
            ),
            (
                term(Some("cr-0aa"), Some("111122223333"), &[], None),
                vec![format!("{at}.id")],
            ),
            (
                term(Some("cr-0AA"), None, &[], None),
                vec![format!("{at}.id")],
            ),
            (term(Some("cr-"), None, &[], None), vec![format!("{at}.id")]),
            (
                term(Some("odcr-1"), None, &[], None),
                vec![format!("{at}.id")],
            ),
            (
                term(None, Some("1111"), &[("team", "ml")], None),
                vec![format!("{at}.ownerID")],
            ),
            (
                term(None, None, &[("team", "ml")], Some("any")),
                vec![format!("{at}.instanceMatchCriteria")],
            ),
            (
                term(None, None, &[("team", "")], None),
                vec![format!("{at}.tags")],
            ),
        ];
        for (t, want) in cases {
            let got: Vec<String> = reservation_term_errors(std::slice::from_ref(&t))
                .into_iter()
                .map(|e| e.field)
                .collect();
            assert_eq!(got, want, "{t:?}");
        }
    }

    #[test]
    fn at_most_thirty_terms() {
        let terms = vec![term(Some("cr-0aa"), None, &[], None); 31];
        let fields: Vec<String> = reservation_term_errors(&terms)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, ["spec.capacityReservationSelectorTerms"]);
        assert!(reservation_term_errors(&terms[..30]).is_empty());
    }
}
