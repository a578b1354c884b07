//! The interruption queue as SQS runs it, on the world's clock ([`model`]), served to the
//! functions through the AWS front in SQS's JSON protocol ([`wire`]).
//!
//! Why not moto's queue: moto keeps SQS time on the wall clock in whole seconds, so a world
//! whose clock runs faster than the wall (the soak) or stands still until a test moves it
//! could not give a message its real visibility timeout or delay. moto still judges every
//! request's IAM: the front forwards each call to moto first and answers from here only when
//! moto did not refuse it, so a function whose role lacks an action is refused as in AWS.
//! A message sent that way also lands in moto's queue; the world knows it by id and throws
//! that copy away.
//!
//! EventBridge's deliveries arrive in moto's queue (moto's rules route PutEvents there, with
//! the template's patterns) and are moved into the emulated queue by [`Sqs::pump`], keeping
//! moto's message id and sender.

pub mod model;
pub mod wire;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use aws_config::SdkConfig;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use jiff::Timestamp;
use tokio::sync::Notify;

use crate::kube_sim::SimClock;
use model::{Message, QueueModel, QueueSettings, Sent};

/// SenderId of a message EventBridge delivered (an AWS service principal's id).
pub const EVENTBRIDGE_SENDER: &str = "AIDAIT2UOQQY3AUEKVGXU";

/// One emulated queue and its dead-letter queue.
pub struct EmulatedQueue {
    pub url: String,
    pub arn: String,
    pub dead_letter_url: String,
    model: Mutex<QueueModel>,
    arrived: Notify,
    clock: SimClock,
}

impl EmulatedQueue {
    pub fn new(
        url: &str,
        arn: &str,
        dead_letter_url: &str,
        settings: QueueSettings,
        clock: SimClock,
    ) -> EmulatedQueue {
        EmulatedQueue {
            url: url.into(),
            arn: arn.into(),
            dead_letter_url: dead_letter_url.into(),
            model: Mutex::new(QueueModel::new(settings)),
            arrived: Notify::new(),
            clock,
        }
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Runs `f` on the queue at the world's `now`.
    pub fn with<T>(&self, f: impl FnOnce(&mut QueueModel, Timestamp) -> T) -> T {
        let now = self.clock.now();
        let mut model = self.model.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut model, now)
    }

    pub fn send(&self, sent: Sent, id: Option<String>) -> Result<String, model::QueueError> {
        let id = self.with(|q, now| q.send(sent, id, now))?;
        self.arrived.notify_waiters();
        Ok(id)
    }

    /// ReceiveMessage with long polling: waits up to `wait` for a message (world time on a
    /// scaled clock; on a manual clock, which moves only when a test moves it, `wait` of
    /// wall-clock time).
    pub async fn receive(
        &self,
        max: usize,
        visibility: Option<Duration>,
        wait: Duration,
    ) -> Vec<Message> {
        let until = self.clock.now() + wait;
        let manual_until = std::time::Instant::now() + wait;
        let manual = self.clock.world_time().is_none();
        loop {
            let arrived = self.arrived.notified();
            let got = self.with(|q, now| q.receive(max, visibility, now));
            let now = self.clock.now();
            let over = if manual {
                std::time::Instant::now() >= manual_until
            } else {
                now >= until
            };
            if !got.is_empty() || over {
                return got;
            }
            // Look again when the next message is due, a new one arrives, or the wait ends;
            // at least every world second, since the clock may be moved by hand.
            let next = self
                .with(|q, _| q.next_visible())
                .unwrap_or(until)
                .min(until);
            let nap = nodewright::clock::until(now, next)
                .clamp(Duration::from_millis(1), Duration::from_secs(1));
            tokio::select! {
                () = arrived => {}
                () = self.clock.sleep(nap) => {}
            }
        }
    }
}

/// The emulated queues and what the front needs to serve them.
#[derive(Default)]
pub struct Sqs {
    queues: Vec<Arc<EmulatedQueue>>,
    /// Access key id -> SenderId (`AROA…:session`), as SQS records the sender.
    senders: Mutex<BTreeMap<String, String>>,
    /// Ids of moto's copies of messages the functions sent (see the module's doc).
    shadows: Mutex<HashSet<String>>,
}

impl Sqs {
    pub fn new(queues: Vec<Arc<EmulatedQueue>>) -> Sqs {
        Sqs {
            queues,
            ..Sqs::default()
        }
    }

    /// The SenderId SQS records for calls signed with `access_key`.
    pub fn know_sender(&self, access_key: &str, sender_id: &str) {
        if let Ok(mut s) = self.senders.lock() {
            s.insert(access_key.to_string(), sender_id.to_string());
        }
    }

    fn sender_of(&self, access_key: &str) -> String {
        self.senders
            .lock()
            .ok()
            .and_then(|s| s.get(access_key).cloned())
            .unwrap_or_else(|| access_key.to_string())
    }

    fn shadow(&self, id: &str) {
        if let Ok(mut s) = self.shadows.lock() {
            s.insert(id.to_string());
        }
    }

    /// The queue whose URL (or dead-letter URL) is `url`, and whether it is the dead-letter
    /// queue.
    pub fn queue(&self, url: &str) -> Option<(&Arc<EmulatedQueue>, bool)> {
        self.queues.iter().find_map(|q| {
            if q.url == url {
                Some((q, false))
            } else if q.dead_letter_url == url {
                Some((q, true))
            } else {
                None
            }
        })
    }

    /// Moves what EventBridge delivered into moto's queues into the emulated ones, and
    /// throws away moto's copies of the functions' own messages.
    pub async fn pump(&self, sdk: &SdkConfig) -> anyhow::Result<usize> {
        let client = aws_sdk_sqs::Client::new(sdk);
        let mut moved = 0;
        for queue in &self.queues {
            loop {
                let out = client
                    .receive_message()
                    .queue_url(&queue.url)
                    .max_number_of_messages(10)
                    .message_system_attribute_names(MessageSystemAttributeName::All)
                    .send()
                    .await
                    .context("ReceiveMessage on moto's queue")?;
                let messages = out.messages();
                if messages.is_empty() {
                    break;
                }
                for m in messages {
                    let id = m.message_id().unwrap_or_default().to_string();
                    let shadow = self.shadows.lock().is_ok_and(|s| s.contains(&id));
                    if !shadow {
                        let sender = m
                            .attributes()
                            .and_then(|a| a.get(&MessageSystemAttributeName::SenderId))
                            .map_or(EVENTBRIDGE_SENDER, String::as_str);
                        let sent = Sent {
                            body: crate::interruption::with_account(m.body().unwrap_or_default()),
                            sender_id: sender.to_string(),
                            trace_header: None,
                            delay: Some(Duration::ZERO),
                        };
                        queue
                            .send(sent, Some(id))
                            .map_err(|e| anyhow::anyhow!("{e}"))?;
                        moved += 1;
                    }
                    client
                        .delete_message()
                        .queue_url(&queue.url)
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .send()
                        .await
                        .context("DeleteMessage on moto's queue")?;
                }
            }
        }
        Ok(moved)
    }
}
