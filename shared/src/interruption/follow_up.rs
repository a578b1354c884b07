//! nodewright's own follow-up message: "look at this node's removal again", sent to the
//! interruption queue with `DelaySeconds` when the removal's decision asks for another look
//! (a drain a PodDisruptionBudget holds back, a replacement not Ready yet, a deadline ahead).
//! The node's removal record says what the removal is; the message only says when to look.
//! It uses the EventBridge envelope so the one dispatcher reads it, with its own source.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::removal::Cause;

/// `source` of follow-up messages; AWS services use `aws.*`, which no one else may send.
pub const FOLLOW_UP_SOURCE: &str = "nodewright.io";
pub const FOLLOW_UP_DETAIL_TYPE: &str = "Interruption Follow-up";

/// The step a follow-up names. Every step continues the node's removal as its record says;
/// the names other than `continue` are those of earlier releases' messages, which may still
/// be queued during an upgrade, and are read the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "name")]
pub enum Step {
    Continue,
    Drain,
    AwaitReplacement {
        instances: Vec<String>,
        until: Timestamp,
    },
    DeleteNode,
}

impl Step {
    pub fn as_str(&self) -> &'static str {
        match self {
            Step::Continue => "continue",
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
    pub reason: Cause,
    /// The hard limit: the instance goes (or the drain is forced) at this time.
    #[serde(default)]
    pub deadline: Option<Timestamp>,
    /// When this look was due: the node's record names the look it expects, and a
    /// follow-up that is not it (a duplicate chain) is dropped.
    #[serde(default)]
    pub due: Option<Timestamp>,
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
}
