//! EC2's eventual consistency, emulated in the AWS front because moto lists an instance
//! the moment it launches: while set, an instance launched through the front less than
//! `lag` ago is left out of DescribeInstances answers, and a DescribeInstances naming it
//! by id is answered `InvalidInstanceID.NotFound` (EC2 API reference, "Eventual
//! consistency in the Amazon EC2 API": a resource just created may not be visible to
//! describe calls yet, and describing it by id may fail with a not-found error).
//!
//! Emulated, not modelled: the front learns launches from the CreateFleet/RunInstances
//! answers it forwards (their `i-...` ids), and hides an instance by cutting its `<item>`
//! out of moto's XML (moto writes it without whitespace between elements). A reservation whose every instance is hidden stays listed with an
//! empty instance set (EC2 would leave it out; a reader iterating instances sees the same).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ec2_idempotency::form_params;

/// Actions whose answers name instances just launched.
const LAUNCHES: [&str; 2] = ["CreateFleet", "RunInstances"];

#[derive(Default)]
pub struct Consistency {
    lag: Mutex<Option<Duration>>,
    launched: Mutex<HashMap<String, Instant>>,
}

impl Consistency {
    /// Hide instances younger than `lag` from now on; `None` lists them at once.
    pub fn set_lag(&self, lag: Option<Duration>) {
        if let Ok(mut l) = self.lag.lock() {
            *l = lag;
        }
    }

    fn lag(&self) -> Option<Duration> {
        self.lag.lock().ok().and_then(|l| *l)
    }

    /// Notes the instances a forwarded launch answer names, launched `at`.
    pub fn launched(&self, action: &str, answer: &[u8], at: Instant) {
        if !LAUNCHES.contains(&action) {
            return;
        }
        if let Ok(mut launched) = self.launched.lock() {
            for id in instance_ids(&String::from_utf8_lossy(answer)) {
                launched.entry(id).or_insert(at);
            }
        }
    }

    /// The instances hidden at `now`.
    fn hidden(&self, now: Instant) -> Vec<String> {
        let Some(lag) = self.lag() else {
            return Vec::new();
        };
        self.launched
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|(_, at)| now.saturating_duration_since(**at) < lag)
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// For a DescribeInstances request naming a hidden instance by id: the instance EC2
    /// would answer `InvalidInstanceID.NotFound` for.
    pub fn not_found(&self, action: &str, request: &[u8], now: Instant) -> Option<String> {
        if action != "DescribeInstances" {
            return None;
        }
        let hidden = self.hidden(now);
        if hidden.is_empty() {
            return None;
        }
        form_params(request)
            .into_iter()
            .filter(|(k, _)| k.starts_with("InstanceId."))
            .map(|(_, id)| id)
            .find(|id| hidden.contains(id))
    }

    /// A DescribeInstances answer without the instances hidden at `now`; any other
    /// answer unchanged.
    pub fn visible(&self, action: &str, answer: Vec<u8>, now: Instant) -> Vec<u8> {
        if action != "DescribeInstances" {
            return answer;
        }
        let hidden = self.hidden(now);
        if hidden.is_empty() {
            return answer;
        }
        match String::from_utf8(answer) {
            Ok(xml) => without_instances(&xml, &hidden).into_bytes(),
            Err(e) => e.into_bytes(),
        }
    }
}

/// EC2's answer to a describe naming an instance it cannot see (yet).
pub fn not_found_xml(id: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
         <Code>InvalidInstanceID.NotFound</Code><Message>The instance ID '{id}' does not \
         exist</Message></Error></Errors>\
         <RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
    )
}

