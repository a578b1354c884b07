//! The marker an earlier release's sweeper put on a node it began removing: the
//! `nodewright.io/disruption` annotation, `<reason> <RFC 3339 start>`. Removals are recorded
//! in `nodewright.io/removal` now (`crate::removal::Record`); a node that release left
//! carrying the marker is read as a record of it.

use jiff::Timestamp;

use super::Reason;

/// On a node being removed by the sweeper: `<reason> <RFC 3339 start>`. Written empty when
/// a removal is called off (a merge patch through the annotation port cannot remove it).
pub const DISRUPTION_ANNOTATION: &str = "nodewright.io/disruption";

/// The annotation's value for a removal of `reason` begun at `started`.
pub fn removal_value(reason: Reason, started: Timestamp) -> String {
    format!("{} {started}", reason.as_str())
}

/// The reason and start the annotation holds; `None` for an empty or unreadable value.
pub fn parse_removal(value: &str) -> Option<(Reason, Timestamp)> {
    let (reason, started) = value.split_once(' ')?;
    Some((Reason::parse(reason)?, started.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_marker_reads_back_what_was_written_and_anything_else_is_none() {
        let at: Timestamp = "2026-03-02T10:00:00Z".parse().unwrap();
        for reason in [
            Reason::Empty,
            Reason::Expired,
            Reason::Underutilized,
            Reason::Drifted,
            Reason::Unhealthy,
            Reason::ScaleDown,
        ] {
            assert_eq!(
                parse_removal(&removal_value(reason, at)),
                Some((reason, at))
            );
            // sweep-plan's JSON spells it as the marker does.
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
        for other in [
            "",
            "expired",
            "expired yesterday",
            "bored 2026-03-02T10:00:00Z",
        ] {
            assert_eq!(parse_removal(other), None, "{other:?}");
        }
    }
}
