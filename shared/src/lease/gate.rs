//! The question an executor asks right before an action only one contender may take.

use futures::future::BoxFuture;

/// Asked right before acting (the provisioner asks before each CreateFleet): `Ok` to go
/// ahead, `Err(why)` to hold back. An implementation re-checks what could have changed
/// since the work began: that this invocation still holds its Lease (it may have been
/// frozen past it), that the invocation's deadline leaves time to finish.
pub trait MayAct: Send + Sync {
    fn may_act(&self) -> BoxFuture<'_, Result<(), String>>;
}
