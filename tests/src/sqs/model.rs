//! One standard SQS queue and its dead-letter queue as SQS keeps them, on the world's clock:
//! `DelaySeconds`, the visibility timeout (per receive, and changed by
//! ChangeMessageVisibility), receipt handles (only the latest deletes), receive counts and
//! the redrive to the dead-letter queue on the receive after `maxReceiveCount`, and the
//! retention period. Pure: every operation takes `now`.
//!
//! Every message's fate is kept, so the world can say that none was lost: deleted (after
//! how many receives), dead-lettered (and why), expired unseen, or still queued.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// A queue's settings, as the deployed template gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSettings {
    pub visibility_timeout: Duration,
    pub retention: Duration,
    pub delay: Duration,
    /// `maxReceiveCount` of the redrive policy; `None`: no dead-letter queue.
    pub max_receive_count: Option<u32>,
    pub dead_letter_retention: Duration,
}

/// System attributes SQS records for a message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sent {
    pub body: String,
    pub sender_id: String,
    /// `AWSTraceHeader`: the sender's X-Ray trace header (Lambda's recursion detection
    /// reads its lineage).
    pub trace_header: Option<String>,
    pub delay: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub sent: Sent,
    pub sent_at: Timestamp,
    pub visible_at: Timestamp,
    pub receive_count: u32,
    pub first_receive_at: Option<Timestamp>,
    /// The receipt handle of the latest receive.
    pub handle: Option<String>,
}

/// What happened to a message in the end.
#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    Deleted {
        at: Timestamp,
        receives: u32,
    },
    DeadLettered {
        at: Timestamp,
        why: DeadLetterWhy,
    },
    /// The retention period ran out before anyone deleted it: lost.
    Expired {
        at: Timestamp,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterWhy {
    /// Received more than `maxReceiveCount` times.
    Receives,
    /// Lambda's recursive loop detection stopped the chain it belonged to.
    Recursion,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("the receipt handle is invalid")]
    ReceiptHandleIsInvalid,
    #[error("the message is not in flight")]
    MessageNotInflight,
    #[error("{0}")]
    InvalidParameterValue(String),
}

/// SQS's limits: DelaySeconds and a visibility timeout of at most 15 minutes and 12 hours.
pub const MAX_DELAY: Duration = Duration::from_secs(900);
pub const MAX_VISIBILITY: Duration = Duration::from_secs(43_200);

#[derive(Debug, Default)]
pub struct QueueModel {
    settings: Option<QueueSettings>,
    queued: VecDeque<Message>,
    dead: Vec<(Message, Timestamp)>,
    fates: BTreeMap<String, Fate>,
    next_handle: u64,
    next_id: u64,
}

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.saturating_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(t)
}

impl QueueModel {
    pub fn new(settings: QueueSettings) -> QueueModel {
        QueueModel {
            settings: Some(settings),
            ..QueueModel::default()
        }
    }

    pub fn settings(&self) -> &QueueSettings {
        static NONE: QueueSettings = QueueSettings {
            visibility_timeout: Duration::from_secs(30),
            retention: Duration::from_secs(345_600),
            delay: Duration::ZERO,
            max_receive_count: None,
            dead_letter_retention: Duration::from_secs(1_209_600),
        };
        self.settings.as_ref().unwrap_or(&NONE)
    }

    /// SendMessage: the new message's id (`id` when the caller names one, as when the
    /// world mirrors a message whose id another queue gave).
    pub fn send(
        &mut self,
        sent: Sent,
        id: Option<String>,
        now: Timestamp,
    ) -> Result<String, QueueError> {
        let delay = sent.delay.unwrap_or(self.settings().delay);
        if delay > MAX_DELAY {
            return Err(QueueError::InvalidParameterValue(format!(
                "DelaySeconds {} is more than 900",
                delay.as_secs()
            )));
        }
        let id = id.unwrap_or_else(|| {
            self.next_id += 1;
            format!("00000000-0000-4000-9000-{:012}", self.next_id)
        });
        self.queued.push_back(Message {
            id: id.clone(),
            sent,
            sent_at: now,
            visible_at: plus(now, delay),
            receive_count: 0,
            first_receive_at: None,
            handle: None,
        });
        Ok(id)
    }

    /// Drops what the retention period has ended, recording each as lost; dead letters
    /// past their own retention leave the dead-letter queue too.
    pub fn expire(&mut self, now: Timestamp) {
        let retention = self.settings().retention;
        let dead_retention = self.settings().dead_letter_retention;
        let mut kept = VecDeque::new();
        for m in self.queued.drain(..) {
            if plus(m.sent_at, retention) <= now {
                self.fates.insert(m.id.clone(), Fate::Expired { at: now });
            } else {
                kept.push_back(m);
            }
        }
        self.queued = kept;
        self.dead
            .retain(|(m, _)| plus(m.sent_at, dead_retention) > now);
    }

