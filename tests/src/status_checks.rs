//! EC2 status checks the world can fail: moto reports every running instance's system and
//! instance checks as `ok` and has no way to impair one, so the AWS front rewrites its
//! DescribeInstanceStatus answer for the instances a test impaired, as EC2 reports a failed
//! check (status `impaired`, the reachability detail `failed` with its `impairedSince`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

/// Which of EC2's two checks fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    System,
    Instance,
}

impl Check {
    fn element(self) -> &'static str {
        match self {
            Check::System => "systemStatus",
            Check::Instance => "instanceStatus",
        }
    }
}

/// Impaired checks, by instance id, shared with the test that set them.
#[derive(Debug, Clone, Default)]
pub struct StatusChecks(Arc<Mutex<BTreeMap<String, (Check, Timestamp)>>>);

impl StatusChecks {
    pub fn impair(&self, instance_id: &str, check: Check, since: Timestamp) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(instance_id.to_string(), (check, since));
        }
    }

    /// moto's answer to `action` with the impaired checks written in.
    pub fn rewrite(&self, action: &str, body: Vec<u8>) -> Vec<u8> {
        if action != "DescribeInstanceStatus" {
            return body;
        }
        let impaired = match self.0.lock() {
            Ok(m) if !m.is_empty() => m.clone(),
            _ => return body,
        };
        let Ok(mut xml) = String::from_utf8(body.clone()) else {
            return body;
        };
        for (id, (check, since)) in impaired {
            xml = impair_in(&xml, &id, check, since);
        }
        xml.into_bytes()
    }
}

/// `xml` with `check` of the `<item>` of instance `id` replaced by an impaired one.
fn impair_in(xml: &str, id: &str, check: Check, since: Timestamp) -> String {
    let Some(at) = xml.find(&format!("<instanceId>{id}</instanceId>")) else {
        return xml.to_string();
    };
    let element = check.element();
    let (open, close) = (format!("<{element}>"), format!("</{element}>"));
    // The check of this item: after its id, before the next item's id.
    let after_id = at + "<instanceId>".len();
    let bound = xml[after_id..]
        .find("<instanceId>")
        .map_or(xml.len(), |n| after_id + n);
    let Some(start) = xml[at..bound].find(&open).map(|s| at + s) else {
        return xml.to_string();
    };
    let Some(end) = xml[start..bound]
        .find(&close)
        .map(|e| start + e + close.len())
    else {
        return xml.to_string();
    };
    let failed = format!(
        "<{element}><details><item><name>reachability</name><status>failed</status>\
         <impairedSince>{since}</impairedSince></item></details><status>impaired</status>{close}"
    );
    format!("{}{failed}{}", &xml[..start], &xml[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"<DescribeInstanceStatusResponse><instanceStatusSet><item><instanceId>i-1</instanceId><instanceStatus><details><item><name>reachability</name><status>passed</status></item></details><status>ok</status></instanceStatus><systemStatus><details><item><name>reachability</name><status>passed</status></item></details><status>ok</status></systemStatus></item><item><instanceId>i-2</instanceId><instanceStatus><status>ok</status></instanceStatus><systemStatus><status>ok</status></systemStatus></item></instanceStatusSet></DescribeInstanceStatusResponse>"#;

    #[test]
    fn only_the_impaired_check_of_the_impaired_instance_changes() {
        let checks = StatusChecks::default();
        let since: Timestamp = "2026-03-02T10:00:00Z".parse().unwrap();
        checks.impair("i-2", Check::System, since);
        let out =
            String::from_utf8(checks.rewrite("DescribeInstanceStatus", ANSWER.as_bytes().to_vec()))
                .unwrap();
        let (first, second) = out.split_once("<instanceId>i-2</instanceId>").unwrap();
        assert_eq!(first.matches("<status>ok</status>").count(), 2, "{out}");
        assert!(second.contains("<instanceStatus><status>ok</status></instanceStatus>"));
        assert!(second.contains(
            "<systemStatus><details><item><name>reachability</name><status>failed</status><impairedSince>2026-03-02T10:00:00Z</impairedSince></item></details><status>impaired</status></systemStatus>"
        ), "{out}");
        assert_eq!(
            checks.rewrite("DescribeInstances", ANSWER.as_bytes().to_vec()),
            ANSWER.as_bytes()
        );
    }
}
