//! A cached EKS token: minted once, reused until shortly before aws-cli would call it expired.
//!
//! A warm Lambda container lives for hours; the token inside it must be re-minted before the
//! 14 minutes aws-cli reports (and before the signing credentials themselves expire). The
//! clock is injected so this is tested without sleeping.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use tokio::sync::Mutex;

use crate::clock::{Clock, SystemClock};

use super::token::{Token, TokenError, presign};

/// Re-mint when the cached token has less than this left. One minute covers a request in
/// flight plus clock skew between the Lambda host and the EKS authenticator.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct Cached {
    token: Token,
    refresh_at: SystemTime,
}

/// Hands out a valid EKS token for one cluster, minting a new one only when needed.
pub struct TokenSource {
    credentials: SharedCredentialsProvider,
    cluster: String,
    region: String,
    clock: Arc<dyn Clock>,
    cached: Mutex<Option<Cached>>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("cluster", &self.cluster)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl TokenSource {
    pub fn new(
        credentials: SharedCredentialsProvider,
        cluster: impl Into<String>,
        region: impl Into<String>,
    ) -> Self {
        Self {
            credentials,
            cluster: cluster.into(),
            region: region.into(),
            clock: Arc::new(SystemClock),
            cached: Mutex::new(None),
        }
    }

    /// Replaces the clock (tests, or a clock corrected for skew).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// The cached token while it has more than [`REFRESH_MARGIN`] left, otherwise a new one.
    pub async fn token(&self) -> Result<Token, TokenError> {
        let mut cached = self.cached.lock().await;
        let now = SystemTime::from(self.clock.now());
        if let Some(c) = cached.as_ref()
            && now < c.refresh_at
        {
            return Ok(c.token.clone());
        }
        let creds = self
            .credentials
            .provide_credentials()
            .await
            .map_err(TokenError::Credentials)?;
        let token = presign(&self.cluster, &self.region, &creds, now)?;
        let refresh_at = refresh_time(now, creds.expiry());
        *cached = Some(Cached {
            token: token.clone(),
            refresh_at,
        });
        Ok(token)
    }
}

/// When a token signed at `signed_at` must be replaced: [`REFRESH_MARGIN`] before its
/// 14-minute expiry, or before the signing credentials expire, whichever comes first
/// (STS rejects a presigned URL whose session credentials have expired).
pub fn refresh_time(signed_at: SystemTime, credentials_expiry: Option<SystemTime>) -> SystemTime {
    let token_refresh = signed_at + super::token::TOKEN_LIFETIME - REFRESH_MARGIN;
    match credentials_expiry {
        Some(expiry) => {
            let creds_refresh = expiry.checked_sub(REFRESH_MARGIN).unwrap_or(expiry);
            token_refresh.min(creds_refresh)
        }
        None => token_refresh,
    }
}
