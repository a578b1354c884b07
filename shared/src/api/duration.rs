//! Go-style durations as Karpenter writes them (`30s`, `720h`, `1h30m`) and the
//! `Never` that several of its fields accept.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-negative duration with second precision, written like Go's `time.Duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

/// A duration that may be `Never` (Karpenter's `NillableDuration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NillableDuration {
    Never,
    After(Duration),
}

impl Duration {
    pub const fn from_secs(s: u64) -> Self {
        Duration(std::time::Duration::from_secs(s))
    }
    pub fn as_secs(&self) -> u64 {
        self.0.as_secs()
    }
}

impl FromStr for Duration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "0" {
            return Ok(Duration::default());
        }
        if s.is_empty() {
            return Err("empty duration".into());
        }
        let mut total = 0f64;
        let mut rest = s;
        while !rest.is_empty() {
            let n = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            if n == 0 {
                return Err(format!(
                    "{s:?} is not a duration (expected e.g. 30s, 5m, 720h, 1h30m)"
                ));
            }
            let value: f64 = rest[..n]
                .parse()
                .map_err(|_| format!("{s:?}: bad number"))?;
            rest = &rest[n..];
            let u = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let unit = match &rest[..u] {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                "" => return Err(format!("{s:?}: missing unit (ns, us, ms, s, m, h)")),
                other => {
                    return Err(format!(
                        "{s:?}: unknown unit {other:?} (ns, us, ms, s, m, h)"
                    ));
                }
            };
            total += value * unit;
            rest = &rest[u..];
        }
        // Go holds a duration in an int64 of nanoseconds, so Karpenter's API server rejects
        // anything longer; `from_secs_f64` would panic on an overflow instead (and with
        // `panic = "abort"`, one such NodePool would stop every poll).
        if total.is_nan() || total > MAX_SECONDS {
            return Err(format!(
                "{s:?} is longer than the longest duration Go (and Karpenter) accepts, {}",
                MAX_GO_DURATION
            ));
        }
        std::time::Duration::try_from_secs_f64(total)
            .map(Duration)
            .map_err(|e| format!("{s:?}: {e}"))
    }
}

/// Go's `time.Duration` maximum: `math.MaxInt64` nanoseconds.
const MAX_SECONDS: f64 = i64::MAX as f64 / 1e9;
const MAX_GO_DURATION: &str = "2562047h47m16.854775807s";

impl fmt::Display for Duration {
    /// Prints the shortest Go form: `30s`, `5m`, `336h`, `1h30m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        if secs == 0 {
            return f.write_str("0s");
        }
        let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

impl FromStr for NillableDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "Never" {
            Ok(NillableDuration::Never)
        } else {
            s.parse().map(NillableDuration::After)
        }
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NillableDuration::Never => f.write_str("Never"),
            NillableDuration::After(d) => d.fmt(f),
        }
    }
}

macro_rules! string_serde {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
string_serde!(Duration);
string_serde!(NillableDuration);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_round_trip() {
        for (input, secs, shown) in [
            ("30s", 30, "30s"),
            ("720h", 2_592_000, "720h"),
            ("1h30m", 5400, "1h30m"),
            ("336h", 1_209_600, "336h"),
            ("90s", 90, "1m30s"),
            ("0s", 0, "0s"),
        ] {
            let d: Duration = input.parse().unwrap();
            assert_eq!(d.as_secs(), secs, "{input}");
            assert_eq!(d.to_string(), shown, "{input}");
        }
    }

    #[test]
    fn durations_longer_than_go_allows_are_an_error_not_a_panic() {
        let many_digits = format!("{}h", "9".repeat(400));
        for long in ["9999999999999999h", "2562048h", &many_digits] {
            let err = long.parse::<Duration>().unwrap_err();
            assert!(err.contains("longest duration"), "{long}: {err}");
        }
        let almost = "2562047h".parse::<Duration>().unwrap();
        assert_eq!(almost.as_secs(), 2_562_047 * 3600);
    }

    #[test]
    fn bad_durations_say_what_is_expected() {
        for bad in ["", "30", "5 minutes", "h", "3d"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad}");
        }
        assert_eq!(
            "Never".parse::<NillableDuration>(),
            Ok(NillableDuration::Never)
        );
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_to_a_duration_or_an_error_never_a_panic(text in "\\PC{0,24}") {
            let _ = text.parse::<Duration>();
            let _ = text.parse::<NillableDuration>();
        }

        #[test]
        fn any_go_shaped_text_parses_or_says_why(
            parts in proptest::collection::vec(("[0-9]{1,22}(\\.[0-9]{0,4})?", "(ns|us|µs|ms|s|m|h|d|)"), 1..4)
        ) {
            let text: String = parts.iter().map(|(n, u)| format!("{n}{u}")).collect();
            match text.parse::<Duration>() {
                // Whole seconds survive a round trip through the printed form.
                Ok(d) => proptest::prop_assert_eq!(
                    d.to_string().parse::<Duration>().map(|p| p.as_secs()),
                    Ok(d.as_secs())
                ),
                Err(e) => proptest::prop_assert!(e.contains(&text), "{e}"),
            }
        }
    }
}
