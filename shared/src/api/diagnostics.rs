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
