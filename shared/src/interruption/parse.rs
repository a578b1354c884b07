//! The dispatcher: an EventBridge envelope (as text) -> a [`Message`] to act on, or an
//! [`Ignored`] event with the reason, or a [`ParseError`] naming the field. Dispatch is on
//! (source, detail-type, version), as Karpenter's interruption controller does; anything
//! else is acknowledged as a no-op, because other rules and other clusters share the bus.

use std::fmt;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::follow_up::{FOLLOW_UP_DETAIL_TYPE, FOLLOW_UP_SOURCE};
use super::message::Message;
use super::{capacity_reservation, health, rebalance, spot, state_change};

/// The account and region the function runs in. Events from elsewhere are not ours: a
/// rule in this account only forwards this account's events, so another account in an
/// envelope means someone wrote to the queue directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub account: String,
    pub region: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Act(Message),
    Ignored(Ignored),
}

/// An event acknowledged without action, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Ignored {
    pub event_id: Option<String>,
    pub source: String,
    pub detail_type: String,
    pub reason: IgnoreReason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnoreReason {
    /// No parser for this (source, detail-type).
    UnknownEvent,
    /// A known kind with an envelope version this parser does not know.
    UnsupportedVersion(String),
    /// An AWS Health event for another service.
    OtherService(String),
    /// An AWS Health event for EC2 that is not a scheduled change (an issue, a notice).
    OtherCategory(String),
    /// The event names no EC2 instance.
    NoInstance,
    /// The envelope's account or region is not the function's own: logged as suspicious.
    Foreign {
        account: Option<String>,
        region: Option<String>,
    },
}

impl IgnoreReason {
    pub fn is_suspicious(&self) -> bool {
        matches!(self, IgnoreReason::Foreign { .. })
    }
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgnoreReason::UnknownEvent => f.write_str("not an event nodewright handles"),
            IgnoreReason::UnsupportedVersion(v) => write!(f, "unsupported envelope version {v:?}"),
            IgnoreReason::OtherService(s) => {
                write!(f, "AWS Health event for service {s:?}, not EC2")
            }
            IgnoreReason::OtherCategory(c) => {
                write!(f, "AWS Health event of category {c:?}, not scheduledChange")
            }
            IgnoreReason::NoInstance => f.write_str("names no EC2 instance"),
            IgnoreReason::Foreign { account, region } => write!(
                f,
                "from account {} in region {}, not this function's: suspicious",
                account.as_deref().unwrap_or("(none)"),
                region.as_deref().unwrap_or("(none)")
            ),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// serde's message is part of this one (it names the missing or mistyped field the
    /// path cannot), so it is not also a `source` that a chain would print again.
    #[error("not an EventBridge event: {path}: {serde}")]
    Envelope {
        path: String,
        serde: serde_json::Error,
    },
    #[error("{detail_type}: {field}: {message}")]
    Field {
        detail_type: String,
        field: String,
        message: String,
    },
}

/// The envelope as the kind parsers see it: `aws_lambda_events`' type with the time in
/// the core's clock type.
pub(super) struct Envelope {
    pub id: String,
    pub detail_type: String,
    pub time: Option<Timestamp>,
    /// The envelope's `resources`: ARNs (or ids) of what the event is about.
    pub resources: Vec<String>,
    pub detail: Value,
}

