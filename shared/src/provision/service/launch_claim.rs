//! Launching one planned claim, the executor of [`super::super::launch_judgement`]: its
//! class's AMI (for the claim's arch), security groups and instance profile as resolved
//! once per poll ([`super::launch_context`]), user data and launch template, then
//! CreateFleet with the claim's deterministic id and its attempt's token. What EC2's
//! answer means is judged there; here it is sent and applied.

use std::time::SystemTime;

use super::super::launch::{
    fleet_request, launch_types, node_labels, node_taints, reservation_for, reservation_labels,
};
use super::super::launch_judgement::{Judgement, Verdict, judge};
use super::super::node_template::{NodeTemplateInput, ProfileChoice, launch_template_spec};
use super::super::nodeclaim::nodeclaim_id;
use super::super::turn::Turn;
use super::launch_context::{LaunchContext, failed};
use super::{ClaimOutcome, Provisioner};
use crate::aws::launch_templates::ReservationUse;
use crate::aws::{AwsError, Cloud, FleetOutcome, FleetRequest};
use crate::catalog::CapacityType;
use crate::disruption::drift_tags;
use crate::ids::PodUid;
use crate::kube::Cluster;
use crate::scheduling::PlannedClaim;

/// New attempts one launch may start in a poll after replays of dead launches; more means
/// something else is wrong, and the next poll tries again.
const MAX_DEAD_REPLAYS: usize = 2;

