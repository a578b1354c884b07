//! Taints and tolerations, with kube-scheduler's matching rules
//! (k8s.io/api/core/v1/toleration.go `ToleratesTaint`).

use crate::api::{Taint, TaintEffect};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every taint.
    pub key: String,
    pub exists: bool,
    pub value: String,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn from_k8s(t: &k8s_openapi::api::core::v1::Toleration) -> Result<Self, String> {
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some("NoSchedule") => Some(TaintEffect::NoSchedule),
            Some("PreferNoSchedule") => Some(TaintEffect::PreferNoSchedule),
            Some("NoExecute") => Some(TaintEffect::NoExecute),
            Some(other) => {
                return Err(format!(
                    "toleration effect {other:?} is not one of NoSchedule, PreferNoSchedule, NoExecute"
                ));
            }
        };
        let exists = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(format!(
                    "toleration operator {other:?} is not Equal or Exists"
                ));
            }
        };
        Ok(Toleration {
            key: t.key.clone().unwrap_or_default(),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
        })
    }

    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        if self.key != taint.key {
            return false;
        }
        self.exists || self.value == taint.value.as_deref().unwrap_or("")
    }
}

/// The first taint that keeps a pod off a node: `NoSchedule` and `NoExecute` must be
/// tolerated, `PreferNoSchedule` is only a preference.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

pub fn format_taint(t: &Taint) -> String {
    match &t.value {
        Some(v) if !v.is_empty() => format!("{}={}:{:?}", t.key, v, t.effect),
        _ => format!("{}:{:?}", t.key, t.effect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaintEffect::*;

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect,
        }
    }

    fn tol(key: &str, exists: bool, value: &str, effect: Option<TaintEffect>) -> Toleration {
        Toleration {
            key: key.into(),
            exists,
            value: value.into(),
            effect,
        }
    }

    #[test]
    fn tolerations_match_like_kube_scheduler() {
        let cases = [
            (
                tol("networkNode", false, "true", Some(NoSchedule)),
                taint("networkNode", "true", NoSchedule),
                true,
            ),
            (
                tol("networkNode", false, "false", Some(NoSchedule)),
                taint("networkNode", "true", NoSchedule),
                false,
            ),
            (
                tol("networkNode", true, "", None),
                taint("networkNode", "true", NoExecute),
                true,
            ),
            (
                tol("networkNode", false, "true", Some(NoExecute)),
                taint("networkNode", "true", NoSchedule),
                false,
            ),
            (
                tol("", true, "", None),
                taint("anything", "x", NoSchedule),
                true,
            ),
            (
                tol("", false, "", None),
                taint("anything", "x", NoSchedule),
                false,
            ),
            (
                tol("cpuIntensive", false, "true", None),
                taint("cpuIntensive", "true", NoSchedule),
                true,
            ),
            (
                tol("k", false, "", Some(NoSchedule)),
                taint("k", "", NoSchedule),
                true,
            ),
        ];
        for (t, ta, want) in cases {
            assert_eq!(t.tolerates(&ta), want, "{t:?} vs {ta:?}");
        }
    }

    #[test]
    fn prefer_no_schedule_never_blocks_and_others_must_be_tolerated() {
        let taints = vec![
            taint("soft", "", PreferNoSchedule),
            taint("hard", "1", NoSchedule),
        ];
        assert_eq!(
            first_untolerated(&taints, &[]).map(|t| t.key.as_str()),
            Some("hard")
        );
        assert!(first_untolerated(&taints, &[tol("hard", true, "", None)]).is_none());
    }

    #[test]
    fn unknown_effects_and_operators_are_errors_not_silently_ignored() {
        let bad = k8s_openapi::api::core::v1::Toleration {
            effect: Some("NoScheduel".into()),
            ..Default::default()
        };
        assert!(
            Toleration::from_k8s(&bad)
                .unwrap_err()
                .contains("NoScheduel")
        );
        let bad_op = k8s_openapi::api::core::v1::Toleration {
            operator: Some("In".into()),
            ..Default::default()
        };
        assert!(Toleration::from_k8s(&bad_op).is_err());
    }
}
