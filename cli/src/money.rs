//! Dollars as every command prints them: four decimals, never a negative zero, and an
//! estimate marked `~` with where it comes from said once beside it.

use nodewright::catalog::BUNDLED_PRICE_REGION;

/// `0.0960`; a sum of nothing (`-0.0` in floating point) prints as `0.0000`.
pub fn usd(amount: f64) -> String {
    let amount = if amount == 0.0 { 0.0 } else { amount };
    format!("{amount:.4}")
}

/// `~0.0384` for an estimate, `0.0960` for a listed price.
pub fn usd_marked(amount: f64, estimated: bool) -> String {
    if estimated {
        format!("~{}", usd(amount))
    } else {
        usd(amount)
    }
}

/// Where the prices come from, for the line under a table.
pub fn source_line(spot_discount: f64, any_estimate: bool) -> String {
    let mut line = format!("Prices: bundled {BUNDLED_PRICE_REGION} on-demand table");
    if any_estimate {
        line.push_str(&format!(
            "; ~ marks an estimate: spot taken as on-demand less {:.0}% (--spot-discount)",
            spot_discount * 100.0
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_have_four_decimals_and_no_negative_zero() {
        let nothing: f64 = [0.0f64; 0].iter().sum();
        assert!(
            nothing.is_sign_negative(),
            "the float sum of nothing is -0.0"
        );
        for (amount, want) in [(nothing, "0.0000"), (0.096, "0.0960"), (1.23456, "1.2346")] {
            assert_eq!(usd(amount), want);
        }
        assert_eq!(usd_marked(0.0384, true), "~0.0384");
        assert_eq!(usd_marked(0.0384, false), "0.0384");
    }

    #[test]
    fn the_source_line_says_how_an_estimate_is_made_only_when_there_is_one() {
        assert_eq!(
            source_line(0.6, false),
            "Prices: bundled us-east-1 on-demand table"
        );
        assert!(source_line(0.6, true).ends_with("on-demand less 60% (--spot-discount)"));
    }
}
