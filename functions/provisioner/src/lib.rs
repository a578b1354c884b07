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
//! What to do next is decided by [`machine`] (pure, tested by a table); [`invocation`]
//! does it. Time is the [`State`]'s clock's.

pub mod batching;
pub mod coverage;
pub mod deadline;
pub mod environment;
pub use environment::{
    DEFAULT_INVOCATION_BUDGET, DEFAULT_POLL_INTERVAL, HandlerConfig, MAX_INVOCATION_BUDGET,
    MIN_POLL_INTERVAL, default_pool_params, parse_duration,
};
mod invocation;
pub mod machine;
pub mod standby;
mod summary;
mod wakes;
pub mod wiring;

use std::sync::Arc;

use lambda_runtime::{Error, LambdaEvent};
use nodewright::aws::{Ec2Adapter, IamAdapter, ImageAdapter, PricingAdapter};
use nodewright::clock::Clock;
use nodewright::eks::EksCluster;
use nodewright::kube::KubeCluster;
use nodewright::provision::{AwsPorts, ClusterFacts, Provisioner, ProvisionerSettings};
use serde_json::Value;
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
    /// The invocations' time (the provisioner's too): `main` builds it from
    /// `NODEWRIGHT_CLOCK`, the system clock unless the local world runs faster.
    clock: Arc<dyn Clock>,
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
            clock: provisioner.clock().clone(),
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

    /// Invocations (and the provisioner) read and wait on `clock`.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        let provisioner = self.provisioner.into_inner().with_clock(clock.clone());
        State {
            provisioner: Mutex::new(provisioner),
            clock,
            ..self
        }
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn config(&self) -> HandlerConfig {
        self.config
    }

    pub fn provisioner(&self) -> &Mutex<Provisioner<K, A>> {
        &self.provisioner
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
/// five-minutely refresh sits on a pending pod's path once it takes over; it also keeps a
/// listing of instances, which its first poll as holder plans with when the Lease was
/// released (see `nodewright::lease::launches`). The Lease is released at the end so
/// the next invocation takes over at once.
///
/// Between polls, once no batching window is open, the holder refreshes what is due
/// (its listing of instances, the catalog and its inputs, on-demand prices once per
/// invocation when due: a cold container, or every twelve hours): after a poll, so pods
/// pending at a cold start are not kept waiting on the Price List API, and dropped the
/// moment a pod turns provisionable (tried again at the next idle moment), so a slow
/// answer (bounded by `PRICE_FETCH_TIMEOUT`) never sits on a pending pod's path.
pub async fn handler<K, A>(event: LambdaEvent<Value>, state: &State<K, A>) -> Result<Value, Error>
where
    K: nodewright::kube::Cluster + nodewright::kube::PendingPodWatch,
    A: nodewright::aws::Cloud + nodewright::aws::OnDemandPriceSource,
{
    let mut run = invocation::Invocation::begin(&event.context, state).await;
    let settings = run.settings();
    let (mut machine, mut action) = machine::start(&settings, state.clock.now());
    loop {
        let Some(event) = run.act(action, &machine, &settings).await else {
            break;
        };
        (machine, action) = machine::next(&settings, machine, event, state.clock.now());
    }
    run.finish().await
}
