//! What a claim's launch comes to, for a poll and a replacement alike
//! ([`Provisioner::settle`]), and a poll's rounds of solve and launch: the pods of claims
//! that found no capacity are solved again, without the offerings that just failed, up to
//! [`MAX_LAUNCH_ROUNDS`] times.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::time::Duration;

use super::super::next_round::{launched_in_flight, next_round};
use super::launch_context::LaunchContext;
use super::{ClaimOutcome, MAX_LAUNCH_ROUNDS, Provisioner};
use crate::aws::Cloud;
use crate::ids::PodUid;
use crate::kube::{Cluster, InFlight};
use crate::scheduling::{PlannedClaim, Snapshot, solve_within_room};
use crate::telemetry::{self, LaunchFailure};

/// What the claims launched so far came to.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) claims: usize,
    pub(super) nominated_pods: usize,
    pub(super) launched_instances: Vec<String>,
    pub(super) failed_claims: usize,
    /// CreateFleet was throttled: launching stopped.
    pub(super) throttled: bool,
    /// The turn said no (its gate, or its time): launching stopped, for this reason.
    pub(super) withheld: Option<String>,
    /// Per launched claim: from the first time one of its pods was seen pending to the
    /// moment CreateFleet was sent.
    pub(super) pending_to_fleet: Vec<Duration>,
    /// (pod key, why) for pods no launch is coming for.
    pub(super) unschedulable: Vec<(String, String)>,
    /// This round's: the pods of claims that found no capacity (the next round's to plan)…
    no_capacity: HashSet<String>,
    /// …and the capacity it launched (in flight for the next round's solve).
    launched_now: Vec<InFlight>,
}

impl Tally {
    fn stopped(&self) -> bool {
        self.throttled || self.withheld.is_some()
    }
}

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// Solves `snapshot` and launches the plan's claims; claims that found no capacity
    /// are solved again (see the module's text). Stops at a throttled CreateFleet or a
    /// withheld launch.
    pub(super) async fn launch_rounds(
        &mut self,
        mut snapshot: Snapshot,
        ctx: &mut LaunchContext<'_>,
    ) -> Tally {
        let mut tally = Tally::default();
        for round in 0..MAX_LAUNCH_ROUNDS {
            let plan = solve_within_room(&snapshot, &ctx.catalog, &ctx.pools, &ctx.classes);
            if round == 0 && !plan.overlay_conflicts.is_empty() {
                tracing::warn!(overlays = ?plan.overlay_conflicts, "NodeOverlays in conflict with another of their weight over the same offerings or resources are not applied");
            }
            tally.claims += plan.node_claims.len();
            tally.nominated_pods += plan.nominations.iter().map(|n| n.pods.len()).sum::<usize>();
            for key in plan
                .node_claims
                .iter()
                .flat_map(|c| &c.pods)
                .chain(plan.nominations.iter().flat_map(|n| &n.pods))
            {
                if let Some(p) = ctx.by_key.get(key) {
                    self.handled.insert(PodUid::of(p));
                }
            }
            tally.unschedulable.extend(
                plan.unschedulable
                    .iter()
                    .map(|u| (u.pod.clone(), u.reason.clone())),
            );
            for claim in &plan.node_claims {
                let outcome = self.launch(claim, ctx).await;
                if self.settle(claim, outcome, ctx, &mut tally).is_break() {
                    break;
                }
            }
            let retry = std::mem::take(&mut tally.no_capacity);
            let launched_now = std::mem::take(&mut tally.launched_now);
            if tally.stopped() || retry.is_empty() {
                break;
            }
            if round + 1 == MAX_LAUNCH_ROUNDS {
                let why = format!(
                    "no capacity for any offering after {MAX_LAUNCH_ROUNDS} attempts; will retry"
                );
                tally
                    .unschedulable
                    .extend(retry.into_iter().map(|p| (p, why.clone())));
                break;
            }
            self.unavailable.apply(&mut ctx.catalog, ctx.now);
            snapshot = next_round(snapshot, &retry, &launched_now);
        }
        tally
    }

    /// Counts `outcome` of `claim` into `tally`; `Break` when launching should stop
    /// (throttled, or withheld).
    pub(super) fn settle(
        &mut self,
        claim: &PlannedClaim,
        outcome: ClaimOutcome,
        ctx: &mut LaunchContext<'_>,
        tally: &mut Tally,
    ) -> ControlFlow<()> {
        let replacing = ctx.replacing.is_some();
        // A replacement runs outside any Lease turn, with no gate; were one set, its
        // refusal is a failure the follow-up retries.
        let outcome = match outcome {
            ClaimOutcome::Withheld(why) if replacing => ClaimOutcome::Failed(why),
            outcome => outcome,
        };
        let mut failed = |reason: LaunchFailure| {
            telemetry::launch_failed(reason);
            // A subnet out of addresses, groups or a profile gone: look the class up
            // afresh, in this poll and the next.
            self.discovered.forget_class(&claim.node_class);
            ctx.forget_class(&claim.node_class);
            tally.failed_claims += 1;
        };
        match outcome {
            ClaimOutcome::Launched {
                instances,
                nodeclaim,
                sent,
            } => {
                let first = claim
                    .pods
                    .iter()
                    .filter_map(|k| ctx.by_key.get(k))
                    .filter_map(|p| self.first_seen.get(&PodUid::of(p)))
                    .min()
                    .copied()
                    .unwrap_or(ctx.now);
                tally
                    .pending_to_fleet
                    .push(sent.duration_since(first).unwrap_or_default());
                for i in &instances {
                    telemetry::launched(&i.zone, i.capacity_type);
                    tally.launched_instances.push(i.id.clone());
                }
                tally.launched_now.extend(launched_in_flight(
                    claim,
                    &instances,
                    &nodeclaim,
                    &ctx.catalog,
                ));
            }
            // An earlier attempt that EC2 says already launched: that instance counts in
            // flight from the next poll on. A replacement's caller waits for it, so it must
            // know it: one it cannot name is a replacement it cannot wait for.
            ClaimOutcome::AlreadyLaunched { instance } => match instance {
                Some(id) if replacing => tally.launched_instances.push(id),
                None if replacing => tally.failed_claims += 1,
                _ => {}
            },
            ClaimOutcome::NoCapacity => {
                failed(LaunchFailure::NoCapacity);
                if replacing {
                    // A replacement solves once: no next round.
                    let why = "no capacity for any offering of the claim".to_string();
                    tally
                        .unschedulable
                        .extend(claim.pods.iter().map(|p| (p.clone(), why.clone())));
                } else {
                    tally.no_capacity.extend(claim.pods.iter().cloned());
                }
            }
            ClaimOutcome::Throttled => {
                telemetry::launch_failed(LaunchFailure::Throttled);
                tally.failed_claims += 1;
                tally.throttled = true;
                return ControlFlow::Break(());
            }
            // Not this invocation's to launch (any more): the holder of the Lease plans
            // these pods itself; no event, they are not unschedulable.
            ClaimOutcome::Withheld(why) => {
                tally.withheld = Some(why);
                return ControlFlow::Break(());
            }
            ClaimOutcome::RetryLater(why) => {
                failed(LaunchFailure::Transient);
                tally
                    .unschedulable
                    .extend(claim.pods.iter().map(|p| (p.clone(), why.clone())));
            }
            ClaimOutcome::Failed(why) => {
                failed(LaunchFailure::Error);
                tally
                    .unschedulable
                    .extend(claim.pods.iter().map(|p| (p.clone(), why.clone())));
            }
        }
        ControlFlow::Continue(())
    }
}
