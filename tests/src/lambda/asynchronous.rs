//! Asynchronous invocation, as EventBridge Scheduler invokes a function: Lambda queues the
//! event and runs it when it can. A throttled event (the function's concurrency in use) is
//! retried with back-off for as long as the event is younger than its maximum age; an event
//! whose invocation failed (error, timeout, a dead environment) is retried up to the
//! function's `MaximumRetryAttempts`, one minute and then two minutes later, as Lambda does.
//! An event that runs out of either is dropped and recorded as such.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use super::function::{Function, Outcome};
use crate::kube_sim::SimClock;
use crate::lambda_api::FRESH_TRACE;

/// What became of one event.
#[derive(Debug, Clone, PartialEq)]
pub enum EventFate {
    Succeeded {
        attempts: u32,
    },
    /// Dropped after its last allowed retry failed.
    RetriesExhausted {
        attempts: u32,
    },
    /// Dropped because it grew older than the maximum event age (throttled meanwhile).
    TooOld {
        attempts: u32,
        throttles: u32,
    },
}

/// The next step for an event after one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Done,
    RetryAfter(Duration),
    Drop,
}

/// Lambda's wait before retrying a failed asynchronous invocation: one minute, then two.
pub fn retry_delay(failures: u32) -> Duration {
    Duration::from_secs(60 * u64::from(failures.clamp(1, 2)))
}

/// Back-off for a throttled event: 1 s doubling to 5 minutes.
pub fn throttle_delay(throttles: u32) -> Duration {
    Duration::from_secs(1u64 << throttles.min(9)).min(Duration::from_secs(300))
}

/// What Lambda does after an attempt ending in `outcome`, for an event `age` old that has
/// failed `failures` times and been throttled `throttles` times (this attempt included).
pub fn next(
    outcome: &Outcome,
    failures: u32,
    throttles: u32,
    age: Duration,
    max_retries: u32,
    max_age: Duration,
) -> Next {
    let wait = match outcome {
        Outcome::Response(_) => return Next::Done,
        Outcome::Throttled => throttle_delay(throttles),
        _ if failures > max_retries => return Next::Drop,
        _ => retry_delay(failures),
    };
    if age + wait > max_age {
        Next::Drop
    } else {
        Next::RetryAfter(wait)
    }
}

/// The asynchronous invocations of one function.
pub struct AsyncInvoker {
    function: Arc<Function>,
    clock: SimClock,
    fates: Mutex<Vec<(Timestamp, EventFate)>>,
}

impl AsyncInvoker {
    pub fn new(function: Arc<Function>, clock: SimClock) -> Arc<AsyncInvoker> {
        Arc::new(AsyncInvoker {
            function,
            clock,
            fates: Mutex::default(),
        })
    }

    /// Every event's fate so far, with when it was queued.
    pub fn fates(&self) -> Vec<(Timestamp, EventFate)> {
        self.fates.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Queues `event`; it runs in a task of its own until it succeeds or is dropped.
    pub fn submit(self: &Arc<Self>, event: Value) {
        let me = self.clone();
        tokio::spawn(async move {
            let queued = me.clock.now();
            let fate = me.run(event, queued).await;
            if let Ok(mut f) = me.fates.lock() {
                f.push((queued, fate));
            }
        });
    }

    async fn run(&self, event: Value, queued: Timestamp) -> EventFate {
        let settings = &self.function.settings;
        let (mut failures, mut throttles, mut attempts) = (0, 0, 0);
        loop {
            attempts += 1;
            let outcome = self
                .function
                .invoke(event.clone(), FRESH_TRACE.to_string(), 0)
                .await;
            match outcome {
                Outcome::Throttled => throttles += 1,
                Outcome::Response(_) => {}
                _ => failures += 1,
            }
            let age =
                Duration::try_from(self.clock.now().duration_since(queued)).unwrap_or_default();
            match next(
                &outcome,
                failures,
                throttles,
                age,
                settings.async_retries,
                settings.async_max_age,
            ) {
                Next::Done => return EventFate::Succeeded { attempts },
                Next::RetryAfter(wait) => self.clock.sleep(wait).await,
                Next::Drop if failures > settings.async_retries => {
                    return EventFate::RetriesExhausted { attempts };
                }
                Next::Drop => {
                    return EventFate::TooOld {
                        attempts,
                        throttles,
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn what_lambda_does_after_each_attempt_of_an_asynchronous_event() {
        let failed = Outcome::Error(json!({}));
        let ok = Outcome::Response(json!({}));
        let cases = [
            // (outcome, failures, throttles, age, retries, max age, want)
            (&ok, 0, 0, 0, 2, 3600, Next::Done),
            (&failed, 1, 0, 0, 2, 3600, Next::RetryAfter(MIN)),
            (&failed, 2, 0, 60, 2, 3600, Next::RetryAfter(2 * MIN)),
            (&failed, 3, 0, 180, 2, 3600, Next::Drop),
            // Retries 0: the first failure is the last.
            (&failed, 1, 0, 0, 0, 60, Next::Drop),
            (&Outcome::TimedOut, 1, 0, 0, 2, 3600, Next::RetryAfter(MIN)),
            (&Outcome::Died, 1, 0, 0, 2, 3600, Next::RetryAfter(MIN)),
            // A throttled event backs off while it is young enough.
            (
                &Outcome::Throttled,
                0,
                1,
                0,
                0,
                60,
                Next::RetryAfter(Duration::from_secs(2)),
            ),
            (&Outcome::Throttled, 0, 6, 50, 0, 60, Next::Drop),
            // A retry that would land past the maximum age is not made.
            (&failed, 1, 0, 30, 2, 60, Next::Drop),
        ];
        for (outcome, failures, throttles, age, retries, max_age, want) in cases {
            let got = next(
                outcome,
                failures,
                throttles,
                Duration::from_secs(age),
                retries,
                Duration::from_secs(max_age),
            );
            assert_eq!(
                got, want,
                "{outcome:?} failures {failures} throttles {throttles} age {age}"
            );
        }
    }
}
