//! The function's own messages: the follow-up that brings a removal back when its decision
//! asks for another look, and a failed message made visible again within seconds when its
//! node has a deadline.

use std::time::Duration;

use jiff::Timestamp;
use nodewright::aws::{AwsError, FollowUpQueue, MAX_DELAY};
use nodewright::interruption::{FollowUp, Step};
use nodewright::removal::Cause;

use super::State;
use super::batch::Handled;
use super::read::Incoming;

/// One look to ask for.
pub struct Look<'a> {
    pub node: &'a str,
    pub instance_id: &'a str,
    pub cause: Cause,
    pub deadline: Option<Timestamp>,
    pub at: Timestamp,
    pub origin: &'a str,
    /// Looks before this one in the chain.
    pub round: u32,
}

/// Sends the follow-up for `look`. A look further off than SQS can delay a message comes
/// back at the longest delay and is sent on again (its `due` is still `look.at`).
pub async fn send<K, E, R, Q: FollowUpQueue>(
    state: &State<K, E, R, Q>,
    look: &Look<'_>,
    now: Timestamp,
) -> Result<(), AwsError> {
    let delay = nodewright::clock::until(now, look.at).min(MAX_DELAY);
    let follow_up = FollowUp {
        instance_id: look.instance_id.to_string(),
        node: look.node.to_string(),
        step: Step::Continue,
        reason: look.cause,
        deadline: look.deadline,
        due: Some(look.at),
        origin_event: look.origin.to_string(),
        round: look.round + 1,
    };
    let origin = &state.settings.origin;
    let body = follow_up.envelope(&origin.account, &origin.region, now);
    state.queue.send_delayed(&body.to_string(), delay).await?;
    tracing::debug!(
        node = look.node,
        ?delay,
        round = follow_up.round,
        "follow-up queued"
    );
    Ok(())
}

/// How soon a failed message whose node has a deadline comes back: a quarter of the time
/// left, between 2 and 20 seconds (a spot warning's two minutes allow several tries).
pub fn retry_delay(deadline: Timestamp, now: Timestamp) -> Duration {
    (nodewright::clock::until(now, deadline) / 4)
        .clamp(Duration::from_secs(2), Duration::from_secs(20))
}

/// Makes a failed message visible again soon when its node has a deadline; others come
/// back after the queue's visibility timeout.
pub async fn retry_soon<K, E, R, Q: FollowUpQueue>(
    state: &State<K, E, R, Q>,
    message: &Incoming,
    outcome: &Handled,
) {
    let (Some(deadline), Some(handle)) = (outcome.deadline, &message.handle) else {
        return;
    };
    let after = retry_delay(deadline, state.clock.now());
    if let Err(e) = state.queue.retry_soon(handle, after).await {
        tracing::warn!(
            message_id = message.id,
            error = nodewright::error_chain(&e),
            "could not make the failed message visible sooner; it comes back after the visibility timeout"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_failed_message_with_a_deadline_comes_back_well_before_it() {
        let cases = [(120, 20), (60, 15), (20, 5), (4, 2), (-10, 2)];
        for (left, want) in cases {
            assert_eq!(
                retry_delay(at(left), at(0)),
                Duration::from_secs(want),
                "{left} s left"
            );
        }
    }
}
