//! EC2's ClientToken idempotency, emulated in the AWS front because moto ignores the
//! token: a repeated CreateFleet/RunInstances with the same token and the same parameters
//! gets the original answer back (also after those instances terminated: EC2 remembers a
//! token far longer than a launch lives), and the same token with other parameters gets
//! `IdempotentParameterMismatch` (EC2 API reference, "Ensuring idempotency").

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use axum::body::Bytes;

/// Actions whose ClientToken EC2 honours and nodewright sends.
pub const TOKENED_ACTIONS: [&str; 2] = ["CreateFleet", "RunInstances"];

/// The first answer to a token.
#[derive(Debug, Clone)]
pub struct Remembered {
    pub status: u16,
    pub content_type: String,
    pub body: Bytes,
}

/// What to do with a tokened call.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// A token not seen yet (or no token): forward, then [`Tokens::remember`].
    Forward { key: Option<(String, String)> },
    /// Seen with the same parameters: answer this again.
    Replay(Remembered),
    /// Seen with other parameters.
    Mismatch { token: String },
}

/// (action, token).
type TokenKey = (String, String);
/// The parameters of the first call (without the token) and its answer.
type FirstCall = (BTreeMap<String, String>, Remembered);

#[derive(Default)]
pub struct Tokens {
    seen: Mutex<HashMap<TokenKey, FirstCall>>,
    /// One call per token at a time (see [`Tokens::turn`]).
    turns: Mutex<HashMap<TokenKey, std::sync::Arc<tokio::sync::Mutex<()>>>>,
}

/// The form parameters of a query-protocol body, decoded.
pub fn form_params(body: &[u8]) -> BTreeMap<String, String> {
    url_decode_pairs(body)
}

fn url_decode_pairs(body: &[u8]) -> BTreeMap<String, String> {
    let text = String::from_utf8_lossy(body);
    text.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Tokens {
    /// Waits for this call's turn with its token: EC2 answers concurrent calls carrying one
    /// token as one launch, so a call waits while another with its token is in flight and
    /// is then judged against that one's answer. `None` for a call without a token.
    pub async fn turn(
        &self,
        action: &str,
        body: &[u8],
    ) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        if !TOKENED_ACTIONS.contains(&action) {
            return None;
        }
        let token = form_params(body)
            .remove("ClientToken")
            .filter(|t| !t.is_empty())?;
        let lock = self
            .turns
            .lock()
            .ok()?
            .entry((action.to_string(), token))
            .or_default()
            .clone();
        Some(lock.lock_owned().await)
    }

    pub fn judge(&self, action: &str, body: &[u8]) -> Verdict {
        if !TOKENED_ACTIONS.contains(&action) {
            return Verdict::Forward { key: None };
        }
        let mut params = form_params(body);
        let Some(token) = params.remove("ClientToken").filter(|t| !t.is_empty()) else {
            return Verdict::Forward { key: None };
        };
        let key = (action.to_string(), token.clone());
        let Ok(seen) = self.seen.lock() else {
            return Verdict::Forward { key: None };
        };
        match seen.get(&key) {
            Some((first, answer)) if *first == params => Verdict::Replay(answer.clone()),
            Some(_) => Verdict::Mismatch { token },
            None => Verdict::Forward { key: Some(key) },
        }
    }

    /// Keeps a successful first answer for `key` (a failed call does not use up a token:
    /// EC2 lets a call that failed validation be retried with the same token).
    pub fn remember(&self, key: (String, String), body: &[u8], answer: Remembered) {
        if !(200..300).contains(&answer.status) {
            return;
        }
        let mut params = form_params(body);
        params.remove("ClientToken");
        if let Ok(mut seen) = self.seen.lock() {
            seen.entry(key).or_insert((params, answer));
        }
    }
}

/// EC2's error document for a token reused with other parameters (HTTP 400).
pub fn mismatch_xml(token: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
         <Code>IdempotentParameterMismatch</Code><Message>The client token {token} was \
         already used with different parameters (emulated by the local world).</Message>\
         </Error></Errors><RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> Remembered {
        Remembered {
            status: 200,
            content_type: "text/xml".into(),
            body: Bytes::from(body.to_string()),
        }
    }

    #[tokio::test]
    async fn a_call_waits_while_another_with_its_token_is_in_flight() {
        let tokens = Tokens::default();
        let body = b"Action=CreateFleet&ClientToken=nw-1&Type=instant";
        let first = tokens.turn("CreateFleet", body).await.expect("a turn");
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            tokens.turn("CreateFleet", body),
        );
        assert!(
            waiting.await.is_err(),
            "the second call waits for the first"
        );
        let other = b"Action=CreateFleet&ClientToken=nw-2&Type=instant";
        assert!(
            tokens.turn("CreateFleet", other).await.is_some(),
            "another token does not wait"
        );
        drop(first);
        assert!(tokens.turn("CreateFleet", body).await.is_some());
        assert!(tokens.turn("DescribeInstances", body).await.is_none());
    }

    #[test]
    fn a_repeated_token_replays_the_first_answer_and_other_parameters_are_a_mismatch() {
        let tokens = Tokens::default();
        let first = b"Action=CreateFleet&ClientToken=t1&Type=instant&Overrides.1.SubnetId=subnet-a";
        let Verdict::Forward { key: Some(key) } = tokens.judge("CreateFleet", first) else {
            panic!("a new token is forwarded");
        };
        tokens.remember(key, first, ok("<i-1/>"));
        match tokens.judge("CreateFleet", first) {
            Verdict::Replay(r) => assert_eq!(r.body, Bytes::from("<i-1/>")),
            other => panic!("expected a replay, got {other:?}"),
        }
        let drifted =
            b"Action=CreateFleet&ClientToken=t1&Type=instant&Overrides.1.SubnetId=subnet-b";
        assert!(matches!(
            tokens.judge("CreateFleet", drifted),
            Verdict::Mismatch { token } if token == "t1"
        ));
        let other_token = b"Action=CreateFleet&ClientToken=t2&Type=instant";
        assert!(matches!(
            tokens.judge("CreateFleet", other_token),
            Verdict::Forward { key: Some(_) }
        ));
        assert!(matches!(
            tokens.judge("DescribeInstances", first),
            Verdict::Forward { key: None }
        ));
    }

    #[test]
    fn a_failed_first_call_does_not_use_up_its_token() {
        let tokens = Tokens::default();
        let body = b"Action=RunInstances&ClientToken=t1";
        let mut failed = ok("<Error/>");
        failed.status = 400;
        tokens.remember(("RunInstances".into(), "t1".into()), body, failed);
        assert!(matches!(
            tokens.judge("RunInstances", body),
            Verdict::Forward { key: Some(_) }
        ));
    }

    #[test]
    fn form_values_are_percent_and_plus_decoded() {
        let p = form_params(b"A=x%20y&B=a+b&C=%3A&D=");
        assert_eq!(p["A"], "x y");
        assert_eq!(p["B"], "a b");
        assert_eq!(p["C"], ":");
        assert_eq!(p["D"], "");
    }
}
