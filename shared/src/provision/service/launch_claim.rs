//! Launching one planned claim, the executor of [`super::super::launch_judgement`]: its
//! class's AMI (for the claim's arch), security groups and instance profile as resolved
//! once per poll ([`super::launch_context`]), user data and launch template, then
//! CreateFleet with the claim's deterministic id and its attempt's token. What EC2's
//! answer means is judged there; here it is sent and applied.

use std::time::SystemTime;

use super::super::attempts::{Answer, Next};
use super::super::launch::NODECLAIM_TAG;
use super::super::launch::{fleet_request, launch_types, node_labels, node_taints};
use super::super::launch_judgement::{Judgement, Verdict, judge};
use super::super::node_template::{NodeTemplateInput, ProfileChoice, launch_template_spec};
use super::super::nodeclaim::nodeclaim_id;
use super::super::turn::Turn;
use super::super::unavailable::{Exclusion, UNAVAILABLE_TTL};
use super::launch_context::{LaunchContext, failed};
use super::{ClaimOutcome, Provisioner};
use crate::aws::{AwsError, Cloud, FleetOutcome, FleetRequest, InstanceInventory, InstanceState};
use crate::catalog::CapacityType;
use crate::disruption::drift_tags;
use crate::ids::PodUid;
use crate::kube::{Cluster, EventType, PodRef};
use crate::scheduling::PlannedClaim;

/// New attempts one launch may start in a poll after replays of dead launches; more means
/// something else is wrong, and the next poll tries again.
const MAX_DEAD_REPLAYS: usize = 2;

