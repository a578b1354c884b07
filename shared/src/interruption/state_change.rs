//! EC2 Instance State-change Notification: `pending`, `running`, `stopping`, `stopped`,
//! `shutting-down`, `terminated`.

use serde::Deserialize;

use super::message::{Detail, InstanceStateName};
use super::parse::{Envelope, ParseError, Parsed, instance_id};

pub const DETAIL_TYPE: &str = "EC2 Instance State-change Notification";

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct StateDetail {
    instance_id: String,
    state: InstanceStateName,
}

pub(super) fn parse(e: &Envelope) -> Result<Parsed, ParseError> {
    let d: StateDetail = e.detail()?;
    e.message(
        instance_id(e, &d.instance_id)?,
        Detail::StateChange { state: d.state },
    )
}
