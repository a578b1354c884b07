//! What EC2's answer to one CreateFleet means, as a value: whether instances came, whether
//! the attempt stands or the next one (a new ClientToken) is due, which offerings to keep
//! out of plans for a while, and what the claim's pods are told. The executor
//! (`service::launch_claim`) sends the request and applies the judgement; everything it
//! decides is here, tested by a table.
//!
//! The ClientToken (see [`super::attempts`]) moves on only on an answer EC2 would repeat:
//! nothing launched, or every instance dead. An error from the call itself (throttled past
//! the SDK's retries, a timeout, a template collected meanwhile) says nothing of whether
//! EC2 acted, so the next try is a retry of the same attempt, with the same token: EC2
//! answers it with the first launch if there was one.

use super::attempts::Answer;
use super::unavailable::{Exclusion, exclusion_for};
use crate::aws::{AwsError, ErrorClass, FleetOutcome};
use crate::catalog::CapacityType;

/// What came of a CreateFleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Instances are on their way.
    Launched,
    /// EC2 answered with an earlier attempt's instances, all dead (a spot instance
    /// reclaimed before it joined): the next attempt may be sent at once.
    Died,
    /// The token was used with other parameters: whether a live instance carries the
    /// claim decides (see [`Answer::TokenMismatch`]).
    TokenReused,
    /// Nothing launched, and what failed is kept out of plans: the claim's pods go to the
    /// next round.
    NoCapacity,
    /// Throttled: launching stops for this poll.
    Throttled,
    /// Nothing launched for a reason that passes by itself: the next poll tries again.
    RetryLater(String),
    Failed(String),
}

/// The judgement of one answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    /// The answer the claim's attempt is judged by; `None` when it says nothing of what
    /// EC2 did (the next try is the same attempt).
    pub attempt: Option<Answer>,
    /// Offerings, zones or capacity types to keep out of plans for a while.
    pub exclusions: Vec<Exclusion>,
    /// The instance profile may be one EC2 cannot see yet, or one deleted since it was
    /// cached: ensure it again on the next launch.
    pub forget_profile: bool,
}

impl Judgement {
    fn of(verdict: Verdict) -> Self {
        Judgement {
            verdict,
            attempt: None,
            exclusions: vec![],
            forget_profile: false,
        }
    }
}

/// Judges `answered`, the answer to a CreateFleet for `capacity_type`. `all_dead`: when
/// instances came, whether EC2 lists every one of them as terminated or shutting down
/// (only positive evidence counts).
pub fn judge(
    answered: &Result<FleetOutcome, AwsError>,
    all_dead: bool,
    capacity_type: CapacityType,
) -> Judgement {
    match answered {
        Ok(outcome) => judge_outcome(outcome, all_dead, capacity_type),
        Err(e) => judge_error(e),
    }
}

fn judge_error(e: &AwsError) -> Judgement {
    match e.class() {
        ErrorClass::TokenReused => Judgement::of(Verdict::TokenReused),
        ErrorClass::Throttled => Judgement::of(Verdict::Throttled),
        ErrorClass::Propagating => Judgement {
            forget_profile: true,
            ..Judgement::of(Verdict::RetryLater(format!(
                "CreateFleet: {}; will retry",
                describe(e)
            )))
        },
        // The template was collected between ensure and CreateFleet (see `template_gc`):
        // the next poll's ensure re-creates it.
        ErrorClass::NotFound => Judgement::of(Verdict::RetryLater(format!(
            "CreateFleet: {}; will retry",
            describe(e)
        ))),
        _ => Judgement::of(Verdict::Failed(format!("CreateFleet: {e}"))),
    }
}

fn judge_outcome(outcome: &FleetOutcome, all_dead: bool, capacity_type: CapacityType) -> Judgement {
    if !outcome.instances.is_empty() && all_dead {
        return Judgement {
            attempt: Some(Answer::Instances { all_dead: true }),
            ..Judgement::of(Verdict::Died)
        };
    }
    let mut exclusions: Vec<Exclusion> = Vec::new();
    for x in outcome
        .errors
        .iter()
        .filter_map(|e| exclusion_for(e, capacity_type))
    {
        if !exclusions.contains(&x) {
            exclusions.push(x);
        }
    }
    let attempt = Some(if outcome.instances.is_empty() {
        Answer::NothingLaunched
    } else {
        Answer::Instances { all_dead: false }
    });
    let has = |class| outcome.errors.iter().find(|e| e.class == class);
    let (verdict, forget_profile) = if !outcome.instances.is_empty() {
        (Verdict::Launched, false)
    } else if has(ErrorClass::Throttled).is_some() {
        (Verdict::Throttled, false)
    } else if let Some(e) = has(ErrorClass::Propagating) {
        let why = format!(
            "CreateFleet launched nothing: {}: {}; will retry",
            e.code, e.message
        );
        (Verdict::RetryLater(why), true)
    } else if !exclusions.is_empty() {
        // The fallback (another type, zone or capacity type) comes in the same poll.
        (Verdict::NoCapacity, false)
    } else {
        let first = outcome
            .errors
            .first()
            .map(|e| format!("{}: {}", e.code, e.message))
            .unwrap_or_default();
        (
            Verdict::Failed(format!("CreateFleet launched nothing: {first}")),
            false,
        )
    };
    Judgement {
        verdict,
        attempt,
        exclusions,
        forget_profile,
    }
}

/// The error and what AWS said, on one line (an [`AwsError`]'s own text names only the call).
pub fn describe(e: &AwsError) -> String {
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests;