impl Envelope {
    pub fn field_error(&self, field: impl Into<String>, message: impl Into<String>) -> ParseError {
        ParseError::Field {
            detail_type: self.detail_type.clone(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// `detail` as `T`; an error names the field under `detail`.
    pub fn detail<T: DeserializeOwned>(&self) -> Result<T, ParseError> {
        serde_path_to_error::deserialize(self.detail.clone()).map_err(|e| {
            let path = e.path().to_string();
            let message = e.into_inner().to_string();
            // serde names a missing field only in its message, at the parent's path.
            let missing = message
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split('`').next());
            let parent = if path == "." {
                "detail".to_string()
            } else {
                format!("detail.{path}")
            };
            let field = match missing {
                Some(name) => format!("{parent}.{name}"),
                None => parent,
            };
            self.field_error(field, message)
        })
    }

    pub fn time(&self) -> Result<Timestamp, ParseError> {
        self.time
            .ok_or_else(|| self.field_error("time", "missing; the deadline counts from it"))
    }

    pub fn message(
        &self,
        instance_ids: Vec<String>,
        detail: super::Detail,
    ) -> Result<Parsed, ParseError> {
        Ok(Parsed::Act(Message {
            event_id: self.id.clone(),
            time: self.time()?,
            instance_ids,
            detail,
        }))
    }
}

/// Parses one message body, read at `received`. `origin`, when given, is checked before
/// anything else. An envelope without a `time` is taken as emitted when it was received, as
/// NTH takes it: a deadline counted from it is then counted from now, never dropped.
pub fn parse(
    body: &str,
    origin: Option<&Origin>,
    received: Timestamp,
) -> Result<Parsed, ParseError> {
    let de = &mut serde_json::Deserializer::from_str(body);
    let event: EventBridgeEvent<Value> =
        serde_path_to_error::deserialize(de).map_err(|e| ParseError::Envelope {
            path: e.path().to_string(),
            serde: e.into_inner(),
        })?;
    let ignored = |reason| {
        Ok(Parsed::Ignored(Ignored {
            event_id: event.id.clone(),
            source: event.source.clone(),
            detail_type: event.detail_type.clone(),
            reason,
        }))
    };
    if let Some(origin) = origin
        && (event.account.as_deref() != Some(origin.account.as_str())
            || event.region.as_deref() != Some(origin.region.as_str()))
    {
        return ignored(IgnoreReason::Foreign {
            account: event.account.clone(),
            region: event.region.clone(),
        });
    }
    type KindParser = fn(&Envelope) -> Result<Parsed, ParseError>;
    let parser: KindParser = match (event.source.as_str(), event.detail_type.as_str()) {
        ("aws.ec2", spot::DETAIL_TYPE) => spot::parse,
        ("aws.ec2", rebalance::DETAIL_TYPE) => rebalance::parse,
        ("aws.ec2", state_change::DETAIL_TYPE) => state_change::parse,
        ("aws.ec2", capacity_reservation::DETAIL_TYPE) => capacity_reservation::parse,
        ("aws.health", health::DETAIL_TYPE) => health::parse,
        (FOLLOW_UP_SOURCE, FOLLOW_UP_DETAIL_TYPE) => parse_follow_up,
        _ => return ignored(IgnoreReason::UnknownEvent),
    };
    // Every kind above is documented with version "0"; a new version may change `detail`.
    let version = event.version.clone().unwrap_or_default();
    if version != "0" {
        return ignored(IgnoreReason::UnsupportedVersion(version));
    }
    let envelope = Envelope {
        id: event.id.clone().unwrap_or_default(),
        detail_type: event.detail_type.clone(),
        time: event
            .time
            .and_then(|t| Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32).ok())
            .or(Some(received)),
        resources: event.resources.clone().unwrap_or_default(),
        detail: event.detail.clone(),
    };
    if envelope.id.is_empty() {
        return Err(envelope.field_error("id", "missing"));
    }
    match parser(&envelope)? {
        Parsed::Ignored(i) => ignored(i.reason),
        act => Ok(act),
    }
}

fn parse_follow_up(e: &Envelope) -> Result<Parsed, ParseError> {
    let follow_up: super::FollowUp = e.detail()?;
    e.message(
        vec![follow_up.instance_id.clone()],
        super::Detail::FollowUp(follow_up),
    )
}

/// EC2 instance ids are `i-` and 8 or 17 lowercase hex digits.
pub(super) fn is_instance_id(s: &str) -> bool {
    s.strip_prefix("i-").is_some_and(|hex| {
        matches!(hex.len(), 8 | 17)
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The `instance-id` every EC2 instance event's detail carries, checked.
pub(super) fn instance_id(e: &Envelope, id: &str) -> Result<Vec<String>, ParseError> {
    if is_instance_id(id) {
        Ok(vec![id.to_string()])
    } else {
        Err(e.field_error(
            "detail.instance-id",
            format!("{id:?} is not an EC2 instance id"),
        ))
    }
}

/// Marker for a kind parser's "nothing to do" answer; the dispatcher fills in the envelope.
pub(super) fn ignore(reason: IgnoreReason) -> Result<Parsed, ParseError> {
    Ok(Parsed::Ignored(Ignored {
        event_id: None,
        source: String::new(),
        detail_type: String::new(),
        reason,
    }))
}
