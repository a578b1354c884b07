//! Whether the cluster's RBAC objects grant what `nodewright rbac` grants: an object that
//! exists but was written by an older release, or edited, can lack a rule a function now
//! needs, and that function then fails on a 403 in the middle of its work; a binding of
//! another group (RBAC applied with another `--group-prefix` than the access entries
//! name) grants the function nothing.

use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};

/// Whether `subjects` name the Kubernetes group `group` (RBAC's API group for a Group
/// subject is `rbac.authorization.k8s.io`, or left out).
pub fn binds_group(subjects: &[Subject], group: &str) -> bool {
    subjects.iter().any(|s| {
        s.kind == "Group"
            && s.name == group
            && s.api_group
                .as_deref()
                .is_none_or(|g| g.is_empty() || g == "rbac.authorization.k8s.io")
    })
}

/// Each grant of `wanted` that no rule of `have` covers, as `verb resource[/name] (group)`.
pub fn ungranted(wanted: &[PolicyRule], have: &[PolicyRule]) -> Vec<String> {
    let mut missing = Vec::new();
    for rule in wanted {
        let names: Vec<Option<&str>> = match rule.resource_names.as_deref() {
            Some(names) if !names.is_empty() => names.iter().map(|n| Some(n.as_str())).collect(),
            _ => vec![None],
        };
        for group in rule.api_groups.as_deref().unwrap_or_default() {
            for resource in rule.resources.as_deref().unwrap_or_default() {
                for verb in &rule.verbs {
                    for name in &names {
                        let grant = Grant {
                            group,
                            resource,
                            verb,
                            name: *name,
                        };
                        if !have.iter().any(|h| grant.covered_by(h)) {
                            missing.push(grant.to_string());
                        }
                    }
                }
            }
        }
    }
    missing
}

/// One verb on one resource (one name of it, or every name).
struct Grant<'a> {
    group: &'a str,
    resource: &'a str,
    verb: &'a str,
    name: Option<&'a str>,
}

impl Grant<'_> {
    /// RBAC's own reading: `*` matches anything, `*/sub` a subresource of any resource; a
    /// rule naming resources grants only those names, one naming none grants every name.
    fn covered_by(&self, rule: &PolicyRule) -> bool {
        let listed = |list: &Option<Vec<String>>, matches: &dyn Fn(&str) -> bool| {
            list.as_deref()
                .unwrap_or_default()
                .iter()
                .any(|v| v == "*" || matches(v))
        };
        let resource = |v: &str| {
            v == self.resource
                || v.strip_prefix("*/")
                    .is_some_and(|sub| self.resource.split_once('/').map(|(_, s)| s) == Some(sub))
        };
        let names = rule.resource_names.as_deref().unwrap_or_default();
        listed(&rule.api_groups, &|v| v == self.group)
            && listed(&rule.resources, &resource)
            && rule.verbs.iter().any(|v| v == "*" || v == self.verb)
            && (names.is_empty() || self.name.is_some_and(|n| names.iter().any(|m| m == n)))
    }
}

