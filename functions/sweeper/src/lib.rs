//! The `sweeper` Lambda function: its handler lives here so tests can invoke it exactly as
//! the Lambda runtime does; `main.rs` only wires configuration and clients.
//!
//! One invocation (every minute, reserved concurrency 1): read the NodePools, nodes, pods,
//! PodDisruptionBudgets and this cluster's instances; decide with [`plan_disruption`]; carry the plan out
//! ([`act`]), re-checking each node just before acting. A removal that cannot finish in
//! one invocation (pods still terminating, a PodDisruptionBudget saying not now) is
//! continued by the next one: the node keeps its `nodewright.io/disruption` annotation and
//! taint, and each sweep drains what is left until it is empty, then terminates the
//! instance and deletes the Node.

mod act;
mod capacity_blocks;
mod consolidation;
mod drift;
mod events;
mod floor;
mod pool_status;
mod profiles;
mod repair;
mod replacement;
mod takeover;

use std::collections::HashMap;
use std::sync::Arc;

use lambda_runtime::{Error, LambdaEvent};
use nodewright::api::labels;
use nodewright::aws::{InstanceStatusChecks, NetworkDiscovery, OwnedInstances};
use nodewright::catalog::{DEFAULT_SPOT_DISCOUNT, bundled_node_prices};
use nodewright::disruption::{
    FirstSight, Inputs, SimulationInputs, plan_disruption, simulation, snapshot,
};
use nodewright::kube::{
    Clock, ConfigSource, NodeDisruption, PdbSource, PodSource, PoolStatusSink, usable,
};
use nodewright::lease::{Elector, Hold, KubeLeases};
use nodewright::provision::Replacement;
use nodewright::provision::in_flight::{missing_nodeclaim_labels, set_nodeclaim_label};
use nodewright::removal::Capacity;
use nodewright::scheduling::{PreferencePolicy, selects_namespaces};
use serde_json::{Value, json};

pub use act::{Report, SweepError};
pub use consolidation::GroupReplacement;
pub use drift::LaunchResolver;
pub use events::{KEPT_EVENT_INTERVAL, KeptEventLog};
pub use profiles::{CollectProfiles, PROFILE_SWEEP_EVERY, ProfileCollection};
pub use replacement::NoReplacement;

/// The Lease a sweep holds while it acts (in kube-system, bound by the RBAC manifests), so
/// two sweepers of one cluster (a second stack, a local run) never act at once.
pub const LEASE_NAME: &str = "nodewright-sweeper";
pub const LEASE_NAMESPACE: &str = "kube-system";
/// The function's timeout: a sweeper that dies mid-sweep frees the Lease by expiry after
/// at most this; one that ends releases it at once.
pub const LEASE_DURATION: std::time::Duration = std::time::Duration::from_secs(300);

/// `NODE_REPAIR` as the template sets it: `true` or `false`; unset is off.
pub fn node_repair_from(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("") | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(format!("NODE_REPAIR={other:?}: expected true or false")),
    }
}

/// Clients built once per cold start, borrowed by every invocation.
pub struct State<K, E, R = NoReplacement> {
    pub kube: K,
    pub ec2: E,
    /// The EKS cluster: only instances carrying its ownership tag are touched.
    pub cluster: String,
    /// `now` for the decisions: the system clock in Lambda, a controlled one in tests.
    pub clock: Arc<dyn Clock>,
    /// (instance type, capacity type) -> $/h, from the bundled on-demand prices.
    pub prices: HashMap<(String, String), f64>,
    /// When each kept node last got its Event, and for which reason.
    pub kept_events: std::sync::Mutex<KeptEventLog>,
    /// `None`: act without a Lease (tests of one sweeper, `sweep-plan`).
    pub lease: Option<Elector<KubeLeases>>,
    /// The provisioning core, for the replacement an expired, drifted or consolidated
    /// node's pods get before it drains. `None`: such a node drains at once and the
    /// provisioner launches for its pods once they are pending.
    pub replacer: Option<R>,
    /// Leftover instance profiles, collected after the sweep when due. `None`: never.
    pub profiles: Option<Box<dyn CollectProfiles>>,
    /// Node repair (the template's `NodeRepair`); off by default, as Karpenter's gate.
    pub node_repair: bool,
    /// Adopt the instances Karpenter launched for this cluster (the template's
    /// `TakeOverFromKarpenter`; see [`nodewright::takeover`]); off by default.
    pub take_over_karpenter: bool,
    /// Whether pods' preferences hold a node in consolidation's simulations
    /// (`PREFERENCE_POLICY`, as the replacement core's).
    pub preferences: PreferencePolicy,
    /// The NodePool statuses this container last wrote, so an unchanged one is not
    /// written again.
    pub pool_status: std::sync::Mutex<HashMap<String, Value>>,
}

