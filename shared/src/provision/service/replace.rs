//! Replacement capacity for a node that is going (an interruption, a rebalance, a
//! scheduled retirement): the same solver, launch path and tags as a poll, for the pods
//! that node holds now instead of pending pods, with the node itself no longer counted as
//! capacity and the reclaimed offering kept out.
//!
//! Idempotent across retries and duplicate events: the claim ids derive from the pods'
//! uids, so asking again for the same pods sends CreateFleet the same ClientToken.

use std::collections::HashSet;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::super::in_flight::{in_flight, node_instance_ids};
use super::super::spoken_for;
use super::super::turn::Turn;
use super::super::unavailable::Exclusion;
use super::launch_context::LaunchContext;
use super::read::CapacityLists;
use super::rounds::Tally;
use super::{ProvisionError, Provisioner, kube_err};
use crate::api::labels::{CAPACITY_TYPE, INSTANCE_TYPE};
use crate::aws::Cloud;
use crate::catalog::CapacityType;
use crate::disruption::{NotSaving, Replacing};
use crate::ids::NodeName;
use crate::kube::{
    Cluster, InFlight, Readiness, existing_nodes, in_flight_name, instance_of, readiness, usable,
};
use crate::scheduling::{Nomination, Snapshot, is_floor_placeholder, solve, solve_within_room};

/// The offering an instance ran on: what an interruption says is running out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offering {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplaceReport {
    pub launched_instances: Vec<String>,
    pub claims: usize,
    /// Pods that fit on existing or in-flight capacity: nothing to launch for them.
    pub nominated_pods: usize,
    /// Instances not Ready yet (launched earlier, or a node still starting) that some of
    /// the pods are nominated to: the caller waits for them as for its own launches.
    pub waiting_on: Vec<String>,
    /// (pod, why) for pods no launch is planned for.
    pub unschedulable: Vec<(String, String)>,
    pub failed_claims: usize,
    pub throttled: bool,
    /// Set when the claims planned would cost more per hour than the caller's ceiling:
    /// their price. Nothing was launched.
    pub over_ceiling: Option<f64>,
    /// Set when, under the ceiling, what is left to offer EC2 would not do: only the
    /// replaced nodes' own types, or too few spot types to replace spot with spot. Nothing
    /// was launched.
    pub too_narrow: Option<String>,
}

/// What the interruption function asks of the provisioning core.
pub trait Replacement: Send + Sync {
    /// Launches capacity for `pods` (those of `node`, which must already be tainted so it
    /// no longer counts), keeping `reclaimed` out of this and later plans for
    /// [`super::super::UNAVAILABLE_TTL`].
    fn replace(
        &self,
        node: &str,
        pods: &[Pod],
        reclaimed: Option<&Offering>,
        now: SystemTime,
    ) -> impl Future<Output = Result<ReplaceReport, ProvisionError>> + Send;
}

