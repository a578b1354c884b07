//! Offerings that just failed with insufficient capacity, kept out of plans for a while so
//! the next solve picks another type or zone instead of asking EC2 again for what it lacks.
//! Three minutes, as Karpenter's `UnavailableOfferingsTTL`.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::catalog::{CapacityType, Catalog};

pub const UNAVAILABLE_TTL: Duration = Duration::from_secs(180);

#[derive(Debug, Default, Clone)]
pub struct UnavailableOfferings {
    until: HashMap<(String, String, CapacityType), SystemTime>,
}

impl UnavailableOfferings {
    pub fn mark(
        &mut self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        now: SystemTime,
    ) {
        self.until.insert(
            (instance_type.to_string(), zone.to_string(), capacity_type),
            now + UNAVAILABLE_TTL,
        );
    }

    pub fn is_unavailable(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        now: SystemTime,
    ) -> bool {
        self.until
            .get(&(instance_type.to_string(), zone.to_string(), capacity_type))
            .is_some_and(|until| now < *until)
    }

    /// Marks matching offerings unavailable in `catalog` and forgets expired entries.
    pub fn apply(&mut self, catalog: &mut Catalog, now: SystemTime) {
        self.until.retain(|_, until| now < *until);
        if self.until.is_empty() {
            return;
        }
        for entry in &mut catalog.entries {
            for o in &mut entry.offerings {
                if self.is_unavailable(&entry.instance_type.name, &o.zone, o.capacity_type, now) {
                    o.available = false;
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.until.len()
    }

    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offering_is_unavailable_for_three_minutes_then_comes_back() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut u = UnavailableOfferings::default();
        u.mark("c6i.large", "us-east-1a", CapacityType::Spot, t0);
        let cases = [
            ("c6i.large", "us-east-1a", CapacityType::Spot, 0, true),
            ("c6i.large", "us-east-1a", CapacityType::Spot, 179, true),
            ("c6i.large", "us-east-1a", CapacityType::Spot, 180, false),
            ("c6i.large", "us-east-1a", CapacityType::OnDemand, 0, false),
            ("c6i.large", "us-east-1b", CapacityType::Spot, 0, false),
            ("m6i.large", "us-east-1a", CapacityType::Spot, 0, false),
        ];
        for (ty, zone, ct, after, want) in cases {
            assert_eq!(
                u.is_unavailable(ty, zone, ct, t0 + Duration::from_secs(after)),
                want,
                "{ty} {zone} {ct} +{after}s"
            );
        }
    }
}
