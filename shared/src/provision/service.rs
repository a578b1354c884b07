//! The provisioner: one poll reads the cluster and EC2, solves, and launches what the plan
//! says. Everything it touches is behind the ports, so the same code runs against AWS and
//! EKS, against moto and the simulated cluster, and against fakes for what neither can
//! easily produce (insufficient capacity, throttling).
//!
//! A poll reads ([`read`]), decides ([`Provisioner::admit`], then the solve in
//! [`rounds`]) and acts (labels, launches through [`launch_claim`], events).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;

use super::attempts::LaunchAttempts;
use super::batch::{Batch, BatchWindow};
use super::discovery::Discovered;
use super::in_flight::in_flight;
use super::live_catalog::LiveCatalog;
use super::node_template::ClusterFacts;
use super::on_demand_prices::PriceRefresh;
use super::profiles::ProfileCache;
use super::shared_unavailable::SharedExclusions;
use super::template_gc::TemplateGc;
use super::unavailable::UnavailableOfferings;
use super::unseen_launches::UnseenLaunches;
use crate::api::{EC2NodeClass, NodePool};
use crate::aws::{AwsError, Cloud, OnDemandPriceSource, Subnet, pick_subnet_per_zone};
use crate::catalog::CatalogError;
use crate::kube::{Cluster, ConfigOrigin, EventType, KubeError, ObjectRef, PodRef, existing_nodes};
use crate::lease::MayAct;
use crate::scheduling::Snapshot;
use crate::telemetry;

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

/// What one poll saw and did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PollReport {
    pub pending_pods: usize,
    /// The batching window is still open: look again after this long.
    pub waiting: Option<Duration>,
    pub claims: usize,
    pub launched_instances: Vec<String>,
    pub failed_claims: usize,
    pub nominated_pods: usize,
    pub unschedulable_pods: usize,
    /// CreateFleet was throttled: launching stopped for this poll.
    pub throttled: bool,
    /// Launching stopped for this poll because [`Provisioner::set_may_act`]'s check said
    /// no (the Lease is someone else's, or the deadline is too near): why.
    pub withheld: Option<String>,
    /// Per launched claim: from the first time one of its pods was seen pending to the
    /// moment CreateFleet was sent.
    pub pending_to_fleet: Vec<Duration>,
    pub nodes_labelled: usize,
    /// Launch templates collected after this poll's launches (see
    /// [`super::template_gc`]).
    pub launch_templates_deleted: Vec<String>,
}

pub struct Provisioner<K, A> {
    kube: K,
    aws: A,
    settings: ProvisionerSettings,
    catalog: LiveCatalog,
    unavailable: UnavailableOfferings,
    /// Pending pod uid -> when this container first saw it pending.
    first_seen: HashMap<String, SystemTime>,
    /// Pending pods some solve already planned for; only others open the batching window.
    handled: HashSet<String>,
    /// (what, reason) already reported, so each poll does not repeat them.
    warned: HashSet<(Warned, String)>,
    template_gc: TemplateGc,
    profiles: ProfileCache,
    /// Per node claim, which launch attempt (ClientToken) this container is at.
    attempts: LaunchAttempts,
    /// Launches DescribeInstances does not list yet.
    unseen: UnseenLaunches,
    /// Subnets and security groups per class, reused across polls for a while.
    discovered: Discovered,
    /// Asked right before each CreateFleet (see [`Provisioner::set_may_act`]).
    may_act: Option<Arc<dyn MayAct>>,
    /// Where exclusions are shared with the other functions (see
    /// [`Provisioner::set_shared_exclusions`]).
    shared_unavailable: Option<Arc<dyn SharedExclusions>>,
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
}

/// What a warning already given was about: a pending pod (by uid, forgotten once the pod is
/// no longer pending) or a configuration object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Warned {
    Pod { uid: String },
    Object(ObjectRef),
}

/// Per poll, what each usable EC2NodeClass resolves to.
pub(super) struct ClassNetwork {
    pub(super) subnets: BTreeMap<String, Subnet>,
}

/// See [`Provisioner::launchable`].
pub(super) struct Launchable {
    pub(super) pools: Vec<NodePool>,
    pub(super) classes: Vec<EC2NodeClass>,
    pub(super) networks: HashMap<String, ClassNetwork>,
    pub(super) catalog: crate::catalog::Catalog,
}