impl<K, A> Replacement for tokio::sync::Mutex<Provisioner<K, A>>
where
    K: Cluster,
    A: Cloud + Send,
{
    async fn replace(
        &self,
        node: &str,
        pods: &[Pod],
        reclaimed: Option<&Offering>,
        now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        self.lock().await.replace(node, pods, reclaimed, now).await
    }
}

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// See [`Replacement::replace`].
    pub async fn replace(
        &mut self,
        node: &str,
        pods: &[Pod],
        reclaimed: Option<&Offering>,
        now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        let reclaimed = reclaimed.map(std::slice::from_ref).unwrap_or_default();
        self.replace_nodes(&[node.to_string()], pods, reclaimed, None, now)
            .await
    }

    /// [`Self::replace`] for the pods of several nodes at once (a consolidation replacing
    /// them by one cheaper node, a wave of interruptions), keeping every `reclaimed`
    /// offering out: none of `nodes` counts as capacity. With a `ceiling`,
    /// claims costing more per hour in all are not launched, and `over_ceiling` says what
    /// they would have cost: a consolidation must not launch something that is not cheaper
    /// than what it replaces, and only this plan, on this catalog, knows the real price.
    pub async fn replace_nodes(
        &mut self,
        nodes_going: &[String],
        pods: &[Pod],
        reclaimed: &[Offering],
        ceiling: Option<f64>,
        now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        let started = SystemTime::from(self.clock.now());
        let mut report = ReplaceReport::default();
        let excluded: Vec<Exclusion> = reclaimed
            .iter()
            .map(|o| Exclusion::Offering {
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
            })
            .collect();
        if !excluded.is_empty() {
            // Every function, not only this one: the provisioner's next poll runs in
            // another process.
            self.share_exclusions(&excluded, now).await;
            for x in excluded {
                self.unavailable.exclude(x, now);
            }
        }
        if pods.is_empty() {
            return Ok(report);
        }
        let config = self.kube.load().await.map_err(kube_err("NodePools"))?;
        let (pools, classes, _dropped) = usable(&config.inputs, &config.problems);
        // Outside any Lease turn: listed now, by the same rule as a poll's.
        let CapacityLists {
            nodes,
            daemon_sets,
            bound,
            owned,
        } = self.list_capacity(&Turn::OUTSIDE, now).await?;
        let mut owned = self
            .capacity_on_its_way(&Turn::OUTSIDE, owned, &nodes, now)
            .await?;
        // The node being replaced is not capacity for its own pods, whether or not the
        // caller's taint is visible yet; nor is its instance, which without its Node would
        // otherwise count as capacity in flight.
        let going_names: HashSet<NodeName> = nodes_going.iter().map(NodeName::new).collect();
        let (going, nodes): (Vec<_>, Vec<_>) = nodes
            .into_iter()
            .partition(|n| NodeName::of(n).is_some_and(|name| going_names.contains(&name)));
        let going_instances = node_instance_ids(&going);
        owned.retain(|i| !going_instances.contains(i.id.as_str()));
        // The interruption and sweeper functions have no idle moment between polls to
        // refresh in, as the provisioner's holder has: a replacement refreshes what is due
        // first (the catalog, a class's lookups), backing off after a failure as they do.
        if self.warm_up_due(now)
            && let Err(e) = self.warm(now).await
        {
            tracing::warn!(error = %e, "refreshing before a replacement failed; using what is kept");
        }
        let launchable = self.launchable(pools, classes, now).await?;
        // One node keeps its claim ids as they were; several are one decision, named by all.
        let replacing = nodes_going.join(",");
        let mut ctx = LaunchContext::new(
            launchable,
            pods,
            Turn::OUTSIDE,
            now,
            started,
            Some(&replacing),
        );
        let (catalog, pools, classes) = (&ctx.catalog, &ctx.pools, &ctx.classes);

        let unbound: Vec<Pod> = pods.iter().map(spoken_for::unbound).collect();
        let (mut snapshot, pod_errors) = Snapshot::from_k8s(&unbound, &daemon_sets);
        snapshot.overlays = crate::scheduling::Overlays::new(&config.inputs.node_overlays);
        snapshot.preferences = self.settings.preferences;
        // A consolidation (a ceiling to stay under) never relaxes minValues to make a move.
        snapshot.min_values = match ceiling {
            Some(_) => crate::scheduling::MinValuesPolicy::Strict,
            None => self.settings.min_values,
        };
        for e in pod_errors {
            report
                .unschedulable
                .push((e.pod, format!("{}: {}", e.field, e.message)));
        }
        let flying = in_flight(
            &owned,
            &nodes,
            catalog,
            pools,
            classes,
            &snapshot.daemon_sets,
            now,
        );
        snapshot.nodes = existing_nodes(&nodes, &bound, &flying);
        // Room other pods are on their way to is theirs first; what is left is what this
        // node's pods may be nominated to.
        let pending = self
            .kube
            .pending_pods()
            .await
            .map_err(kube_err("pending pods"))?;
        let spoken = spoken_for::spoken_for(nodes_going, &nodes, &bound, pending);
        // A capacity floor counts nodes, not room: another node's replacement is a node
        // of its pool on its way, and withheld it would be launched again.
        if !pods.iter().all(is_floor_placeholder) {
            spoken.withhold(&flying, &nodes, &mut snapshot.nodes);
        }
        self.read_namespace_labels(&mut snapshot).await?;
        for e in self.read_volume_topology(&mut snapshot, &unbound).await {
            report
                .unschedulable
                .push((e.pod, format!("{}: {}", e.field, e.message)));
        }
        if !spoken.pods.is_empty() {
            // Their pod errors are not this replacement's: the provisioner reports them.
            let (mut before, _) = Snapshot::from_k8s(&spoken.pods, &daemon_sets);
            self.read_volume_topology(&mut before, &spoken.pods).await;
            before.nodes = std::mem::take(&mut snapshot.nodes);
            before.namespace_labels = snapshot.namespace_labels.clone();
            before.overlays = snapshot.overlays.clone();
            before.preferences = snapshot.preferences;
            before.min_values = snapshot.min_values;
            if before.namespace_labels.is_empty() {
                self.read_namespace_labels(&mut before).await?;
            }
            let theirs = solve(&before, catalog, pools, classes);
            spoken_for::book(&mut before.nodes, &before.pods, &theirs.nominations);
            snapshot.nodes = before.nodes;
        }
        let mut plan = solve_within_room(&snapshot, catalog, pools, classes);
        // A consolidation's claims offer EC2 only what saves: types that keep the whole
        // under the ceiling (`disruption::Replacing`); none left, nothing is launched.
        if let Some(ceiling) = ceiling {
            match judged_by(&going, ceiling).narrow(&plan.node_claims, catalog, &plan.overlays) {
                Ok(narrowed) => plan.node_claims = narrowed,
                Err(NotSaving::TooNarrow(why)) => {
                    tracing::info!(why, "replacement not launched");
                    report.claims = plan.node_claims.len();
                    report.too_narrow = Some(why);
                    return Ok(report);
                }
                Err(NotSaving::OverCeiling(price)) => {
                    tracing::info!(price, ceiling, "replacement not launched: over the ceiling");
                    report.claims = plan.node_claims.len();
                    report.over_ceiling = Some(price);
                    return Ok(report);
                }
            }
        }
        report.waiting_on = not_ready_yet(&plan.nominations, &flying, &nodes);
        let mut tally = Tally::default();
        tally.claims = plan.node_claims.len();
        tally.nominated_pods = plan.nominations.iter().map(|n| n.pods.len()).sum();
        tally.unschedulable = std::mem::take(&mut report.unschedulable);
        tally.unschedulable.extend(
            plan.unschedulable
                .iter()
                .map(|u| (u.pod.clone(), u.reason.clone())),
        );
        for claim in &plan.node_claims {
            let outcome = self.launch(claim, &mut ctx).await;
            if self.settle(claim, outcome, &mut ctx, &mut tally).is_break() {
                break;
            }
        }
        report.claims = tally.claims;
        report.nominated_pods = tally.nominated_pods;
        report.unschedulable = tally.unschedulable;
        report.launched_instances = tally.launched_instances;
        report.failed_claims = tally.failed_claims;
        report.throttled = tally.throttled;
        // The holder of the provisioner's Lease may plan with a listing asked for before
        // these launches: it learns of them here.
        self.share_launches(&report.launched_instances, now).await;
        Ok(report)
    }
}

