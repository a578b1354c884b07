//! The namespaces a pod (anti-)affinity term looks in: listed by name, selected by the
//! Namespace objects' labels (`namespaceSelector`), or every one (`namespaceSelector: {}`).
//! Labels are read from the cluster only when some term selects by them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};

use super::selector::Selector;

/// The Namespace objects' labels, by namespace name.
pub type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

/// See [`AffinityTerm::covers`]; also for a term's parts as the topology groups keep them.
pub fn covers(
    namespaces: &[String],
    selector: Option<&Selector>,
    namespace: &str,
    labels: &NamespaceLabels,
) -> bool {
    let listed = namespaces.iter().any(|n| n == namespace);
    match selector {
        Some(s) => listed || labels.get(namespace).is_some_and(|l| s.matches(l)),
        None => listed || namespaces.is_empty(),
    }
}

/// Whether some (anti-)affinity term of these pods, required or preferred, has a
/// `namespaceSelector` with terms: only then are the Namespaces' labels needed.
pub fn selects_namespaces<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> bool {
    pods.into_iter().any(|p| {
        terms(p).any(|t| {
            t.namespace_selector.as_ref().is_some_and(|s| {
                s.match_labels.as_ref().is_some_and(|m| !m.is_empty())
                    || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
            })
        })
    })
}

fn terms(pod: &Pod) -> impl Iterator<Item = &PodAffinityTerm> {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let pa = affinity.and_then(|a| a.pod_affinity.as_ref());
    let anti = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
    let required = pa
        .and_then(|p| {
            p.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
        .chain(
            anti.and_then(|p| {
                p.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten(),
        );
    let preferred = pa
        .and_then(|p| {
            p.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
        .chain(
            anti.and_then(|p| {
                p.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten(),
        )
        .map(|w| &w.pod_affinity_term);
    required.chain(preferred)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn team_a() -> Selector {
        let s = serde_json::from_value(serde_json::json!({"matchLabels": {"team": "a"}})).unwrap();
        Selector::from_k8s(&s).unwrap()
    }

    #[test]
    fn a_term_covers_its_listed_namespaces_and_those_its_selector_matches() {
        let known: NamespaceLabels = [
            ("web".to_string(), labels(&[("team", "a")])),
            ("db".to_string(), labels(&[("team", "b")])),
            ("ops".to_string(), labels(&[])),
        ]
        .into();
        let listed = vec!["ops".to_string()];
        // (namespaces, selector, namespace asked about, covered)
        let cases: [(&[String], Option<Selector>, &str, bool); 8] = [
            (&listed, Some(team_a()), "web", true),
            (&listed, Some(team_a()), "ops", true),
            (&listed, Some(team_a()), "db", false),
            (&[], Some(team_a()), "web", true),
            // A selector matching nothing, and no list: no namespace at all.
            (&[], Some(team_a()), "db", false),
            (&[], Some(team_a()), "unknown", false),
            // No selector: the list, or every namespace when the list is empty.
            (&listed, None, "web", false),
            (&[], None, "db", true),
        ];
        for (namespaces, selector, namespace, want) in cases {
            assert_eq!(
                covers(namespaces, selector.as_ref(), namespace, &known),
                want,
                "{namespaces:?} {selector:?} {namespace}"
            );
        }
    }

    #[test]
    fn only_a_namespace_selector_with_terms_needs_the_namespaces_labels() {
        let pod = |term: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "web"},
                "spec": {"containers": [{"name": "c"}], "affinity": {"podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": term}]}}}
            }))
            .unwrap()
        };
        let with = |ns: serde_json::Value| {
            let mut t = serde_json::json!({"topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app": "x"}}});
            if !ns.is_null() {
                t["namespaceSelector"] = ns;
            }
            pod(t)
        };
        assert!(selects_namespaces(&[with(
            serde_json::json!({"matchLabels": {"team": "a"}})
        )]));
        assert!(selects_namespaces(&[with(serde_json::json!(
            {"matchExpressions": [{"key": "team", "operator": "Exists"}]}
        ))]));
        assert!(!selects_namespaces(&[with(serde_json::json!({}))]));
        assert!(!selects_namespaces(&[with(serde_json::Value::Null)]));
    }
}
