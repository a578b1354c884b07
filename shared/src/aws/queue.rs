//! The interruption queue as a port: nodewright's delayed follow-up messages (the next
//! step of work that outlives one invocation) go back onto the queue the events arrive on.

use std::time::Duration;

use super::errors::{AwsError, api};

/// SQS `DelaySeconds` is at most 900 (15 minutes); work due later is re-sent until due.
pub const MAX_DELAY: Duration = Duration::from_secs(900);

pub trait FollowUpQueue: Send + Sync {
    /// Sends `body`, delivered after `delay` (capped at [`MAX_DELAY`]).
    fn send_delayed(
        &self,
        body: &str,
        delay: Duration,
    ) -> impl Future<Output = Result<(), AwsError>> + Send;
    /// Makes the received message `receipt_handle` visible again after `after` instead of
    /// the queue's visibility timeout (ChangeMessageVisibility): a message whose handling
    /// failed and whose deadline is near is tried again in seconds.
    fn retry_soon(
        &self,
        receipt_handle: &str,
        after: Duration,
    ) -> impl Future<Output = Result<(), AwsError>> + Send;
}

/// The queue by URL (`INTERRUPTION_QUEUE_URL`).
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsQueue {
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> SqsQueue {
        SqsQueue {
            client,
            url: url.into(),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

/// Whole seconds, rounded up so a follow-up never arrives before it is due.
fn delay_seconds(delay: Duration) -> i32 {
    let capped = delay.min(MAX_DELAY);
    let secs = capped.as_secs() + u64::from(capped.subsec_nanos() > 0);
    secs.min(MAX_DELAY.as_secs()) as i32
}

impl FollowUpQueue for SqsQueue {
    async fn send_delayed(&self, body: &str, delay: Duration) -> Result<(), AwsError> {
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .delay_seconds(delay_seconds(delay))
            .send()
            .await
            .map_err(api(|source| AwsError::SendMessage {
                queue: self.url.clone(),
                source,
            }))?;
        Ok(())
    }

    async fn retry_soon(&self, receipt_handle: &str, after: Duration) -> Result<(), AwsError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(delay_seconds(after))
            .send()
            .await
            .map_err(api(|source| AwsError::ChangeMessageVisibility {
                queue: self.url.clone(),
                source,
            }))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_up_to_whole_seconds_and_stop_at_fifteen_minutes() {
        let cases = [
            (Duration::ZERO, 0),
            (Duration::from_millis(1), 1),
            (Duration::from_millis(4_200), 5),
            (Duration::from_secs(900), 900),
            (Duration::from_secs(3_600), 900),
        ];
        for (delay, want) in cases {
            assert_eq!(delay_seconds(delay), want, "{delay:?}");
        }
    }
}
