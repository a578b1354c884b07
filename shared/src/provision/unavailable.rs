//! Launches that just failed in a way that will repeat for a while, kept out of plans so
//! the next solve picks another type, zone or capacity type instead of asking EC2 again
//! for what it lacks or refuses. Three minutes, as Karpenter's `UnavailableOfferingsTTL`;
//! how far one failure reaches is [`crate::aws::fleet_errors`]'s table.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::aws::{FleetError, Reach, quota_group, reach};
use crate::catalog::{CapacityType, Catalog};

pub const UNAVAILABLE_TTL: Duration = Duration::from_secs(180);

/// What a failure keeps out of plans.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Exclusion {
    Offering {
        instance_type: String,
        zone: String,
        capacity_type: CapacityType,
    },
    /// Every offering in the zone.
    Zone(String),
    /// Every offering of the capacity type.
    CapacityType(CapacityType),
    /// Every offering of the capacity type whose type is in this vCPU quota group.
    Quota {
        group: &'static str,
        capacity_type: CapacityType,
    },
}

impl Exclusion {
    fn covers(&self, instance_type: &str, zone: &str, capacity_type: CapacityType) -> bool {
        match self {
            Exclusion::Offering {
                instance_type: t,
                zone: z,
                capacity_type: c,
            } => t == instance_type && z == zone && *c == capacity_type,
            Exclusion::Zone(z) => z == zone,
            Exclusion::CapacityType(c) => *c == capacity_type,
            Exclusion::Quota {
                group,
                capacity_type: c,
            } => *c == capacity_type && *group == quota_group(instance_type),
        }
    }
}

/// What one error of a CreateFleet answer excludes, for a request of `capacity_type`.
/// An error that names no instance type or zone where its reach needs one excludes
/// nothing: excluding on a guess could hide offerings that work.
pub fn exclusion_for(error: &FleetError, capacity_type: CapacityType) -> Option<Exclusion> {
    let named = |s: &str| (!s.is_empty()).then(|| s.to_string());
    match reach(&error.code)? {
        Reach::Offering => Some(Exclusion::Offering {
            instance_type: named(&error.instance_type)?,
            zone: named(&error.zone)?,
            capacity_type,
        }),
        Reach::Zone => Some(Exclusion::Zone(named(&error.zone)?)),
        Reach::Spot => Some(Exclusion::CapacityType(CapacityType::Spot)),
        Reach::Quota => Some(Exclusion::Quota {
            group: quota_group(&named(&error.instance_type)?),
            capacity_type,
        }),
    }
}

#[derive(Debug, Default, Clone)]
pub struct UnavailableOfferings {
    until: HashMap<Exclusion, SystemTime>,
}

impl UnavailableOfferings {
    pub fn mark(
        &mut self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        now: SystemTime,
    ) {
        self.exclude(
            Exclusion::Offering {
                instance_type: instance_type.to_string(),
                zone: zone.to_string(),
                capacity_type,
            },
            now,
        );
    }

    /// Keeps what `exclusion` covers out of plans for [`UNAVAILABLE_TTL`] from `now`.
    pub fn exclude(&mut self, exclusion: Exclusion, now: SystemTime) {
        self.until.insert(exclusion, now + UNAVAILABLE_TTL);
    }

    /// Keeps what `exclusion` covers out of plans until `until` (an exclusion another
    /// function shared), unless this process already keeps it out longer.
    pub fn exclude_until(&mut self, exclusion: Exclusion, until: SystemTime) {
        let t = self.until.entry(exclusion).or_insert(until);
        *t = (*t).max(until);
    }

