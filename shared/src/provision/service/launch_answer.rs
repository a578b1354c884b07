//! What a sent claim comes to: [`super::super::launch_judgement::judge`]'s verdict applied
//! (the attempt, exclusions, the instance profile, this container's memory of the launch,
//! the pods' Events), and the two cases the verdict leaves to EC2's word (the earlier
//! launch's instances dead or alive, a token reused).

use std::time::SystemTime;

use super::super::attempts::{Answer, Next};
use super::super::launch::NODECLAIM_TAG;
use super::super::launch_judgement::{Judgement, Verdict, describe};
use super::super::node_template::ProfileChoice;
use super::super::unavailable::{Exclusion, UNAVAILABLE_TTL};
use super::launch_claim::Prepared;
use super::launch_context::LaunchContext;
use super::{ClaimOutcome, Provisioner};
use crate::aws::{AwsError, Cloud, FleetOutcome, InstanceInventory, InstanceState};
use crate::kube::{Cluster, EventType, PodRef};
use crate::scheduling::PlannedClaim;

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// Applies `judgement` of `answered`: the attempt, exclusions, the profile, and for a
    /// launch its events and this container's memory of it.
    pub(super) async fn apply(
        &mut self,
        claim: &PlannedClaim,
        ctx: &mut LaunchContext<'_>,
        prepared: Prepared,
        answered: Result<FleetOutcome, AwsError>,
        sent: SystemTime,
        judgement: Judgement,
    ) -> ClaimOutcome {
        let Prepared {
            nodeclaim,
            profile_choice,
            request,
            reservation,
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
            if let Some(id) = &reservation {
                // Until EC2 is asked again, the reservation has that much less room.
                ctx.catalog.launched_into(id);
                self.discovered.launched_into(id);
            }
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
        let relaxed = if claim.min_values_relaxed {
            format!(
                " (minValues relaxed to what fits: {})",
                relaxed_min_values(claim)
            )
        } else {
            String::new()
        };
        let message = format!(
            "Launching {} {} in {} for {} pods, node claim {}{relaxed}",
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
            min_values_relaxed = claim.min_values_relaxed,
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

/// Each `minValues` the claim launches with, as `key=n`.
fn relaxed_min_values(claim: &PlannedClaim) -> String {
    claim
        .requirements
        .iter()
        .filter_map(|(k, r)| r.min_values.map(|m| format!("{k}={m}")))
        .collect::<Vec<_>>()
        .join(", ")
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
    pub(super) async fn all_dead(&self, instances: &[crate::aws::LaunchedInstance]) -> bool {
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
    pub(super) async fn token_reused(
        &mut self,
        nodeclaim: &str,
        e: &AwsError,
        now: SystemTime,
    ) -> ClaimOutcome {
        // Some(None): unknown, as if an instance were on its way, so nothing launches twice.
        let live: Option<Option<String>> = match self.aws.list_owned().await {
            // A launch of this container not listed yet is live (EC2 is eventually
            // consistent): launching again would make a second instance.
            Ok(owned) => self
                .fleet
                .on_its_way(owned, now)
                .into_iter()
                .find(|i| {
                    i.tags.get(NODECLAIM_TAG).map(String::as_str) == Some(nodeclaim)
                        && matches!(i.state, InstanceState::Pending | InstanceState::Running)
                })
                .map(|i| Some(i.id)),
            Err(_) => Some(None),
        };
        let live_instance = live.is_some();
        match (self.fleet.attempts_mut()).judge(
            nodeclaim,
            Answer::TokenMismatch { live_instance },
            now,
        ) {
            Next::Stands => ClaimOutcome::AlreadyLaunched {
                instance: live.flatten(),
            },
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
