//! EC2 Spot Instance Interruption Warning: the instance is stopped, hibernated or
//! terminated two minutes after the event's `time`.

use serde::Deserialize;

use super::message::{Detail, InstanceAction};
use super::parse::{Envelope, ParseError, Parsed, instance_id};

pub const DETAIL_TYPE: &str = "EC2 Spot Instance Interruption Warning";
/// "Two minutes before Amazon EC2 stops or terminates your Spot Instance" (EC2 User Guide,
/// Spot Instance interruption notices).
pub const NOTICE: std::time::Duration = std::time::Duration::from_secs(120);

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct SpotDetail {
    instance_id: String,
    instance_action: InstanceAction,
}

pub(super) fn parse(e: &Envelope) -> Result<Parsed, ParseError> {
    let d: SpotDetail = e.detail()?;
    let deadline = e.time()? + NOTICE;
    e.message(
        instance_id(e, &d.instance_id)?,
        Detail::SpotInterruption {
            action: d.instance_action,
            deadline,
        },
    )
}
