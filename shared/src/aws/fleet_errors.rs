//! How far a CreateFleet error reaches: which launches it says will fail the same way for
//! a while, so the next solve falls back (another type or zone, the other capacity type)
//! instead of asking EC2 the same question again.
//!
//! The codes are EC2's (API reference, "Error codes"; CreateFleet `instant` fleets return
//! them per override in the answer's `errorSet`). The reaches follow
//! karpenter-provider-aws `pkg/providers/instance/instance.go`
//! (`updateUnavailableOfferingsCache`: unfulfillable capacity marks the offering, a missing
//! spot service-linked role marks spot everywhere, a subnet out of addresses marks its
//! zone) and EC2's vCPU quotas, which count per capacity type and per group of families
//! (Service Quotas: "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
//! "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", and one per other
//! group).

/// What one failed override says about other launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// This type in this zone with this capacity type (no capacity, or EC2 does not offer
    /// or accept this combination).
    Offering,
    /// Every type and capacity type in this zone: its subnet has no free address.
    Zone,
    /// Spot, every type in every zone: the account cannot launch spot at all (the
    /// `AWSServiceRoleForEC2Spot` service-linked role is missing and may not be created).
    Spot,
    /// This capacity type for every type in the same vCPU quota group.
    Quota,
}

/// Codes whose answer depends on the (type, zone, capacity type) asked for.
const OFFERING: &[&str] = &[
    "InsufficientInstanceCapacity",
    "UnfulfillableCapacity",
    "Unsupported",
    "ReservationCapacityExceeded",
    "InsufficientCapacityOnHost",
    "InsufficientHostCapacity",
    // The type does not go with the AMI, the zone or the launch template (architecture,
    // ENA, boot mode): another type may.
    "InvalidParameterCombination",
    // The spot price of this pool is above the maximum price (by default the on-demand
    // price): other pools or on-demand may be cheaper.
    "SpotMaxPriceTooLow",
];

/// Account quotas on running vCPUs, counted per capacity type and family group.
const QUOTA: &[&str] = &[
    "VcpuLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "InstanceLimitExceeded",
];

const SPOT: &[&str] = &["AuthFailure.ServiceLinkedRoleCreationNotPermitted"];

const ZONE: &[&str] = &["InsufficientFreeAddressesInSubnet"];

/// The reach of a CreateFleet error code; `None` for codes that say nothing about other
/// launches (throttling, a wrong request, an instance profile not visible yet).
pub fn reach(code: &str) -> Option<Reach> {
    let is = |table: &[&str]| table.contains(&code);
    if is(OFFERING) {
        Some(Reach::Offering)
    } else if is(QUOTA) {
        Some(Reach::Quota)
    } else if is(SPOT) {
        Some(Reach::Spot)
    } else if is(ZONE) {
        Some(Reach::Zone)
    } else {
        None
    }
}

/// The vCPU quota group of an instance type (`c6i.large` -> `standard`): the families
/// EC2 counts under one quota. Families not in a named group are standard, as A, C, D, H,
/// I, M, R, T and Z are.
pub fn quota_group(instance_type: &str) -> &'static str {
    let family = instance_type
        .split('.')
        .next()
        .unwrap_or(instance_type)
        .to_ascii_lowercase();
    const GROUPS: &[(&str, &str)] = &[
        ("mac", "mac"),
        ("u-", "high-memory"),
        ("inf", "inf"),
        ("trn", "trn"),
        ("dl", "dl"),
        ("hpc", "hpc"),
        ("vt", "g-vt"),
        ("g", "g-vt"),
        ("p", "p"),
        ("x", "x"),
        ("f", "f"),
    ];
    GROUPS
        .iter()
        .find(|(prefix, _)| family.starts_with(prefix))
        .map_or("standard", |(_, group)| group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_create_fleet_error_code_reaches_as_far_as_what_it_says() {
        let cases = [
            ("InsufficientInstanceCapacity", Some(Reach::Offering)),
            ("Unsupported", Some(Reach::Offering)),
            ("InvalidParameterCombination", Some(Reach::Offering)),
            ("SpotMaxPriceTooLow", Some(Reach::Offering)),
            ("UnfulfillableCapacity", Some(Reach::Offering)),
            ("VcpuLimitExceeded", Some(Reach::Quota)),
            ("MaxSpotInstanceCountExceeded", Some(Reach::Quota)),
            (
                "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
                Some(Reach::Spot),
            ),
            ("InsufficientFreeAddressesInSubnet", Some(Reach::Zone)),
            // A plain AuthFailure is our credentials, not the offering.
            ("AuthFailure", None),
            ("RequestLimitExceeded", None),
            ("InvalidParameterValue", None),
            ("InvalidLaunchTemplateId.NotFound", None),
        ];
        for (code, want) in cases {
            assert_eq!(reach(code), want, "{code}");
        }
    }

    #[test]
    fn families_share_a_quota_only_within_their_group() {
        let cases = [
            ("c6i.large", "standard"),
            ("m5.xlarge", "standard"),
            ("t3.micro", "standard"),
            ("d3.xlarge", "standard"),
            ("i4i.large", "standard"),
            ("r7g.medium", "standard"),
            ("z1d.large", "standard"),
            ("g5.xlarge", "g-vt"),
            ("vt1.3xlarge", "g-vt"),
            ("p4d.24xlarge", "p"),
            ("inf2.xlarge", "inf"),
            ("trn1.2xlarge", "trn"),
            ("dl1.24xlarge", "dl"),
            ("hpc7g.4xlarge", "hpc"),
            ("x2iedn.xlarge", "x"),
            ("f1.2xlarge", "f"),
            ("u-6tb1.metal", "high-memory"),
            ("mac2.metal", "mac"),
        ];
        for (ty, want) in cases {
            assert_eq!(quota_group(ty), want, "{ty}");
        }
    }
}