impl<K, E> State<K, E> {
    pub fn new(kube: K, ec2: E, cluster: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        let prices = bundled_node_prices(DEFAULT_SPOT_DISCOUNT);
        State {
            kube,
            ec2,
            cluster: cluster.into(),
            clock,
            prices,
            kept_events: Default::default(),
            pool_status: Default::default(),
            lease: None,
            replacer: None,
            profiles: None,
            node_repair: false,
            take_over_karpenter: false,
            preferences: PreferencePolicy::default(),
        }
    }
}

impl<K, E, R> State<K, E, R> {
    /// The cluster whose ownership tag a removal requires.
    pub(crate) fn ec2_cluster(&self) -> &str {
        &self.cluster
    }

    /// Launches replacements through `replacer` before draining (see [`State::replacer`]).
    pub fn with_replacer<R2: Replacement>(self, replacer: R2) -> State<K, E, R2> {
        State {
            kube: self.kube,
            ec2: self.ec2,
            cluster: self.cluster,
            clock: self.clock,
            prices: self.prices,
            kept_events: self.kept_events,
            pool_status: self.pool_status,
            lease: self.lease,
            replacer: Some(replacer),
            profiles: self.profiles,
            node_repair: self.node_repair,
            take_over_karpenter: self.take_over_karpenter,
            preferences: self.preferences,
        }
    }

    /// Collects leftover instance profiles through `profiles` (see [`ProfileCollection`]).
    pub fn with_profile_collection(mut self, profiles: impl CollectProfiles + 'static) -> Self {
        self.profiles = Some(Box::new(profiles));
        self
    }

    /// Repairs unhealthy nodes (see [`State::node_repair`]).
    pub fn with_node_repair(mut self, on: bool) -> Self {
        self.node_repair = on;
        self
    }

    /// Simulates consolidation with `policy` (see [`State::preferences`]).
    pub fn with_preferences(mut self, policy: PreferencePolicy) -> Self {
        self.preferences = policy;
        self
    }

    /// Adopts Karpenter's instances (see [`State::take_over_karpenter`]).
    pub fn with_takeover(mut self, on: bool) -> Self {
        self.take_over_karpenter = on;
        self
    }

    /// Sweeps only while holding `elector`'s Lease.
    pub fn with_lease(mut self, elector: Elector<KubeLeases>) -> Self {
        self.lease = Some(elector);
        self
    }
}

/// The handler, generic over the ports so tests hand it the real adapters against the
/// local world. Answers a summary of what was done (also logged).
pub async fn handler<K, E, R>(
    event: LambdaEvent<Value>,
    state: &State<K, E, R>,
) -> Result<Value, Error>
where
    K: NodeDisruption + ConfigSource + PodSource + PdbSource + PoolStatusSink,
    E: OwnedInstances + InstanceStatusChecks + NetworkDiscovery,
    R: Replacement + Capacity + LaunchResolver + GroupReplacement,
{
    tracing::debug!(request_id = event.context.request_id, "sweeper invoked");
    let report = sweep(state).await;
    nodewright::telemetry::flush();
    let report = report.map_err(|e| {
        tracing::error!(error = %nodewright::error_chain(&e), "sweep failed");
        Box::new(e) as Error
    })?;
    tracing::info!(?report, "swept");
    Ok(json!(report))
}

/// One sweep under the Lease (when there is one): a sweep that finds it held by another
/// does nothing and says who holds it; one that holds it releases it when done.
pub async fn sweep<K, E, R>(state: &State<K, E, R>) -> Result<Report, SweepError>
where
    K: NodeDisruption + ConfigSource + PodSource + PdbSource + PoolStatusSink,
    E: OwnedInstances + InstanceStatusChecks + NetworkDiscovery,
    R: Replacement + Capacity + LaunchResolver + GroupReplacement,
{
    let Some(elector) = &state.lease else {
        return sweep_held(state).await;
    };
    let hold = elector
        .hold(state.clock.now().into())
        .await
        .map_err(act::lease("taking the sweeper's Lease"))?;
    if let Hold::Waiting { holder, .. } = hold {
        tracing::info!(holder, "another sweeper holds the Lease; nothing done");
        return Ok(Report {
            skipped: Some(format!("the Lease {} is held by {holder}", elector.name())),
            ..Report::default()
        });
    }
    let result = sweep_held(state).await;
    if let Err(e) = elector.release(state.clock.now().into()).await {
        // It expires on its own; the next sweep only waits longer.
        tracing::warn!(error = %nodewright::error_chain(&e), "releasing the Lease failed");
    }
    result
}

