//! `-o table|wide|json|yaml`, as kubectl spells it.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns for a person.
    Table,
    /// The table with more columns, where the command has more to show.
    Wide,
    /// JSON, for scripts.
    Json,
    /// YAML, for scripts.
    Yaml,
}

impl Output {
    /// True for the formats that print data rather than a table.
    pub fn is_data(self) -> bool {
        matches!(self, Output::Json | Output::Yaml)
    }
}

/// Prints `value` as JSON (pretty) or YAML; `false` when it could not be serialized.
pub fn print_data(value: &impl Serialize, format: Output) -> bool {
    let text = match format {
        Output::Yaml => serde_yaml::to_string(value).ok(),
        _ => serde_json::to_string_pretty(value).ok().map(|t| t + "\n"),
    };
    match text {
        Some(t) => {
            print!("{t}");
            true
        }
        None => {
            eprintln!("error: the result could not be written as {format:?}");
            false
        }
    }
}
