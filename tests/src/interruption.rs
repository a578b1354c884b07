//! The interruption function wired to the local world, and the queue around it as Lambda's
//! SQS event source mapping runs it: receive a batch, invoke the real handler with it, delete
//! the messages it did not report as failed.
//!
//! The queue is the world's (`crate::sqs`), on the world's clock: a failed message comes back
//! after the queue's visibility timeout from the deployed template, a delayed follow-up
//! after its `DelaySeconds`, and a message received more than `maxReceiveCount` times moves
//! to the dead-letter queue; a scenario on a manual clock advances it to see them.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use jiff::Timestamp;
use lambda_runtime::LambdaEvent;
use nodewright::aws::{Ec2Adapter, ImageAdapter, SqsQueue};
use nodewright::interruption::Origin;
use nodewright::kube::KubeCluster;
use nodewright::provision::{AwsPorts, Provisioner};
use nodewright_interruption::{Settings, State};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::world::World;
use crate::world::provisioner::ProvisionerState;

/// moto's account; the world's region.
pub const ACCOUNT: &str = "123456789012";
pub const REGION: &str = "us-east-1";

pub type Replacer = Mutex<Provisioner<KubeCluster, AwsPorts<Ec2Adapter, ImageAdapter>>>;
/// The handler's state, borrowing the provisioning core of a [`ProvisionerState`].
pub type InterruptionState<'a> = State<KubeCluster, Ec2Adapter, &'a Replacer, SqsQueue>;

