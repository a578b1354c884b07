//! What happens to the cluster through the day, at fractions of its length (so a
//! simulated hour and a simulated day see the same incidents, in the same order).

/// One thing the world does to the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incident {
    /// One spot interruption warning for a busy spot node; AWS takes it two minutes later.
    SpotWarning,
    /// Ten warnings at once (as many spot nodes as there are, and the foreign instance).
    SpotWave,
    RebalanceRecommendation,
    /// An AWS Health scheduled change for an on-demand node.
    ScheduledChange,
    /// An instance stopped under a node, and its state-change event.
    InstanceStopping,
    /// The busiest spot instance type runs out of capacity (CreateFleet answers ICE).
    InsufficientCapacity,
    CapacityBack,
    /// The Kubernetes API answers 500s and 429s and times out.
    ApiFaults,
    ApiHealthy,
    /// EC2 throttles CreateFleet and DescribeInstances.
    Ec2Throttling,
    /// A function's environment killed mid-invocation.
    KillFunction,
    /// Two extra sweeper events at once: one runs, the other is throttled and retried.
    ThrottledInvocation,
    /// The on-demand pool's template edited: its nodes drift.
    PoolEdit,
    /// The spot pool's `expireAfter` shortened: its oldest nodes expire.
    ExpiryWave,
    /// Twenty batch pods at once, then gone.
    BurstStart,
    BurstEnd,
    /// A client outside nodewright deletes a do-not-disrupt pod with grace 0 past its
    /// PodDisruptionBudget (only when asked: the checker must catch it).
    Rogue,
}

/// The day's incidents, by fraction of its length.
pub fn timeline(rogue: bool) -> Vec<(f64, Incident)> {
    use Incident::*;
    let mut t = vec![
        (0.10, SpotWarning),
        (0.15, BurstStart),
        (0.20, RebalanceRecommendation),
        (0.25, ApiFaults),
        (0.28, ApiHealthy),
        (0.30, BurstEnd),
        (0.32, InsufficientCapacity),
        (0.36, Ec2Throttling),
        (0.40, SpotWave),
        (0.44, CapacityBack),
        (0.48, ScheduledChange),
        (0.55, InstanceStopping),
        (0.60, KillFunction),
        (0.62, ThrottledInvocation),
        (0.68, PoolEdit),
        (0.78, ExpiryWave),
    ];
    if rogue {
        t.push((0.90, Rogue));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_is_in_order_within_the_day_and_the_rogue_only_when_asked() {
        for rogue in [false, true] {
            let t = timeline(rogue);
            assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(t.iter().all(|(f, _)| (0.0..1.0).contains(f)));
            assert_eq!(t.iter().any(|(_, i)| *i == Incident::Rogue), rogue);
        }
    }
}
