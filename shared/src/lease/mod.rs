//! Leader election through a `coordination.k8s.io/v1` Lease, so invocations of one function
//! that overlap in time take turns acting: exactly one holds the Lease and acts, the others
//! keep watching and take over when it is released or expires. The provisioner uses it so
//! consecutive scheduled invocations can overlap without a gap in coverage; the sweeper can
//! use the same mechanism under its own Lease name.
//!
//! The standard pattern (client-go's `leaderelection`): a holder identity, a lease
//! duration, a renew time; writes carry the resourceVersion read, so of two contenders
//! only one write succeeds and the other gets 409 Conflict and reads again.
//! - [`decide`] (pure): given the Lease as read, who I am and now: create, acquire, renew,
//!   take over an expired one, or wait.
//! - [`LeaseStore`] (port) with [`KubeLeases`] (adapter over `kube::Api<Lease>`).
//! - [`Elector`]: read, decide, write; a conflict means someone else won, so read again.
//!
//! Expiry compares the holder's `renewTime` with this container's clock: Lambda hosts keep
//! time through the Amazon Time Sync Service (well under a second apart), far less than
//! the lease duration of a few seconds. A holder that acts re-checks (renews) its Lease
//! right before acting, so one frozen past its lease (Lambda freezes containers between
//! invocations, and may pause one mid-invocation) cannot act on an old belief.

mod decide;
mod elector;
mod gate;
pub mod launches;
mod store;

pub use decide::{LeaseRecord, Step, decide, expires};
pub use elector::{Elector, Hold};
pub use gate::{MayAct, Refusal};
pub use launches::{Launches, Named};
pub use store::{KubeLeases, LAUNCHES_ANNOTATION, LeaseError, LeaseStore, Versioned};
