//! Label selectors (`matchLabels` + `matchExpressions`) as used by topology spread
//! constraints, pod (anti-)affinity terms and PodDisruptionBudgets.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Expr {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A compiled label selector. An empty selector matches everything, as in Kubernetes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Selector(Vec<Expr>);

impl Selector {
    pub fn from_k8s(s: &LabelSelector) -> Result<Self, String> {
        let mut exprs = vec![];
        for (k, v) in s.match_labels.iter().flatten() {
            exprs.push(Expr::In(k.clone(), vec![v.clone()]));
        }
        for e in s.match_expressions.iter().flatten() {
            let mut values = e.values.clone().unwrap_or_default();
            values.sort();
            exprs.push(match e.operator.as_str() {
                "In" => Expr::In(e.key.clone(), values),
                "NotIn" => Expr::NotIn(e.key.clone(), values),
                "Exists" => Expr::Exists(e.key.clone()),
                "DoesNotExist" => Expr::DoesNotExist(e.key.clone()),
                other => {
                    return Err(format!(
                        "label selector operator {other:?} is not one of In, NotIn, Exists, DoesNotExist"
                    ));
                }
            });
        }
        exprs.sort();
        Ok(Selector(exprs))
    }

    /// This selector ANDed with `key = value` (a spread's `matchLabelKeys`).
    pub fn and_label(mut self, key: &str, value: &str) -> Self {
        self.0
            .push(Expr::In(key.to_string(), vec![value.to_string()]));
        self.0.sort();
        self.0.dedup();
        self
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|e| match e {
            Expr::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Expr::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Expr::Exists(k) => labels.contains_key(k),
            Expr::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_combine_match_labels_and_expressions() {
        let sel = Selector::from_k8s(&LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["db".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        })
        .unwrap();
        assert!(sel.matches(&labels(&[("app", "web")])));
        assert!(sel.matches(&labels(&[("app", "web"), ("tier", "front")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("canary", "1")])));
        assert!(!sel.matches(&labels(&[("app", "api")])));
        assert!(Selector::default().matches(&labels(&[])));
    }

    #[test]
    fn unknown_selector_operators_are_reported() {
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Equals".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(Selector::from_k8s(&bad).unwrap_err().contains("Equals"));
    }
}
