//! The parts of the project's Markdown the doc tests read: fenced code blocks and tables.

use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ sits in the repository")
        .to_path_buf()
}

/// README.md, CONTRIBUTING.md and every page under docs/, as (path relative to the root, text).
pub fn pages() -> Vec<(String, String)> {
    let root = root();
    let mut paths = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let name = p.strip_prefix(&root).unwrap_or(&p).display().to_string();
            (name, text)
        })
        .collect()
}

/// One fenced code block: its info string (`sh`, `console`, ...), its first line's number in
/// the page (1-based), and its lines.
#[derive(Debug, Clone)]
pub struct Block {
    pub info: String,
    pub line: usize,
    pub lines: Vec<String>,
}

/// Every fenced block of a page (``` fences, at any indentation).
pub fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, String, Vec<String>)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let indent = line[..line.len() - trimmed.len()].to_string();
                    open = Some((info.trim().to_string(), i + 2, indent, Vec::new()));
                }
            }
            Some((info, start, indent, lines)) => {
                if trimmed.starts_with("```") {
                    out.push(Block {
                        info: std::mem::take(info),
                        line: *start,
                        lines: std::mem::take(lines),
                    });
                    open = None;
                } else {
                    lines.push(
                        line.strip_prefix(indent.as_str())
                            .unwrap_or(line)
                            .to_string(),
                    );
                }
            }
        }
    }
    out
}

/// The rows of every pipe table that follows a line equal to `marker` (an HTML comment
/// naming the table), each row split into trimmed cells; header and rule lines left out.
pub fn table_after(text: &str, marker: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut lines = text.lines().skip_while(|l| l.trim() != marker).skip(1);
    // The header and the rule under it.
    let Some(_) = lines.find(|l| l.trim_start().starts_with('|')) else {
        return rows;
    };
    lines.next();
    for line in lines {
        let line = line.trim();
        if !line.starts_with('|') {
            break;
        }
        rows.push(split_row(line));
    }
    rows
}

/// `| a | b \| c |` -> `["a", "b | c"]`.
fn split_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell).trim().to_string()),
            c => cell.push(c),
        }
    }
    cells.push(cell.trim().to_string());
    cells
}

/// The text between the first pair of backticks in a cell, or the cell itself.
pub fn code(cell: &str) -> String {
    let mut parts = cell.split('`');
    match (parts.next(), parts.next()) {
        (Some(_), Some(inner)) => inner.to_string(),
        _ => cell.to_string(),
    }
}
