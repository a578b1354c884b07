//! Resource quantities (`500m`, `4Gi`, `1.5`, `2e3`) and the resource vector the solver packs.
//!
//! Every amount is held as an integer in milli-units so that CPU (`250m`) and bytes share one
//! arithmetic without floating point: memory `1Gi` is `1073741824000` milli-bytes, well inside
//! `i64` for any instance that exists.

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses a Kubernetes quantity into milli-units.
///
/// Grammar from k8s.io/apimachinery/pkg/api/resource/quantity.go: a signed decimal number,
/// then a binary suffix (Ki..Ei), a decimal SI suffix (n, u, m, "", k, M, G, T, P, E) or a
/// decimal exponent (e3, E-2). Fractions finer than a milli-unit round up, as the API server
/// rounds requests up rather than down.
pub fn parse_milli(input: &str) -> Result<i64, QuantityError> {
    let err = |reason| QuantityError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let (negative, digits) = match number.as_bytes().first() {
        Some(b'-') => (true, &number[1..]),
        Some(b'+') => (false, &number[1..]),
        _ => (false, number),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && frac.is_empty() {
        return Err(err("no digits"));
    }
    if !whole.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(err("not a number"));
    }
    // value = mantissa * base^exp10 (decimal) or mantissa * 2^exp2, mantissa = whole.frac
    let (exp10, exp2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other if other.starts_with(['e', 'E']) => {
            let e: i32 = other[1..].parse().map_err(|_| err("bad exponent"))?;
            (e, 0)
        }
        _ => {
            return Err(err(
                "unknown suffix (use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)",
            ));
        }
    };
    // Work in i128 on the digits so "0.1Gi" and "1.5" are exact before the final rounding.
    let mantissa_digits = format!("{whole}{frac}");
    let significant = mantissa_digits.trim_start_matches('0');
    // Only digits are left, so a failed parse means more digits than i128 holds; an empty
    // string is zero.
    let mantissa: i128 = if significant.is_empty() {
        0
    } else {
        significant.parse().map_err(|_| err("too large"))?
    };
    let fraction_digits = i32::try_from(frac.len()).map_err(|_| err("too many digits"))?;
    let scale = exp10
        .checked_add(3) // milli-units
        .and_then(|e| e.checked_sub(fraction_digits))
        .ok_or_else(|| err("exponent out of range"))?;
    let mut value = mantissa
        .checked_mul(1i128 << exp2)
        .ok_or_else(|| err("too large"))?;
    if scale >= 0 {
        value = value
            .checked_mul(
                10i128
                    .checked_pow(scale as u32)
                    .ok_or_else(|| err("too large"))?,
            )
            .ok_or_else(|| err("too large"))?;
    } else {
        // Past 10^38 every representable mantissa rounds up to one milli-unit (or zero).
        value = match 10i128.checked_pow(scale.unsigned_abs()) {
            Some(div) => value / div + i128::from(value % div != 0), // round up
            None => i128::from(value != 0),
        };
    }
    let value = if negative { -value } else { value };
    i64::try_from(value).map_err(|_| err("too large"))
}

/// Formats milli-units the way `kubectl` would show them: whole numbers plainly, CPU-like
/// fractions with `m`, and byte-sized amounts with the largest exact binary suffix.
pub fn format_milli(milli: i64, binary: bool) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let units = milli / 1000;
    if binary && units != 0 {
        for (suffix, shift) in [
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ] {
            if units % (1i64 << shift) == 0 {
                return format!("{}{suffix}", units >> shift);
            }
        }
    }
    units.to_string()
}

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// A resource vector in milli-units. The four core resources are fields because the solver
/// touches them for every pod on every candidate; anything else (`nvidia.com/gpu`,
/// `vpc.amazonaws.com/efa`, hugepages) lives in `extended`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub pods: i64,
    pub extended: BTreeMap<String, i64>,
}

impl Resources {
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            other => self.extended.get(other).copied().unwrap_or(0),
        }
    }

    pub fn set(&mut self, name: &str, milli: i64) {
        match name {
            CPU => self.cpu = milli,
            MEMORY => self.memory = milli,
            EPHEMERAL_STORAGE => self.ephemeral_storage = milli,
            PODS => self.pods = milli,
            other => {
                if milli == 0 {
                    self.extended.remove(other);
                } else {
                    self.extended.insert(other.to_string(), milli);
                }
            }
        }
    }

    /// Builds a vector from `(name, quantity)` pairs such as a container's `requests`.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, (String, QuantityError)> {
        let mut out = Resources::default();
        for (name, quantity) in pairs {
            let milli = parse_milli(quantity).map_err(|e| (name.to_string(), e))?;
            out.set(name, out.get(name) + milli);
        }
        Ok(out)
    }

    pub fn add(&mut self, other: &Resources) {
        self.cpu += other.cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.pods += other.pods;
        for (k, v) in &other.extended {
            *self.extended.entry(k.clone()).or_insert(0) += v;
        }
    }

    pub fn sub(&mut self, other: &Resources) {
        self.cpu -= other.cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.pods -= other.pods;
        for (k, v) in &other.extended {
            *self.extended.entry(k.clone()).or_insert(0) -= v;
        }
    }

    /// Element-wise maximum: init containers run one at a time before the app containers,
    /// so a pod needs the larger of its biggest init container and its app containers' sum.
    pub fn max(&mut self, other: &Resources) {
        self.cpu = self.cpu.max(other.cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.pods = self.pods.max(other.pods);
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    /// True when every amount in `self` is at most what `capacity` has; a resource that
    /// `capacity` does not list counts as zero there (a GPU pod never fits a CPU node).
    pub fn fits_in(&self, capacity: &Resources) -> bool {
        self.cpu <= capacity.cpu
            && self.memory <= capacity.memory
            && self.ephemeral_storage <= capacity.ephemeral_storage
            && self.pods <= capacity.pods
            && self
                .extended
                .iter()
                .all(|(k, v)| *v <= 0 || *v <= capacity.extended.get(k).copied().unwrap_or(0))
    }

    /// The first resource of `self` that `capacity` cannot hold, for error messages.
    pub fn first_exceeding(&self, capacity: &Resources) -> Option<&str> {
        [CPU, MEMORY, EPHEMERAL_STORAGE, PODS]
            .into_iter()
            .chain(self.extended.keys().map(String::as_str))
            .find(|name| self.get(name) > 0 && self.get(name) > capacity.get(name))
    }

    /// Names and human-formatted amounts, core resources first, zeros left out.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for name in [CPU, MEMORY, EPHEMERAL_STORAGE, PODS]
            .into_iter()
            .chain(self.extended.keys().map(String::as_str))
        {
            let v = self.get(name);
            if v != 0 {
                out.insert(name.to_string(), format_milli(v, is_byte_resource(name)));
            }
        }
        out
    }
}

