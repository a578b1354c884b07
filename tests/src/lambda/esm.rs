//! Lambda's SQS event source mapping, as AWS documents it: pollers long-poll the queue,
//! hand each batch (up to `BatchSize`) to the function synchronously, and delete what the
//! function did not report as failed (`ReportBatchItemFailures`); a message reported as
//! failed, or a batch whose invocation failed, timed out or was throttled, is left to come
//! back after the queue's visibility timeout, counting a receive each time, and moves to the
//! dead-letter queue past `maxReceiveCount`. At most `ScalingConfig.MaximumConcurrency`
//! batches are in flight. A message continuing a chain that Lambda's recursive loop
//! detection stops is not delivered: it goes to the queue's dead-letter queue.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::function::{Function, Outcome};
use super::lineage;
use crate::kube_sim::SimClock;
use crate::sqs::EmulatedQueue;
use crate::sqs::model::{DeadLetterWhy, Message};

/// How long one poll waits for messages (SQS's longest long poll).
const LONG_POLL: Duration = Duration::from_secs(20);
/// How long a throttled batch waits before the mapping invokes again.
const THROTTLE_BACKOFF: Duration = Duration::from_secs(1);

/// One batch's delivery, for the world's records.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// When the batch was received (world time).
    pub at: jiff::Timestamp,
    pub message_ids: Vec<String>,
    pub outcome: Outcome,
    /// Ids the function reported as failed (or all, when the invocation failed).
    pub failed: Vec<String>,
    /// The invocation's answer named an id it was not given, or was not a batch response.
    pub invalid_response: bool,
}

/// The ids of a batch the function asks to have delivered again, and whether its answer was
/// invalid. As AWS documents it: an empty or null `batchItemFailures`, or an empty or null
/// answer, is a complete success; an answer of another shape, or an item whose
/// `itemIdentifier` is empty, null or not a message of the batch, fails the whole batch; so
/// does an invocation that did not succeed.
pub fn failed_ids(outcome: &Outcome, batch: &[String], partial: bool) -> (Vec<String>, bool) {
    let Outcome::Response(answer) = outcome else {
        return (batch.to_vec(), false);
    };
    if !partial {
        return (Vec::new(), false);
    }
    let items = match answer {
        Value::Null => return (Vec::new(), false),
        Value::Object(o) => match o.get("batchItemFailures") {
            None | Some(Value::Null) => return (Vec::new(), false),
            Some(Value::Array(items)) => items,
            Some(_) => return (batch.to_vec(), true),
        },
        _ => return (batch.to_vec(), true),
    };
    let mut ids = Vec::new();
    for item in items {
        match item.get("itemIdentifier").and_then(Value::as_str) {
            Some(id) if batch.iter().any(|b| b == id) => ids.push(id.to_string()),
            _ => return (batch.to_vec(), true),
        }
    }
    (ids, false)
}

/// The SQS event Lambda invokes the function with.
pub fn sqs_event(queue: &EmulatedQueue, region: &str, batch: &[Message]) -> Value {
    let records: Vec<Value> = batch
        .iter()
        .map(|m| {
            let mut attributes = json!({
                "ApproximateReceiveCount": m.receive_count.to_string(),
                "SentTimestamp": m.sent_at.as_millisecond().to_string(),
                "SenderId": m.sent.sender_id,
                "ApproximateFirstReceiveTimestamp":
                    m.first_receive_at.map(|t| t.as_millisecond().to_string()),
            });
            if let Some(t) = &m.sent.trace_header {
                attributes["AWSTraceHeader"] = json!(t);
            }
            json!({
                "messageId": m.id,
                "receiptHandle": m.handle,
                "body": m.sent.body,
                "attributes": attributes,
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": queue.arn,
                "awsRegion": region,
            })
        })
        .collect();
    json!({ "Records": records })
}

/// The mapping from one queue to one function.
pub struct EventSourceMapping {
    function: Arc<Function>,
    queue: Arc<EmulatedQueue>,
    region: String,
    clock: SimClock,
    slots: Arc<Semaphore>,
    deliveries: Mutex<Vec<Delivery>>,
    stopped_by_recursion: Mutex<BTreeSet<String>>,
}

impl EventSourceMapping {
    pub fn new(
        function: Arc<Function>,
        queue: Arc<EmulatedQueue>,
        region: &str,
        clock: SimClock,
    ) -> Arc<EventSourceMapping> {
        let source = function.settings.queue.clone();
        let concurrency = source.and_then(|q| q.max_concurrency).unwrap_or(1000);
        Arc::new(EventSourceMapping {
            function,
            queue,
            region: region.to_string(),
            clock,
            slots: Arc::new(Semaphore::new(concurrency)),
            deliveries: Mutex::default(),
            stopped_by_recursion: Mutex::default(),
        })
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default()
    }

