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
        Ok(Duration(std::time::Duration::from_secs_f64(total)))
    }
}

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
    fn bad_durations_say_what_is_expected() {
        for bad in ["", "30", "5 minutes", "h", "3d"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad}");
        }
        assert_eq!(
            "Never".parse::<NillableDuration>(),
            Ok(NillableDuration::Never)
        );
    }
}
