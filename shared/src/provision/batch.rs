//! The batching window: act soon after pods go pending, but not on the first of fifty.
//! Like Karpenter's batcher (`BATCH_IDLE_DURATION` 1 s, `BATCH_MAX_DURATION` 10 s): solve
//! once no new pending pod has appeared for `idle`, or `max` after the first one.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchWindow {
    pub idle: Duration,
    pub max: Duration,
}

impl Default for BatchWindow {
    fn default() -> Self {
        BatchWindow {
            idle: Duration::from_secs(1),
            max: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// Solve now.
    Ready,
    /// Look again after this long.
    Wait(Duration),
}

impl BatchWindow {
    /// `first` and `last_new`: when the first and the most recent not-yet-seen pending
    /// pod were noticed; all three instants are offsets on the same clock.
    pub fn decide(&self, first: Duration, last_new: Duration, now: Duration) -> Batch {
        let idle_until = last_new + self.idle;
        let max_until = first + self.max;
        let until = idle_until.min(max_until);
        if now >= until {
            Batch::Ready
        } else {
            Batch::Wait(until - now)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    #[test]
    fn the_window_closes_after_a_quiet_second_or_ten_seconds_at_most() {
        let w = BatchWindow::default();
        // (first seen, last new, now, decision)
        let cases = [
            (0.0, 0.0, 0.0, Batch::Wait(s(1.0))),
            (0.0, 0.0, 0.4, Batch::Wait(s(0.6))),
            (0.0, 0.0, 1.0, Batch::Ready),
            (0.0, 0.8, 1.0, Batch::Wait(s(0.8))),
            (0.0, 9.5, 9.9, Batch::Wait(s(0.1))),
            (0.0, 9.9, 10.0, Batch::Ready),
        ];
        for (first, last, now, want) in cases {
            let got = w.decide(s(first), s(last), s(now));
            match (got, want) {
                (Batch::Wait(a), Batch::Wait(b)) => assert!(
                    (a.as_secs_f64() - b.as_secs_f64()).abs() < 1e-9,
                    "{first} {last} {now}: {a:?} vs {b:?}"
                ),
                _ => assert_eq!(got, want, "{first} {last} {now}"),
            }
        }
    }
}