    /// ReceiveMessage: up to `max` visible messages, each hidden for `visibility` (the
    /// queue's when `None`). A message received more than `maxReceiveCount` times moves to
    /// the dead-letter queue instead of being returned.
    pub fn receive(
        &mut self,
        max: usize,
        visibility: Option<Duration>,
        now: Timestamp,
    ) -> Vec<Message> {
        self.expire(now);
        let visibility = visibility.unwrap_or(self.settings().visibility_timeout);
        let max_receives = self.settings().max_receive_count;
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.queued.len() && out.len() < max {
            if self.queued[i].visible_at > now {
                i += 1;
                continue;
            }
            if max_receives.is_some_and(|max| self.queued[i].receive_count >= max) {
                if let Some(m) = self.queued.remove(i) {
                    self.dead_letter(m, DeadLetterWhy::Receives, now);
                }
                continue;
            }
            self.next_handle += 1;
            let handle = format!("rh-{}-{}", self.queued[i].id, self.next_handle);
            let m = &mut self.queued[i];
            m.receive_count += 1;
            m.first_receive_at.get_or_insert(now);
            m.visible_at = plus(now, visibility);
            m.handle = Some(handle);
            out.push(m.clone());
            i += 1;
        }
        out
    }

    fn position(&self, handle: &str) -> Result<Option<usize>, QueueError> {
        if !handle.starts_with("rh-") {
            return Err(QueueError::ReceiptHandleIsInvalid);
        }
        Ok(self
            .queued
            .iter()
            .position(|m| m.handle.as_deref() == Some(handle)))
    }

    /// DeleteMessage. A handle of an earlier receive succeeds and deletes nothing, as SQS
    /// documents ("the request succeeds, but the message might not be deleted").
    pub fn delete(&mut self, handle: &str, now: Timestamp) -> Result<(), QueueError> {
        if let Some(i) = self.position(handle)?
            && let Some(m) = self.queued.remove(i)
        {
            self.fates.insert(
                m.id.clone(),
                Fate::Deleted {
                    at: now,
                    receives: m.receive_count,
                },
            );
        }
        Ok(())
    }

    /// ChangeMessageVisibility: the message becomes visible `timeout` from now, if it is
    /// still in flight under this handle.
    pub fn change_visibility(
        &mut self,
        handle: &str,
        timeout: Duration,
        now: Timestamp,
    ) -> Result<(), QueueError> {
        if timeout > MAX_VISIBILITY {
            return Err(QueueError::InvalidParameterValue(format!(
                "VisibilityTimeout {} is more than 43200",
                timeout.as_secs()
            )));
        }
        let i = self
            .position(handle)?
            .ok_or(QueueError::MessageNotInflight)?;
        let m = &mut self.queued[i];
        if m.visible_at <= now {
            return Err(QueueError::MessageNotInflight);
        }
        m.visible_at = plus(now, timeout);
        Ok(())
    }

    /// Moves the message under `handle` to the dead-letter queue (Lambda's recursive loop
    /// detection does this to a message it will not deliver).
    pub fn dead_letter_handle(
        &mut self,
        handle: &str,
        why: DeadLetterWhy,
        now: Timestamp,
    ) -> Result<(), QueueError> {
        let i = self
            .position(handle)?
            .ok_or(QueueError::MessageNotInflight)?;
        if let Some(m) = self.queued.remove(i) {
            self.dead_letter(m, why, now);
        }
        Ok(())
    }

    fn dead_letter(&mut self, m: Message, why: DeadLetterWhy, now: Timestamp) {
        self.fates
            .insert(m.id.clone(), Fate::DeadLettered { at: now, why });
        self.dead.push((m, now));
    }

    /// When the next message becomes visible, if any is waiting.
    pub fn next_visible(&self) -> Option<Timestamp> {
        self.queued.iter().map(|m| m.visible_at).min()
    }

    /// ApproximateNumberOfMessages / ...NotVisible / ...Delayed at `now`.
    pub fn counts(&self, now: Timestamp) -> Counts {
        let mut c = Counts::default();
        for m in &self.queued {
            if m.visible_at <= now {
                c.visible += 1;
            } else if m.receive_count == 0 {
                c.delayed += 1;
            } else {
                c.in_flight += 1;
            }
        }
        c.dead_letters = self.dead.len();
        c
    }

    /// The oldest message's age (ApproximateAgeOfOldestMessage).
    pub fn oldest_age(&self, now: Timestamp) -> Duration {
        self.queued
            .iter()
            .map(|m| Duration::try_from(now.duration_since(m.sent_at)).unwrap_or_default())
            .max()
            .unwrap_or_default()
    }

    /// Messages in the dead-letter queue, oldest first, with when they moved.
    pub fn dead_letters(&self) -> &[(Message, Timestamp)] {
        &self.dead
    }

    /// Messages still queued (visible, delayed or in flight).
    pub fn queued(&self) -> impl Iterator<Item = &Message> {
        self.queued.iter()
    }

    pub fn fate(&self, id: &str) -> Option<&Fate> {
        self.fates.get(id)
    }