/// One received batch, as the emulated event source mapping holds it until the function
/// answered.
#[derive(Debug)]
pub struct Batch {
    /// The SQS event Lambda invokes the function with (`Records`).
    pub event: Value,
    /// When ReceiveMessage returned it.
    pub received_at: Instant,
    pub bodies: Vec<Value>,
    messages: Vec<crate::sqs::model::Message>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

/// What one delivery did.
#[derive(Debug, Default)]
pub struct Delivery {
    pub received: usize,
    pub failed: Vec<String>,
    pub bodies: Vec<Value>,
}

impl World {
    /// The interruption handler's state over the real adapters, its replacement launches
    /// going through `provisioner`'s core (as in AWS, where both run the same core).
    pub async fn interruption<'a>(
        &self,
        provisioner: &'a ProvisionerState,
    ) -> anyhow::Result<InterruptionState<'a>> {
        let kube = provisioner.provisioner().lock().await.kube().clone();
        // Signed as the interruption function's own template role (IAM is enforced).
        let sdk = self.function_sdk("InterruptionFunction")?;
        let ec2 = aws_sdk_ec2::Client::new(&sdk);
        Ok(State {
            clock: std::sync::Arc::new(crate::kit::SimNow(self.clock())),
            kube,
            ec2: Ec2Adapter::new(ec2, self.seeded.cluster.clone()),
            replacer: provisioner.provisioner(),
            queue: SqsQueue::new(aws_sdk_sqs::Client::new(&sdk), self.stack.queue_url.clone()),
            settings: Settings {
                cluster: self.seeded.cluster.clone(),
                origin: Origin {
                    account: ACCOUNT.into(),
                    region: REGION.into(),
                },
                sender_id: self.senders.get("InterruptionFunction").cloned(),
                take_over_karpenter: self.takeover_setting("InterruptionFunction")?,
            },
        })
    }

    /// Sends an event through moto's EventBridge (PutEvents), which the seeded rules route
    /// to the interruption queue as EventBridge does.
    pub async fn put_event(
        &self,
        source: &str,
        detail_type: &str,
        detail: Value,
        time: Timestamp,
    ) -> anyhow::Result<()> {
        self.put_events(source, detail_type, vec![detail], time)
            .await
    }

    /// Sends one event per detail in a single PutEvents call (at most ten, as EventBridge
    /// takes them), all at the same moment, as a reclaimed spot pool warns every instance in it.
    pub async fn put_events(
        &self,
        source: &str,
        detail_type: &str,
        details: Vec<Value>,
        time: Timestamp,
    ) -> anyhow::Result<()> {
        let events = aws_sdk_eventbridge::Client::new(&self.sdk);
        let entries = details.into_iter().map(|detail| {
            aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                .source(source)
                .detail_type(detail_type)
                .detail(detail.to_string())
                .time(aws_smithy_types::DateTime::from_secs(time.as_second()))
                .build()
        });
        let out = events
            .put_events()
            .set_entries(Some(entries.collect()))
            .send()
            .await
            .context("PutEvents against moto")?;
        anyhow::ensure!(out.failed_entry_count() == 0, "PutEvents failed: {out:?}");
        // EventBridge delivers to the queue: moto's rules routed it into moto's queue, from
        // where the world's queue takes it.
        self.sqs.pump(&self.sdk).await?;
        Ok(())
    }

    /// Sends a raw message to the interruption queue (as someone with SendMessage could).
    pub async fn send_raw(&self, body: &str) -> anyhow::Result<()> {
        aws_sdk_sqs::Client::new(&self.sdk)
            .send_message()
            .queue_url(&self.stack.queue_url)
            .message_body(body)
            .send()
            .await
            .context("SendMessage against moto")?;
        self.sqs.pump(&self.sdk).await?;
        Ok(())
    }

    /// One batch (up to ten messages, waiting up to `wait` for the first) handed to the
    /// real handler as Lambda hands it; acknowledged messages are deleted.
    pub async fn deliver(
        &self,
        state: &InterruptionState<'_>,
        wait: Duration,
    ) -> anyhow::Result<Delivery> {
        let Some(batch) = self.receive_batch(wait).await? else {
            return Ok(Delivery::default());
        };
        let event: SqsEvent = serde_json::from_value(batch.event.clone())
            .context("an SQS event as Lambda builds it")?;
        let response: SqsBatchResponse = nodewright_interruption::handler(
            LambdaEvent::new(event, lambda_runtime::Context::default()),
            state,
        )
        .await
        .map_err(|e| anyhow::anyhow!("the handler failed: {e}"))?;
        let failed: Vec<String> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        self.settle(&batch, &failed).await?;
        Ok(Delivery {
            received: batch.messages.len(),
            failed,
            bodies: batch.bodies,
        })
    }

    /// The first half of the emulated event source mapping: EventBridge's deliveries moved
    /// into the world's queue, then one ReceiveMessage (up to ten messages, hidden for the
    /// queue's visibility timeout, waiting up to `wait` for the first) turned into the SQS
    /// event Lambda invokes the function with; `None` when nothing arrived.
    pub async fn receive_batch(&self, wait: Duration) -> anyhow::Result<Option<Batch>> {
        self.sqs.pump(&self.sdk).await?;
        let messages = self.queue.receive(10, None, wait).await;
        let received_at = Instant::now();
        if messages.is_empty() {
            return Ok(None);
        }
        let event = crate::lambda::esm::sqs_event(&self.queue, REGION, &messages);
        let bodies = messages
            .iter()
            .filter_map(|m| serde_json::from_str(&m.sent.body).ok())
            .collect();
        Ok(Some(Batch {
            event,
            received_at,
            bodies,
            messages,
        }))
    }

    /// The second half: the messages not reported as failed (`batchItemFailures` ids) are
    /// deleted; the failed ones stay hidden until the queue's visibility timeout has passed
    /// on the world's clock, as Lambda leaves them.
    pub async fn settle(&self, batch: &Batch, failed: &[String]) -> anyhow::Result<()> {
        for m in &batch.messages {
            if failed.contains(&m.id) {
                continue;
            }
            if let Some(handle) = &m.handle {
                self.queue
                    .with(|q, now| q.delete(handle, now))
                    .map_err(|e| anyhow::anyhow!("deleting message {}: {e}", m.id))?;
            }
        }
        Ok(())
    }

    /// The bodies of the messages in the dead-letter queue.
    pub async fn dead_letters(&self) -> anyhow::Result<Vec<String>> {
        Ok(self.queue.with(|q, _| {
            q.dead_letters()
                .iter()
                .map(|(m, _)| m.sent.body.clone())
                .collect()
        }))
    }
}

/// moto gap, filled here and only here: moto 5.2.5's EventBridge writes to an SQS target
/// through its default input template, which leaves out the envelope's `account`
/// (moto/events/utils.py, `DEFAULT_EVENT_INPUT_TEMPLATE`); EventBridge always sends it. The
/// emulated event source mapping puts moto's own account back into an EventBridge envelope
/// that lacks one. A body that carries an account, or is not an envelope, passes unchanged,
/// so the handler's own account check still judges every forged or foreign message.
pub(crate) fn with_account(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(mut event))
            if event.contains_key("detail-type") && !event.contains_key("account") =>
        {
            event.insert("account".into(), json!(ACCOUNT));
            Value::Object(event).to_string()
        }
        _ => body.to_string(),
    }
}
