//! Plain aligned text tables for terminal output.

/// Renders rows under headers, each column as wide as its widest cell; columns listed in
/// `right` are right-aligned (numbers).
pub fn render(headers: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if right.contains(&i) {
                    format!("{c:>w$}", w = widths[i])
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_are_aligned_to_the_widest_cell() {
        let out = super::render(
            &["A", "NUM"],
            &[
                vec!["long-name".into(), "1".into()],
                vec!["x".into(), "100".into()],
            ],
            &[1],
        );
        assert_eq!(out, "A          NUM\nlong-name    1\nx          100\n");
    }
}
