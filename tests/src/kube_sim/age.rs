//! Ages as the API server prints them in Table cells (`5m`, `3h12m`, `2d4h`): the rounding
//! of k8s.io/apimachinery/pkg/util/duration.HumanDuration, so that kubectl shows the same
//! AGE and LAST SEEN it would show against a real cluster.

use jiff::Timestamp;

use super::clock::parse_ts;

/// `HumanDuration(now - at)`, with `<unknown>` for a missing or malformed timestamp (as
/// `translateTimestampSince` prints a zero time).
pub fn since(at: Option<&str>, now: Timestamp) -> String {
    match parse_ts(at) {
        Some(t) => human(now.as_second() - t.as_second()),
        None => "<unknown>".to_string(),
    }
}

/// The precision drops as the duration grows: seconds up to two minutes, then minutes and
/// seconds up to ten minutes, minutes up to three hours, hours and minutes up to eight
/// hours, hours up to two days, days and hours up to eight days, then days, then years.
pub fn human(secs: i64) -> String {
    // A clock up to a second behind still counts as "now", as upstream tolerates.
    if secs < -1 {
        return "<invalid>".to_string();
    }
    if secs < 0 {
        return "0s".to_string();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_like_the_api_server_prints_them() {
        let table = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (599, "9m59s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 25 * 60, "3h25m"),
            (8 * 3600 + 59 * 60, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 24 * 3600, "8d"),
            (2 * 365 * 24 * 3600, "2y"),
            (2 * 365 * 24 * 3600 + 24 * 3600, "2y1d"),
            (9 * 365 * 24 * 3600, "9y"),
        ];
        for (secs, want) in table {
            assert_eq!(human(secs), want, "{secs} seconds");
        }
    }

    #[test]
    fn a_missing_timestamp_has_an_unknown_age() {
        let now = Timestamp::UNIX_EPOCH;
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(since(Some("yesterday"), now), "<unknown>");
        assert_eq!(since(Some("1969-12-31T23:59:00Z"), now), "60s");
    }
}
