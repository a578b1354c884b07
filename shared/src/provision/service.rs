//! The provisioner: one poll reads the cluster and EC2, solves, and launches what the plan
//! says. Everything it touches is behind the ports, so the same code runs against AWS and
//! EKS, against moto and the simulated cluster, and against fakes for what neither can
//! easily produce (insufficient capacity, throttling).
//!
//! A poll reads ([`read`]), decides ([`Provisioner::admit`], then the solve in
//! [`rounds`]) and acts (labels, launches through [`launch_claim`], events).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;

use super::batch::{Batch, BatchWindow};
use super::discovery::Discovered;
use super::fleet_view::FleetView;
use super::in_flight::in_flight;
use super::live_catalog::LiveCatalog;
use super::node_template::ClusterFacts;
use super::profiles::ProfileCache;
use super::shared_unavailable::SharedState;
use super::template_gc::TemplateGc;
use super::turn::Turn;
use super::unavailable::UnavailableOfferings;
use crate::aws::{AwsError, Cloud};
use crate::catalog::CatalogError;
use crate::clock::{Clock, SystemClock};
use crate::ids::PodUid;
use crate::kube::{Cluster, ConfigOrigin, KubeError, existing_nodes};
use crate::scheduling::{MinValuesPolicy, PreferencePolicy, Snapshot};

/// Rounds of solve-and-launch in one poll when launches fail for insufficient capacity:
/// each round keeps the offerings that just failed out of the plan.
pub const MAX_LAUNCH_ROUNDS: usize = 3;

#[derive(Debug, Clone)]
pub struct ProvisionerSettings {
    pub cluster: ClusterFacts,
    /// The stack's instance profile (`NODE_INSTANCE_PROFILE`), holding
    /// `default_node_role`: for EC2NodeClasses that name that role, or neither a role nor
    /// an `instanceProfile`.
    pub default_instance_profile: String,
    /// The stack's node role (`NODE_ROLE`). A class naming another `role` gets a profile
    /// nodewright creates for it (see [`crate::aws::InstanceProfiles`]).
    pub default_node_role: String,
    pub batch: BatchWindow,
    /// Whether pods' preferences shape what is launched (`PREFERENCE_POLICY`).
    pub preferences: PreferencePolicy,
    /// What a launch short of a NodePool's `minValues` does (`MIN_VALUES_POLICY`); a
    /// consolidation's replacement is always `Strict`.
    pub min_values: MinValuesPolicy,
}

#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("reading {what} from the cluster failed")]
    Kube {
        what: &'static str,
        #[source]
        source: KubeError,
    },
    #[error("{what} failed")]
    Aws {
        what: &'static str,
        #[source]
        source: AwsError,
    },
    #[error("on-demand price table")]
    Prices(#[source] CatalogError),
}

/// `what` failed reading the cluster: for `map_err`.
pub(super) fn kube_err(what: &'static str) -> impl Fn(KubeError) -> ProvisionError {
    move |source| ProvisionError::Kube { what, source }
}

/// `what` failed asking AWS: for `map_err`.
pub(super) fn aws_err(what: &'static str) -> impl Fn(AwsError) -> ProvisionError {
    move |source| ProvisionError::Aws { what, source }
}

/// What one poll saw and did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PollReport {
    pub pending_pods: usize,
    /// How long the longest-waiting of them has waited ([`super::pending_age::oldest`]).
    pub oldest_pending: Option<Duration>,
    /// The batching window is still open: look again after this long.
    pub waiting: Option<Duration>,
    pub claims: usize,
    pub launched_instances: Vec<String>,
    pub failed_claims: usize,
    pub nominated_pods: usize,
    pub unschedulable_pods: usize,
    /// CreateFleet was throttled: launching stopped for this poll.
    pub throttled: bool,
    /// Launching stopped for this poll because the [`Turn`] said no (the Lease is someone
    /// else's, or the deadline is too near): why.
    pub withheld: Option<String>,
    /// Per launched claim: from the first time one of its pods was seen pending to the
    /// moment CreateFleet was sent.
    pub pending_to_fleet: Vec<Duration>,
    pub nodes_labelled: usize,
    /// Launch templates collected after this poll's launches (see
    /// [`super::template_gc`]).
    pub launch_templates_deleted: Vec<String>,
}

