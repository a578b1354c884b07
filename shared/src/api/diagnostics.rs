//! The diagnostics vocabulary of the configuration API: how bad a problem is, where it is
//! (file, document, field), and the remarks a conversion or a load makes on the way. Loading
//! (`load.rs`), legacy conversion (`legacy.rs`) and validation all speak it.

use std::fmt;

/// How bad a problem is: an `Error` makes the input unusable (`plan` fails), a `Warning` is
/// worth telling but does not stop anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// One thing wrong with the inputs, located by file, document and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    /// `NodePool/default (document 2)`; empty when the problem is about the whole file.
    pub document: String,
    /// A field path such as `spec.template.spec.requirements[0].operator`; empty when the
    /// problem is about the whole document.
    pub field: String,
    pub message: String,
    pub severity: Severity,
}

impl Problem {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    /// `{file}: {document}: {field}: {message}`, leaving out the parts that are empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in [&self.file, &self.document, &self.field] {
            if !part.is_empty() {
                write!(f, "{part}: ")?;
            }
        }
        f.write_str(&self.message)
    }
}

/// Where a loaded NodePool or EC2NodeClass came from. `kind` is the kind as written, so a
/// NodePool converted from a `Provisioner` says `Provisioner`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Source {
    pub file: String,
    /// 1-based document number within the file.
    pub index: usize,
    pub kind: String,
    pub name: String,
}

impl Source {
    /// `NodePool/default (document 2)`.
    pub fn describe(&self) -> String {
        describe(&self.kind, &self.name, self.index, None)
    }
}

pub(super) fn describe(kind: &str, name: &str, index: usize, item: Option<usize>) -> String {
    let at = match item {
        Some(i) => format!("document {index}, item {}", i + 1),
        None => format!("document {index}"),
    };
    match (kind.is_empty(), name.is_empty()) {
        (true, _) => at,
        (false, true) => format!("{kind} ({at})"),
        (false, false) => format!("{kind}/{name} ({at})"),
    }
}

/// A mistake at one field of one object, before it is placed in a file and document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// A remark made while converting or loading one object: an error or a warning at a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub field: String,
    pub message: String,
    pub severity: Severity,
}

impl Note {
    pub fn error(field: impl Into<String>, message: impl Into<String>) -> Note {
        Note {
            field: field.into(),
            message: message.into(),
            severity: Severity::Error,
        }
    }
    pub fn warning(field: impl Into<String>, message: impl Into<String>) -> Note {
        Note {
            field: field.into(),
            message: message.into(),
            severity: Severity::Warning,
        }
    }
}

/// The problems validation found that loading did not already report: one at a field (or
/// inside one) where loading reported an error in the same document is left out. Loading sets
/// aside a field it cannot read and converts a legacy object as far as it goes, so without
/// this the same mistake would be reported twice, once as written and once as what was left.
pub fn not_yet_reported(loaded: &[Problem], checked: Vec<Problem>) -> Vec<Problem> {
    // A List item's document names its item; validation's names only the document.
    let document = |d: &str| {
        d.split(", item ")
            .next()
            .unwrap_or(d)
            .trim_end_matches(')')
            .to_owned()
    };
    let within = |field: &str, parent: &str| {
        field == parent
            || field
                .strip_prefix(parent)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    checked
        .into_iter()
        .filter(|c| {
            !loaded.iter().any(|l| {
                l.is_error()
                    && !l.field.is_empty()
                    && l.file == c.file
                    && document(&l.document) == document(&c.document)
                    && within(&c.field, &l.field)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(document: &str, field: &str, severity: Severity) -> Problem {
        Problem {
            file: "f.yaml".into(),
            document: document.into(),
            field: field.into(),
            message: "m".into(),
            severity,
        }
    }

    #[test]
    fn a_field_loading_reported_is_not_reported_again_nor_anything_inside_it() {
        let loaded = [
            problem(
                "Provisioner/p (document 1, item 2)",
                "spec.providerRef",
                Severity::Error,
            ),
            problem(
                "Provisioner/p (document 1, item 2)",
                "spec.labels",
                Severity::Warning,
            ),
        ];
        let checked = vec![
            problem(
                "Provisioner/p (document 1)",
                "spec.providerRef.name",
                Severity::Error,
            ),
            problem(
                "Provisioner/p (document 1)",
                "spec.providerRefs",
                Severity::Error,
            ),
            problem(
                "Provisioner/p (document 1)",
                "spec.labels[x]",
                Severity::Error,
            ),
            problem(
                "Provisioner/q (document 1)",
                "spec.providerRef",
                Severity::Error,
            ),
        ];
        let kept: Vec<String> = not_yet_reported(&loaded, checked)
            .into_iter()
            .map(|p| format!("{} {}", p.document, p.field))
            .collect();
        assert_eq!(
            kept,
            [
                "Provisioner/p (document 1) spec.providerRefs",
                "Provisioner/p (document 1) spec.labels[x]",
                "Provisioner/q (document 1) spec.providerRef",
            ]
        );
    }
}