    pub fn fates(&self) -> &BTreeMap<String, Fate> {
        &self.fates
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub visible: usize,
    pub in_flight: usize,
    pub delayed: usize,
    pub dead_letters: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn queue() -> QueueModel {
        QueueModel::new(QueueSettings {
            visibility_timeout: Duration::from_secs(120),
            retention: Duration::from_secs(3600),
            delay: Duration::ZERO,
            max_receive_count: Some(3),
            dead_letter_retention: Duration::from_secs(1_209_600),
        })
    }

    fn send(q: &mut QueueModel, body: &str, delay: u64, now: i64) -> String {
        q.send(
            Sent {
                body: body.into(),
                delay: Some(Duration::from_secs(delay)),
                ..Sent::default()
            },
            None,
            at(now),
        )
        .unwrap()
    }

    #[test]
    fn a_delayed_message_is_invisible_until_its_delay_is_over() {
        let mut q = queue();
        send(&mut q, "later", 5, 0);
        assert!(q.receive(10, None, at(4)).is_empty());
        assert_eq!(q.counts(at(4)).delayed, 1);
        let got = q.receive(10, None, at(5));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].receive_count, 1);
    }

    #[test]
    fn a_received_message_comes_back_only_after_its_visibility_timeout() {
        let mut q = queue();
        send(&mut q, "m", 0, 0);
        assert_eq!(q.receive(10, None, at(0)).len(), 1);
        assert!(q.receive(10, None, at(119)).is_empty());
        assert_eq!(q.counts(at(119)).in_flight, 1);
        let again = q.receive(10, None, at(120));
        assert_eq!(again[0].receive_count, 2);
    }

    #[test]
    fn change_message_visibility_brings_a_message_back_sooner_and_only_while_in_flight() {
        let mut q = queue();
        send(&mut q, "m", 0, 0);
        let h = q.receive(1, None, at(0))[0].handle.clone().unwrap();
        q.change_visibility(&h, Duration::from_secs(3), at(1))
            .unwrap();
        assert_eq!(q.receive(1, None, at(4)).len(), 1);
        // The old handle no longer names the in-flight receive.
        assert_eq!(
            q.change_visibility(&h, Duration::from_secs(3), at(5)),
            Err(QueueError::MessageNotInflight)
        );
        assert_eq!(
            q.change_visibility("nonsense", Duration::ZERO, at(5)),
            Err(QueueError::ReceiptHandleIsInvalid)
        );
    }

    #[test]
    fn only_the_latest_receipt_handle_deletes_and_an_older_one_succeeds_doing_nothing() {
        let mut q = queue();
        let id = send(&mut q, "m", 0, 0);
        let first = q.receive(1, None, at(0))[0].handle.clone().unwrap();
        let second = q.receive(1, None, at(120))[0].handle.clone().unwrap();
        q.delete(&first, at(121)).unwrap();
        assert_eq!(q.fate(&id), None);
        q.delete(&second, at(122)).unwrap();
        assert_eq!(
            q.fate(&id),
            Some(&Fate::Deleted {
                at: at(122),
                receives: 2
            })
        );
    }

    #[test]
    fn the_receive_after_max_receive_count_moves_the_message_to_the_dead_letter_queue() {
        let mut q = queue();
        let id = send(&mut q, "poison", 0, 0);
        for i in 0..3 {
            assert_eq!(
                q.receive(1, None, at(i * 120)).len(),
                1,
                "receive {}",
                i + 1
            );
        }
        assert!(q.receive(1, None, at(360)).is_empty());
        assert_eq!(
            q.fate(&id),
            Some(&Fate::DeadLettered {
                at: at(360),
                why: DeadLetterWhy::Receives
            })
        );
        assert_eq!(q.counts(at(360)).dead_letters, 1);
    }

    #[test]
    fn a_message_nobody_deletes_within_the_retention_period_is_recorded_as_lost() {
        let mut q = QueueModel::new(QueueSettings {
            max_receive_count: None,
            ..queue().settings().clone()
        });
        let id = send(&mut q, "m", 0, 0);
        q.receive(1, Some(Duration::from_secs(4000)), at(0));
        q.expire(at(3600));
        assert_eq!(q.fate(&id), Some(&Fate::Expired { at: at(3600) }));
    }

    #[test]
    fn a_delay_over_fifteen_minutes_is_refused() {
        let mut q = queue();
        let sent = Sent {
            delay: Some(Duration::from_secs(901)),
            ..Sent::default()
        };
        assert!(matches!(
            q.send(sent, None, at(0)),
            Err(QueueError::InvalidParameterValue(_))
        ));
    }

    #[test]
    fn a_receive_returns_at_most_max_messages_in_the_order_they_were_sent() {
        let mut q = queue();
        for i in 0..12 {
            send(&mut q, &format!("m{i}"), 0, 0);
        }
        let got: Vec<String> = q
            .receive(10, None, at(0))
            .into_iter()
            .map(|m| m.sent.body)
            .collect();
        assert_eq!(got.len(), 10);
        assert_eq!(got[0], "m0");
        assert_eq!(q.receive(10, None, at(0)).len(), 2);
    }
}
