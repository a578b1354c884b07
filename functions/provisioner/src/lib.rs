//! The `provisioner` Lambda function: its handler lives here so tests can invoke it exactly as
//! the Lambda runtime does; `main.rs` only wires configuration and clients.
//!
//! One invocation (scheduled every minute) polls for pending pods every `POLL_INTERVAL`
//! until `DEADLINE_MARGIN` before its Lambda deadline (never past `INVOCATION_BUDGET`), and
//! between polls watches pods, so a pod that turns unschedulable starts a poll at once
//! rather than at the next tick. While the batching window is open (see [`batching`]) it
//! looks again as soon as the window closes.
//!
//! The function's timeout is longer than the schedule's period, so consecutive invocations
//! overlap and some invocation is always watching; a Lease (see [`coverage`]) lets exactly
//! one of them poll and launch at a time. The holder renews it while polling, re-checks it
//! right before each CreateFleet and releases it when it ends; the others check it every
//! [`coverage::STANDBY_RECHECK`] and take over at once.
//!
//! Past ~450 lines: the handler's loop and its summary; the loop is being reshaped (issue
//! 15). Its configuration lives in [`environment`].

pub mod batching;
pub mod coverage;
pub mod deadline;
pub mod environment;
pub use environment::{
    DEFAULT_INVOCATION_BUDGET, DEFAULT_POLL_INTERVAL, HandlerConfig, MAX_INVOCATION_BUDGET,
    MIN_POLL_INTERVAL, default_pool_params, parse_duration,
};
pub mod standby;
pub mod wiring;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::FutureExt as _;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use lambda_runtime::{Error, LambdaEvent};
use nodewright::aws::{Ec2Adapter, IamAdapter, ImageAdapter, PricingAdapter};
use nodewright::eks::EksCluster;
use nodewright::kube::KubeCluster;
use nodewright::lease::Hold;
use nodewright::provision::{
    AwsPorts, ClusterFacts, PollReport, ProvisionError, Provisioner, ProvisionerSettings,
};
use nodewright::telemetry::{self, Decision};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// The cluster facts new nodes need, from DescribeCluster.
pub fn cluster_facts(cluster: &EksCluster) -> ClusterFacts {
    ClusterFacts {
        name: cluster.name.clone(),
        endpoint: cluster.endpoint.clone(),
        ca_bundle_base64: cluster.certificate_authority_data.clone(),
        service_cidr: cluster.service_ipv4_cidr.clone().unwrap_or_default(),
        kubernetes_version: cluster.kubernetes_version.clone(),
    }
}

/// What a warm container keeps between invocations: the provisioner (its catalog cache,
/// unavailable offerings, batching and event dedupe) behind a mutex, so a container that
/// takes over the Lease acts on what it already knows. One container runs one invocation
/// at a time, so the lock is never contended in AWS.
pub struct State<K, A> {
    provisioner: Mutex<Provisioner<K, A>>,
    config: HandlerConfig,
    coverage: coverage::CoverageConfig,
    /// `None`: no Lease, every invocation acts (in-process tests, one invocation at a time).
    lease: Option<coverage::LeaseSetup>,
}

impl State<KubeCluster, AwsPorts<Ec2Adapter, ImageAdapter, PricingAdapter, IamAdapter>> {
    /// The production wiring (the Lease and the deadline margin: [`State::with_coverage`]).
    pub fn new(
        kube: KubeCluster,
        ec2: Ec2Adapter,
        images: ImageAdapter,
        prices: PricingAdapter,
        iam: IamAdapter,
        settings: ProvisionerSettings,
        config: HandlerConfig,
    ) -> Result<Self, Error> {
        let aws = AwsPorts {
            ec2,
            images,
            prices,
            iam,
        };
        let provisioner = Provisioner::new(kube, aws, settings)?;
        Ok(State::with_provisioner(provisioner, config))
    }
}

impl<K, A> State<K, A> {
    pub fn with_provisioner(provisioner: Provisioner<K, A>, config: HandlerConfig) -> Self {
        State {
            provisioner: Mutex::new(provisioner),
            config,
            coverage: coverage::CoverageConfig::default(),
            lease: None,
        }
    }

    /// Invocations take turns through the Lease `coverage` names, in `lease`'s store.
    pub fn with_coverage(
        mut self,
        coverage: coverage::CoverageConfig,
        lease: Option<coverage::LeaseSetup>,
    ) -> Self {
        self.coverage = coverage;
        self.lease = lease;
        self
    }