/// Resources measured in bytes, shown with binary suffixes.
pub fn is_byte_resource(name: &str) -> bool {
    name == MEMORY || name == EPHEMERAL_STORAGE || name.starts_with("hugepages-")
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .to_map()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_to_milli_units() {
        let cases: &[(&str, i64)] = &[
            ("1", 1000),
            ("250m", 250),
            ("1.5", 1500),
            ("0.1", 100),
            ("100Mi", 100 * 1024 * 1024 * 1000),
            ("4Gi", 4 * (1 << 30) * 1000),
            ("1k", 1_000_000),
            ("2M", 2_000_000_000),
            ("1e3", 1_000_000),
            ("1E-3", 1),
            ("0.5Gi", (1i64 << 29) * 1000),
            ("1n", 1), // rounds up to one milli-unit, as requests do
            ("-2", -2000),
            ("+3", 3000),
            ("20Gi", 20 * (1i64 << 30) * 1000),
        ];
        for (input, want) in cases {
            assert_eq!(parse_milli(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn malformed_quantities_are_rejected_with_a_reason() {
        for bad in ["", "abc", "1Qi", "1.2.3", "m", "1e", "--1", "1 Gi"] {
            let e = parse_milli(bad).expect_err(bad);
            assert_eq!(e.input, bad);
        }
    }

    #[test]
    fn quantities_beyond_what_fits_are_too_large_not_zero() {
        let forty_digits = "9".repeat(40);
        for big in [
            forty_digits.as_str(),
            "9999999999999999999Ei",
            "1e2147483647",
            "8Ei",
        ] {
            let e = parse_milli(big).expect_err(big);
            assert!(
                e.reason.contains("too large") || e.reason.contains("range"),
                "{big}: {e}"
            );
        }
        // Tiny amounts still round up to one milli-unit, however small.
        assert_eq!(parse_milli("1e-2147483648"), Ok(1));
        assert_eq!(parse_milli("0e-99999"), Ok(0));
        assert_eq!(parse_milli(&format_milli(i64::MIN, false)), Ok(i64::MIN));
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_quantity_or_an_error_never_a_panic(text in "\\PC{0,30}") {
            let _ = parse_milli(&text);
        }

        #[test]
        fn any_number_shaped_text_is_a_quantity_or_an_error(
            text in "[+-]?[0-9]{0,45}(\\.[0-9]{0,45})?([eE][+-]?[0-9]{1,12}|[numkMGTPE]|[KMGTPE]i)?"
        ) {
            let _ = parse_milli(&text);
        }

        #[test]
        fn a_formatted_amount_parses_back_to_itself(milli in proptest::num::i64::ANY, binary: bool) {
            let shown = format_milli(milli, binary);
            proptest::prop_assert_eq!(parse_milli(&shown), Ok(milli), "{}", shown);
        }
    }

    #[test]
    fn formatting_uses_the_largest_exact_suffix() {
        assert_eq!(format_milli(1500, false), "1500m");
        assert_eq!(format_milli(2000, false), "2");
        assert_eq!(format_milli(4 * (1 << 30) * 1000, true), "4Gi");
        assert_eq!(format_milli(1536 * (1 << 20) * 1000, true), "1536Mi");
        assert_eq!(format_milli(0, true), "0");
    }

    #[test]
    fn fits_in_treats_missing_extended_resources_as_zero() {
        let mut gpu_pod = Resources {
            cpu: 1000,
            ..Default::default()
        };
        gpu_pod.set("nvidia.com/gpu", 1000);
        let cpu_node = Resources {
            cpu: 4000,
            memory: 1,
            ephemeral_storage: 1,
            pods: 10_000,
            ..Default::default()
        };
        assert!(!gpu_pod.fits_in(&cpu_node));
        assert_eq!(gpu_pod.first_exceeding(&cpu_node), Some("nvidia.com/gpu"));
        let mut gpu_node = cpu_node.clone();
        gpu_node.set("nvidia.com/gpu", 4000);
        assert!(gpu_pod.fits_in(&gpu_node));
    }

    #[test]
    fn init_containers_take_the_maximum_not_the_sum() {
        let mut app = Resources {
            cpu: 500,
            memory: 100,
            ..Default::default()
        };
        app.max(&Resources {
            cpu: 2000,
            memory: 50,
            ..Default::default()
        });
        assert_eq!((app.cpu, app.memory), (2000, 100));
    }
}
