//! The batching window: act soon after pods go pending, but not on the first of fifty.
//! Like Karpenter's batcher (`BATCH_IDLE_DURATION` 1 s, `BATCH_MAX_DURATION` 10 s): solve
//! once no new pending pod has appeared for `idle`, or `max` after the first one; but
//! adaptive, where Karpenter is not: while no pod has come after the first look
//! (`first_idle`, 300 ms by default) the window is short, so a lone pod does not wait a full
//! idle second for company that is not coming. The moment a later look finds another new
//! pod, pods are arriving and the window is `idle` after the newest, as in Karpenter.
//!
//! The trade: pods of one burst that reach the provisioner more than `first_idle` apart
//! with nothing in between are solved in two batches (two smaller instances where one
//! larger might have done). A Deployment's ReplicaSet creates its pods within tens of
//! milliseconds, and any pod seen during the short window turns it into the long one, so a
//! burst is split only when its first pods and the rest are separated by a quiet gap
//! between `first_idle` and `idle`.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchWindow {
    /// After the last new pod, once a second look has found pods still arriving.
    pub idle: Duration,
    /// After the first look, while it found every fresh pod at once.
    pub first_idle: Duration,
    pub max: Duration,
}

/// The default [`BatchWindow::first_idle`].
pub const DEFAULT_FIRST_IDLE: Duration = Duration::from_millis(300);

impl Default for BatchWindow {
    fn default() -> Self {
        BatchWindow {
            idle: Duration::from_secs(1),
            first_idle: DEFAULT_FIRST_IDLE,
            max: Duration::from_secs(10),
        }
    }
}

impl BatchWindow {
    /// Karpenter's window: `idle` after every new pod, the first one included.
    pub fn fixed(idle: Duration, max: Duration) -> BatchWindow {
        BatchWindow {
            idle,
            first_idle: idle,
            max,
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
    /// pod were noticed; all three instants are offsets on the same clock. Pods noticed at
    /// the same look share an instant, so `last_new == first` means no pod has come since
    /// the first look.
    pub fn decide(&self, first: Duration, last_new: Duration, now: Duration) -> Batch {
        let idle_until = if last_new > first {
            last_new + self.idle
        } else {
            first + self.first_idle
        };
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

    fn check(w: BatchWindow, cases: &[(f64, f64, f64, Batch)]) {
        for &(first, last, now, want) in cases {
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

    #[test]
    fn a_fixed_window_closes_after_a_quiet_second_or_ten_seconds_at_most() {
        let w = BatchWindow::fixed(s(1.0), s(10.0));
        // (first seen, last new, now, decision)
        check(
            w,
            &[
                (0.0, 0.0, 0.0, Batch::Wait(s(1.0))),
                (0.0, 0.0, 0.4, Batch::Wait(s(0.6))),
                (0.0, 0.0, 1.0, Batch::Ready),
                (0.0, 0.8, 1.0, Batch::Wait(s(0.8))),
                (0.0, 9.5, 9.9, Batch::Wait(s(0.1))),
                (0.0, 9.9, 10.0, Batch::Ready),
            ],
        );
    }

    #[test]
    fn pods_seen_at_one_look_wait_only_the_short_first_window() {
        let w = BatchWindow::default();
        check(
            w,
            &[
                (0.0, 0.0, 0.0, Batch::Wait(s(0.3))),
                (0.0, 0.0, 0.1, Batch::Wait(s(0.2))),
                (0.0, 0.0, 0.3, Batch::Ready),
                (5.0, 5.0, 5.31, Batch::Ready),
            ],
        );
    }

    #[test]
    fn a_pod_arriving_after_the_first_look_stretches_the_window_to_the_idle_second() {
        let w = BatchWindow::default();
        check(
            w,
            &[
                // A second pod seen at the look that closed the short window.
                (0.0, 0.3, 0.3, Batch::Wait(s(1.0))),
                (0.0, 0.3, 1.29, Batch::Wait(s(0.01))),
                (0.0, 0.3, 1.3, Batch::Ready),
                // Pods keep coming: each one pushes the end to a second after it.
                (0.0, 4.0, 4.5, Batch::Wait(s(0.5))),
            ],
        );
    }

    #[test]
    fn pods_that_never_stop_arriving_are_solved_ten_seconds_after_the_first() {
        let w = BatchWindow::default();
        check(
            w,
            &[
                (0.0, 9.5, 9.9, Batch::Wait(s(0.1))),
                (0.0, 9.9, 10.0, Batch::Ready),
                (0.0, 12.0, 12.0, Batch::Ready),
            ],
        );
    }
}
