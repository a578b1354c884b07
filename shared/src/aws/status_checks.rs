//! EC2's status checks (DescribeInstanceStatus), read for node repair: an instance whose
//! system or instance check is impaired is broken whatever its kubelet last said.

use aws_sdk_ec2::types::{InstanceStatusSummary, SummaryStatus};

use super::Ec2Adapter;
use super::convert::timestamp;
use super::errors::{AwsError, api};
use super::ports::{Impaired, InstanceStatusChecks, StatusCheck};

/// DescribeInstanceStatus takes at most 100 ids a call.
const IDS_PER_CALL: usize = 100;

impl InstanceStatusChecks for Ec2Adapter {
    async fn impaired(&self, ids: &[String]) -> Result<Vec<Impaired>, AwsError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(IDS_PER_CALL) {
            let statuses = self
                .client
                .describe_instance_status()
                .set_instance_ids(Some(chunk.to_vec()))
                .into_paginator()
                .items()
                .send()
                .collect::<Result<Vec<_>, _>>()
                .await
                .map_err(api(|source| AwsError::DescribeInstanceStatus { source }))?;
            for s in &statuses {
                let Some(id) = s.instance_id() else { continue };
                let checks = [
                    (StatusCheck::System, s.system_status()),
                    (StatusCheck::Instance, s.instance_status()),
                ];
                for (check, summary) in checks {
                    if let Some(since) = impaired_since(summary) {
                        out.push(Impaired {
                            instance_id: id.to_string(),
                            check,
                            since,
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}

/// `Some(since)` when the summary says impaired (`since`: the earliest detail's
/// `impairedSince`, if any).
fn impaired_since(summary: Option<&InstanceStatusSummary>) -> Option<Option<jiff::Timestamp>> {
    let summary = summary?;
    if summary.status() != Some(&SummaryStatus::Impaired) {
        return None;
    }
    Some(
        summary
            .details()
            .iter()
            .filter_map(|d| d.impaired_since().and_then(timestamp))
            .min(),
    )
}
