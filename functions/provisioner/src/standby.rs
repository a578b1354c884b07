//! Refreshing off a pending pod's path: what an invocation does while another holds the
//! Lease (warm its provisioner, keep a listing of instances), so that taking over costs a
//! pending pod nothing, and what the holder does between polls. Neither ever delays a
//! takeover or a pod's poll.

use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use nodewright::clock::Clock;
use nodewright::lease::{Elector, Hold, KubeLeases};
use nodewright::provision::{PriceRefresh, Provisioner, Turn};
use tokio::sync::Mutex;

/// How a standby warm-up ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmUp {
    /// Subnets and catalog warmed, and on-demand prices refreshed when they were due.
    Done,
    /// The Lease became this invocation's (or its working time ran out) first: the
    /// warm-up was dropped where it stood; the steps it had finished are kept.
    Interrupted,
}

/// Warms `provisioner` and refreshes on-demand prices when `prices` says so, until done,
/// until this invocation holds the Lease (checked every `recheck`), or until `until`,
/// whichever comes first: the takeover never waits for the warm-up. A warm-up dropped
/// midway loses only the step it was in (each step stores its result once it has it), and
/// the first poll as holder does what is missing, as it would have without a warm-up (a
/// holder that died is taken over after its lease expires, possibly before a cold
/// container's catalog is built).
pub async fn warm_while_standing_by<K, A>(
    provisioner: &Mutex<Provisioner<K, A>>,
    elector: &Elector<KubeLeases>,
    recheck: Duration,
    until: Timestamp,
    prices: bool,
) -> WarmUp
where
    K: nodewright::kube::ConfigSource,
    A: nodewright::aws::InstanceTypeSource
        + nodewright::aws::NetworkDiscovery
        + nodewright::aws::ImageResolver
        + nodewright::aws::OnDemandPriceSource,
{
    let clock = provisioner.lock().await.clock().clone();
    let now = || SystemTime::from(clock.now());
    let catalog = async {
        let mut provisioner = provisioner.lock().await;
        match provisioner.warm(now()).await {
            Ok(warmed) => tracing::debug!(?warmed, "warmed up while standing by"),
            Err(e) => tracing::warn!(
                error = nodewright::error_chain(&e),
                "warming up while standing by failed; the first poll as holder builds what is missing"
            ),
        }
    };
    if !optional(catalog, elector, recheck, until, clock.as_ref()).await {
        return WarmUp::Interrupted;
    }
    if prices {
        let refresh = async {
            provisioner.lock().await.refresh_prices(now()).await;
        };
        if !optional(refresh, elector, recheck, until, clock.as_ref()).await {
            return WarmUp::Interrupted;
        }
    }
    WarmUp::Done
}

/// Lists this cluster's instances while standing by, when the last listing is
/// [`nodewright::provision::owned_listing::REFRESH_EVERY`] old: taking over a Lease that
/// its holder released (see `nodewright::lease::launches`), this invocation's first poll
/// plans with it instead of waiting for DescribeInstances. Whether it ran.
pub async fn list_standing_by<K, A>(provisioner: &Mutex<Provisioner<K, A>>) -> bool
where
    A: nodewright::aws::InstanceInventory + Sync,
{
    let mut provisioner = provisioner.lock().await;
    let now = SystemTime::from(provisioner.clock().now());
    if !provisioner.owned_listing_due(&Turn::OUTSIDE, true, now) {
        return false;
    }
    if let Err(e) = provisioner.refresh_owned_listing(now).await {
        tracing::debug!(
            error = nodewright::error_chain(&e),
            "listing owned instances while standing by failed; the first poll as holder lists"
        );
    }
    true
}

/// What the holder's refresh between polls did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BetweenPolls {
    /// A refresh (of the catalog and its inputs, or of prices) ran to its end: time has
    /// passed, so the loop looks again before waiting.
    pub ran: bool,
    /// The on-demand prices were asked for, or were not due: not to be tried again in
    /// this invocation.
    pub prices_checked: bool,
}