/// Writes the `nodewright.io/nodeclaim` label on the nodes of this cluster's instances
/// that lack it, and sets it in `nodes` too. The provisioner writes it on the polls that
/// read nodes, which happen only while pods are pending; a node that joined when none
/// were would otherwise never carry it, and a node without it is never taken for
/// nodewright's (an orphan whose instance is gone would stay). A failed write is logged
/// and tried again next sweep; this sweep counts the node as labelled either way, since
/// its instance's tag already says whose it is.
async fn label_nodes<K, E, R>(
    state: &State<K, E, R>,
    nodes: &mut [k8s_openapi::api::core::v1::Node],
    instances: &[nodewright::aws::OwnedInstance],
) where
    K: NodeDisruption,
{
    for (node, claim) in missing_nodeclaim_labels(nodes, instances) {
        if let Err(e) = state.kube.label(&node, labels::NODECLAIM, &claim).await {
            tracing::warn!(
                node,
                nodeclaim = claim,
                error = nodewright::error_chain(&e),
                "labelling node failed"
            );
        }
        set_nodeclaim_label(nodes, &node, &claim);
    }
}

/// Relabels on-demand the nodes labelled `reserved` whose instance no longer runs in a
/// reservation (`nodewright::disruption::out_of_reservation`), in `nodes` too, so this
/// sweep prices them as what they are. A failed write is logged and tried again next sweep.
async fn relabel_out_of_reservation<K, E, R>(
    state: &State<K, E, R>,
    nodes: &mut [k8s_openapi::api::core::v1::Node],
    instances: &[nodewright::aws::OwnedInstance],
) where
    K: NodeDisruption,
{
    for node in nodewright::disruption::out_of_reservation(nodes, instances) {
        let written = state
            .kube
            .relabel(&node, &nodewright::disruption::OUT_OF_RESERVATION)
            .await;
        match written {
            Ok(()) => tracing::info!(
                node,
                "the node's instance left its capacity reservation; relabelled on-demand"
            ),
            Err(e) => tracing::warn!(
                node,
                error = nodewright::error_chain(&e),
                "relabelling a node that left its reservation failed"
            ),
        }
        nodewright::disruption::set_out_of_reservation(nodes, &node);
    }
}

/// The claims, volumes and classes when a pod has a claim. When they cannot be read, none:
/// every pod with a claim is then unreadable to the simulation, so its node is kept rather
/// than its pods moved where their volumes may not follow.
async fn volume_objects<K, E, R>(
    state: &State<K, E, R>,
    pods: &[k8s_openapi::api::core::v1::Pod],
) -> nodewright::scheduling::VolumeObjects
where
    K: PodSource,
{
    if !nodewright::scheduling::claims_volumes(pods) {
        return Default::default();
    }
    state.kube.volume_objects().await.unwrap_or_else(|e| {
        tracing::warn!(
            error = nodewright::error_chain(&e),
            "listing PersistentVolumeClaims, PersistentVolumes or StorageClasses failed; \
             nodes whose pods have claims are kept this sweep"
        );
        Default::default()
    })
}

