//! `karpenter.sh/v1` NodePool, field for field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Meta, NillableDuration, Quantity};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePool {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: NodePoolSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolSpec {
    pub template: NodeClaimTemplate,
    #[serde(default)]
    pub disruption: Disruption,
    /// Resource name -> ceiling, summed over every node the pool owns (`cpu`, `memory`,
    /// `nodes`, extended resources).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    /// 1..=100; pools with a higher weight are tried first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Set: a static NodePool, kept at exactly this many nodes whatever the pods ask
    /// (Karpenter's static capacity); never consolidated, only `limits.nodes` applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

impl NodePoolSpec {
    /// The node count a static NodePool keeps (`None`: a dynamic one).
    pub fn static_replicas(&self) -> Option<usize> {
        self.replicas.map(|r| usize::try_from(r).unwrap_or(0))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "TemplateMeta::is_empty")]
    pub metadata: TemplateMeta,
    pub spec: NodeClaimTemplateSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl TemplateMeta {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplateSpec {
    pub node_class_ref: NodeClassRef,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints the node starts with and that something else removes once it is ready (a
    /// CNI, a GPU driver); the solver ignores them because pods need not tolerate them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirement>,
    /// Defaults to 720h; `Never` disables expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<NillableDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<super::Duration>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClassRef {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelectorRequirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Karpenter's `minValues`: launch only if at least this many distinct values of the key
    /// remain among the candidate instance types (flexibility for spot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    #[default]
    WhenEmptyOrUnderutilized,
    /// Underutilized nodes consolidate only when the move saves at least half as large a
    /// share of the pool's cost as the share of its disruption it causes (`disruption::balanced`).
    Balanced,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Disruption {
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,
    /// Karpenter v1 requires it; we default to `0s` as Karpenter's defaulting webhook did.
    #[serde(default = "Disruption::default_consolidate_after")]
    pub consolidate_after: NillableDuration,
    #[serde(default = "Disruption::default_budgets")]
    pub budgets: Vec<Budget>,
}

impl Disruption {
    fn default_consolidate_after() -> NillableDuration {
        NillableDuration::After(super::Duration::from_secs(0))
    }
    /// Karpenter's default budget: at most 10% of a pool's nodes disrupted at once.
    pub fn default_budgets() -> Vec<Budget> {
        vec![Budget {
            nodes: "10%".into(),
            reasons: vec![],
            schedule: None,
            duration: None,
        }]
    }
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            consolidation_policy: ConsolidationPolicy::default(),
            consolidate_after: Self::default_consolidate_after(),
            budgets: Self::default_budgets(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// An integer or a percentage of the pool's nodes (`"10%"`, `"0"`, `"5"`).
    #[serde(default = "Budget::default_nodes")]
    pub nodes: String,
    /// `Underutilized`, `Empty`, `Drifted`; empty means every reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// A cron schedule (UTC) at which the budget becomes active, for `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<super::Duration>,
}

impl Budget {
    fn default_nodes() -> String {
        "10%".into()
    }
}
