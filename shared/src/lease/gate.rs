//! The question an executor asks right before an action only one contender may take.

use futures::future::BoxFuture;

use super::LeaseError;

/// Why an action was held back.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Another contender holds the Lease now (this one was frozen or slow past it).
    #[error("the Lease {lease} is now held by {holder}")]
    TakenOver { lease: String, holder: String },
    /// The Lease could not be read or renewed: acting might act twice.
    #[error("the Lease {lease} could not be confirmed")]
    Unconfirmed {
        lease: String,
        #[source]
        source: LeaseError,
    },
}

/// Asked right before acting (the provisioner asks before each CreateFleet): `Ok` to go
/// ahead, a [`Refusal`] to hold back. An implementation re-checks what could have changed
/// since the work began: that this invocation still holds its Lease (it may have been
/// frozen past it).
pub trait MayAct: Send + Sync {
    fn may_act(&self) -> BoxFuture<'_, Result<(), Refusal>>;
}