    pub fn config(&self) -> HandlerConfig {
        self.config
    }

    pub fn provisioner(&self) -> &Mutex<Provisioner<K, A>> {
        &self.provisioner
    }
}

/// Totals over the polls of one invocation.
#[derive(Debug, Default)]
struct Summary {
    polls: u32,
    failed_polls: u32,
    claims: usize,
    launched: Vec<String>,
    unschedulable: usize,
    throttled: u32,
    /// Polls started early because the pod watch saw a provisionable pod.
    wakeups: u32,
    /// `open`, `ended` (the server closed it; polling only since) or `failed` (never opened).
    watch: &'static str,
    pending_to_fleet_ms: Vec<u128>,
    last_error: Option<String>,
    /// Launches held back right before CreateFleet (Lease lost, deadline near): the last why.
    withheld: Option<String>,
    lease: LeaseSummary,
    /// US dollars per hour of the owned instances at the end of the invocation.
    fleet_cost_per_hour: Option<f64>,
}

/// What the Lease did in one invocation.
#[derive(Debug, Default)]
struct LeaseSummary {
    /// This invocation's holder identity; `None` without a Lease.
    identity: Option<String>,
    /// Times it went from not holding to holding the Lease.
    acquired: u32,
    /// Checks that found another holder.
    standby_checks: u32,
    /// Checks that failed (the API server did not answer): treated as not holding.
    failed_checks: u32,
    /// The Lease was released at the end (the next invocation takes it at once).
    released: bool,
    /// The standby warm-up started (see [`handler`]).
    warmed: bool,
    /// How it ended and how long it took, caches and prices included.
    warm_up: Option<(standby::WarmUp, u128)>,
}

impl Summary {
    fn add(&mut self, r: &PollReport) {
        self.claims += r.claims;
        self.launched.extend(r.launched_instances.iter().cloned());
        self.unschedulable = r.unschedulable_pods;
        self.throttled += u32::from(r.throttled);
        self.pending_to_fleet_ms
            .extend(r.pending_to_fleet.iter().map(Duration::as_millis));
        if r.withheld.is_some() {
            self.withheld.clone_from(&r.withheld);
        }
    }

    fn json(&self) -> Value {
        json!({
            "polls": self.polls,
            "failedPolls": self.failed_polls,
            "claims": self.claims,
            "launchedInstances": self.launched,
            "unschedulablePods": self.unschedulable,
            "throttledPolls": self.throttled,
            "watchWakeups": self.wakeups,
            "watch": self.watch,
            "pendingToFleetMs": self.pending_to_fleet_ms,
            "lastError": self.last_error,
            "withheld": self.withheld,
            "lease": {
                "identity": self.lease.identity,
                "acquired": self.lease.acquired,
                "standbyChecks": self.lease.standby_checks,
                "failedChecks": self.lease.failed_checks,
                "released": self.lease.released,
                "standbyWarmUp": self.lease.warm_up.map(|(outcome, ms)| json!({
                    "ms": ms,
                    "done": outcome == standby::WarmUp::Done,
                })),
            },
            "fleetCostPerHour": self.fleet_cost_per_hour,
        })
    }
}

