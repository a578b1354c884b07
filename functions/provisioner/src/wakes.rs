//! The pod watch of one invocation: a pod that turns provisionable wakes the handler's
//! wait, so its poll starts at once rather than at the next `POLL_INTERVAL`.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use jiff::Timestamp;
use nodewright::clock::Clock;

/// After a wake-up, how long to let the burst that caused it land before polling: a
/// Deployment scaled up creates its pods within milliseconds of each other.
const WAKE_COALESCE: Duration = Duration::from_millis(50);

/// The pod watch of one invocation; without one (it failed to open, or the server ended
/// it) the handler polls every `POLL_INTERVAL`, which is slower but correct.
pub(crate) struct PodWakes {
    stream: Option<BoxStream<'static, ()>>,
    /// `open`, `ended` or `failed`, for the invocation's summary.
    pub(crate) state: &'static str,
    /// Polls started early because a pod turned provisionable.
    pub(crate) count: u32,
    /// An event was taken from the stream since the last poll's [`PodWakes::drain`]: kept
    /// here, not only in what [`PodWakes::wait`] returns, because a `wait` dropped while it
    /// coalesces (the holder's refresh between polls ended first) has taken the event and
    /// would otherwise lose it, and the pod would wait for the next `POLL_INTERVAL`.
    woke: bool,
    clock: Arc<dyn Clock>,
}

impl PodWakes {
    pub(crate) fn from(
        opened: Result<BoxStream<'static, ()>, nodewright::kube::KubeError>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        match opened {
            Ok(stream) => PodWakes {
                stream: Some(stream),
                state: "open",
                count: 0,
                woke: false,
                clock,
            },
            Err(e) => {
                tracing::warn!(
                    error = nodewright::error_chain(&e),
                    "watching pods failed; polling only"
                );
                PodWakes {
                    stream: None,
                    state: "failed",
                    count: 0,
                    woke: false,
                    clock,
                }
            }
        }
    }

    fn ended(&mut self) {
        tracing::debug!("the pod watch ended; polling only");
        self.stream = None;
        self.state = "ended";
    }

    /// Whether a pod event was taken since the last poll (see `woke`), forgetting it.
    pub(crate) fn take_woken(&mut self) -> bool {
        std::mem::take(&mut self.woke)
    }

    /// Forgets the events already queued, and any taken: the poll about to list pods
    /// covers them.
    pub(crate) fn drain(&mut self) {
        self.woke = false;
        while let Some(stream) = self.stream.as_mut() {
            match stream.next().now_or_never() {
                Some(Some(())) => {}
                Some(None) => self.ended(),
                None => return,
            }
        }
    }

    /// Whether a pod event can wake a wait now.
    pub(crate) fn watching(&self) -> bool {
        self.stream.is_some()
    }

    /// Waits, idle, until `until` on the clock, or less when `watching` and a pod turns
    /// provisionable first; true when woken early.
    pub(crate) async fn wait(&mut self, until: Timestamp, watching: bool) -> bool {
        let idle = self.clock.idle_until(until);
        self.first(idle, watching).await
    }

    /// As [`PodWakes::wait`], while work goes on elsewhere (the holder's refresh between
    /// polls): the end of the working time bounds that work, so it is not an idle wait.
    pub(crate) async fn wake_or_end(&mut self, until: Timestamp, watching: bool) -> bool {
        let bound = self.clock.sleep_until(until);
        self.first(bound, watching).await
    }

    /// `timer`, or a pod event first when `watching`; true for the event.
    async fn first(&mut self, timer: nodewright::clock::Sleep, watching: bool) -> bool {
        let Some(stream) = self.stream.as_mut().filter(|_| watching) else {
            timer.await;
            return false;
        };
        tokio::select! {
            () = timer => false,
            event = stream.next() => match event {
                Some(()) => {
                    self.count += 1;
                    self.woke = true;
                    self.clock.sleep(WAKE_COALESCE).await;
                    true
                }
                None => {
                    self.ended();
                    false
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use nodewright::clock::SystemClock;

    use super::*;

    fn wakes() -> (futures::channel::mpsc::UnboundedSender<()>, PodWakes) {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        (tx, PodWakes::from(Ok(rx.boxed()), Arc::new(SystemClock)))
    }

    fn in_secs(s: u64) -> Timestamp {
        SystemClock.now() + Duration::from_secs(s)
    }

    #[tokio::test]
    async fn a_wait_dropped_while_it_coalesces_keeps_the_pod_event_it_took() {
        let (tx, mut wakes) = wakes();
        tx.unbounded_send(()).unwrap();
        // As the holder's refresh between polls does: the wait goes first, and something
        // else finishes before its coalescing does.
        tokio::select! {
            biased;
            _ = wakes.wait(in_secs(5), true) => panic!("the coalescing is 50 ms"),
            () = async {} => {}
        }
        assert!(wakes.take_woken(), "the event taken is kept");
        assert!(!wakes.take_woken(), "and told once");
    }

    #[tokio::test]
    async fn a_poll_forgets_the_events_taken_and_queued_before_it() {
        let (tx, mut wakes) = wakes();
        tx.unbounded_send(()).unwrap();
        assert!(wakes.wait(in_secs(5), true).await);
        tx.unbounded_send(()).unwrap();
        wakes.drain();
        assert!(!wakes.take_woken());
        assert!(!wakes.wait(SystemClock.now(), true).await);
    }
}
