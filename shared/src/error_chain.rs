//! One line for an error and every cause under it, for logs and invocation summaries: the
//! functions' errors keep their causes as `#[source]`, and a log line that printed only the
//! top would say "DescribeInstances failed" without saying why.

/// `top: cause: cause of cause`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("listing pods failed")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_cause_is_joined_after_the_error_itself() {
        let e = Outer(std::io::Error::other("connection refused"));
        assert_eq!(error_chain(&e), "listing pods failed: connection refused");
    }
}