/// Every `i-<hex>` text node of an XML answer (CreateFleet lists ids as `<item>i-..</item>`,
/// RunInstances as `<instanceId>i-..</instanceId>`).
pub fn instance_ids(xml: &str) -> Vec<String> {
    xml.split('>')
        .filter_map(|s| s.split('<').next())
        .map(str::trim)
        .filter(|t| {
            t.strip_prefix("i-")
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .map(str::to_string)
        .collect()
}

/// `xml` without the instance `<item>` of each id in `hidden`: each direct `<item>` of an
/// `<instancesSet>` (its end found by counting nested items: tags, groups, interfaces)
/// that names a hidden id as an `<instanceId>` is cut out.
fn without_instances(xml: &str, hidden: &[String]) -> String {
    let markers: Vec<String> = hidden
        .iter()
        .map(|id| format!("<instanceId>{id}</instanceId>"))
        .collect();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut search = 0;
    while let Some(found) = xml[search..].find("<instancesSet>") {
        let mut at = search + found + "<instancesSet>".len();
        while xml[at..].starts_with("<item>") {
            let Some(end) = item_end(xml, at) else { break };
            if markers.iter().any(|m| xml[at..end].contains(m.as_str())) {
                cuts.push((at, end));
            }
            at = end;
        }
        search = at;
    }
    let mut out = String::with_capacity(xml.len());
    let mut from = 0;
    for (start, end) in cuts {
        out.push_str(&xml[from..start]);
        from = end;
    }
    out.push_str(&xml[from..]);
    out
}

/// The byte after the `</item>` closing the `<item>` at `start`.
fn item_end(xml: &str, start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i < xml.len() {
        let rest = &xml[i..];
        if rest.starts_with("<item>") {
            depth += 1;
            i += "<item>".len();
        } else if rest.starts_with("</item>") {
            depth = depth.checked_sub(1)?;
            i += "</item>".len();
            if depth == 0 {
                return Some(i);
            }
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DESCRIBED: &str = "<DescribeInstancesResponse><reservationSet><item>\
        <reservationId>r-1</reservationId><instancesSet>\
        <item><blockDeviceMapping><item><deviceName>d</deviceName></item></blockDeviceMapping>\
        <instanceId>i-0a</instanceId><tagSet><item><key>k</key></item></tagSet></item>\
        <item><instanceId>i-0b</instanceId><networkInterfaceSet><item><attachment>\
        <instanceId>i-0b</instanceId></attachment></item></networkInterfaceSet></item>\
        </instancesSet></item></reservationSet></DescribeInstancesResponse>";

    #[test]
    fn a_hidden_instance_is_cut_out_with_its_nested_items_and_the_others_stay() {
        let out = without_instances(DESCRIBED, &["i-0a".to_string()]);
        assert!(
            !out.contains("i-0a") && !out.contains("<key>k</key>"),
            "{out}"
        );
        assert!(out.contains("<instanceId>i-0b</instanceId>"), "{out}");
        assert!(out.contains("<reservationId>r-1</reservationId>"), "{out}");
        assert_eq!(
            out.matches("<item>").count(),
            out.matches("</item>").count()
        );
    }

    #[test]
    fn the_ids_of_a_fleet_answer_and_of_a_run_instances_answer_are_found() {
        let fleet = "<CreateFleetResponse><fleetId>fleet-1</fleetId><fleetInstanceSet><item>\
            <instanceIds><item>i-0c1</item><item>i-0d2</item></instanceIds></item>\
            </fleetInstanceSet></CreateFleetResponse>";
        assert_eq!(instance_ids(fleet), ["i-0c1", "i-0d2"]);
        assert_eq!(
            instance_ids(
                "<instancesSet><item><instanceId>i-9f</instanceId><imageId>ami-1</imageId>"
            ),
            ["i-9f"]
        );
    }

    #[test]
    fn an_instance_is_hidden_for_the_lag_only_and_not_at_all_without_one() {
        let c = Consistency::default();
        let t0 = Instant::now();
        c.launched("CreateFleet", b"<item>i-0a</item>", t0);
        let described = DESCRIBED.as_bytes().to_vec();
        assert_eq!(
            c.visible("DescribeInstances", described.clone(), t0),
            described
        );
        c.set_lag(Some(Duration::from_secs(5)));
        let during = c.visible(
            "DescribeInstances",
            described.clone(),
            t0 + Duration::from_secs(4),
        );
        assert!(!String::from_utf8(during).unwrap().contains("i-0a"));
        assert_eq!(
            c.not_found(
                "DescribeInstances",
                b"Action=DescribeInstances&InstanceId.1=i-0a",
                t0
            ),
            Some("i-0a".to_string())
        );
        let after = c.visible(
            "DescribeInstances",
            described.clone(),
            t0 + Duration::from_secs(5),
        );
        assert_eq!(after, described);
        assert_eq!(
            c.not_found("DescribeInstances", b"InstanceId.1=i-0b", t0),
            None
        );
    }
}