/// A claim ready to send: its node claim id, what its class resolved to, and the request.
struct Prepared {
    nodeclaim: String,
    profile_choice: ProfileChoice,
    request: FleetRequest,
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
        ctx.create_fleet_sent = true;
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
        let input = NodeTemplateInput {
            class_name: &claim.node_class,
            spec: &class.spec,
            cluster: &self.settings.cluster,
            image_id: &image,
            security_group_ids: resolved.security_group_ids.clone(),
            instance_profile: &resolved.profile,
            labels: node_labels(claim),
            taints: node_taints(claim),
            spot: claim.capacity_type == CapacityType::Spot,
        };
        let spec = launch_template_spec(&input)
            .map_err(|e| ClaimOutcome::Failed(crate::error_chain(&e)))?;
        let template = match self.aws.ensure_launch_template(&spec).await {
            Ok(t) => t,
            Err(e) => return Err(failed("launch template", &e)),
        };
        self.template_gc.ensured(&template.name, ctx.now);
        let network = &ctx.networks[&claim.node_class];
        let mut request = fleet_request(
            claim,
            &ctx.catalog,
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

    /// Applies `judgement` of `answered`: the attempt, exclusions, the profile, and for a
    /// launch its events and this container's memory of it.
    async fn apply(
        &mut self,
        claim: &PlannedClaim,
        ctx: &LaunchContext<'_>,
        prepared: Prepared,
        answered: Result<FleetOutcome, AwsError>,
        sent: SystemTime,
        judgement: Judgement,
    ) -> ClaimOutcome {
        let Prepared {
            nodeclaim,
            profile_choice,
            request,
        } = prepared;
        let now = ctx.now;
        if let Some(answer) = judgement.attempt {
            self.fleet.attempts_mut().judge(&nodeclaim, answer, now);
        }
        if judgement.forget_profile
            && let ProfileChoice::ForRole(role) = &profile_choice
        {
            // A profile EC2 refuses may be one IAM has not propagated yet, or one deleted
            // by hand since it was cached: the next launch ensures it again.
            self.profiles.forget(role);
        }
        self.exclude(&judgement.exclusions, now).await;
        let outcome = match answered {
            Ok(outcome) => outcome,
            Err(e) => {
                return match judgement.verdict {
                    Verdict::TokenReused => self.token_reused(&nodeclaim, &e, now).await,
                    verdict => outcome_of(verdict),
                };
            }
        };
        if judgement.verdict != Verdict::Launched {
            if judgement.verdict == Verdict::NoCapacity {
                let first = outcome.errors.first();
                tracing::warn!(
                    nodeclaim,
                    errors = outcome.errors.len(),
                    code = first.map(|e| e.code.as_str()),
                    message = first.map(|e| e.message.as_str()),
                    "no offering of the claim launched; falling back"
                );
            }
            return outcome_of(judgement.verdict);
        }
        self.tell_launching(claim, ctx, &outcome, &nodeclaim).await;
        // Counted in flight by the next reads even while DescribeInstances does not list
        // it yet (EC2 is eventually consistent).
        for i in &outcome.instances {
            self.fleet.launched(i, request.tags.clone(), sent);
        }
        ClaimOutcome::Launched {
            instances: outcome.instances,
            nodeclaim,
            sent,
        }
    }

    /// Keeps `exclusions` out of plans, here and in every function.
    async fn exclude(&mut self, exclusions: &[Exclusion], now: SystemTime) {
        for x in exclusions {
            if !matches!(x, Exclusion::Offering { .. }) {
                tracing::warn!(
                    exclusion = ?x,
                    for_how_long = ?UNAVAILABLE_TTL,
                    "CreateFleet: excluding more than one offering from plans"
                );
            }
            self.unavailable.exclude(x.clone(), now);
        }
        self.share_exclusions(exclusions, now).await;
    }

    /// The decision's facts in one line, its price included (as planned: the catalog
    /// this poll solved with), and a `Launching` Event on each of the claim's pods.
    async fn tell_launching(
        &self,
        claim: &PlannedClaim,
        ctx: &LaunchContext<'_>,
        outcome: &FleetOutcome,
        nodeclaim: &str,
    ) {
        let Some(first) = outcome.instances.first() else {
            return;
        };
        let message = format!(
            "Launching {} {} in {} for {} pods, node claim {}",
            first.instance_type,
            first.capacity_type,
            first.zone,
            claim.pods.len(),
            nodeclaim
        );
        let price_per_hour = crate::provision::instance_price(
            &first.instance_type,
            &first.zone,
            first.capacity_type,
            Some(&ctx.catalog),
            &Default::default(),
        );
        tracing::info!(
            instance_type = first.instance_type,
            capacity_type = %first.capacity_type,
            zone = first.zone,
            price_per_hour,
            pods = claim.pods.len(),
            nodeclaim,
            instance_id = first.id,
            nodepool = claim.nodepool,
            "launching"
        );
        for key in &claim.pods {
            if let Some(p) = ctx.by_key.get(key) {
                self.kube
                    .pod_event(&PodRef::of(p), "Launching", &message, EventType::Normal)
                    .await;
            }
        }
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

/// The claim's outcome for a verdict that launched nothing.
fn outcome_of(verdict: Verdict) -> ClaimOutcome {
    match verdict {
        Verdict::NoCapacity => ClaimOutcome::NoCapacity,
        Verdict::Throttled => ClaimOutcome::Throttled,
        Verdict::RetryLater(why) => ClaimOutcome::RetryLater(why),
        Verdict::Failed(why) => ClaimOutcome::Failed(why),
        // Applied by the caller; not a verdict that reaches here.
        Verdict::Launched | Verdict::Died | Verdict::TokenReused => {
            ClaimOutcome::Failed(format!("CreateFleet: unexpected verdict {verdict:?}"))
        }
    }
}

impl<K, A> Provisioner<K, A>
where
    A: InstanceInventory + Sync,
{
    /// Whether EC2 lists every one of `instances` as terminated or shutting down. Not
    /// listed, or the lookup failing, counts as alive: only positive evidence of death
    /// starts a new attempt (a new instance may not be listed yet).
    async fn all_dead(&self, instances: &[crate::aws::LaunchedInstance]) -> bool {
        let ids: Vec<String> = instances.iter().map(|i| i.id.clone()).collect();
        match self.aws.states(&ids).await {
            Ok(states) => ids.iter().all(|id| {
                matches!(
                    states.get(id),
                    Some(InstanceState::Terminated | InstanceState::ShuttingDown)
                )
            }),
            Err(e) => {
                tracing::warn!(error = %e, "looking up launched instances failed; counting them alive");
                false
            }
        }
    }

    /// CreateFleet said the claim's token was used with other parameters: an earlier
    /// attempt reached EC2 and its inputs have drifted since (see [`super::super::attempts`]).
    async fn token_reused(
        &mut self,
        nodeclaim: &str,
        e: &AwsError,
        now: SystemTime,
    ) -> ClaimOutcome {
        let live_instance = match self.aws.list_owned().await {
            // A launch of this container not listed yet is live (EC2 is eventually
            // consistent): launching again would make a second instance.
            Ok(owned) => self.fleet.on_its_way(owned, now).iter().any(|i| {
                i.tags.get(NODECLAIM_TAG).map(String::as_str) == Some(nodeclaim)
                    && matches!(i.state, InstanceState::Pending | InstanceState::Running)
            }),
            // Unknown: as if an instance were on its way, so nothing launches twice.
            Err(_) => true,
        };
        match (self.fleet.attempts_mut()).judge(
            nodeclaim,
            Answer::TokenMismatch { live_instance },
            now,
        ) {
            Next::Stands => ClaimOutcome::AlreadyLaunched,
            Next::Wait => ClaimOutcome::RetryLater(format!(
                "CreateFleet: {}; waiting to learn whether the earlier launch of node claim \
                 {nodeclaim} lives",
                describe(e)
            )),
            Next::NextAttempt => ClaimOutcome::RetryLater(format!(
                "the earlier launch of node claim {nodeclaim} left no instance; will launch again"
            )),
        }
    }
}

pub(super) use super::super::launch_judgement::describe;