/// One sweep: read, decide, act.
async fn sweep_held<K, E, R>(state: &State<K, E, R>) -> Result<Report, SweepError>
where
    K: NodeDisruption + ConfigSource + PodSource + PdbSource + PoolStatusSink,
    E: OwnedInstances + InstanceStatusChecks + NetworkDiscovery,
    R: Replacement + Capacity + LaunchResolver + GroupReplacement,
{
    let config = state
        .kube
        .load()
        .await
        .map_err(act::kube("loading NodePools"))?;
    let mut nodes = state
        .kube
        .nodes()
        .await
        .map_err(act::kube("listing nodes"))?;
    let mut pods: Vec<_> = state
        .kube
        .bound_pods_by_node()
        .await
        .map_err(act::kube("listing pods"))?
        .into_values()
        .flatten()
        .collect();
    // Pending pods too: consolidation keeps the room they are about to take
    // (`Simulation::pending_on`); the snapshot reads bound pods only. Without them the sweep
    // goes on as before, the room unbooked.
    match state.kube.pending_pods().await {
        Ok(pending) => pods.extend(pending),
        Err(e) => tracing::warn!(
            error = nodewright::error_chain(&e),
            "listing pending pods failed; consolidating without their room booked"
        ),
    }
    let (pools, classes, _) = usable(&config.inputs, &config.problems);
    let config_now = takeover::Config {
        pools: &pools,
        classes: &classes,
    };
    let adoption = takeover::adopt_karpenters(state, &nodes, config_now).await;
    let adopted = adoption.adopted;
    let mut instances = state
        .ec2
        .list_owned()
        .await
        .map_err(act::aws("listing this cluster's instances"))?;
    // EC2's tag filters may not see the tags just written yet.
    for i in &adopted {
        if !instances.iter().any(|o| o.id == i.id) {
            instances.push(i.clone());
        }
    }
    label_nodes(state, &mut nodes, &instances).await;
    relabel_out_of_reservation(state, &mut nodes, &instances).await;
    let daemon_sets = state
        .kube
        .daemon_sets()
        .await
        .map_err(act::kube("listing DaemonSets"))?;
    // A node whose pods a budget allows no disruption of now is kept with the budget's name
    // (a `DisruptionBlocked` Event), not tainted for a drain the Eviction API would refuse:
    // tainted, it would hold its pool's budget and stop consolidation everywhere.
    let pdbs = state
        .kube
        .pod_disruption_budgets()
        .await
        .map_err(act::kube("listing PodDisruptionBudgets"))?;
    let namespace_labels = if selects_namespaces(&pods) {
        state
            .kube
            .namespace_labels()
            .await
            .map_err(act::kube("listing Namespaces"))?
    } else {
        Default::default()
    };
    let volumes = volume_objects(state, &pods).await;
    let price = |t: &str, c: &str| state.prices.get(&(t.to_string(), c.to_string())).copied();
    let now = state.clock.now();
    let (sim, sim_problems) = simulation(&SimulationInputs {
        pools: &config.inputs.node_pools,
        classes: &config.inputs.node_classes,
        nodes: &nodes,
        pods: &pods,
        daemon_sets: &daemon_sets,
        spot_discount: DEFAULT_SPOT_DISCOUNT,
        namespace_labels: &namespace_labels,
        overlays: &config.inputs.node_overlays,
        preferences: state.preferences,
        volumes: &volumes,
    });
    // Nodes are priced with the overlays the solver uses (conflicts left out), once the
    // simulation has resolved them.
    let overlays = match &sim {
        Ok(sim) => sim.overlays.clone(),
        Err(_) => nodewright::scheduling::Overlays::new(&config.inputs.node_overlays),
    };
    let (mut snapshot, mut problems) = snapshot(&Inputs {
        pools: &config.inputs.node_pools,
        nodes: &nodes,
        pods: &pods,
        pdbs: &pdbs,
        instances: Some(&instances),
        price: &price,
        overlays: &overlays,
        first_sight: FirstSight::Mark,
        node_repair: state.node_repair,
        now,
    });
    problems.extend(sim_problems);
    // Drift needs what a launch would use now, which only the provisioning core knows.
    if let Some(resolver) = &state.replacer {
        drift::mark_drifted(
            &mut snapshot,
            &nodes,
            &pools,
            &classes,
            &instances,
            resolver,
        )
        .await;
    }
    match sim {
        Ok(sim) => snapshot.simulation = Some(sim),
        Err(e) => problems.push(format!("underutilized nodes are not considered: {e}")),
    }
    for p in &problems {
        tracing::warn!(problem = p, "object not considered for disruption");
    }
    pool_status::write_statuses(state, &config, &nodes, &snapshot, now).await;
    if state.node_repair {
        repair::mark_status_checks(state, &mut snapshot, &instances, now).await;
    }
    let plan = plan_disruption(&snapshot, now);
    nodewright::telemetry::sweep_decided(&plan);
    // Before the plan is carried out: a node about to lose its block is taken now, and
    // the plan's command for it, if any, drops at its re-check.
    let mut blocks = Report::default();
    capacity_blocks::give_up_expiring(state, &snapshot, &nodes, now, &mut blocks).await;
    let mut report = act::carry_out(state, &snapshot, &nodes, &plan, now).await?;
    report.absorb(blocks);
    report.adopted = adopted.into_iter().map(|i| i.id).collect();
    report.adoption_paused = adoption.paused;
    floor::launch_floors(state, &snapshot, now, &mut report).await;
    if let Some(profiles) = &state.profiles {
        report.profiles_deleted = profiles.collect(&config, now).await;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    #[test]
    fn node_repair_is_off_unless_the_template_says_true_and_a_typo_is_an_error() {
        let cases = [
            (None, Ok(false)),
            (Some(""), Ok(false)),
            (Some("false"), Ok(false)),
            (Some("true"), Ok(true)),
            (
                Some("yes"),
                Err("NODE_REPAIR=\"yes\": expected true or false".to_string()),
            ),
        ];
        for (value, want) in cases {
            assert_eq!(super::node_repair_from(value), want, "{value:?}");
        }
    }
}