pub(super) enum ClaimOutcome {
    Launched {
        instances: Vec<crate::aws::LaunchedInstance>,
        nodeclaim: String,
        sent: SystemTime,
    },
    /// No instance: these (type, zone) offerings lacked capacity.
    NoCapacity,
    /// An earlier attempt of this claim already launched its instance (EC2 told us through
    /// its ClientToken); the next poll counts it in flight.
    AlreadyLaunched,
    Throttled,
    /// Not launched: the [`MayAct`] check said no, for this reason.
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
            catalog,
            unavailable: UnavailableOfferings::default(),
            first_seen: HashMap::new(),
            handled: HashSet::new(),
            warned: HashSet::new(),
            template_gc: TemplateGc::default(),
            profiles: ProfileCache::default(),
            attempts: LaunchAttempts::default(),
            unseen: UnseenLaunches::default(),
            discovered: Discovered::default(),
            may_act: None,
            shared_unavailable: None,
            pool_hashes: HashMap::new(),
        }
    }

    /// A check asked right before each CreateFleet; `None` (the default) launches without
    /// asking. The provisioner's handler sets one per invocation: its Lease still held,
    /// its deadline still far enough.
    pub fn set_may_act(&mut self, check: Option<Arc<dyn MayAct>>) {
        self.may_act = check;
    }

    /// One poll: launch for pending pods, then, at most every
    /// [`super::template_gc::TEMPLATE_GC_INTERVAL`], collect old launch templates. Launch
    /// latency comes first: collection runs after launching and never while the batching
    /// window is open, and its failure is logged, never the poll's.
    pub async fn poll(&mut self, now: SystemTime) -> Result<PollReport, ProvisionError> {
        self.attempts.forget_old(now);
        let mut report = self.poll_pods(now).await?;
        if report.waiting.is_none() && self.template_gc.due(now) {
            report.launch_templates_deleted = self.collect_launch_templates(now).await;
        }
        Ok(report)
    }

    /// Read (the configuration and pending pods; then, when a plan is due, the capacity
    /// side), decide (solve) and act (labels, launches, events). Nothing in the read phase
    /// writes; see [`read`].
    async fn poll_pods(&mut self, now: SystemTime) -> Result<PollReport, ProvisionError> {
        let started = Instant::now();
        let pending = self.read_pending().await?;
        for (object, why) in &pending.dropped {
            self.report_dropped(object, why).await;
        }
        let mut report = PollReport {
            pending_pods: pending.pods.len(),
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
        let capacity = self.read_capacity(now).await?;
        report.nodes_labelled = self.label_nodes(&capacity.unlabelled).await;
        let launchable = self.launchable(pending.pools, pending.classes, now).await?;
        let mut ctx = LaunchContext::new(launchable, &pending.pods, now, started, None);
        let snapshot = poll_snapshot(&pending.pods, &capacity, &ctx);
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
        let uids: HashSet<String> = pending.pods.iter().map(pod_uid).collect();
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

    /// A `FailedScheduling` warning per (pod, reason), once while the pod stays pending.
    async fn warn_unschedulable(
        &mut self,
        by_key: &HashMap<String, &Pod>,
        unschedulable: Vec<(String, String)>,
    ) {
        for (key, reason) in unschedulable {
            let Some(pod) = by_key.get(&key) else {
                continue;
            };
            let uid = pod_uid(pod);
            if self.warned.insert((Warned::Pod { uid }, reason.clone())) {
                tracing::warn!(pod = key, reason, "pod cannot be provisioned for");
                telemetry::pod_not_provisioned();
                self.kube
                    .pod_event(
                        &PodRef::of(pod),
                        "FailedScheduling",
                        &reason,
                        EventType::Warning,
                    )
                    .await;
            }
        }
    }

    /// `Some(wait)` while the batching window over pods no solve has planned for is open.
    fn batch_wait(&self, uids: &HashSet<String>, now: SystemTime) -> Option<Duration> {
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

    async fn report_dropped(&mut self, object: &ObjectRef, why: &str) {
        if !self
            .warned
            .insert((Warned::Object(object.clone()), why.to_string()))
        {
            return;
        }
        tracing::warn!(%object, reason = why, "configuration skipped");
        self.kube
            .object_event(
                object.kind,
                &object.name,
                "InvalidConfiguration",
                why,
                EventType::Warning,
            )
            .await;
    }

    /// Where capacity can be launched now: the classes whose subnets are found, the pools
    /// that use them, and the catalog of their zones less the offerings just found
    /// unavailable. Shared by a poll and by a replacement.
    pub(super) async fn launchable(
        &mut self,
        pools: Vec<NodePool>,
        classes: Vec<EC2NodeClass>,
        now: SystemTime,
    ) -> Result<Launchable, ProvisionError> {
        let (networks, classes) = self.discover_networks(classes, now).await;
        let pools: Vec<NodePool> = pools
            .into_iter()
            .filter(|p| networks.contains_key(&p.spec.template.spec.node_class_ref.name))
            .collect();
        let mut zones: Vec<String> = networks
            .values()
            .flat_map(|n| n.subnets.keys().cloned())
            .collect();
        zones.sort();
        zones.dedup();
        let (mut catalog, refresh) =
            self.catalog
                .get(&self.aws, &zones, now)
                .await
                .map_err(|source| ProvisionError::Aws {
                    what: "building the instance catalog",
                    source,
                })?;
        if let Some(e) = refresh.stale_because {
            tracing::warn!(error = %e, "refreshing the instance catalog failed; using the last good one");
        }
        self.adopt_shared_exclusions(now).await;
        self.unavailable.apply(&mut catalog, now);
        self.pool_hashes = pools
            .iter()
            .map(|p| (p.metadata.name.clone(), crate::disruption::nodepool_hash(p)))
            .collect();
        Ok(Launchable {
            pools,
            classes,
            networks,
            catalog,
        })
    }

    /// Subnets per usable class; a class whose subnets cannot be found (or that has none)
    /// is reported and left out, with the NodePools that use it.
    async fn discover_networks(
        &mut self,
        classes: Vec<EC2NodeClass>,
        now: SystemTime,
    ) -> (HashMap<String, ClassNetwork>, Vec<EC2NodeClass>) {
        let mut networks = HashMap::new();
        let mut kept = Vec::new();
        for class in classes {
            let name = class.metadata.name.clone();
            let found = self.class_subnets(&class, now).await;
            match found {
                Ok(found) if !found.is_empty() => {
                    networks.insert(
                        name,
                        ClassNetwork {
                            subnets: pick_subnet_per_zone(&found),
                        },
                    );
                    kept.push(class);
                }
                Ok(_) => {
                    self.report_dropped(
                        &ObjectRef::node_class(&name),
                        "spec.subnetSelectorTerms: no subnet matches",
                    )
                    .await
                }
                Err(e) => {
                    self.report_dropped(
                        &ObjectRef::node_class(&name),
                        &format!("subnet discovery failed: {e}"),
                    )
                    .await
                }
            }
        }
        (networks, kept)
    }
}

impl<K, A: OnDemandPriceSource> Provisioner<K, A> {
    /// Asks the price source for the region's on-demand prices when they are due, and
    /// logs how it went; the next poll's catalog uses them. Kept out of [`Self::poll`] so
    /// a poll never waits on the Price List API: the caller picks the moment (the handler
    /// does it right after an invocation's first poll).
    pub async fn refresh_prices(&mut self, now: SystemTime) -> PriceRefresh {
        let refresh = self.catalog.refresh_prices(&self.aws, now).await;
        match &refresh {
            PriceRefresh::NotDue => {}
            PriceRefresh::Updated { priced, total } => tracing::info!(
                priced,
                total,
                "on-demand prices updated from the Price List API; types it has no price for keep the bundled one"
            ),
            PriceRefresh::NoRegionalPrices => tracing::info!(
                "no regional on-demand prices (no Price List endpoint for this region, or none \
                 configured); keeping the prices in use"
            ),
            PriceRefresh::Failed(e) => tracing::warn!(
                error = %e,
                cause = std::error::Error::source(e).map(ToString::to_string),
                retry_after = ?super::on_demand_prices::PRICE_RETRY_AFTER,
                "refreshing on-demand prices failed; keeping the last good prices"
            ),
        }
        refresh
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
    for e in pod_errors {
        tracing::warn!(
            pod = e.pod,
            field = e.field,
            message = e.message,
            "pod cannot be planned for"
        );
    }
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

pub(super) fn pod_uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_else(|| pod_key(p))
}

pub(super) fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

mod launch_claim;

mod launch_context;
use launch_context::LaunchContext;

mod read;

mod rounds;

mod gc;

mod shared;

mod fleet_cost_of_owned;

pub mod replace;

#[path = "service_warm.rs"]
mod warm;
pub use warm::Warmed;

#[cfg(test)]
mod tests;
