//! The `interruption` Lambda function: its handler lives here so tests can invoke it exactly as
//! the Lambda runtime does; `main.rs` only wires configuration and clients.
//!
//! One invocation receives an SQS batch (EventBridge events, and nodewright's own delayed
//! follow-ups) and answers with the ids of the messages to retry (`ReportBatchItemFailures`):
//! - a message that cannot be parsed is logged with its id and acknowledged, unless it names
//!   an instance of this cluster: that one is retried, and dead-lettered (alarmed) after
//!   `maxReceiveCount` receives, never dropped unseen;
//! - an event nodewright does not handle, about an instance it does not own, or from
//!   another account or region, or a follow-up this function did not send (logged as
//!   suspicious) is acknowledged as a no-op;
//! - the nodes the batch names are taken away through the one removal path
//!   (`nodewright::removal`), all of them at once: every node's first evictions come before
//!   any replacement launch, and the batch's replacements are asked for together;
//! - a step that failed is tried again within the invocation while its deadline and the
//!   invocation's time allow; a message whose handling still failed is returned, and made
//!   visible again within seconds when its node has a deadline (not after the queue's
//!   visibility timeout).

mod batch;
mod follow;
mod read;

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use jiff::Timestamp;
use lambda_runtime::{Error, LambdaEvent};
use nodewright::aws::{FollowUpQueue, OwnedInstances};
use nodewright::clock::Clock;
use nodewright::interruption::Origin;
use nodewright::kube::{ConfigSource, NodeDisruption};
use nodewright::removal::Capacity;
use nodewright::telemetry::{self, Decision};

pub use batch::Handled;

/// What the function knows about where it runs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub cluster: String,
    /// The function's own account and region; events naming others are ignored.
    pub origin: Origin,
    /// The SQS `SenderId` of the function's own messages (its role's id and session, from
    /// STS GetCallerIdentity): a follow-up sent by anyone else is ignored as suspicious.
    /// `None` accepts every follow-up (a test of the handler alone).
    pub sender_id: Option<String>,
    /// Adopt an instance Karpenter launched for this cluster when an event names it (the
    /// template's `TakeOverFromKarpenter`; see [`nodewright::takeover`]), so a warning that
    /// comes before the sweeper's adoption pass is still acted on.
    pub take_over_karpenter: bool,
}

/// Clients built once per cold start, borrowed by every invocation.
pub struct State<K, E, R, Q> {
    /// `now` for the decisions and the follow-ups' delays.
    pub clock: Arc<dyn Clock>,
    pub kube: K,
    pub ec2: E,
    /// The provisioning core, for replacement capacity.
    pub replacer: R,
    pub queue: Q,
    pub settings: Settings,
}

/// How long before its Lambda deadline the handler stops retrying, so its answer (and the
/// messages it returns) reach Lambda in time.
pub const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The handler, generic over the ports so tests hand it the real adapters against the
/// local world.
pub async fn handler<K, E, R, Q>(
    event: LambdaEvent<SqsEvent>,
    state: &State<K, E, R, Q>,
) -> Result<SqsBatchResponse, Error>
where
    K: NodeDisruption + ConfigSource,
    E: OwnedInstances,
    R: Capacity,
    Q: FollowUpQueue,
{
    let started = std::time::Instant::now();
    let now = state.clock.now();
    // Lambda's deadline, on the clock the function runs on (the runtime's in AWS).
    let deadline = Timestamp::from_millisecond(event.context.deadline as i64)
        .ok()
        .filter(|_| event.context.deadline > 0)
        .unwrap_or(now + std::time::Duration::from_secs(60));
    let answer_by = deadline - ANSWER_MARGIN;
    tracing::debug!(
        request_id = event.context.request_id,
        messages = event.payload.records.len(),
        "interruption invoked"
    );
    let messages = read::messages(&event.payload.records, state, now);
    let handled = batch::run(state, &messages, now, answer_by).await;
    let mut response = SqsBatchResponse::default();
    for (message, outcome) in messages.iter().zip(&handled) {
        if outcome.failed {
            follow::retry_soon(state, message, outcome).await;
            response.add_failure(message.id.clone());
        }
    }
    telemetry::decision_latency(Decision::Interruption, started.elapsed());
    telemetry::flush();
    Ok(response)
}

#[cfg(test)]
mod tests;