/// A borrowed core replaces as the core does (the local world's interruption function
/// shares the provisioner's).
impl<T: Replacement> Replacement for &T {
    async fn replace(
        &self,
        node: &str,
        pods: &[Pod],
        reclaimed: Option<&Offering>,
        now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        (**self).replace(node, pods, reclaimed, now).await
    }
}

/// The instances of the capacity `nominations` name that is not a Ready node yet: in
/// flight without a Node, or a Node still starting.
fn not_ready_yet(nominations: &[Nomination], flying: &[InFlight], nodes: &[Node]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for nomination in nominations {
        let id = match flying.iter().find(|f| in_flight_name(f) == nomination.node) {
            Some(f) => Some(f.instance_id.clone()),
            None => nodes
                .iter()
                .filter(|n| n.metadata.name.as_deref() == Some(nomination.node.as_str()))
                .filter(|n| readiness(n) != Readiness::Ready)
                .find_map(instance_of),
        };
        if let Some(id) = id
            && !ids.contains(&id)
        {
            ids.push(id);
        }
    }
    ids
}

/// What a consolidation's replacement of `going` must keep to under `ceiling`, as the
/// decision judged it.
fn judged_by(going: &[Node], ceiling: f64) -> Replacing {
    let label = |n: &Node, key: &str| n.metadata.labels.as_ref()?.get(key).cloned();
    let all_spot = !going.is_empty()
        && going
            .iter()
            .all(|n| label(n, CAPACITY_TYPE).as_deref() == Some("spot"));
    Replacing {
        ceiling,
        replaced: going
            .iter()
            .filter_map(|n| label(n, INSTANCE_TYPE))
            .collect(),
        all_spot,
    }
}
