//! The `nodewright.io/` annotations a NodePool may carry: nodewright's only extensions of
//! Karpenter's API. Each is read where it acts (the interruption function, the sweeper); this
//! list is what validation checks a NodePool's own `nodewright.io/` annotations against, so a
//! misspelt one is reported instead of silently doing nothing.

/// The domain of nodewright's own annotations, labels and tags.
pub const PREFIX: &str = "nodewright.io/";

/// What a rebalance recommendation does to the pool's nodes (`replace`, `cordon`, `ignore`).
pub const REBALANCE: &str = "nodewright.io/rebalance";
/// The IANA time zone of the pool's disruption budget schedules.
pub const BUDGET_TIME_ZONE: &str = "nodewright.io/budget-time-zone";
/// Capacity windows: a floor of nodes and free room kept during a schedule, or always.
pub const CAPACITY_WINDOWS: &str = "nodewright.io/capacity-windows";

/// Every `nodewright.io/` annotation nodewright reads on a NodePool.
pub const NODEPOOL_ANNOTATIONS: &[&str] = &[BUDGET_TIME_ZONE, CAPACITY_WINDOWS, REBALANCE];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_the_annotations_the_functions_read() {
        assert_eq!(REBALANCE, crate::interruption::REBALANCE_ANNOTATION);
        assert_eq!(BUDGET_TIME_ZONE, crate::disruption::TIME_ZONE_ANNOTATION);
        assert_eq!(
            CAPACITY_WINDOWS,
            crate::disruption::CAPACITY_WINDOWS_ANNOTATION
        );
    }
}
