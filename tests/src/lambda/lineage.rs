//! Lambda's recursive loop detection, as AWS documents it: Lambda counts, in the X-Ray trace
//! header it gives each invocation, how many times a function has been invoked in one chain
//! of requests (the header's `Lineage` field); the AWS SDK forwards the header with what the
//! function sends (SQS keeps it as the message's `AWSTraceHeader`), so an SQS → function →
//! same queue chain carries its count. After 16 invocations in a chain Lambda stops the
//! next one, unless the function's `RecursiveLoop` is `Allow`.
//!
//! Emulated: the field's exact encoding is Lambda's own; here it is
//! `Lineage=<function hash>:<invocations>`, entries joined by `|`, one per function.

use super::settings::RecursiveLoop;

/// Invocations of one function allowed in one chain.
pub const MAX_CHAIN: u32 = 16;

/// An 8-hex-digit tag of the function (FNV-1a of its name), as the lineage keys it.
pub fn tag(function: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in function.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

fn entries(header: &str) -> Vec<(String, u32)> {
    header
        .split(';')
        .filter_map(|part| part.trim().strip_prefix("Lineage="))
        .flat_map(|l| l.split('|'))
        .filter_map(|e| {
            let (t, n) = e.split_once(':')?;
            Some((t.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// How many times `function` has been invoked in the chain `header` belongs to.
pub fn count(header: Option<&str>, function: &str) -> u32 {
    let me = tag(function);
    header
        .map(entries)
        .unwrap_or_default()
        .into_iter()
        .filter(|(t, _)| *t == me)
        .map(|(_, n)| n)
        .max()
        .unwrap_or(0)
}

/// Whether Lambda stops an invocation of `function` continuing a chain in which it already
/// ran `before` times.
pub fn stops(before: u32, setting: RecursiveLoop) -> bool {
    setting == RecursiveLoop::Terminate && before >= MAX_CHAIN
}

/// The trace header of the next invocation of `function`, continuing a chain where it ran
/// `before` times (`root`: the chain's X-Ray root, kept).
pub fn next_header(root: &str, function: &str, before: u32, others: Option<&str>) -> String {
    let me = tag(function);
    let mut lineage: Vec<(String, u32)> = others
        .map(entries)
        .unwrap_or_default()
        .into_iter()
        .filter(|(t, _)| *t != me)
        .collect();
    lineage.push((me, before + 1));
    let lineage: Vec<String> = lineage.iter().map(|(t, n)| format!("{t}:{n}")).collect();
    format!("Root={root};Sampled=0;Lineage={}", lineage.join("|"))
}

/// The X-Ray root a header names, if any.
pub fn root(header: Option<&str>) -> Option<String> {
    header?
        .split(';')
        .find_map(|p| p.trim().strip_prefix("Root="))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_invocation_in_a_chain_counts_one_more_for_its_own_function() {
        let first = next_header("1-a-b", "InterruptionFunction", 0, None);
        assert_eq!(count(Some(&first), "InterruptionFunction"), 1);
        assert_eq!(count(Some(&first), "SweeperFunction"), 0);
        let second = next_header("1-a-b", "InterruptionFunction", 1, Some(&first));
        assert_eq!(count(Some(&second), "InterruptionFunction"), 2);
        assert_eq!(root(Some(&second)).as_deref(), Some("1-a-b"));
        assert_eq!(count(None, "InterruptionFunction"), 0);
    }

    #[test]
    fn another_function_s_count_is_carried_along_unchanged() {
        // A's fourth invocation sends to B's queue.
        let a = next_header("r", "A", 3, None);
        let b = next_header("r", "B", 0, Some(&a));
        assert_eq!(count(Some(&b), "A"), 4);
        assert_eq!(count(Some(&b), "B"), 1);
    }

    #[test]
    fn the_seventeenth_invocation_is_stopped_unless_the_function_allows_recursion() {
        assert!(!stops(15, RecursiveLoop::Terminate));
        assert!(stops(16, RecursiveLoop::Terminate));
        assert!(!stops(16, RecursiveLoop::Allow));
        assert!(!stops(1000, RecursiveLoop::Allow));
    }

    #[test]
    fn a_header_without_lineage_or_with_garbage_counts_nothing() {
        for h in ["Root=1-2-3", "Lineage=zz", "Lineage=abc:x", ""] {
            assert_eq!(count(Some(h), "A"), 0, "{h}");
        }
    }
}
