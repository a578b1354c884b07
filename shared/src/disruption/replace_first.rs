//! What the sweeper's plan says of a consolidation that replaces ([`launches_first`]), and
//! the replacement annotation of an earlier release's removals (`nodewright.io/replacement`:
//! the instance ids launched, comma-separated, or `none`), still read from nodes that
//! release began removing (`crate::removal::Record::read`).

use super::Reason;
use super::plan::{Action, Command};

pub use crate::api::labels::REPLACEMENT_ANNOTATION;

/// Whether the executor asks for `command`'s replacement before taking any of its nodes,
/// once for the pods of all of them: a consolidation's replace (its nodes go together or
/// not at all, and only for something cheaper).
pub fn launches_first(command: &Command) -> bool {
    command.action == Action::Replace && command.reason == Reason::Underutilized
}

/// The annotation's value for `ids`.
pub fn replacement_value(ids: &[String]) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.join(",")
}

/// The ids an annotation value names (`none` or empty: none).
pub fn parse_replacement(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "none")
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_a_consolidation_replace_launches_before_its_nodes_are_taken() {
        let command = |action, reason| Command {
            action,
            reason,
            nodes: vec!["a".into(), "b".into()],
            savings_per_hour: 0.1,
            replacement: Vec::new(),
        };
        let cases = [
            (Action::Replace, Reason::Underutilized, true),
            (Action::Delete, Reason::Underutilized, false),
            (Action::Replace, Reason::Expired, false),
            (Action::Replace, Reason::Drifted, false),
            (Action::Delete, Reason::Empty, false),
        ];
        for (action, reason, want) in cases {
            assert_eq!(
                launches_first(&command(action, reason)),
                want,
                "{action:?} {reason:?}"
            );
        }
    }

    #[test]
    fn the_annotation_round_trips_its_ids_and_reads_none_as_no_launch() {
        let v = replacement_value(&ids(&["i-1", "i-2"]));
        assert_eq!(v, "i-1,i-2");
        assert_eq!(parse_replacement(&v), ids(&["i-1", "i-2"]));
        assert_eq!(replacement_value(&[]), "none");
        assert_eq!(parse_replacement("none"), Vec::<String>::new());
        assert_eq!(parse_replacement(""), Vec::<String>::new());
        assert_eq!(parse_replacement(" i-1 ,, "), ids(&["i-1"]));
    }
}
