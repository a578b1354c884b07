//! Problems as every command prints them: one line each on stderr, `error:` or `warning:`
//! first, then file, document, field and what is wrong.

use nodewright::api::{Problem, Severity};
use serde_json::{Value, json};

pub fn label(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// `error: file: document: field: message`, one line per problem, on stderr.
pub fn print(problems: &[Problem]) {
    for p in problems {
        eprintln!("{}: {p}", label(p.severity));
    }
}

pub fn any_error(problems: &[Problem]) -> bool {
    problems.iter().any(Problem::is_error)
}

/// One problem as data, for `-o json|yaml`.
pub fn to_json(p: &Problem) -> Value {
    json!({
        "severity": label(p.severity),
        "file": p.file,
        "document": p.document,
        "field": p.field,
        "message": p.message,
    })
}
