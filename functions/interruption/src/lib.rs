//! The `interruption` Lambda function: its handler lives here so tests can invoke it exactly as
//! the Lambda runtime does; `main.rs` only wires configuration and clients.
//!
//! One invocation receives an SQS batch (EventBridge events, and nodewright's own delayed
//! follow-ups) and answers with the ids of the messages to retry (`ReportBatchItemFailures`):
//! - a message that cannot be parsed is logged with its id and acknowledged: retrying
//!   cannot make it parse;
//! - an event nodewright does not handle, about an instance it does not own, or from
//!   another account or region (logged as suspicious) is acknowledged as a no-op;
//! - a message whose handling failed is returned, so SQS delivers it again, and after
//!   `maxReceiveCount` receives moves it to the dead-letter queue.

mod act;
mod steps;

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{Error, LambdaEvent};
use nodewright::aws::{FollowUpQueue, OwnedInstances};
use nodewright::interruption::{Origin, Parsed, parse};
use nodewright::kube::{ConfigSource, NodeDisruption};
use nodewright::provision::Replacement;
use nodewright::telemetry::{self, Decision};

pub use act::{ActError, Outcome};

/// How long a rebalance replacement may take to become a Ready node before the old node
/// is drained anyway: boot and join take one to three minutes, so ten is generous.
pub const AWAIT_REPLACEMENT: Duration = Duration::from_secs(600);
/// How often a follow-up looks again for the replacement to be Ready.
pub const REPLACEMENT_RECHECK: Duration = Duration::from_secs(10);

/// What the function knows about where it runs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub cluster: String,
    /// The function's own account and region; events naming others are ignored.
    pub origin: Origin,
}

/// Clients built once per cold start, borrowed by every invocation.
pub struct State<K, E, R, Q> {
    /// `now` for the decisions and the follow-ups' delays.
    pub clock: std::sync::Arc<dyn nodewright::clock::Clock>,
    pub kube: K,
    pub ec2: E,
    /// The provisioning core, for replacement capacity.
    pub replacer: R,
    pub queue: Q,
    pub settings: Settings,
}

/// The handler, generic over the ports so tests hand it the real adapters against the
/// local world.
pub async fn handler<K, E, R, Q>(
    event: LambdaEvent<SqsEvent>,
    state: &State<K, E, R, Q>,
) -> Result<SqsBatchResponse, Error>
where
    K: NodeDisruption + ConfigSource,
    E: OwnedInstances,
    R: Replacement,
    Q: FollowUpQueue,
{
    tracing::debug!(
        request_id = event.context.request_id,
        messages = event.payload.records.len(),
        "interruption invoked"
    );
    // Messages of one batch are independent (other instances), so they are handled
    // concurrently: ten spot warnings must not wait on each other's replacement launch.
    let results = futures::future::join_all(
        event
            .payload
            .records
            .iter()
            .map(|record| handle_record(record, state)),
    )
    .await;
    telemetry::flush();
    let mut response = SqsBatchResponse::default();
    for (record, ok) in event.payload.records.iter().zip(results) {
        if !ok {
            response.add_failure(record.message_id.clone().unwrap_or_default());
        }
    }
    Ok(response)
}

/// Handles one message; `false` when it should be delivered again.
async fn handle_record<K, E, R, Q>(record: &SqsMessage, state: &State<K, E, R, Q>) -> bool
where
    K: NodeDisruption + ConfigSource,
    E: OwnedInstances,
    R: Replacement,
    Q: FollowUpQueue,
{
    let message_id = record.message_id.as_deref().unwrap_or("(no id)");
    let receives = record
        .attributes
        .get("ApproximateReceiveCount")
        .map(String::as_str)
        .unwrap_or("?");
    let Some(body) = record.body.as_deref() else {
        telemetry::interruption_message("unreadable");
        tracing::error!(message_id, "message without a body; dropped");
        return true;
    };
    let message = match parse(body, Some(&state.settings.origin)) {
        Err(e) => {
            telemetry::interruption_message("unreadable");
            tracing::error!(message_id, error = %nodewright::error_chain(&e), "unparsable message; dropped");
            return true;
        }
        Ok(Parsed::Ignored(i)) if i.reason.is_suspicious() => {
            telemetry::interruption_message("suspicious");
            tracing::warn!(
                message_id,
                event_id = i.event_id,
                source = i.source,
                detail_type = i.detail_type,
                reason = %i.reason,
                "suspicious event ignored"
            );
            return true;
        }
        Ok(Parsed::Ignored(i)) => {
            telemetry::interruption_message("ignored");
            tracing::info!(
                message_id,
                event_id = i.event_id,
                source = i.source,
                detail_type = i.detail_type,
                reason = %i.reason,
                "event ignored"
            );
            return true;
        }
        Ok(Parsed::Act(m)) => m,
    };
    telemetry::interruption_message(message.kind().as_str());
    let started = std::time::Instant::now();
    let mut ok = true;
    for instance_id in &message.instance_ids {
        match act::handle(state, &message, instance_id, state.clock.now()).await {
            Ok(outcome) => tracing::info!(
                message_id,
                event_id = message.event_id,
                kind = message.kind().as_str(),
                instance_id,
                ?outcome,
                "handled"
            ),
            Err(e) => {
                ok = false;
                tracing::error!(
                    message_id,
                    receives,
                    event_id = message.event_id,
                    kind = message.kind().as_str(),
                    instance_id,
                    error = %nodewright::error_chain(&e),
                    "handling failed; the message will be delivered again"
                );
            }
        }
    }
    telemetry::decision_latency(Decision::Interruption, started.elapsed());
    ok
}

#[cfg(test)]
mod tests;
