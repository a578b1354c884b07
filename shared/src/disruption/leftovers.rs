//! Leftover instance profiles: those nodewright created for an EC2NodeClass `role` (see
//! `aws::instance_profiles`) that no class names any more and no instance runs with. The
//! decision is this pure function; the sweeper lists, re-checks and deletes.
//!
//! Karpenter deletes a class's profile from the class's finalizer, once its instances are
//! gone. nodewright installs nothing in the cluster (no finalizer), and names profiles per
//! role rather than per class, so it collects instead: a profile is kept while any class
//! names its role, while any instance runs with it, and for an hour after it was created.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;

use crate::aws::{OwnInstanceProfile, instance_profile_name, role_name};

/// How long a new profile is kept whatever the classes say: a provisioner may have just
/// created it for a class this sweep's listing does not show yet (caches, a class applied
/// a moment ago), and IAM itself is eventually consistent.
pub const PROFILE_GRACE: Duration = Duration::from_secs(60 * 60);

/// A profile to delete, with the roles to take out of it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusedProfile {
    pub name: String,
    pub roles: Vec<String>,
}

/// The profiles of `cluster` that nothing needs: no class's role (`named_roles`, as the
/// classes spell them: a name, a path or an ARN) is in them or maps to their name, no
/// instance in the region runs with them (`in_use`, profile names), and they are older than
/// [`PROFILE_GRACE`]. A profile without a creation date is kept.
pub fn unused_profiles(
    cluster: &str,
    profiles: &[OwnInstanceProfile],
    named_roles: &BTreeSet<String>,
    in_use: &BTreeSet<String>,
    now: Timestamp,
) -> Vec<UnusedProfile> {
    let roles: BTreeSet<&str> = named_roles
        .iter()
        .map(|r| role_name(r))
        .filter(|r| !r.is_empty())
        .collect();
    let names: BTreeSet<String> = roles
        .iter()
        .map(|r| instance_profile_name(cluster, r))
        .collect();
    profiles
        .iter()
        .filter(|p| !in_use.contains(&p.name) && !names.contains(&p.name))
        .filter(|p| !p.roles.iter().any(|r| roles.contains(r.as_str())))
        .filter(|p| {
            p.created.is_some_and(|at| {
                now.duration_since(at).unsigned_abs() >= PROFILE_GRACE && now > at
            })
        })
        .map(|p| UnusedProfile {
            name: p.name.clone(),
            roles: p.roles.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "demo";

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn profile(role: Option<&str>, created: Option<&str>) -> OwnInstanceProfile {
        OwnInstanceProfile {
            name: instance_profile_name(CLUSTER, role.unwrap_or("gone-role")),
            roles: role.map(|r| vec![r.to_string()]).unwrap_or_default(),
            created: created.map(at),
        }
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// (why, the profile, roles classes name, profiles instances run with, collected?)
    type Case<'a> = (
        &'a str,
        OwnInstanceProfile,
        &'a [&'a str],
        &'a [&'a str],
        bool,
    );

    #[test]
    fn a_profile_is_collected_only_when_nothing_names_uses_or_just_made_it() {
        let now = at("2026-11-24T12:00:00Z");
        let old = Some("2026-11-24T10:00:00Z");
        let new = Some("2026-11-24T11:30:00Z");
        let nodes = instance_profile_name(CLUSTER, "nodes");
        let cases: [Case; 9] = [
            (
                "no class names its role, nothing runs with it, old",
                profile(Some("nodes"), old),
                &[],
                &[],
                true,
            ),
            (
                "a class names its role",
                profile(Some("nodes"), old),
                &["nodes"],
                &[],
                false,
            ),
            (
                "a class names its role by ARN",
                profile(Some("nodes"), old),
                &["arn:aws:iam::1:role/team/nodes"],
                &[],
                false,
            ),
            (
                "an instance runs with it",
                profile(Some("nodes"), old),
                &[],
                &[nodes.as_str()],
                false,
            ),
            (
                "younger than the grace",
                profile(Some("nodes"), new),
                &[],
                &[],
                false,
            ),
            (
                "no creation date",
                profile(Some("nodes"), None),
                &[],
                &[],
                false,
            ),
            (
                "created in the future (clock skew)",
                profile(Some("nodes"), Some("2026-11-24T13:00:00Z")),
                &[],
                &[],
                false,
            ),
            (
                "roleless, named for a role a class names (its role not added yet)",
                OwnInstanceProfile {
                    name: nodes.clone(),
                    roles: vec![],
                    created: old.map(at),
                },
                &["nodes"],
                &[],
                false,
            ),
            (
                "roleless, named for no class's role",
                profile(None, old),
                &["nodes"],
                &[],
                true,
            ),
        ];
        for (why, p, named, in_use, collected) in cases {
            let got = unused_profiles(
                CLUSTER,
                std::slice::from_ref(&p),
                &set(named),
                &set(in_use),
                now,
            );
            assert_eq!(!got.is_empty(), collected, "{why}");
            if collected {
                assert_eq!(
                    got,
                    vec![UnusedProfile {
                        name: p.name.clone(),
                        roles: p.roles.clone()
                    }],
                    "{why}"
                );
            }
        }
    }

    #[test]
    fn only_the_unused_ones_of_several_are_collected() {
        let now = at("2026-11-24T12:00:00Z");
        let old = Some("2026-11-24T10:00:00Z");
        let profiles = [
            profile(Some("a"), old),
            profile(Some("b"), old),
            profile(Some("c"), old),
        ];
        let got = unused_profiles(CLUSTER, &profiles, &set(&["b"]), &set(&[]), now);
        let names: Vec<_> = got.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(
            names,
            [profiles[0].name.as_str(), profiles[2].name.as_str()]
        );
    }
}
