//! The MIME multipart user data cloud-init and nodeadm read.
//!
//! Serialisation matches Karpenter's (Go `mime/multipart` with boundary `//`, carriage
//! returns removed): a part's content is followed by `\n--//`, so content ending in a newline
//! leaves a blank line before the delimiter. Parsing follows Go's reader: the line break
//! just before a delimiter belongs to the delimiter, not to the part.

use super::UserDataError;

/// Karpenter's boundary (`bootstrap/mime/mime.go` `boundary = "//"`).
pub const BOUNDARY: &str = "//";
pub const SHELL_CONTENT_TYPE: &str = "text/x-shellscript; charset=\"us-ascii\"";
/// nodeadm's content type (`application/` + the `node.eks.aws` API group).
pub const NODE_CONFIG_CONTENT_TYPE: &str = "application/node.eks.aws";

/// One part: its headers in their original order, and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MimePart {
    pub headers: Vec<(String, String)>,
    pub content: String,
}

impl MimePart {
    pub fn new(content_type: &str, content: impl Into<String>) -> Self {
        Self {
            headers: vec![("Content-Type".to_owned(), content_type.to_owned())],
            content: content.into(),
        }
    }

    pub fn content_type(&self) -> Option<&str> {
        header(&self.headers, "content-type")
    }
}

/// A multipart/mixed document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MimeArchive {
    pub parts: Vec<MimePart>,
}

impl MimeArchive {
    /// Parses a `multipart/*` document (`\r\n` or `\n` line ends).
    pub fn parse(text: &str) -> Result<Self, UserDataError> {
        let text = text.replace("\r\n", "\n");
        let text = text.trim_start();
        let (head, body) = split_head(text);
        let headers = parse_headers(head)?;
        let content_type =
            header(&headers, "content-type").ok_or_else(|| bad("it has no Content-Type header"))?;
        let (media, params) = content_type.split_once(';').unwrap_or((content_type, ""));
        if !media.trim().to_ascii_lowercase().starts_with("multipart/") {
            return Err(bad(&format!(
                "its Content-Type is {:?}, not multipart/*",
                media.trim()
            )));
        }
        let boundary = params
            .split(';')
            .filter_map(|p| p.trim().split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
            .map(|(_, v)| v.trim().trim_matches('"').to_owned())
            .filter(|b| !b.is_empty())
            .ok_or_else(|| bad("its Content-Type has no boundary parameter"))?;
        let delimiter = format!("--{boundary}");
        let close = format!("--{boundary}--");

        let mut parts = Vec::new();
        let mut current: Option<Vec<&str>> = None;
        let mut closed = false;
        for line in body.split('\n') {
            let trimmed = line.trim_end();
            if trimmed == close {
                if let Some(lines) = current.take() {
                    parts.push(parse_part(&lines)?);
                }
                closed = true;
                break;
            }
            if trimmed == delimiter {
                if let Some(lines) = current.take() {
                    parts.push(parse_part(&lines)?);
                }
                current = Some(Vec::new());
                continue;
            }
            // Lines before the first delimiter are the preamble, ignored as Go does.
            if let Some(lines) = current.as_mut() {
                lines.push(line);
            }
        }
        if !closed {
            return Err(bad(&format!("it has no closing '{close}' line")));
        }
        Ok(Self { parts })
    }

    /// Serialises with boundary `//`, as Karpenter's `mime.Archive.Serialize`.
    pub fn serialize(&self) -> String {
        let mut out = format!(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n"
        );
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("--");
            out.push_str(BOUNDARY);
            out.push('\n');
            for (name, value) in &part.headers {
                out.push_str(name);
                out.push_str(": ");
                out.push_str(value);
                out.push('\n');
            }
            out.push('\n');
            out.push_str(&part.content);
        }
        out.push_str("\n--");
        out.push_str(BOUNDARY);
        out.push_str("--\n");
        out
    }
}

fn bad(why: &str) -> UserDataError {
    UserDataError::BadMime(why.to_owned())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Splits at the first empty line: headers before, body after.
fn split_head(text: &str) -> (&str, &str) {
    match text.find("\n\n") {
        Some(i) => (&text[..i], &text[i + 2..]),
        None => (text, ""),
    }
}

fn parse_headers(head: &str) -> Result<Vec<(String, String)>, UserDataError> {
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in head.lines() {
        if line.starts_with([' ', '\t']) {
            // RFC 5322 folding: a continuation of the previous header.
            let Some(last) = headers.last_mut() else {
                return Err(bad("a header continuation line comes before any header"));
            };
            last.1.push(' ');
            last.1.push_str(line.trim());
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(&format!("header line {line:?} has no ':'")));
        };
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(headers)
}

fn parse_part(lines: &[&str]) -> Result<MimePart, UserDataError> {
    let joined = lines.join("\n");
    // A part that starts with an empty line has no headers.
    let (head, content) = match joined.strip_prefix('\n') {
        Some(content) => ("", content),
        None => split_head(&joined),
    };
    Ok(MimePart {
        headers: parse_headers(head)?,
        content: content.to_owned(),
    })
}
