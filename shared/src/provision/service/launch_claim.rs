//! Launching one planned claim: its class's AMI (for the claim's arch), security groups
//! and instance profile as resolved once per poll ([`super::launch_context`]), user data
//! and launch template, then CreateFleet with the claim's deterministic id; failures that
//! will repeat for a while (no capacity, no spot role, a quota) are remembered at their
//! reach (see [`super::super::unavailable`]), and what passes by itself (a profile EC2 cannot see yet, a
//! template deleted meanwhile) is retried on the next poll.

use std::time::SystemTime;

use super::super::attempts::{Answer, Next};
use super::super::launch::NODECLAIM_TAG;
use super::super::launch::{fleet_request, launch_types, node_labels, node_taints};
use super::super::node_template::{NodeTemplateInput, ProfileChoice, launch_template_spec};
use super::super::nodeclaim::nodeclaim_id;
use super::super::unavailable::{Exclusion, UNAVAILABLE_TTL, exclusion_for};
use super::launch_context::{LaunchContext, failed};
use super::{ClaimOutcome, Provisioner, pod_uid};
use crate::aws::{AwsError, Cloud, ErrorClass, InstanceInventory, InstanceState};
use crate::catalog::CapacityType;
use crate::disruption::drift_tags;
use crate::kube::{Cluster, EventType, PodRef};
use crate::scheduling::PlannedClaim;