    pub fn is_unavailable(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        now: SystemTime,
    ) -> bool {
        self.until
            .iter()
            .any(|(x, until)| now < *until && x.covers(instance_type, zone, capacity_type))
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
    use crate::aws::ErrorClass;

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

    fn error(code: &str, instance_type: &str, zone: &str) -> FleetError {
        FleetError {
            instance_type: instance_type.into(),
            zone: zone.into(),
            code: code.into(),
            message: String::new(),
            class: ErrorClass::Other,
        }
    }

    /// (code of a failed c6i.large spot launch in us-east-1a, offering asked about, whether
    /// it is excluded afterwards).
    #[test]
    fn each_fleet_error_excludes_its_own_scope_and_nothing_more() {
        use CapacityType::{OnDemand, Spot};
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let cases: &[(&str, &str, &str, CapacityType, bool)] = &[
            // The offering: another zone, type or capacity type still launches.
            (
                "InsufficientInstanceCapacity",
                "c6i.large",
                "us-east-1a",
                Spot,
                true,
            ),
            (
                "InsufficientInstanceCapacity",
                "c6i.large",
                "us-east-1a",
                OnDemand,
                false,
            ),
            (
                "InsufficientInstanceCapacity",
                "c6i.large",
                "us-east-1b",
                Spot,
                false,
            ),
            ("Unsupported", "c6i.large", "us-east-1a", Spot, true),
            ("Unsupported", "m6i.large", "us-east-1a", Spot, false),
            (
                "InvalidParameterCombination",
                "c6i.large",
                "us-east-1a",
                Spot,
                true,
            ),
            (
                "InvalidParameterCombination",
                "c6i.large",
                "us-east-1a",
                OnDemand,
                false,
            ),
            ("SpotMaxPriceTooLow", "c6i.large", "us-east-1a", Spot, true),
            (
                "SpotMaxPriceTooLow",
                "c6i.large",
                "us-east-1a",
                OnDemand,
                false,
            ),
            // No spot service-linked role: spot everywhere, on-demand still launches.
            (
                "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
                "m5.xlarge",
                "us-east-1b",
                Spot,
                true,
            ),
            (
                "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
                "c6i.large",
                "us-east-1a",
                OnDemand,
                false,
            ),
            // A vCPU quota: the capacity type within the quota group, in every zone.
            (
                "MaxSpotInstanceCountExceeded",
                "m5.xlarge",
                "us-east-1b",
                Spot,
                true,
            ),
            (
                "MaxSpotInstanceCountExceeded",
                "g5.xlarge",
                "us-east-1a",
                Spot,
                false,
            ),
            (
                "MaxSpotInstanceCountExceeded",
                "c6i.large",
                "us-east-1a",
                OnDemand,
                false,
            ),
            ("VcpuLimitExceeded", "r5.large", "us-east-1b", Spot, true),
            (
                "VcpuLimitExceeded",
                "p4d.24xlarge",
                "us-east-1a",
                Spot,
                false,
            ),
            // A subnet out of addresses: its zone, for every type and capacity type.
            (
                "InsufficientFreeAddressesInSubnet",
                "m5.xlarge",
                "us-east-1a",
                OnDemand,
                true,
            ),
            (
                "InsufficientFreeAddressesInSubnet",
                "c6i.large",
                "us-east-1b",
                Spot,
                false,
            ),
            // Nothing that says anything about other launches excludes anything.
            (
                "RequestLimitExceeded",
                "c6i.large",
                "us-east-1a",
                Spot,
                false,
            ),
            (
                "InvalidParameterValue",
                "c6i.large",
                "us-east-1a",
                Spot,
                false,
            ),
        ];
        for &(code, ty, zone, ct, want) in cases {
            let mut u = UnavailableOfferings::default();
            if let Some(x) = exclusion_for(&error(code, "c6i.large", "us-east-1a"), Spot) {
                u.exclude(x, t0);
            }
            assert_eq!(
                u.is_unavailable(ty, zone, ct, t0),
                want,
                "{code}: {ty} {zone} {ct}"
            );
            assert!(
                !u.is_unavailable(ty, zone, ct, t0 + UNAVAILABLE_TTL),
                "{code}: {ty} {zone} {ct} comes back after {UNAVAILABLE_TTL:?}"
            );
        }
    }

    #[test]
    fn an_offering_error_that_names_no_offering_excludes_nothing() {
        let unnamed = error("InsufficientInstanceCapacity", "", "");
        assert_eq!(exclusion_for(&unnamed, CapacityType::Spot), None);
        let no_zone = error("InsufficientFreeAddressesInSubnet", "c6i.large", "");
        assert_eq!(exclusion_for(&no_zone, CapacityType::Spot), None);
        // Spot-wide needs neither.
        let slr = error("AuthFailure.ServiceLinkedRoleCreationNotPermitted", "", "");
        assert_eq!(
            exclusion_for(&slr, CapacityType::Spot),
            Some(Exclusion::CapacityType(CapacityType::Spot))
        );
    }
}
