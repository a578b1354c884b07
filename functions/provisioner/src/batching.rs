//! The batching window from the environment (see `nodewright::provision::BatchWindow`):
//! - `BATCH_IDLE_DURATION` (default 1 s, Karpenter's): once pods keep arriving, solve
//!   when none has come for this long;
//! - `BATCH_FIRST_IDLE_DURATION` (default 300 ms): while every fresh pod was seen at the
//!   first look, solve after this long; set it equal to `BATCH_IDLE_DURATION` for
//!   Karpenter's fixed window;
//! - `BATCH_MAX_DURATION` (default 10 s, Karpenter's): solve at the latest this long after
//!   the first pod.
//!
//! Durations are written as `POLL_INTERVAL` is (`0.3`, `300ms`, `1s`).

use nodewright::provision::BatchWindow;

use super::parse_duration;

pub fn batch_window_from_lookup(
    env: impl Fn(&str) -> Option<String>,
) -> Result<BatchWindow, String> {
    let d = BatchWindow::default();
    let read = |name: &str, default| match env(name) {
        Some(v) => parse_duration(&v).ok_or_else(|| {
            format!("{name}={v:?}: expected seconds (1, 0.3, 1s) or milliseconds (300ms)")
        }),
        None => Ok(default),
    };
    let window = BatchWindow {
        idle: read("BATCH_IDLE_DURATION", d.idle)?,
        first_idle: read("BATCH_FIRST_IDLE_DURATION", d.first_idle)?,
        max: read("BATCH_MAX_DURATION", d.max)?,
    };
    if window.first_idle > window.idle {
        return Err(format!(
            "BATCH_FIRST_IDLE_DURATION={:?} is longer than BATCH_IDLE_DURATION={:?}: a lone \
             pod would wait longer than a pod among many",
            window.first_idle, window.idle
        ));
    }
    if window.idle > window.max {
        return Err(format!(
            "BATCH_IDLE_DURATION={:?} is longer than BATCH_MAX_DURATION={:?}: the idle \
             window would never be what closes the batch",
            window.idle, window.max
        ));
    }
    Ok(window)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> Result<BatchWindow, String> {
        batch_window_from_lookup(move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn unset_variables_give_the_adaptive_production_window() {
        let w = lookup(&[]).expect("defaults");
        assert_eq!(w, BatchWindow::default());
        assert_eq!(w.first_idle, Duration::from_millis(300));
        assert_eq!(w.idle, Duration::from_secs(1));
        assert_eq!(w.max, Duration::from_secs(10));
    }

    #[test]
    fn a_first_idle_equal_to_the_idle_window_is_karpenters_fixed_window() {
        let w = lookup(&[
            ("BATCH_FIRST_IDLE_DURATION", "1s"),
            ("BATCH_IDLE_DURATION", "1"),
            ("BATCH_MAX_DURATION", "10s"),
        ]);
        assert_eq!(
            w,
            Ok(BatchWindow::fixed(
                Duration::from_secs(1),
                Duration::from_secs(10)
            ))
        );
    }

    #[test]
    fn windows_out_of_order_or_unreadable_are_refused_naming_the_variable() {
        for (vars, name) in [
            (
                &[("BATCH_FIRST_IDLE_DURATION", "2s")][..],
                "BATCH_FIRST_IDLE_DURATION",
            ),
            (&[("BATCH_IDLE_DURATION", "11")][..], "BATCH_IDLE_DURATION"),
            (&[("BATCH_MAX_DURATION", "soon")][..], "BATCH_MAX_DURATION"),
            (&[("BATCH_IDLE_DURATION", "-1")][..], "BATCH_IDLE_DURATION"),
        ] {
            let err = lookup(vars).expect_err(name);
            assert!(err.starts_with(name), "{err}");
        }
    }
}