/// New attempts one launch may start in a poll after replays of dead launches; more means
/// something else is wrong, and the next poll tries again.
const MAX_DEAD_REPLAYS: usize = 2;

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// Launches `claim` with what `ctx` resolved for its class.
    pub(super) async fn launch(
        &mut self,
        claim: &PlannedClaim,
        ctx: &mut LaunchContext<'_>,
    ) -> ClaimOutcome {
        let class = ctx
            .classes
            .iter()
            .find(|c| c.metadata.name == claim.node_class);
        let (Some(class), true) = (class, ctx.networks.contains_key(&claim.node_class)) else {
            return ClaimOutcome::Failed(format!(
                "EC2NodeClass {} is not usable",
                claim.node_class
            ));
        };
        let class = class.clone();
        let resolved = match self.class_launch(ctx, &class).await {
            Ok(r) => r,
            Err(outcome) => return outcome,
        };
        let (arch, _) = launch_types(claim, &ctx.catalog);
        let Some(image) = resolved.images.iter().find(|i| i.arch == arch) else {
            return ClaimOutcome::Failed(format!(
                "EC2NodeClass {}: spec.amiSelectorTerms select no {arch} image for Kubernetes {}",
                claim.node_class, self.settings.cluster.kubernetes_version
            ));
        };
        let image = image.id.clone();
        let (catalog, by_key, now, started) = (&ctx.catalog, &ctx.by_key, ctx.now, ctx.started);
        let network = &ctx.networks[&claim.node_class];
        let uids: Vec<String> = claim
            .pods
            .iter()
            .map(|k| {
                by_key
                    .get(k)
                    .map(|p| pod_uid(p))
                    .unwrap_or_else(|| k.clone())
            })
            .collect();
        // A replacement for the pods of a node that is going is a decision of its own: the
        // same pods were launched for once already, and that launch's ClientToken would be
        // answered with the instance now being reclaimed. Naming the node keeps a retried
        // replacement the same decision (the same token) all the same.
        let replaced = ctx.replacing.map(|node| format!("replaces:{node}"));
        let nodeclaim = nodeclaim_id(
            &claim.nodepool,
            uids.iter().map(String::as_str).chain(replaced.as_deref()),
        );
        // A profile EC2 refuses may be one IAM has not propagated yet, or one deleted by
        // hand since it was cached: either way the next launch should ensure it again.
        let forget_profile = |this: &mut Self| {
            if let ProfileChoice::ForRole(role) = &resolved.profile_choice {
                this.profiles.forget(role);
            }
        };
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
        let spec = match launch_template_spec(&input) {
            Ok(s) => s,
            Err(e) => return ClaimOutcome::Failed(crate::error_chain(&e)),
        };
        let template = match self.aws.ensure_launch_template(&spec).await {
            Ok(t) => t,
            Err(e) => return failed("launch template", &e),
        };
        self.template_gc.ensured(&template.name, now);
        let mut request = fleet_request(
            claim,
            catalog,
            &nodeclaim,
            &self.attempts.token(&nodeclaim),
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
            return ClaimOutcome::Failed(format!(
                "no subnet of EC2NodeClass {} is in a zone where the planned types are offered ({})",
                claim.node_class,
                claim.zones.join(", ")
            ));
        }
        // Right before acting: this invocation may have lost its Lease (or its time) while
        // the claim was prepared.
        if let Some(check) = &self.may_act
            && let Err(why) = check.may_act().await
        {
            return ClaimOutcome::Withheld(why);
        }
        let mut sent = now + started.elapsed();
        let mut answered = self.aws.create_fleet(&request).await;
        // A replayed answer naming only dead instances (a spot instance reclaimed before it
        // joined) means that attempt died: the next attempt, with its own token, at once.
        for _ in 0..MAX_DEAD_REPLAYS {
            let Ok(outcome) = &answered else { break };
            if outcome.instances.is_empty() || !self.all_dead(&outcome.instances).await {
                break;
            }
            let dead = Answer::Instances { all_dead: true };
            self.attempts.judge(&nodeclaim, dead, now);
            tracing::info!(
                nodeclaim,
                attempt = self.attempts.attempt(&nodeclaim),
                "the earlier launch of this node claim died; launching again"
            );
            request.client_token = self.attempts.token(&nodeclaim);
            sent = now + started.elapsed();
            answered = self.aws.create_fleet(&request).await;
        }
        let outcome = match answered {
            Ok(o) => o,
            Err(e) if e.class() == ErrorClass::TokenReused => {
                return self.token_reused(&nodeclaim, &e, now).await;
            }
            Err(e) if e.class() == ErrorClass::Propagating => {
                forget_profile(self);
                return failed("CreateFleet", &e);
            }
            // The template was collected between ensure and CreateFleet (see
            // `template_gc`): the next poll's ensure re-creates it.
            Err(e) if e.class() == ErrorClass::NotFound => {
                return ClaimOutcome::RetryLater(format!(
                    "CreateFleet: {}; will retry",
                    describe(&e)
                ));
            }
            Err(e) => return failed("CreateFleet", &e),
        };
        let answer = if outcome.instances.is_empty() {
            Answer::NothingLaunched
        } else {
            Answer::Instances { all_dead: false }
        };
        self.attempts.judge(&nodeclaim, answer, now);
        let mut excluded = false;
        let mut told = Vec::new();
        let mut fresh = Vec::new();
        for e in &outcome.errors {
            if let Some(x) = exclusion_for(e, request.capacity_type) {
                // One line per wide exclusion (a spot-wide error comes once per override).
                if !matches!(x, Exclusion::Offering { .. }) && !told.contains(&x) {
                    tracing::warn!(
                        code = e.code,
                        message = e.message,
                        exclusion = ?x,
                        for_how_long = ?UNAVAILABLE_TTL,
                        "CreateFleet: excluding more than one offering from plans"
                    );
                    told.push(x.clone());
                }
                fresh.push(x.clone());
                self.unavailable.exclude(x, now);
                excluded = true;
            }
        }
        self.share_exclusions(&fresh, now).await;
        if let Some(first) = outcome.instances.first() {
            let message = format!(
                "Launching {} {} in {} for {} pods, node claim {}",
                first.instance_type,
                first.capacity_type,
                first.zone,
                claim.pods.len(),
                nodeclaim
            );
            // The decision's facts in one line, its price included (as planned: the
            // catalog this poll solved with).
            let price_per_hour = crate::provision::instance_price(
                &first.instance_type,
                &first.zone,
                first.capacity_type,
                Some(catalog),
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
                if let Some(p) = by_key.get(key) {
                    self.kube
                        .pod_event(&PodRef::of(p), "Launching", &message, EventType::Normal)
                        .await;
                }
            }
            // Counted in flight by the next polls even while DescribeInstances does not
            // list it yet (EC2 is eventually consistent).
            for i in &outcome.instances {
                self.unseen.record(i, request.tags.clone(), sent);
            }
            return ClaimOutcome::Launched {
                instances: outcome.instances,
                nodeclaim,
                sent,
            };
        }
        if outcome
            .errors
            .iter()
            .any(|e| e.class == ErrorClass::Throttled)
        {
            return ClaimOutcome::Throttled;
        }
        if let Some(e) = outcome
            .errors
            .iter()
            .find(|e| e.class == ErrorClass::Propagating)
        {
            forget_profile(self);
            return ClaimOutcome::RetryLater(format!(
                "CreateFleet launched nothing: {}: {}; will retry",
                e.code, e.message
            ));
        }
        // Every failure that excluded something sends the claim's pods to the next round,
        // whose solve no longer sees what just failed: the fallback (another type, zone
        // or capacity type) comes in the same poll.
        if excluded {
            let first = outcome.errors.first();
            tracing::warn!(
                nodeclaim,
                errors = outcome.errors.len(),
                code = first.map(|e| e.code.as_str()),
                message = first.map(|e| e.message.as_str()),
                "no offering of the claim launched; falling back"
            );
            return ClaimOutcome::NoCapacity;
        }
        let first_error = outcome
            .errors
            .first()
            .map(|e| format!("{}: {}", e.code, e.message))
            .unwrap_or_default();
        ClaimOutcome::Failed(format!("CreateFleet launched nothing: {first_error}"))
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
            Ok(owned) => self.unseen.merge(owned, now).iter().any(|i| {
                i.tags.get(NODECLAIM_TAG).map(String::as_str) == Some(nodeclaim)
                    && matches!(i.state, InstanceState::Pending | InstanceState::Running)
            }),
            // Unknown: as if an instance were on its way, so nothing launches twice.
            Err(_) => true,
        };
        match self
            .attempts
            .judge(nodeclaim, Answer::TokenMismatch { live_instance }, now)
        {
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

/// The error and what AWS said, on one line (an [`AwsError`]'s own text names only the call).
pub(super) fn describe(e: &AwsError) -> String {
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}