/// The provisioning core of a warm container. What it remembers between polls, each
/// piece with one owner (ARCHITECTURE.md, "The provisioner's state"):
pub struct Provisioner<K, A> {
    kube: K,
    aws: A,
    settings: ProvisionerSettings,
    /// Time, for what a poll measures (when a CreateFleet was sent); decisions take `now`.
    clock: Arc<dyn Clock>,
    catalog: LiveCatalog,
    unavailable: UnavailableOfferings,
    /// Pending pod -> when this container first saw it pending.
    first_seen: HashMap<PodUid, SystemTime>,
    /// Pending pods some solve already planned for; only others open the batching window.
    handled: HashSet<PodUid>,
    /// (what, reason) already reported, so each poll does not repeat them.
    warned: HashSet<(Warned, String)>,
    template_gc: TemplateGc,
    profiles: ProfileCache,
    /// This cluster's instances: the kept listing, this container's launches and their
    /// attempts, the launches others published.
    fleet: FleetView,
    /// Subnets and security groups per class, reused across polls for a while.
    discovered: Discovered,
    /// Where the functions share exclusions and launches (see
    /// [`Provisioner::set_shared_state`]).
    shared: Option<Arc<dyn SharedState>>,
    /// NodePool -> its template's drift hash, as of the last `launchable` (each launch
    /// tags its instance with it, `disruption::drift`).
    pool_hashes: HashMap<String, String>,
}

/// Accessors that need none of the ports' capabilities.
impl<K, A> Provisioner<K, A> {
    pub fn kube(&self) -> &K {
        &self.kube
    }

    pub fn aws(&self) -> &A {
        &self.aws
    }

    /// The cluster it launches for (its Kubernetes version selects alias AMIs).
    pub fn cluster(&self) -> &ClusterFacts {
        &self.settings.cluster
    }

    /// Measures with `clock` (the system clock by default).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// This container's view of the cluster's instances.
    pub fn fleet(&self) -> &FleetView {
        &self.fleet
    }
}

