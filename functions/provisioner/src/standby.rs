//! What an invocation does while another holds the Lease: warm its provisioner, so that
//! taking over costs a pending pod nothing (see `Provisioner::warm`), without delaying the
//! takeover for work the first poll would not do.

use std::time::{Duration, Instant, SystemTime};

use nodewright::lease::{Elector, Hold, KubeLeases};
use nodewright::provision::Provisioner;
use tokio::sync::Mutex;

/// How a standby warm-up ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmUp {
    /// Subnets and catalog warmed, and on-demand prices refreshed when they were due.
    Done,
    /// The Lease became this invocation's (or its working time ran out) first: the
    /// optional part of the warm-up was dropped where it stood; what it had finished is kept.
    Interrupted,
}

/// Warms `provisioner` and refreshes on-demand prices when `prices` says so.
///
/// A catalog the first poll would have to build or refresh anyway (a cold container's, or
/// one past its TTL) is built to the end: dropping it for the Lease would only make that
/// poll start it again. What the first poll would not wait for (refreshing a catalog that
/// is still fresh, ahead of its TTL; on-demand prices, up to `PRICE_FETCH_TIMEOUT`) is
/// dropped the moment this invocation holds the Lease (checked every `recheck`) or its
/// working time (`until`) is over. Every step stores its result only once it has it, so
/// dropping one loses that step's work and nothing else.
pub async fn warm_while_standing_by<K, A>(
    provisioner: &Mutex<Provisioner<K, A>>,
    elector: &Elector<KubeLeases>,
    recheck: Duration,
    until: Instant,
    prices: bool,
) -> WarmUp
where
    K: nodewright::kube::ConfigSource,
    A: nodewright::aws::InstanceTypeSource
        + nodewright::aws::NetworkDiscovery
        + nodewright::aws::OnDemandPriceSource,
{
    let needed = !provisioner.lock().await.catalog_is_fresh(SystemTime::now());
    let catalog = async {
        let mut provisioner = provisioner.lock().await;
        match provisioner.warm(SystemTime::now()).await {
            Ok(warmed) => tracing::debug!(?warmed, "warmed up while standing by"),
            Err(e) => tracing::warn!(
                error = nodewright::error_chain(&e),
                "warming up while standing by failed; the first poll as holder builds what is missing"
            ),
        }
    };
    if needed {
        let deadline = tokio::time::sleep_until(until.into());
        tokio::select! {
            () = catalog => {}
            () = deadline => return WarmUp::Interrupted,
        }
    } else if !optional(catalog, elector, recheck, until).await {
        return WarmUp::Interrupted;
    }
    if prices {
        let refresh = async {
            provisioner
                .lock()
                .await
                .refresh_prices(SystemTime::now())
                .await;
        };
        if !optional(refresh, elector, recheck, until).await {
            return WarmUp::Interrupted;
        }
    }
    WarmUp::Done
}

/// Runs `work` to its end unless the Lease becomes this invocation's, or `until` passes,
/// first: true when it ran to its end.
async fn optional(
    work: impl Future<Output = ()>,
    elector: &Elector<KubeLeases>,
    recheck: Duration,
    until: Instant,
) -> bool {
    let held = async {
        loop {
            tokio::time::sleep(recheck).await;
            if let Ok(Hold::Held { .. }) = elector.hold(SystemTime::now()).await {
                return;
            }
        }
    };
    tokio::select! {
        () = work => true,
        () = held => false,
        () = tokio::time::sleep_until(until.into()) => false,
    }
}