    /// Messages not delivered because Lambda's recursive loop detection stopped their chain.
    pub fn stopped_by_recursion(&self) -> BTreeSet<String> {
        self.stopped_by_recursion
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Polls and invokes until the task is aborted.
    pub async fn run(self: Arc<Self>) {
        let Some(source) = self.function.settings.queue.clone() else {
            return;
        };
        loop {
            let Ok(slot) = self.slots.clone().acquire_owned().await else {
                return;
            };
            let batch = self.queue.receive(source.batch_size, None, LONG_POLL).await;
            let batch = self.drop_stopped_chains(batch);
            if batch.is_empty() {
                continue;
            }
            let me = self.clone();
            let partial = source.report_batch_item_failures;
            tokio::spawn(async move {
                me.deliver(batch, partial).await;
                drop(slot);
            });
        }
    }

    /// Lambda's recursion check, per message: one that would be the seventeenth invocation
    /// of its chain is not delivered.
    fn drop_stopped_chains(&self, batch: Vec<Message>) -> Vec<Message> {
        let name = self.function.name();
        let setting = self.function.settings.recursive_loop;
        let (stopped, kept): (Vec<Message>, Vec<Message>) = batch.into_iter().partition(|m| {
            lineage::stops(
                lineage::count(m.sent.trace_header.as_deref(), name),
                setting,
            )
        });
        for m in stopped {
            tracing::warn!(
                message_id = m.id,
                function = name,
                "recursive loop detected: Lambda stops the chain"
            );
            if let Some(h) = &m.handle {
                let _ = self
                    .queue
                    .with(|q, now| q.dead_letter_handle(h, DeadLetterWhy::Recursion, now));
            }
            if let Ok(mut s) = self.stopped_by_recursion.lock() {
                s.insert(m.id.clone());
            }
        }
        kept
    }

    async fn deliver(&self, batch: Vec<Message>, partial: bool) {
        let at = self.clock.now();
        let name = self.function.name().to_string();
        let before = batch
            .iter()
            .map(|m| lineage::count(m.sent.trace_header.as_deref(), &name))
            .max()
            .unwrap_or(0);
        let root = batch
            .iter()
            .find_map(|m| lineage::root(m.sent.trace_header.as_deref()))
            .unwrap_or_else(|| format!("1-{:08x}-{}", self.clock.now().as_second(), batch[0].id));
        let others = batch.iter().find_map(|m| m.sent.trace_header.clone());
        let trace = lineage::next_header(&root, &name, before, others.as_deref());
        let event = sqs_event(&self.queue, &self.region, &batch);
        let ids: Vec<String> = batch.iter().map(|m| m.id.clone()).collect();
        let mut outcome = self
            .function
            .invoke(event.clone(), trace.clone(), before + 1)
            .await;
        // A throttled batch is invoked again while its messages are still hidden.
        let hidden_until = batch.iter().map(|m| m.visible_at).min();
        while outcome == Outcome::Throttled
            && hidden_until.is_some_and(|t| self.clock.now() + THROTTLE_BACKOFF < t)
        {
            self.clock.sleep(THROTTLE_BACKOFF).await;
            outcome = self
                .function
                .invoke(event.clone(), trace.clone(), before + 1)
                .await;
        }
        let (failed, invalid_response) = failed_ids(&outcome, &ids, partial);
        for m in &batch {
            if failed.contains(&m.id) {
                continue;
            }
            if let Some(h) = &m.handle {
                let _ = self.queue.with(|q, now| q.delete(h, now));
            }
        }
        if let Ok(mut d) = self.deliveries.lock() {
            d.push(Delivery {
                at,
                message_ids: ids,
                outcome,
                failed,
                invalid_response,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn which_messages_come_back_after_an_invocation() {
        let batch = ids(&["a", "b", "c"]);
        let reported = Outcome::Response(json!({"batchItemFailures": [{"itemIdentifier": "b"}]}));
        let none = Outcome::Response(json!({"batchItemFailures": []}));
        let unknown = Outcome::Response(json!({"batchItemFailures": [{"itemIdentifier": "z"}]}));
        let cases = [
            (&reported, true, ids(&["b"]), false),
            (&none, true, ids(&[]), false),
            (&Outcome::Response(Value::Null), true, ids(&[]), false),
            (&unknown, true, batch.clone(), true),
            (
                &Outcome::Response(json!("nonsense")),
                true,
                batch.clone(),
                true,
            ),
            (
                &Outcome::Response(json!({"batchItemFailures": [{"itemIdentifier": ""}]})),
                true,
                batch.clone(),
                true,
            ),
            (&Outcome::Response(json!({})), true, ids(&[]), false),
            (&Outcome::Error(json!({})), true, batch.clone(), false),
            (&Outcome::TimedOut, true, batch.clone(), false),
            (&Outcome::Died, true, batch.clone(), false),
            (&Outcome::Throttled, true, batch.clone(), false),
            // Without ReportBatchItemFailures a successful invocation deletes the batch.
            (&reported, false, ids(&[]), false),
        ];
        for (outcome, partial, want, invalid) in cases {
            assert_eq!(
                failed_ids(outcome, &batch, partial),
                (want, invalid),
                "{outcome:?} partial {partial}"
            );
        }
    }
}