pub(super) enum ClaimOutcome {
    Launched {
        instances: Vec<crate::aws::LaunchedInstance>,
        nodeclaim: String,
        sent: SystemTime,
    },
    /// No instance: the offerings it was asked on are excluded for a while.
    NoCapacity,
    /// An earlier attempt of this claim already launched its instance (EC2 told us through
    /// its ClientToken); the next poll counts it in flight. `instance`: that instance, when
    /// the listing shows it.
    AlreadyLaunched {
        instance: Option<String>,
    },
    Throttled,
    /// Not launched: the [`Turn`] said no (its gate, or its time), for this reason.
    Withheld(String),
    /// Nothing launched for a reason that passes by itself (an instance profile EC2 cannot
    /// see yet, a launch template deleted meanwhile): the next poll tries again, and no
    /// offering is marked unavailable.
    RetryLater(String),
    Failed(String),
}

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// A provisioner whose on-demand prices start from the bundled us-east-1 table, until
    /// [`Provisioner::refresh_prices`] brings the region's own (see [`super::live_catalog`]).
    pub fn new(kube: K, aws: A, settings: ProvisionerSettings) -> Result<Self, ProvisionError> {
        let prices =
            super::live_catalog::bundled_on_demand_prices().map_err(ProvisionError::Prices)?;
        Ok(Self::with_catalog(
            kube,
            aws,
            settings,
            LiveCatalog::new(prices),
        ))
    }

    pub fn with_catalog(
        kube: K,
        aws: A,
        settings: ProvisionerSettings,
        catalog: LiveCatalog,
    ) -> Self {
        Provisioner {
            kube,
            aws,
            settings,
            clock: Arc::new(SystemClock),
            catalog,
            unavailable: UnavailableOfferings::default(),
            first_seen: HashMap::new(),
            handled: HashSet::new(),
            warned: HashSet::new(),
            template_gc: TemplateGc::default(),
            profiles: ProfileCache::default(),
            fleet: FleetView::default(),
            discovered: Discovered::default(),
            shared: None,
            pool_hashes: HashMap::new(),
        }
    }

    /// One poll of `turn`: launch for pending pods, then, at most every
    /// [`super::template_gc::TEMPLATE_GC_INTERVAL`], collect old launch templates. Launch
    /// latency comes first: collection runs after launching and never while the batching
    /// window is open, and its failure is logged, never the poll's.
    pub async fn poll(
        &mut self,
        turn: &Turn<'_>,
        now: SystemTime,
    ) -> Result<PollReport, ProvisionError> {
        self.fleet.attempts_mut().forget_old(now);
        let mut report = self.poll_pods(turn, now).await?;
        if report.waiting.is_none() && self.template_gc.due(now) {
            report.launch_templates_deleted = self.collect_launch_templates(now).await;
        }
        Ok(report)
    }

    /// Read (the configuration and pending pods; then, when a plan is due, the capacity
    /// side), decide (solve) and act (labels, launches, events). Nothing in the read phase
    /// writes; see [`read`].
    async fn poll_pods(
        &mut self,
        turn: &Turn<'_>,
        now: SystemTime,
    ) -> Result<PollReport, ProvisionError> {
        let started = SystemTime::from(self.clock.now());
        let pending = self.read_pending().await?;
        for (object, why) in &pending.dropped {
            self.report_dropped(object, why).await;
        }
        let mut report = PollReport {
            pending_pods: pending.pods.len(),
            oldest_pending: super::pending_age::oldest(&pending.pods, now),
            ..PollReport::default()
        };
        match self.admit(&pending, now) {
            Admit::Idle => return Ok(report),
            Admit::Wait(wait) => {
                report.waiting = Some(wait);
                return Ok(report);
            }
            Admit::NoPool => {
                // Nothing can be launched: say why on each pod once, and spare EC2 the calls.
                let why = no_pool_reason(&pending.origin);
                let by_key: HashMap<String, &Pod> =
                    pending.pods.iter().map(|p| (pod_key(p), p)).collect();
                let all = by_key.keys().map(|k| (k.clone(), why.clone())).collect();
                report.unschedulable_pods = pending.pods.len();
                self.warn_unschedulable(&by_key, all).await;
                return Ok(report);
            }
            Admit::Plan => {}
        }
        let capacity = self.read_capacity(turn, now).await?;
        report.nodes_labelled = self.label_nodes(&capacity.unlabelled).await;
        let launchable = self.launchable(pending.pools, pending.classes, now).await?;
        let mut ctx = LaunchContext::new(launchable, &pending.pods, *turn, now, started, None);
        let mut snapshot = poll_snapshot(&pending.pods, &capacity, &ctx);
        snapshot.overlays = pending.overlays;
        snapshot.preferences = self.settings.preferences;
        snapshot.min_values = self.settings.min_values;
        self.read_namespace_labels(&mut snapshot).await?;
        let unplannable = self
            .read_volume_topology(&mut snapshot, &pending.pods)
            .await;
        warn_unplannable(unplannable);
        let tally = self.launch_rounds(snapshot, &mut ctx).await;
        report.claims = tally.claims;
        report.nominated_pods = tally.nominated_pods;
        report.launched_instances = tally.launched_instances;
        report.failed_claims = tally.failed_claims;
        report.throttled = tally.throttled;
        report.withheld = tally.withheld;
        report.pending_to_fleet = tally.pending_to_fleet;
        report.unschedulable_pods = tally.unschedulable.len();
        self.warn_unschedulable(&ctx.by_key, tally.unschedulable)
            .await;
        Ok(report)
    }

    /// Whether this poll plans: forgets what it remembered of pods no longer pending,
    /// notes when new ones were first seen, and keeps the batching window.
    fn admit(&mut self, pending: &read::Pending, now: SystemTime) -> Admit {
        let uids: HashSet<PodUid> = pending.pods.iter().map(PodUid::of).collect();
        self.first_seen.retain(|uid, _| uids.contains(uid));
        self.handled.retain(|uid| uids.contains(uid));
        self.warned.retain(|(about, _)| match about {
            Warned::Pod { uid } => uids.contains(uid),
            Warned::Object(_) => true,
        });
        if pending.pods.is_empty() {
            return Admit::Idle;
        }
        if pending.pools.is_empty() {
            return Admit::NoPool;
        }
        for uid in &uids {
            self.first_seen.entry(uid.clone()).or_insert(now);
        }
        match self.batch_wait(&uids, now) {
            Some(wait) => Admit::Wait(wait),
            None => Admit::Plan,
        }
    }

    /// `Some(wait)` while the batching window over pods no solve has planned for is open.
    fn batch_wait(&self, uids: &HashSet<PodUid>, now: SystemTime) -> Option<Duration> {
        let fresh: Vec<SystemTime> = uids
            .iter()
            .filter(|u| !self.handled.contains(*u))
            .filter_map(|u| self.first_seen.get(u))
            .copied()
            .collect();
        let (first, last) = (fresh.iter().min()?, fresh.iter().max()?);
        let offset = |t: &SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        match self
            .settings
            .batch
            .decide(offset(first), offset(last), offset(&now))
        {
            Batch::Ready => None,
            Batch::Wait(d) => Some(d),
        }
    }
}

