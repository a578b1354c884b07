//! EC2 Instance Rebalance Recommendation: a spot instance is at elevated risk of
//! interruption. Nothing is due; what to do is the NodePool's choice (see `action`).

use serde::Deserialize;

use super::message::Detail;
use super::parse::{Envelope, ParseError, Parsed, instance_id};

pub const DETAIL_TYPE: &str = "EC2 Instance Rebalance Recommendation";

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RebalanceDetail {
    instance_id: String,
}

pub(super) fn parse(e: &Envelope) -> Result<Parsed, ParseError> {
    let d: RebalanceDetail = e.detail()?;
    e.message(
        instance_id(e, &d.instance_id)?,
        Detail::RebalanceRecommendation,
    )
}