/// Polls until the margin before the invocation's deadline (or the budget) and returns a
/// JSON summary. A failed poll is logged and the next one tries again; the invocation
/// fails only when every poll failed.
///
/// With a Lease, only the holder polls: each turn of the loop first acquires or renews it
/// (at least every third of its duration), and an invocation that does not hold it
/// checks again every [`coverage::STANDBY_RECHECK`], its pod watch open. The first time
/// an invocation finds it is not the holder it warms its provisioner
/// ([`Provisioner::warm`]: subnets, the catalog, refreshed ahead of its TTL; on-demand
/// prices when due), so neither a cold container's first catalog nor a warm one's
/// five-minutely refresh sits on a pending pod's path once it takes over. The Lease is
/// released at the end so the next invocation takes over at once.
///
/// Between polls, once no batching window is open, the holder refreshes on-demand prices
/// when due (a cold container, or every twelve hours), as it refreshes the catalog: after
/// a poll, so pods pending at a cold start are not kept waiting on the Price List API, and
/// dropped the moment a pod turns provisionable (tried again at the next idle moment), so
/// a slow answer (bounded by `PRICE_FETCH_TIMEOUT`) never sits on a pending pod's path.
pub async fn handler<K, A>(event: LambdaEvent<Value>, state: &State<K, A>) -> Result<Value, Error>
where
    K: nodewright::kube::Cluster + nodewright::kube::PendingPodWatch,
    A: nodewright::aws::Cloud + nodewright::aws::OnDemandPriceSource,
{
    let started = Instant::now();
    let poll_interval = state.config.poll_interval;
    let margin = state.coverage.deadline_margin;
    let deadline_at = deadline::deadline_of(event.context.deadline);
    let working =
        deadline::working_time(SystemTime::now(), state.config.budget, deadline_at, margin);
    let until = started + working;
    let request_id = &event.context.request_id;
    tracing::debug!(request_id, ?working, "provisioner invoked");
    let elector = state.lease.as_ref().map(|l| {
        Arc::new(nodewright::lease::Elector::new(
            l.store.clone(),
            &state.coverage.lease_name,
            &format!("{}/{request_id}", l.container),
            state.coverage.lease_duration,
        ))
    });
    let mut summary = Summary::default();
    summary.lease.identity = elector.as_ref().map(|e| e.identity().to_string());
    let mut wakes = {
        let mut provisioner = state.provisioner.lock().await;
        provisioner.set_may_act(Some(Arc::new(coverage::InvocationGate {
            elector: elector.clone(),
            deadline: deadline_at,
            margin,
        })));
        PodWakes::from(provisioner.kube().watch_pending(working).await)
    };
    let mut prices_checked = false;
    let mut holding = false;
    let mut window_open = false;
    let mut next_poll = Instant::now();
    let mut woken = false;
    let mut refreshed_since_poll = false;
    while Instant::now() < until {
        let acting = match &elector {
            None => true,
            Some(elector) => match elector.hold(SystemTime::now()).await {
                Ok(Hold::Held { how, .. }) => {
                    if !holding {
                        summary.lease.acquired += 1;
                        tracing::info!(identity = elector.identity(), ?how, "holding the Lease");
                    }
                    true
                }
                Ok(Hold::Waiting { holder, until }) => {
                    if holding {
                        tracing::warn!(holder, "the Lease was taken over; standing by");
                    }
                    summary.lease.standby_checks += 1;
                    tracing::debug!(holder, ?until, "another invocation holds the Lease");
                    false
                }
                Err(e) => {
                    summary.lease.failed_checks += 1;
                    tracing::warn!(
                        error = nodewright::error_chain(&e),
                        "checking the Lease failed; not acting"
                    );
                    false
                }
            },
        };
        let was_holding = holding;
        holding = acting && elector.is_some();
        if holding != was_holding {
            // A Lease turn begins or ends: the kept listing of instances is used only
            // within the turn it was asked for in (see `provision::owned_listing`).
            let since = holding.then(SystemTime::now);
            state.provisioner.lock().await.set_acting_since(since);
        }
        if let (false, false, Some(elector)) = (acting, summary.lease.warmed, &elector) {
            // Standing by: build now what the first poll as holder would otherwise build
            // with pods pending (a cold container's catalog; a warm one's refresh ahead of
            // its TTL), and fetch on-demand prices when due (up to PRICE_FETCH_TIMEOUT),
            // so that taking over costs nothing. Once per invocation; dropped the moment
            // the Lease is ours. Prices interrupted here wait for the next invocation's
            // standby rather than for a holder's poll: they are due every twelve hours.
            summary.lease.warmed = true;
            let warm_started = Instant::now();
            let outcome = standby::warm_while_standing_by(
                &state.provisioner,
                elector,
                coverage::STANDBY_RECHECK.min(poll_interval),
                until,
                !prices_checked,
            )
            .await;
            prices_checked = true;
            summary.lease.warm_up = Some((outcome, warm_started.elapsed().as_millis()));
            continue;
        }
        if acting && (woken || Instant::now() >= next_poll) {
            // Pod events so far are covered by the list this poll is about to make; later
            // ones (during the poll) stay queued and wake the next one.
            wakes.drain();
            summary.polls += 1;
            refreshed_since_poll = false;
            let poll_started = Instant::now();
            let poll = async { state.provisioner.lock().await.poll(SystemTime::now()).await };
            // A poll can outlast the Lease (a cold container builds its catalog first):
            // the Lease is renewed meanwhile, so the other invocation does not take over
            // a holder that is working (the check before each launch still decides).
            let result: Result<PollReport, ProvisionError> =
                coverage::while_holding(elector.as_deref(), state.coverage.renew_every(), poll)
                    .await;
            window_open = matches!(&result, Ok(r) if r.waiting.is_some());
            let next = match result {
                Ok(report) => {
                    telemetry::pending_pods(report.pending_pods);
                    // A poll that planned (pods pending, batching window closed) is a decision.
                    if report.pending_pods > 0 && report.waiting.is_none() {
                        telemetry::decision_latency(Decision::Provision, poll_started.elapsed());
                    }
                    summary.add(&report);
                    if !report.launched_instances.is_empty()
                        || report.unschedulable_pods > 0
                        || report.withheld.is_some()
                    {
                        tracing::info!(?report, "poll");
                    }
                    report
                        .waiting
                        .map_or(poll_interval, |w| w.min(poll_interval))
                }
                Err(e) => {
                    summary.failed_polls += 1;
                    let chain = nodewright::error_chain(&e);
                    tracing::error!(error = chain, "poll failed");
                    summary.last_error = Some(chain);
                    poll_interval
                }
            };
            next_poll = Instant::now() + next;
            // Per poll, so a long invocation's latencies stay within one document's 100 values.
            telemetry::flush();
        }
        let now = Instant::now();
        let wake_at = match (&elector, acting) {
            (None, _) => next_poll,
            (Some(_), true) => next_poll.min(now + state.coverage.renew_every()),
            (Some(_), false) => now + coverage::STANDBY_RECHECK.min(poll_interval),
        }
        .min(until);
        // While the batching window is open its deadline is the next look anyway.
        let watching = !window_open && wakes.stream.is_some();
        if acting && !window_open && !refreshed_since_poll {
            // Between polls, refresh what is past its TTL (catalog, subnets, groups,
            // AMIs) so no poll waits on EC2 for it, and on-demand prices once per
            // invocation when due (the Price List API may take PRICE_FETCH_TIMEOUT); a pod
            // turning provisionable drops either, and the next idle moment tries again.
            refreshed_since_poll = true;
            let mut early = false;
            let woken_by_pod = async {
                early = wakes
                    .wait(until.saturating_duration_since(now), watching)
                    .await;
            };
            let refresh =
                standby::refresh_between_polls(&state.provisioner, woken_by_pod, !prices_checked);
            // Longer than the Lease at worst (PRICE_FETCH_TIMEOUT): renewed meanwhile.
            let between =
                coverage::while_holding(elector.as_deref(), state.coverage.renew_every(), refresh)
                    .await;
            prices_checked |= between.prices_checked;
            // A wake the refresh cut short (its event taken, the coalescing not over) still
            // counts: the pod's poll must not wait for the next interval.
            let early = early | wakes.take_woken();
            if between.ran || early {
                woken = early;
                continue;
            }
        }
        woken = wakes
            .wait(wake_at.saturating_duration_since(now), watching)
            .await;
    }
    state.provisioner.lock().await.set_may_act(None);
    if let Some(elector) = &elector {
        match elector.release(SystemTime::now()).await {
            Ok(released) => summary.lease.released = released,
            Err(e) => tracing::warn!(
                error = nodewright::error_chain(&e),
                "releasing the Lease failed; the next invocation takes it when it expires"
            ),
        }
    }
    summary.watch = wakes.state;
    summary.wakeups = wakes.count;
    // Only an invocation that acted reports the fleet: a standby one would list the same
    // instances again for the same figure.
    if summary.polls > 0 {
        match state
            .provisioner
            .lock()
            .await
            .fleet_cost(SystemTime::now())
            .await
        {
            Ok(cost) => {
                telemetry::fleet(cost.per_hour, cost.instances);
                summary.fleet_cost_per_hour = Some(cost.per_hour);
                if !cost.unpriced.is_empty() {
                    tracing::warn!(instances = ?cost.unpriced, "no price for these instances; the fleet's cost leaves them out");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "listing owned instances for the fleet's cost failed")
            }
        }
    }
    state.provisioner.lock().await.set_acting_since(None);
    telemetry::flush();
    if summary.polls > 0 && summary.failed_polls == summary.polls {
        return Err(format!(
            "all {} polls failed; last error: {}",
            summary.polls,
            summary.last_error.as_deref().unwrap_or("unknown")
        )
        .into());
    }
    Ok(summary.json())
}

