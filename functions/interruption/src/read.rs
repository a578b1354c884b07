//! Each message of a batch read once: parsed, its follow-ups checked to come from this
//! function, and what could not be read kept with the instance ids it seems to name, so a
//! message about one of this cluster's instances is never acknowledged unread.

use aws_lambda_events::event::sqs::SqsMessage;
use nodewright::interruption::{Detail, Message, Parsed, parse};
use nodewright::telemetry;

use super::State;

/// A message of the batch, as read.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub id: String,
    /// Its receipt handle, to make it visible again sooner than the visibility timeout.
    pub handle: Option<String>,
    pub receives: String,
    pub read: Read,
}

#[derive(Debug, Clone)]
pub enum Read {
    Act(Message),
    /// Nothing to do (ignored, suspicious): acknowledged.
    Done,
    /// Not readable: acknowledged unless it names an instance of this cluster.
    Unreadable {
        why: String,
        instance_ids: Vec<String>,
    },
}

/// The instance ids a text seems to name (`i-` and 8 or 17 hex digits).
pub fn instance_ids_in(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .filter(|w| {
            w.strip_prefix("i-").is_some_and(|h| {
                (h.len() == 8 || h.len() == 17) && h.bytes().all(|b| b.is_ascii_hexdigit())
            })
        })
        .map(str::to_string)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

pub fn messages<K, E, R, Q>(
    records: &[SqsMessage],
    state: &State<K, E, R, Q>,
    now: jiff::Timestamp,
) -> Vec<Incoming> {
    records.iter().map(|r| one(r, state, now)).collect()
}

fn one<K, E, R, Q>(
    record: &SqsMessage,
    state: &State<K, E, R, Q>,
    now: jiff::Timestamp,
) -> Incoming {
    let id = record
        .message_id
        .clone()
        .unwrap_or_else(|| "(no id)".into());
    let receives = record
        .attributes
        .get("ApproximateReceiveCount")
        .cloned()
        .unwrap_or_else(|| "?".into());
    let incoming = |read| Incoming {
        id: id.clone(),
        handle: record.receipt_handle.clone(),
        receives: receives.clone(),
        read,
    };
    let Some(body) = record.body.as_deref() else {
        telemetry::interruption_message("unreadable");
        tracing::error!(message_id = id, "message without a body; dropped");
        return incoming(Read::Done);
    };
    let message = match parse(body, Some(&state.settings.origin), now) {
        Err(e) => {
            telemetry::interruption_message("unreadable");
            let why = nodewright::error_chain(&e);
            return incoming(Read::Unreadable {
                why,
                instance_ids: instance_ids_in(body),
            });
        }
        Ok(Parsed::Ignored(i)) => {
            let suspicious = i.reason.is_suspicious();
            telemetry::interruption_message(if suspicious { "suspicious" } else { "ignored" });
            let log = |level_warn: bool| {
                if level_warn {
                    tracing::warn!(message_id = id, event_id = i.event_id, source = i.source,
                        detail_type = i.detail_type, reason = %i.reason, "suspicious event ignored");
                } else {
                    tracing::info!(message_id = id, event_id = i.event_id, source = i.source,
                        detail_type = i.detail_type, reason = %i.reason, "event ignored");
                }
            };
            log(suspicious);
            return incoming(Read::Done);
        }
        Ok(Parsed::Act(m)) => m,
    };
    if let (Detail::FollowUp(_), Some(me)) = (&message.detail, &state.settings.sender_id) {
        let sender = record.attributes.get("SenderId").map(String::as_str);
        if sender != Some(me.as_str()) {
            telemetry::interruption_message("suspicious");
            tracing::warn!(
                message_id = id,
                sender,
                "a follow-up this function did not send; ignored as suspicious"
            );
            return incoming(Read::Done);
        }
    }
    telemetry::interruption_message(message.kind().as_str());
    incoming(Read::Act(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_are_found_in_text_that_does_not_parse() {
        let cases = [
            (
                r#"{"detail": {"instance-id": "i-0b662ef9931388ba0""#,
                vec!["i-0b662ef9931388ba0"],
            ),
            (
                "entities: i-1234abcd, i-1234abcd and vol-0aaa",
                vec!["i-1234abcd"],
            ),
            ("i-123 i-zzzzzzzz ami-0b662ef9931388ba0", vec![]),
        ];
        for (text, want) in cases {
            assert_eq!(instance_ids_in(text), want, "{text}");
        }
    }
}