/// What a poll does with the pods it read.
enum Admit {
    /// None is pending.
    Idle,
    /// No NodePool is usable: each pod is told why.
    NoPool,
    /// The batching window is open for this long still.
    Wait(Duration),
    Plan,
}

/// The poll's snapshot: the pending pods, and the nodes with the capacity in flight
/// (what [`read::Capacity`] saw, as `ctx`'s catalog prices and sizes it).
fn poll_snapshot(pods: &[Pod], capacity: &read::Capacity, ctx: &LaunchContext<'_>) -> Snapshot {
    let (mut snapshot, pod_errors) = Snapshot::from_k8s(pods, &capacity.daemon_sets);
    warn_unplannable(pod_errors);
    let flying = in_flight(
        &capacity.owned,
        &capacity.nodes,
        &ctx.catalog,
        &ctx.pools,
        &ctx.classes,
        &snapshot.daemon_sets,
        ctx.now,
    );
    snapshot.nodes = existing_nodes(&capacity.nodes, &capacity.bound, &flying);
    snapshot
}

/// Pods whose spec or claims cannot be planned for stay pending: kube-scheduler's own
/// events say why on the pod, this line says it in the provisioner's log.
fn warn_unplannable(errors: Vec<crate::scheduling::PodError>) {
    for e in errors {
        tracing::warn!(
            pod = e.pod,
            field = e.field,
            message = e.message,
            "pod cannot be planned for"
        );
    }
}

/// Why nothing is provisioned when no NodePool is usable.
fn no_pool_reason(origin: &ConfigOrigin) -> String {
    match origin {
        ConfigOrigin::Crds => "no usable NodePool: Karpenter's CRDs are installed, so the \
                               cluster's NodePools are the configuration (none means no \
                               provisioning, as in Karpenter)"
            .to_string(),
        ConfigOrigin::ConfigMap { namespace, name } => {
            format!("no usable NodePool in ConfigMap {namespace}/{name}")
        }
        ConfigOrigin::Default => "the stack's default NodePool is not usable".to_string(),
    }
}

pub(super) fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

mod launch_answer;
mod launch_claim;

mod launchable;
use launchable::{ClassNetwork, Launchable};

mod warnings;
use warnings::Warned;

mod launch_context;
use launch_context::LaunchContext;

mod read;

mod rounds;

mod gc;

mod shared;

mod fleet_cost_of_owned;

mod listing;

pub mod replace;

mod warm;
pub use warm::Warmed;

#[cfg(test)]
mod tests;
