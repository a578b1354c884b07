//! The five-field cron schedules of Karpenter's disruption budgets (`minute hour
//! day-of-month month day-of-week`, with `*`, lists, ranges, steps, month and day names,
//! and the `@daily`-style macros), read in a time zone.
//!
//! Karpenter reads them with robfig/cron in UTC; nodewright reads them the same way but in
//! the zone a NodePool names (see [`super::budget::TIME_ZONE_ANNOTATION`]). As in cron, when
//! both day fields are restricted a day matches if either does.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A parsed schedule: one bit per allowed value of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    /// Whether each day field was `*` (cron's rule for combining them).
    any_day_of_month: bool,
    any_day_of_week: bool,
}

impl Cron {
    pub fn parse(schedule: &str) -> Result<Cron, String> {
        let s = schedule.trim();
        let expanded = match s {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(format!("{other:?} is not a known cron macro"));
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields[..] else {
            return Err(format!(
                "{s:?} has {} fields; a schedule needs 5 (minute hour day-of-month month day-of-week)",
                fields.len()
            ));
        };
        let field = |text: &str, what: &str, lo: u32, hi: u32, names: &[&str]| {
            bits(text, lo, hi, names).map_err(|e| format!("{s:?}: the {what} field {text:?} {e}"))
        };
        // Day-of-week 7 is Sunday as well as 0.
        let dow_bits = field(dow, "day-of-week", 0, 7, &DAYS)?;
        Ok(Cron {
            minutes: field(minute, "minute", 0, 59, &[])?,
            hours: field(hour, "hour", 0, 23, &[])? as u32,
            days_of_month: field(dom, "day-of-month", 1, 31, &[])? as u32,
            months: field(month, "month", 1, 12, &MONTHS)? as u16,
            days_of_week: ((dow_bits | (dow_bits >> 7)) & 0x7f) as u8,
            any_day_of_month: matches!(dom, "*" | "?"),
            any_day_of_week: matches!(dow, "*" | "?"),
        })
    }

    /// Whether the schedule fires at this wall-clock minute.
    pub fn matches(&self, t: DateTime) -> bool {
        let bit = |set: u64, v: i8| set & (1u64 << v) != 0;
        let dom = bit(self.days_of_month.into(), t.day());
        let dow = bit(
            self.days_of_week.into(),
            t.weekday().to_sunday_zero_offset(),
        );
        let day = match (self.any_day_of_month, self.any_day_of_week) {
            (true, true) => true,
            (true, false) => dow,
            (false, true) => dom,
            (false, false) => dom || dow,
        };
        t.second() == 0
            && bit(self.minutes, t.minute())
            && bit(self.hours.into(), t.hour())
            && bit(self.months.into(), t.month())
            && day
    }

    /// The latest firing at or before `now` and no earlier than `now - within`, read in
    /// `tz`. Walks back minute by minute: a budget's window is hours long at most in
    /// practice, so this is a few thousand cheap steps per budget and sweep.
    pub fn last_fire(
        &self,
        now: Timestamp,
        within: std::time::Duration,
        tz: &TimeZone,
    ) -> Option<Timestamp> {
        let floor = now.as_second() - now.as_second().rem_euclid(60);
        let minutes = i64::try_from(within.as_secs() / 60).unwrap_or(i64::MAX);
        (0..=minutes).find_map(|k| {
            let t = Timestamp::from_second(floor - k * 60).ok()?;
            self.matches(tz.to_datetime(t)).then_some(t)
        })
    }
}

/// The set of values one field allows, as bits.
fn bits(text: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, String> {
    if text == "?" {
        return Ok(range_bits(lo, hi, 1));
    }
    let value = |v: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
            // Month names count from 1 (`lo`), day names from 0.
            return Ok(i as u32 + lo);
        }
        v.parse::<u32>()
            .ok()
            .filter(|n| (lo..=hi).contains(n))
            .ok_or_else(|| format!("has {v:?}, outside {lo}-{hi}"))
    };
    let mut set = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                s.parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("has step {s:?}, not a positive number"))?,
            ),
            None => (part, 1),
        };
        let (a, b) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `5/15` means from 5 to the end, every 15.
                None if step > 1 => (value(r)?, hi),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        if a > b {
            return Err(format!("has the range {a}-{b}, which is empty"));
        }
        set |= range_bits(a, b, step);
    }
    Ok(set)
}

fn range_bits(a: u32, b: u32, step: u32) -> u64 {
    (a..=b).step_by(step as usize).fold(0, |s, v| s | 1u64 << v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime {
        s.parse().unwrap()
    }

    #[test]
    fn fields_lists_ranges_steps_and_names_select_the_right_minutes() {
        let cases = [
            ("0 9 * * *", "2026-03-02T09:00:00", true),
            ("0 9 * * *", "2026-03-02T09:01:00", false),
            ("*/15 * * * *", "2026-03-02T10:45:00", true),
            ("*/15 * * * *", "2026-03-02T10:50:00", false),
            ("5/20 * * * *", "2026-03-02T10:45:00", true),
            ("0 22 * * MON-FRI", "2026-03-06T22:00:00", true), // a Friday
            ("0 22 * * mon-fri", "2026-03-07T22:00:00", false), // a Saturday
            ("0 0 * * 7", "2026-03-08T00:00:00", true),        // Sunday as 7
            ("0 0 1 JAN *", "2026-01-01T00:00:00", true),
            ("0 0 1 FEB *", "2026-01-01T00:00:00", false),
            ("0 12 1,15 * *", "2026-03-15T12:00:00", true),
            // Both day fields restricted: either matches (the 13th, or any Friday).
            ("0 0 13 * 5", "2026-03-06T00:00:00", true),
            ("0 0 13 * 5", "2026-03-13T00:00:00", true),
            ("0 0 13 * 5", "2026-03-12T00:00:00", false),
            ("@daily", "2026-03-12T00:00:00", true),
            ("@hourly", "2026-03-12T07:00:00", true),
        ];
        for (schedule, t, want) in cases {
            let cron = Cron::parse(schedule).unwrap();
            assert_eq!(cron.matches(at(t)), want, "{schedule} at {t}");
        }
    }

    #[test]
    fn a_bad_schedule_is_an_error_naming_the_field() {
        for (schedule, needle) in [
            ("0 25 * * *", "hour field \"25\""),
            ("* * *", "3 fields"),
            ("@sometimes", "not a known cron macro"),
            ("*/0 * * * *", "step \"0\""),
            ("0 0 * FOO *", "month field"),
            ("30-10 * * * *", "empty"),
        ] {
            let e = Cron::parse(schedule).unwrap_err();
            assert!(e.contains(needle), "{schedule}: {e}");
        }
    }

    #[test]
    fn the_last_firing_is_found_within_the_window_in_the_time_zone() {
        let cron = Cron::parse("0 22 * * *").unwrap();
        let paris = TimeZone::get("Europe/Paris").unwrap();
        let hours = |h: u64| std::time::Duration::from_secs(h * 3600);
        // 2026-03-02 23:30 in Paris is 22:30 UTC: the 22:00 Paris firing was 21:00 UTC.
        let now: Timestamp = "2026-03-02T22:30:00Z".parse().unwrap();
        assert_eq!(
            cron.last_fire(now, hours(2), &paris),
            Some("2026-03-02T21:00:00Z".parse().unwrap())
        );
        assert_eq!(
            cron.last_fire(now, hours(2), &TimeZone::UTC),
            Some("2026-03-02T22:00:00Z".parse().unwrap())
        );
        assert_eq!(cron.last_fire(now, hours(1), &paris), None);
    }
}
