//! Whether the cluster's RBAC objects grant what `nodewright rbac` grants: an object that
//! exists but was written by an older release, or edited, can lack a rule a function now
//! needs, and that function then fails on a 403 in the middle of its work.

use k8s_openapi::api::rbac::v1::PolicyRule;

/// Each grant of `wanted` that no rule of `have` covers, as `verb resource[/name] (group)`.
pub fn ungranted(wanted: &[PolicyRule], have: &[PolicyRule]) -> Vec<String> {
    let mut missing = Vec::new();
    for rule in wanted {
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        let names = rule.resource_names.clone().unwrap_or_default();
        for group in &groups {
            for resource in &resources {
                for verb in &rule.verbs {
                    let grant = Grant {
                        group,
                        resource,
                        verb,
                        names: &names,
                    };
                    if !have.iter().any(|h| grant.covered_by(h)) {
                        missing.push(grant.to_string());
                    }
                }
            }
        }
    }
    missing
}

struct Grant<'a> {
    group: &'a str,
    resource: &'a str,
    verb: &'a str,
    names: &'a [String],
}

impl Grant<'_> {
    /// RBAC's own reading: `*` matches anything; a rule naming resources grants only
    /// those names, one naming none grants every name.
    fn covered_by(&self, rule: &PolicyRule) -> bool {
        let has = |list: &Option<Vec<String>>, item: &str| {
            list.as_deref()
                .unwrap_or_default()
                .iter()
                .any(|v| v == "*" || v == item)
        };
        let names = rule.resource_names.as_deref().unwrap_or_default();
        has(&rule.api_groups, self.group)
            && has(&rule.resources, self.resource)
            && rule.verbs.iter().any(|v| v == "*" || v == self.verb)
            && (names.is_empty()
                || (!self.names.is_empty() && self.names.iter().all(|n| names.contains(n))))
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
        if !self.names.is_empty() {
            write!(f, "/{}", self.names.join(","))?;
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
    fn a_name_wanted_for_every_name_is_not_covered_by_a_rule_for_some() {
        let wanted = [rule(&[""], &["configmaps"], &["get"], &[])];
        let named = rule(&[""], &["configmaps"], &["get"], &["nodewright"]);
        assert_eq!(ungranted(&wanted, &[named]), ["get configmaps (core)"]);
    }
}
