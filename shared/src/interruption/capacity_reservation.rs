//! EC2 Capacity Reservation Instance Interruption Warning: an interruptible Capacity
//! Reservation takes its instance back at `instance-termination-time` (two minutes after
//! the event, per the EC2 User Guide, "Monitor interruptible Capacity Reservations").

use jiff::Timestamp;
use serde::Deserialize;

use super::message::{Detail, InstanceAction};
use super::parse::{Envelope, ParseError, Parsed, instance_id};

pub const DETAIL_TYPE: &str = "EC2 Capacity Reservation Instance Interruption Warning";

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ReservationDetail {
    instance_id: String,
    instance_action: InstanceAction,
    /// Absent in some samples; then the notice is the documented two minutes.
    #[serde(default)]
    instance_termination_time: Option<Timestamp>,
}

pub(super) fn parse(e: &Envelope) -> Result<Parsed, ParseError> {
    let d: ReservationDetail = e.detail()?;
    let deadline = match d.instance_termination_time {
        Some(t) => t,
        None => e.time()? + super::spot::NOTICE,
    };
    e.message(
        instance_id(e, &d.instance_id)?,
        Detail::CapacityReservationInterruption {
            action: d.instance_action,
            deadline,
        },
    )
}
