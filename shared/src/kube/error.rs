//! Errors from talking to the Kubernetes API, with the verb and resource they happened on,
//! and the one place that decides which of them are worth retrying.

use std::time::Duration;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum KubeError {
    /// A call to the API server failed (after retries, when the failure was transient).
    /// The message names the call; the cause is the source (print it with
    /// [`crate::error_chain`], once).
    #[error("{verb} {resource}")]
    Api {
        verb: &'static str,
        /// `pods`, `nodes/ip-10-0-0-1`, `configmaps/kube-system/nodewright`, ...
        resource: String,
        #[source]
        source: ::kube::Error,
    },
    /// A node could not be written (a taint, a finalizer) because it kept changing under us.
    #[error("patch nodes/{node}: the node changed {attempts} times while being written")]
    Conflict { node: String, attempts: u32 },
}

impl KubeError {
    /// The HTTP status the API server answered with, when it answered.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            KubeError::Api {
                source: ::kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// The API server's 409: the object changed since it was read (a failed precondition,
    /// a stale resourceVersion).
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409)
    }

    /// Worth trying again in a moment: no answer (a timeout, a dropped connection), the
    /// server's 429 or 5xx, or a node that kept changing while it was patched.
    pub fn is_transient(&self) -> bool {
        match self {
            KubeError::Conflict { .. } => true,
            KubeError::Api { .. } => self
                .status_code()
                .is_none_or(|c| c == 409 || c == 429 || c >= 500),
        }
    }
}

/// Bounded retry for throttling (429) and server errors (5xx). The Lambda has a minute per
/// invocation and polls again seconds later, so a short budget is better than a long one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in total, the first included.
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
    /// The longest `retryAfterSeconds` honoured; a server asking for more is asked again
    /// sooner, since the next poll would come anyway.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(400),
            max_retry_after: Duration::from_secs(2),
        }
    }
}

/// Each wait is four times the last (100 ms, 400 ms with the defaults), capped.
const BACKOFF_FACTOR: u32 = 4;

impl RetryPolicy {
    /// How long to wait before trying again after `error` on try number `attempt` (1-based),
    /// or `None` when the error is not transient or the tries are used up.
    ///
    /// The API server says how long to wait on a 429 in the Status body's
    /// `details.retryAfterSeconds` (it also sends the `Retry-After` header with the same
    /// value, which `kube::Error` does not keep).
    pub fn delay(&self, attempt: u32, error: &::kube::Error) -> Option<Duration> {
        if attempt >= self.attempts {
            return None;
        }
        let ::kube::Error::Api(status) = error else {
            return None;
        };
        if status.code != 429 && !(500..=599).contains(&status.code) {
            return None;
        }
        let asked = status
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .unwrap_or(0);
        if asked > 0 {
            return Some(Duration::from_secs(u64::from(asked)).min(self.max_retry_after));
        }
        let factor = BACKOFF_FACTOR.saturating_pow(attempt.saturating_sub(1));
        Some(self.first_delay.saturating_mul(factor).min(self.max_delay))
    }

    /// Runs `call` until it succeeds, fails for good, or the tries are used up.
    pub async fn run<T, F, Fut>(
        &self,
        verb: &'static str,
        resource: &str,
        mut call: F,
    ) -> Result<T, KubeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ::kube::Error>>,
    {
        let mut attempt = 1;
        loop {
            match call().await {
                Ok(v) => return Ok(v),
                Err(e) => match self.delay(attempt, &e) {
                    Some(wait) => {
                        tracing::debug!(verb, resource, attempt, ?wait, error = %e, "retrying Kubernetes API call");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                    }
                    None => {
                        return Err(KubeError::Api {
                            verb,
                            resource: resource.to_owned(),
                            source: e,
                        });
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::kube::core::Status;

    fn api(code: u16, retry_after: u32) -> ::kube::Error {
        let mut status = Status::failure("x", "y").with_code(code);
        if retry_after > 0 {
            status.details =
                serde_json::from_value(serde_json::json!({"retryAfterSeconds": retry_after})).ok();
        }
        ::kube::Error::Api(status.boxed())
    }

    #[test]
    fn only_throttling_and_server_errors_are_retried_with_growing_bounded_waits() {
        let p = RetryPolicy::default();
        let ms = Duration::from_millis;
        let cases: &[(&str, u32, ::kube::Error, Option<Duration>)] = &[
            ("429 first", 1, api(429, 0), Some(ms(100))),
            ("503 second", 2, api(503, 0), Some(ms(400))),
            ("500 third: out of tries", 3, api(500, 0), None),
            ("429 asking 1 s", 1, api(429, 1), Some(ms(1000))),
            ("429 asking 30 s is capped", 1, api(429, 30), Some(ms(2000))),
            ("404 is an answer", 1, api(404, 0), None),
            ("409 is an answer", 1, api(409, 0), None),
            ("403 is an answer", 1, api(403, 0), None),
            (
                "not an API error",
                1,
                ::kube::Error::LinesCodecMaxLineLengthExceeded,
                None,
            ),
        ];
        for (what, attempt, error, want) in cases {
            assert_eq!(p.delay(*attempt, error), *want, "{what}");
        }
        let longer = RetryPolicy { attempts: 5, ..p };
        assert_eq!(
            longer.delay(4, &api(502, 0)),
            Some(ms(400)),
            "waits stay capped"
        );
    }
}
