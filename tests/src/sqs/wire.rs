//! SQS's JSON protocol (`X-Amz-Target: AmazonSQS.<Action>`, awsJson1_0) for the emulated
//! queues: the calls a function or the CLI makes. Errors are SQS's: HTTP 400 with
//! `__type` and the `x-amzn-query-error` header the SDK reads the code from.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use md5::{Digest as _, Md5};
use serde_json::{Value, json};

use super::model::{Message, QueueError, Sent};
use super::{EmulatedQueue, Sqs};

/// The actions served from the emulated queues; anything else goes to moto.
pub const ACTIONS: [&str; 9] = [
    "SendMessage",
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
    "GetQueueAttributes",
    "PurgeQueue",
];

/// The queue URL a JSON-protocol SQS request names, if it is one of [`ACTIONS`].
pub fn queue_url_of(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let target = headers.get("x-amz-target")?.to_str().ok()?;
    let action = target.strip_prefix("AmazonSQS.")?;
    if !ACTIONS.contains(&action) {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    v.get("QueueUrl")?.as_str().map(str::to_string)
}

/// The access key id a SigV4 `Authorization` header names.
pub fn access_key_of(headers: &HeaderMap) -> Option<String> {
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let credential = auth.split("Credential=").nth(1)?;
    credential.split('/').next().map(str::to_string)
}

fn md5_hex(text: &str) -> String {
    hex::encode(Md5::digest(text.as_bytes()))
}

fn ok(v: Value) -> Response {
    let mut r = (StatusCode::OK, v.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    r
}

fn error(code: &str, message: &str) -> Response {
    let body = json!({"__type": format!("com.amazonaws.sqs#{code}"), "message": message});
    let mut r = (StatusCode::BAD_REQUEST, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("{code};Sender")) {
        r.headers_mut().insert("x-amzn-query-error", v);
    }
    r
}

fn queue_error(e: &QueueError) -> Response {
    let code = match e {
        QueueError::ReceiptHandleIsInvalid => "ReceiptHandleIsInvalid",
        QueueError::MessageNotInflight => "MessageNotInflight",
        QueueError::InvalidParameterValue(_) => "InvalidParameterValue",
    };
    error(code, &e.to_string())
}

fn seconds(v: &Value, key: &str) -> Option<Duration> {
    v.get(key).and_then(Value::as_u64).map(Duration::from_secs)
}

/// The trace header a message carries: the `AWSTraceHeader` system attribute if the
/// caller set one, else the `X-Amzn-Trace-Id` header the SDK forwards from Lambda.
fn trace_header(request: &Value, headers: &HeaderMap) -> Option<String> {
    request
        .pointer("/MessageSystemAttributes/AWSTraceHeader/StringValue")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            headers
                .get("x-amzn-trace-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
}

fn message_json(m: &Message, attributes: bool) -> Value {
    let mut v = json!({
        "MessageId": m.id,
        "ReceiptHandle": m.handle,
        "Body": m.sent.body,
        "MD5OfBody": md5_hex(&m.sent.body),
    });
    if attributes {
        let mut a = json!({
            "SenderId": m.sent.sender_id,
            "SentTimestamp": (m.sent_at.as_millisecond()).to_string(),
            "ApproximateReceiveCount": m.receive_count.to_string(),
            "ApproximateFirstReceiveTimestamp": m
                .first_receive_at
                .map(|t| t.as_millisecond().to_string()),
        });
        if let Some(t) = &m.sent.trace_header {
            a["AWSTraceHeader"] = json!(t);
        }
        v["Attributes"] = a;
    }
    v
}

/// Answers one request for an emulated queue (moto has already judged its IAM), or `None`
/// when the URL is not an emulated queue's. `moto`: moto's answer to the same request; the
/// ids it gave its copies of sent messages are kept as the messages' ids, so the copies can
/// be told apart (see [`super`]).
pub async fn serve(
    sqs: &Sqs,
    action: &str,
    headers: &HeaderMap,
    body: &Bytes,
    moto: &Value,
) -> Option<Response> {
    let request: Value = serde_json::from_slice(body).ok()?;
    let url = request.get("QueueUrl")?.as_str()?;
    let (queue, dead) = sqs.queue(url)?;
    let sender = access_key_of(headers)
        .map(|k| sqs.sender_of(&k))
        .unwrap_or_default();
    Some(if dead {
        dead_letter_queue(queue, action, &request)
    } else {
        main_queue(sqs, queue, action, &request, headers, &sender, moto).await
    })
}

async fn main_queue(
    sqs: &Sqs,
    queue: &EmulatedQueue,
    action: &str,
    request: &Value,
    headers: &HeaderMap,
    sender: &str,
    moto: &Value,
) -> Response {
    match action {
        "SendMessage" => {
            let body = request["MessageBody"].as_str().unwrap_or_default();
            let sent = Sent {
                body: body.to_string(),
                sender_id: sender.to_string(),
                trace_header: trace_header(request, headers),
                delay: seconds(request, "DelaySeconds"),
            };
            let id = moto["MessageId"].as_str().map(str::to_string);
            if let Some(id) = &id {
                sqs.shadow(id);
            }
            match queue.send(sent, id) {
                Ok(id) => ok(json!({"MessageId": id, "MD5OfMessageBody": md5_hex(body)})),
                Err(e) => queue_error(&e),
            }
        }
        "SendMessageBatch" => {
            let mut successful = Vec::new();
            let mut failed = Vec::new();
            for entry in request["Entries"].as_array().into_iter().flatten() {
                let body = entry["MessageBody"].as_str().unwrap_or_default();
                let sent = Sent {
                    body: body.to_string(),
                    sender_id: sender.to_string(),
                    trace_header: trace_header(entry, headers),
                    delay: seconds(entry, "DelaySeconds"),
                };
                let id = moto["Successful"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|s| s["Id"] == entry["Id"])
                    .and_then(|s| s["MessageId"].as_str())
                    .map(str::to_string);
                if let Some(id) = &id {
                    sqs.shadow(id);
                }
                match queue.send(sent, id) {
                    Ok(id) => successful.push(json!({"Id": entry["Id"], "MessageId": id,
                        "MD5OfMessageBody": md5_hex(body)})),
                    Err(e) => failed.push(json!({"Id": entry["Id"], "SenderFault": true,
                        "Code": "InvalidParameterValue", "Message": e.to_string()})),
                }
            }
            ok(json!({"Successful": successful, "Failed": failed}))
        }
        "ReceiveMessage" => {
            let max = request["MaxNumberOfMessages"]
                .as_u64()
                .unwrap_or(1)
                .clamp(1, 10) as usize;
            let wait = seconds(request, "WaitTimeSeconds").unwrap_or_default();
            let visibility = seconds(request, "VisibilityTimeout");
            let attributes = request.get("MessageSystemAttributeNames").is_some()
                || request.get("AttributeNames").is_some();
            let got = queue.receive(max, visibility, wait).await;
            let messages: Vec<Value> = got.iter().map(|m| message_json(m, attributes)).collect();
            ok(json!({"Messages": messages}))
        }
        "DeleteMessage" => {
            let handle = request["ReceiptHandle"].as_str().unwrap_or_default();
            match queue.with(|q, now| q.delete(handle, now)) {
                Ok(()) => ok(json!({})),
                Err(e) => queue_error(&e),
            }
        }
        "DeleteMessageBatch" => batch(request, |entry| {
            let handle = entry["ReceiptHandle"].as_str().unwrap_or_default();
            queue.with(|q, now| q.delete(handle, now))
        }),
        "ChangeMessageVisibility" => {
            let handle = request["ReceiptHandle"].as_str().unwrap_or_default();
            let timeout = seconds(request, "VisibilityTimeout").unwrap_or_default();
            match queue.with(|q, now| q.change_visibility(handle, timeout, now)) {
                Ok(()) => ok(json!({})),
                Err(e) => queue_error(&e),
            }
        }
        "ChangeMessageVisibilityBatch" => batch(request, |entry| {
            let handle = entry["ReceiptHandle"].as_str().unwrap_or_default();
            let timeout = seconds(entry, "VisibilityTimeout").unwrap_or_default();
            queue.with(|q, now| q.change_visibility(handle, timeout, now))
        }),
        "GetQueueAttributes" => {
            let (counts, oldest) = queue.with(|q, now| (q.counts(now), q.oldest_age(now)));
            ok(json!({"Attributes": {
                "QueueArn": queue.arn,
                "ApproximateNumberOfMessages": counts.visible.to_string(),
                "ApproximateNumberOfMessagesNotVisible": counts.in_flight.to_string(),
                "ApproximateNumberOfMessagesDelayed": counts.delayed.to_string(),
                "ApproximateAgeOfOldestMessage": oldest.as_secs().to_string(),
            }}))
        }
        _ => error(
            "UnsupportedOperation",
            &format!("{action} is not emulated by the local world's queue"),
        ),
    }
}

fn batch(request: &Value, mut each: impl FnMut(&Value) -> Result<(), QueueError>) -> Response {
    let mut successful = Vec::new();
    let mut failed = Vec::new();
    for entry in request["Entries"].as_array().into_iter().flatten() {
        match each(entry) {
            Ok(()) => successful.push(json!({"Id": entry["Id"]})),
            Err(e) => failed.push(json!({"Id": entry["Id"], "SenderFault": true,
                "Code": format!("{e:?}"), "Message": e.to_string()})),
        }
    }
    ok(json!({"Successful": successful, "Failed": failed}))
}

fn dead_letter_queue(queue: &EmulatedQueue, action: &str, request: &Value) -> Response {
    match action {
        "ReceiveMessage" => {
            let max = request["MaxNumberOfMessages"]
                .as_u64()
                .unwrap_or(1)
                .clamp(1, 10) as usize;
            let messages: Vec<Value> = queue.with(|q, _| {
                q.dead_letters()
                    .iter()
                    .take(max)
                    .map(|(m, _)| message_json(m, true))
                    .collect()
            });
            ok(json!({"Messages": messages}))
        }
        "GetQueueAttributes" => {
            let n = queue.with(|q, _| q.dead_letters().len());
            ok(json!({"Attributes": {
                "ApproximateNumberOfMessages": n.to_string(),
                "ApproximateNumberOfMessagesNotVisible": "0",
                "ApproximateNumberOfMessagesDelayed": "0",
            }}))
        }
        _ => error(
            "UnsupportedOperation",
            &format!("{action} on the dead-letter queue is not emulated by the local world"),
        ),
    }
}