/// After a wake-up, how long to let the burst that caused it land before polling: a
/// Deployment scaled up creates its pods within milliseconds of each other.
const WAKE_COALESCE: Duration = Duration::from_millis(50);

/// The pod watch of one invocation; without one (it failed to open, or the server ended
/// it) the handler polls every `POLL_INTERVAL`, which is slower but correct.
struct PodWakes {
    stream: Option<BoxStream<'static, ()>>,
    /// `open`, `ended` or `failed`, for the invocation's summary.
    state: &'static str,
    /// Polls started early because a pod turned provisionable.
    count: u32,
    /// An event was taken from the stream since the last poll's [`PodWakes::drain`]: kept
    /// here, not only in what [`PodWakes::wait`] returns, because a `wait` dropped while it
    /// coalesces (the holder's refresh between polls ended first) has taken the event and
    /// would otherwise lose it, and the pod would wait for the next `POLL_INTERVAL`.
    woke: bool,
}

impl PodWakes {
    fn from(opened: Result<BoxStream<'static, ()>, nodewright::kube::KubeError>) -> Self {
        match opened {
            Ok(stream) => PodWakes {
                stream: Some(stream),
                state: "open",
                count: 0,
                woke: false,
            },
            Err(e) => {
                tracing::warn!(
                    error = nodewright::error_chain(&e),
                    "watching pods failed; polling only"
                );
                PodWakes {
                    stream: None,
                    state: "failed",
                    count: 0,
                    woke: false,
                }
            }
        }
    }

