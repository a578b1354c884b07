//! AWS Health Event: only `service: EC2` with `eventTypeCategory: scheduledChange`
//! (instance retirement, system maintenance) is acted on; the affected instances are in
//! `affectedEntities`, the work must be done before `startTime`. Health writes its times
//! in RFC 2822 (`Mon, 30 Nov 2026 14:00:00 GMT`).

use jiff::Timestamp;
use serde::Deserialize;

use super::message::Detail;
use super::parse::{Envelope, IgnoreReason, ParseError, Parsed, ignore, is_instance_id};

pub const DETAIL_TYPE: &str = "AWS Health Event";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HealthDetail {
    service: String,
    event_type_category: String,
    #[serde(default)]
    event_type_code: String,
    #[serde(default)]
    start_time: Option<String>,
    #[serde(default)]
    end_time: Option<String>,
    #[serde(default)]
    affected_entities: Vec<Entity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entity {
    entity_value: String,
}

fn time(e: &Envelope, field: &str, text: &str) -> Result<Timestamp, ParseError> {
    jiff::fmt::rfc2822::parse(text)
        .map(|z| z.timestamp())
        .or_else(|_| text.parse::<Timestamp>())
        .map_err(|err| e.field_error(format!("detail.{field}"), format!("{text:?}: {err}")))
}

pub(super) fn parse(e: &Envelope) -> Result<Parsed, ParseError> {
    let d: HealthDetail = e.detail()?;
    if d.service != "EC2" {
        return ignore(IgnoreReason::OtherService(d.service));
    }
    if d.event_type_category != "scheduledChange" {
        return ignore(IgnoreReason::OtherCategory(d.event_type_category));
    }
    // Entities may also be volumes or hosts; only instances have nodes.
    let mut instance_ids: Vec<String> = d
        .affected_entities
        .into_iter()
        .map(|x| x.entity_value)
        .filter(|v| is_instance_id(v))
        .collect();
    instance_ids.dedup();
    if instance_ids.is_empty() {
        return ignore(IgnoreReason::NoInstance);
    }
    let Some(start) = d.start_time.as_deref() else {
        return Err(e.field_error(
            "detail.startTime",
            "missing; a scheduled change must say when it starts",
        ));
    };
    let start = time(e, "startTime", start)?;
    let end = match d.end_time.as_deref() {
        Some(t) => Some(time(e, "endTime", t)?),
        None => None,
    };
    e.message(
        instance_ids,
        Detail::ScheduledChange {
            event_type_code: d.event_type_code,
            start,
            end,
        },
    )
}