/// A claim ready to send: its node claim id, what its class resolved to, and the request.
pub(super) struct Prepared {
    pub(super) nodeclaim: String,
    pub(super) profile_choice: ProfileChoice,
    pub(super) request: FleetRequest,
    /// The capacity reservation it launches into, if reserved.
    pub(super) reservation: Option<String>,
}

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// Launches `claim` with what `ctx` resolved for its class: prepares the request,
    /// asks the turn whether it may still launch, sends it, and applies what
    /// [`judge`] makes of EC2's answer.
    pub(super) async fn launch(
        &mut self,
        claim: &PlannedClaim,
        ctx: &mut LaunchContext<'_>,
    ) -> ClaimOutcome {
        let mut prepared = match self.prepare(claim, ctx).await {
            Ok(p) => p,
            Err(outcome) => return outcome,
        };
        // Right before acting: this invocation may have lost its Lease (or its time) while
        // the claim was prepared.
        if let Err(why) = self.may_launch(&ctx.turn).await {
            return ClaimOutcome::Withheld(why);
        }
        let (answered, sent, judgement) = self.send(&mut prepared, ctx).await;
        self.apply(claim, ctx, prepared, answered, sent, judgement)
            .await
    }

    /// The claim's node claim id, launch template and CreateFleet request.
    async fn prepare(
        &mut self,
        claim: &PlannedClaim,
        ctx: &mut LaunchContext<'_>,
    ) -> Result<Prepared, ClaimOutcome> {
        let class = ctx
            .classes
            .iter()
            .find(|c| c.metadata.name == claim.node_class);
        let (Some(class), true) = (class, ctx.networks.contains_key(&claim.node_class)) else {
            return Err(ClaimOutcome::Failed(format!(
                "EC2NodeClass {} is not usable",
                claim.node_class
            )));
        };
        let class = class.clone();
        let resolved = self.class_launch(ctx, &class).await?;
        let (arch, _) = launch_types(claim, &ctx.catalog);
        let Some(image) = resolved.images.iter().find(|i| i.arch == arch) else {
            return Err(ClaimOutcome::Failed(format!(
                "EC2NodeClass {}: spec.amiSelectorTerms select no {arch} image for Kubernetes {}",
                claim.node_class, self.settings.cluster.kubernetes_version
            )));
        };
        let image = image.id.clone();
        let nodeclaim = claim_id(claim, ctx);
        let network = &ctx.networks[&claim.node_class];
        let reservation = reservation_for(claim, &ctx.catalog, &network.subnets).cloned();
        if claim.capacity_type == CapacityType::Reserved && reservation.is_none() {
            // Filled since the claim was planned: the next round plans without it.
            return Err(ClaimOutcome::NoCapacity);
        }
        let mut labels = node_labels(claim);
        labels.extend(reservation.iter().flat_map(reservation_labels));
        let input = NodeTemplateInput {
            class_name: &claim.node_class,
            spec: &class.spec,
            cluster: &self.settings.cluster,
            image_id: &image,
            security_group_ids: resolved.security_group_ids.clone(),
            instance_profile: &resolved.profile,
            labels,
            taints: node_taints(claim),
            spot: claim.capacity_type == CapacityType::Spot,
            reservations: match &reservation {
                Some(r) => Some(ReservationUse::Only {
                    id: r.id.clone(),
                    kind: r.kind,
                }),
                // By the class's terms, not by the room left: a template must not change
                // as reservations fill and empty.
                None if !class.spec.capacity_reservation_selector_terms.is_empty() => {
                    Some(ReservationUse::None)
                }
                None => None,
            },
        };
        let spec = launch_template_spec(&input)
            .map_err(|e| ClaimOutcome::Failed(crate::error_chain(&e)))?;
        let template = match self.aws.ensure_launch_template(&spec).await {
            Ok(t) => t,
            Err(e) => return Err(failed("launch template", &e)),
        };
        self.template_gc.ensured(&template.name, ctx.now);
        let mut request = fleet_request(
            claim,
            &ctx.catalog,
            reservation.as_ref(),
            &nodeclaim,
            &self.fleet.attempts().token(&nodeclaim),
            &template,
            &network.subnets,
            &self.settings.cluster.name,
            &class.spec.tags,
        );
        // What the sweeper compares to find drift (`disruption::drift`); the class's own
        // tags never replace them.
        let pool_hash = self.pool_hashes.get(&claim.nodepool).map(String::as_str);
        request.tags.extend(drift_tags(
            pool_hash,
            &class,
            &image,
            &input.security_group_ids,
        ));
        if request.overrides.is_empty() {
            return Err(ClaimOutcome::Failed(format!(
                "no subnet of EC2NodeClass {} is in a zone where the planned types are offered ({})",
                claim.node_class,
                claim.zones.join(", ")
            )));
        }
        Ok(Prepared {
            nodeclaim,
            profile_choice: resolved.profile_choice,
            request,
            reservation: reservation.map(|r| r.id),
        })
    }

    /// Whether `turn` still lets this poll launch: its time to launch by not reached, its
    /// gate (the Lease, renewed now) still open.
    async fn may_launch(&self, turn: &Turn<'_>) -> Result<(), String> {
        if let Some(by) = turn.launch_by
            && SystemTime::from(self.clock.now()) >= by
        {
            return Err(
                "within the margin before the invocation's deadline: a launch might not finish"
                    .to_string(),
            );
        }
        match turn.gate {
            Some(gate) => gate.may_act().await.map_err(|e| crate::error_chain(&e)),
            None => Ok(()),
        }
    }

    /// Sends the request and judges the answer; a replay naming only dead instances is
    /// followed by the next attempt, with its own token, at once (at most
    /// [`MAX_DEAD_REPLAYS`] times). Returns the last answer, when it was sent, and its
    /// judgement.
    async fn send(
        &mut self,
        prepared: &mut Prepared,
        ctx: &LaunchContext<'_>,
    ) -> (Result<FleetOutcome, AwsError>, SystemTime, Judgement) {
        let nodeclaim = prepared.nodeclaim.clone();
        let mut replays = 0;
        loop {
            let sent = self.sent_at(ctx);
            let answered = self.aws.create_fleet(&prepared.request).await;
            let launched = matches!(&answered, Ok(o) if !o.instances.is_empty());
            let all_dead = replays < MAX_DEAD_REPLAYS
                && launched
                && match &answered {
                    Ok(o) => self.all_dead(&o.instances).await,
                    Err(_) => false,
                };
            let judgement = judge(&answered, all_dead, prepared.request.capacity_type);
            if judgement.verdict != Verdict::Died {
                return (answered, sent, judgement);
            }
            let attempts = self.fleet.attempts_mut();
            if let Some(answer) = judgement.attempt {
                attempts.judge(&nodeclaim, answer, ctx.now);
            }
            tracing::info!(
                nodeclaim,
                attempt = attempts.attempt(&nodeclaim),
                "the earlier launch of this node claim died; launching again"
            );
            prepared.request.client_token = attempts.token(&nodeclaim);
            replays += 1;
        }
    }

    /// When a CreateFleet sent now is sent, in the poll's time: its `now` plus the
    /// clock's time since the poll started.
    fn sent_at(&self, ctx: &LaunchContext<'_>) -> SystemTime {
        let elapsed = SystemTime::from(self.clock.now())
            .duration_since(ctx.started)
            .unwrap_or_default();
        ctx.now + elapsed
    }
}

/// The claim's id: from its NodePool and its pods' uids. A replacement for the pods of a
/// node that is going is a decision of its own: the same pods were launched for once
/// already, and that launch's ClientToken would be answered with the instance now being
/// reclaimed. Naming the node keeps a retried replacement the same decision (the same
/// token) all the same.
fn claim_id(claim: &PlannedClaim, ctx: &LaunchContext<'_>) -> String {
    let uids: Vec<String> = claim
        .pods
        .iter()
        .map(|k| {
            ctx.by_key
                .get(k)
                .map(|p| PodUid::of(p).into_string())
                .unwrap_or_else(|| k.clone())
        })
        .collect();
    let replaced = ctx.replacing.map(|node| format!("replaces:{node}"));
    nodeclaim_id(
        &claim.nodepool,
        uids.iter().map(String::as_str).chain(replaced.as_deref()),
    )
}

pub(super) use super::super::launch_judgement::describe;