    fn ended(&mut self) {
        tracing::debug!("the pod watch ended; polling only");
        self.stream = None;
        self.state = "ended";
    }

    /// Whether a pod event was taken since the last poll (see `woke`), forgetting it.
    fn take_woken(&mut self) -> bool {
        std::mem::take(&mut self.woke)
    }

    /// Forgets the events already queued, and any taken: the poll about to list pods
    /// covers them.
    fn drain(&mut self) {
        self.woke = false;
        while let Some(stream) = self.stream.as_mut() {
            match stream.next().now_or_never() {
                Some(Some(())) => {}
                Some(None) => self.ended(),
                None => return,
            }
        }
    }

    /// Sleeps `up_to`, or less when `watching` and a pod turns provisionable first; true
    /// when woken early.
    async fn wait(&mut self, up_to: Duration, watching: bool) -> bool {
        let Some(stream) = self.stream.as_mut().filter(|_| watching) else {
            tokio::time::sleep(up_to).await;
            return false;
        };
        tokio::select! {
            () = tokio::time::sleep(up_to) => false,
            event = stream.next() => match event {
                Some(()) => {
                    self.count += 1;
                    self.woke = true;
                    tokio::time::sleep(WAKE_COALESCE).await;
                    true
                }
                None => {
                    self.ended();
                    false
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use super::*;

    fn wakes() -> (futures::channel::mpsc::UnboundedSender<()>, PodWakes) {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        (tx, PodWakes::from(Ok(rx.boxed())))
    }

    #[tokio::test]
    async fn a_wait_dropped_while_it_coalesces_keeps_the_pod_event_it_took() {
        let (tx, mut wakes) = wakes();
        tx.unbounded_send(()).unwrap();
        // As the holder's refresh between polls does: the wait goes first, and something
        // else finishes before its coalescing does.
        tokio::select! {
            biased;
            _ = wakes.wait(Duration::from_secs(5), true) => panic!("the coalescing is 50 ms"),
            () = async {} => {}
        }
        assert!(wakes.take_woken(), "the event taken is kept");
        assert!(!wakes.take_woken(), "and told once");
    }

    #[tokio::test]
    async fn a_poll_forgets_the_events_taken_and_queued_before_it() {
        let (tx, mut wakes) = wakes();
        tx.unbounded_send(()).unwrap();
        assert!(wakes.wait(Duration::from_secs(5), true).await);
        tx.unbounded_send(()).unwrap();
        wakes.drain();
        assert!(!wakes.take_woken());
        assert!(!wakes.wait(Duration::from_millis(10), true).await);
    }
}
