//! nodewright's own follow-up message: the next step of work that outlives one invocation
//! (a drain a PodDisruptionBudget holds back, a replacement not Ready yet, a node to delete
//! once its instance is gone), sent to the interruption queue with `DelaySeconds`. It uses
//! the EventBridge envelope so the one dispatcher reads it, with its own source.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::action::Reason;

/// `source` of follow-up messages; AWS services use `aws.*`, which no one else may send.
pub const FOLLOW_UP_SOURCE: &str = "nodewright.io";
pub const FOLLOW_UP_DETAIL_TYPE: &str = "Interruption Follow-up";

/// What is left to do for one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "name")]
pub enum Step {
    /// Evict (or, near the deadline, delete) what is still on the node.
    Drain,
    /// Drain once these instances are Ready nodes (or `until`, whichever comes first).
    AwaitReplacement {
        instances: Vec<String>,
        until: Timestamp,
    },
    /// Delete the Node object once the instance is gone (after `deadline`).
    DeleteNode,
}

impl Step {
    pub fn as_str(&self) -> &'static str {
        match self {
            Step::Drain => "drain",
            Step::AwaitReplacement { .. } => "await-replacement",
            Step::DeleteNode => "delete-node",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct FollowUp {
    pub instance_id: String,
    pub node: String,
    pub step: Step,
    pub reason: Reason,
    /// The hard limit: the instance goes (or the drain is forced) at this time.
    #[serde(default)]
    pub deadline: Option<Timestamp>,
    /// The event that started this work, for logs.
    pub origin_event: String,
    /// How many follow-ups came before this one in the chain.
    #[serde(default)]
    pub round: u32,
}

impl FollowUp {
    /// The message body: an EventBridge-shaped envelope the parser reads back as this value.
    pub fn envelope(&self, account: &str, region: &str, now: Timestamp) -> serde_json::Value {
        serde_json::json!({
            "version": "0",
            "id": format!("{}-{}-{}", self.origin_event, self.step.as_str(), self.round),
            "detail-type": FOLLOW_UP_DETAIL_TYPE,
            "source": FOLLOW_UP_SOURCE,
            "account": account,
            "time": now.to_string(),
            "region": region,
            "resources": [],
            "detail": self,
        })
    }

    /// The next message of the chain.
    pub fn next(&self, step: Step) -> FollowUp {
        FollowUp {
            step,
            round: self.round + 1,
            ..self.clone()
        }
    }
}
