//! AWS Health Event: only `service: EC2` with `eventTypeCategory: scheduledChange`
//! (instance retirement, system maintenance) is acted on. The affected instances are named
//! in `affectedEntities` and, as ARNs or ids, in the envelope's `resources` (Karpenter's and
//! NTH's samples use either, and repeat them): every instance id found in either, once. The
//! work must be done before `startTime`; Health writes its times in RFC 2822
//! (`Mon, 30 Nov 2026 14:00:00 GMT`), and a weekday that does not match its date (NTH's own
//! sample has one) is not a reason to drop the event. With no `startTime` (Karpenter's
//! sample has none), the change is taken as starting when the event was emitted: now.

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
    #[serde(default)]
    entity_value: String,
}

/// RFC 2822 without trusting its weekday (the date says which day it is), else RFC 3339.
fn lenient(text: &str) -> Option<Timestamp> {
    let without_weekday = text
        .split_once(',')
        .filter(|(day, _)| day.trim().chars().all(|c| c.is_ascii_alphabetic()))
        .map_or(text, |(_, rest)| rest.trim());
    jiff::fmt::rfc2822::parse(without_weekday)
        .map(|z| z.timestamp())
        .ok()
        .or_else(|| text.parse::<Timestamp>().ok())
}

fn time(e: &Envelope, field: &str, text: &str) -> Result<Timestamp, ParseError> {
    lenient(text).ok_or_else(|| {
        e.field_error(
            format!("detail.{field}"),
            format!("{text:?} is neither an RFC 2822 nor an RFC 3339 time"),
        )
    })
}

/// The instance id an entity or a resource names (`i-…` or an instance ARN).
fn instance_in(value: &str) -> Option<String> {
    let id = value.rsplit('/').next().unwrap_or(value);
    is_instance_id(id).then(|| id.to_string())
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
    let mut instance_ids: Vec<String> = Vec::new();
    let named = d
        .affected_entities
        .iter()
        .map(|x| x.entity_value.as_str())
        .chain(e.resources.iter().map(String::as_str));
    for id in named.filter_map(instance_in) {
        if !instance_ids.contains(&id) {
            instance_ids.push(id);
        }
    }
    if instance_ids.is_empty() {
        return ignore(IgnoreReason::NoInstance);
    }
    let start = match d.start_time.as_deref() {
        Some(t) => time(e, "startTime", t)?,
        None => e.time()?,
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_times_are_read_whatever_their_weekday_says() {
        let cases = [
            // NTH's sample: 5 June 2016 was a Sunday.
            (
                "Sat, 05 Jun 2016 15:10:09 GMT",
                Some("2016-06-05T15:10:09Z"),
            ),
            (
                "Mon, 30 Nov 2026 14:00:00 GMT",
                Some("2026-11-30T14:00:00Z"),
            ),
            ("30 Nov 2026 14:00:00 GMT", Some("2026-11-30T14:00:00Z")),
            ("2026-11-30T14:00:00Z", Some("2026-11-30T14:00:00Z")),
            ("next Tuesday", None),
        ];
        for (text, want) in cases {
            let want = want.map(|w| w.parse::<Timestamp>().unwrap());
            assert_eq!(lenient(text), want, "{text}");
        }
    }

    #[test]
    fn instances_are_found_in_entity_values_and_resource_arns() {
        let cases = [
            ("i-0b662ef9931388ba0", Some("i-0b662ef9931388ba0")),
            (
                "arn:aws:ec2:us-west-2:instance/i-0b662ef9931388ba0",
                Some("i-0b662ef9931388ba0"),
            ),
            ("vol-0b662ef9931388ba0", None),
            ("arn:aws:ec2:us-west-2:volume/vol-0b662ef9931388ba0", None),
        ];
        for (value, want) in cases {
            assert_eq!(instance_in(value).as_deref(), want, "{value}");
        }
    }
}