/// The holder's refresh between polls: its listing of this cluster's instances when due
/// in `turn` (a pending pod's poll then plans with it, see
/// `nodewright::provision::owned_listing`); when [`Provisioner::warm_up_due`] (the catalog
/// past half its TTL, a class's subnets, security groups or AMIs past theirs, and no
/// failed refresh backing off), warms `provisioner` as a standby invocation would, then,
/// when `prices` asks for it, refreshes on-demand prices if due; until done or until
/// `woken` says a pod turned provisionable, whichever comes first: a pod's poll never
/// waits for the warm-up or the prices (dropped where they stood, each is tried again at
/// the next idle moment; neither stores anything before its answer is in). The listing is
/// dropped too while the kept one is still one a poll plans with; without one the pod's
/// poll would list for itself, so the listing already on its way is finished first
/// rather than dropped and asked again from scratch. Without this refresh the holder's
/// own container would only ever refresh inside a poll, or use a catalog ever staler (see
/// `LiveCatalog::get`).
///
/// Between polls, in the holder's own task, rather than in a spawned one: the
/// provisioner is behind the invocation's lock, which a spawned refresh would hold
/// while a poll waits for it, and a task outliving its invocation would run frozen by
/// Lambda between invocations, its SDK calls timing out on thaw.
pub async fn refresh_between_polls<K, A>(
    provisioner: &Mutex<Provisioner<K, A>>,
    turn: &Turn<'_>,
    woken: impl Future<Output = ()>,
    prices: bool,
) -> BetweenPolls
where
    K: nodewright::kube::ConfigSource,
    A: nodewright::aws::InstanceTypeSource
        + nodewright::aws::NetworkDiscovery
        + nodewright::aws::ImageResolver
        + nodewright::aws::OnDemandPriceSource
        + nodewright::aws::InstanceInventory
        + Sync,
{
    tokio::pin!(woken);
    let clock = provisioner.lock().await.clock().clone();
    let now = || SystemTime::from(clock.now());
    let (listing_due, poll_would_list) = {
        let provisioner = provisioner.lock().await;
        (
            provisioner.owned_listing_due(turn, false, now()),
            !provisioner.plans_with_listing(turn, now()),
        )
    };
    let mut listed = false;
    if listing_due {
        // First: the next poll with pods pending plans with this listing instead of
        // waiting for DescribeInstances.
        let listing = async {
            let mut provisioner = provisioner.lock().await;
            if let Err(e) = provisioner.refresh_owned_listing(now()).await {
                tracing::warn!(
                    error = nodewright::error_chain(&e),
                    "listing owned instances between polls failed; the polls list for themselves"
                );
            }
        };
        if poll_would_list {
            listing.await;
        } else {
            tokio::select! {
                biased;
                () = &mut woken => return BetweenPolls::default(),
                () = listing => {}
            }
        }
        listed = true;
    }
    let refresh = async {
        let mut provisioner = provisioner.lock().await;
        let mut done = BetweenPolls {
            ran: listed,
            prices_checked: false,
        };
        if provisioner.warm_up_due(now()) {
            let started = clock.now();
            match provisioner.warm(now()).await {
                Ok(warmed) => tracing::debug!(
                    ?warmed,
                    ms = clock.now().duration_since(started).as_millis(),
                    "refreshed between polls"
                ),
                Err(e) => tracing::warn!(
                    error = nodewright::error_chain(&e),
                    "refreshing between polls failed; the polls use what they have"
                ),
            }
            done.ran = true;
        }
        if prices {
            let refresh = provisioner.refresh_prices(now()).await;
            done.ran |= !matches!(refresh, PriceRefresh::NotDue);
            done.prices_checked = true;
        }
        done
    };
    tokio::select! {
        biased;
        () = &mut woken => BetweenPolls { ran: listed, prices_checked: false },
        done = refresh => done,
    }
}

/// Runs `work` to its end unless the Lease becomes this invocation's, or `until` passes,
/// first: true when it ran to its end.
async fn optional(
    work: impl Future<Output = ()>,
    elector: &Elector<KubeLeases>,
    recheck: Duration,
    until: Timestamp,
    clock: &dyn Clock,
) -> bool {
    let held = async {
        loop {
            clock.sleep(recheck).await;
            if let Ok(Hold::Held { .. }) = elector.hold(SystemTime::from(clock.now())).await {
                return;
            }
        }
    };
    tokio::select! {
        () = work => true,
        () = held => false,
        () = clock.sleep_until(until) => false,
    }
}