impl std::fmt::Display for Grant<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        write!(f, "{} {}", self.verb, self.resource)?;
        if let Some(name) = self.name {
            write!(f, "/{name}")?;
        }
        write!(f, " ({group})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str], names: &[&str]) -> PolicyRule {
        let list = |l: &[&str]| Some(l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        PolicyRule {
            api_groups: list(groups),
            resources: list(resources),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            resource_names: (!names.is_empty()).then(|| list(names)).flatten(),
            non_resource_urls: None,
        }
    }

    #[test]
    fn a_grant_is_covered_by_a_rule_as_rbac_reads_it() {
        let eviction = rule(&[""], &["pods/eviction"], &["create"], &[]);
        let lease = rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "update"],
            &["nodewright-sweeper"],
        );
        // (rule in the cluster, what of the two wanted rules it leaves ungranted)
        let cases: [(PolicyRule, &[&str]); 6] = [
            (
                rule(&[""], &["pods/eviction"], &["create"], &[]),
                &[
                    "get leases/nodewright-sweeper (coordination.k8s.io)",
                    "update leases/nodewright-sweeper (coordination.k8s.io)",
                ],
            ),
            (rule(&["*"], &["*"], &["*"], &[]), &[]),
            // A rule for other names does not grant this one; one for every name does.
            (
                rule(&["coordination.k8s.io"], &["leases"], &["*"], &["other"]),
                &[
                    "create pods/eviction (core)",
                    "get leases/nodewright-sweeper (coordination.k8s.io)",
                    "update leases/nodewright-sweeper (coordination.k8s.io)",
                ],
            ),
            (
                rule(
                    &["coordination.k8s.io"],
                    &["leases"],
                    &["get", "update"],
                    &[],
                ),
                &["create pods/eviction (core)"],
            ),
            // A verb short.
            (
                rule(
                    &["coordination.k8s.io"],
                    &["leases"],
                    &["get"],
                    &["nodewright-sweeper"],
                ),
                &[
                    "create pods/eviction (core)",
                    "update leases/nodewright-sweeper (coordination.k8s.io)",
                ],
            ),
            // Another resource of the group.
            (
                rule(&[""], &["pods"], &["create"], &[]),
                &[
                    "create pods/eviction (core)",
                    "get leases/nodewright-sweeper (coordination.k8s.io)",
                    "update leases/nodewright-sweeper (coordination.k8s.io)",
                ],
            ),
        ];
        let wanted = [eviction, lease];
        for (have, want) in cases {
            assert_eq!(
                ungranted(&wanted, std::slice::from_ref(&have)),
                want,
                "{have:?}"
            );
        }
    }

    #[test]
    fn a_subresource_of_every_resource_and_each_of_several_names_count_as_rbac_counts_them() {
        let wanted = [
            rule(&[""], &["pods/eviction"], &["create"], &[]),
            rule(&[""], &["configmaps"], &["get"], &["a", "b"]),
        ];
        let have = [
            rule(&[""], &["*/eviction"], &["create"], &[]),
            rule(&[""], &["configmaps"], &["get"], &["a"]),
        ];
        assert_eq!(ungranted(&wanted, &have), ["get configmaps/b (core)"]);
        let other_sub = [rule(&[""], &["*/status"], &["create"], &[])];
        assert_eq!(
            ungranted(&wanted[..1], &other_sub),
            ["create pods/eviction (core)"]
        );
    }

    #[test]
    fn a_name_wanted_for_every_name_is_not_covered_by_a_rule_for_some() {
        let wanted = [rule(&[""], &["configmaps"], &["get"], &[])];
        let named = rule(&[""], &["configmaps"], &["get"], &["nodewright"]);
        assert_eq!(ungranted(&wanted, &[named]), ["get configmaps (core)"]);
    }

    #[test]
    fn a_binding_grants_a_group_only_when_a_group_subject_names_it() {
        let subject = |kind: &str, name: &str, api_group: Option<&str>| Subject {
            kind: kind.into(),
            name: name.into(),
            api_group: api_group.map(str::to_string),
            namespace: None,
        };
        let rbac = Some("rbac.authorization.k8s.io");
        for (subjects, bound) in [
            (vec![subject("Group", "nodewright-sweeper", rbac)], true),
            (vec![subject("Group", "nodewright-sweeper", None)], true),
            (vec![subject("Group", "platform-sweeper", rbac)], false),
            (vec![subject("User", "nodewright-sweeper", rbac)], false),
            (
                vec![subject("Group", "nodewright-sweeper", Some("x.io"))],
                false,
            ),
            (
                vec![
                    subject("Group", "platform-sweeper", rbac),
                    subject("Group", "nodewright-sweeper", rbac),
                ],
                true,
            ),
            (vec![], false),
        ] {
            assert_eq!(
                binds_group(&subjects, "nodewright-sweeper"),
                bound,
                "{subjects:?}"
            );
        }
    }
}
