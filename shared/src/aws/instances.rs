//! The instances this cluster owns (EC2 DescribeInstances, TerminateInstances,
//! CreateTags). Ownership is the tag `nodewright.io/cluster=<cluster>`; nothing without it
//! is ever terminated, whatever the caller asks.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Instance, InstanceStateName, ResourceType};

use crate::catalog::CapacityType;

use super::Ec2Adapter;
use super::convert::{filter, tag_map, timestamp};
use super::errors::{AwsError, ErrorClass, api};
use super::fleet::capacity_type_of;
use super::ports::InstanceInventory;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

impl InstanceState {
    fn from_sdk(state: &InstanceStateName) -> Option<InstanceState> {
        Some(match state {
            InstanceStateName::Pending => InstanceState::Pending,
            InstanceStateName::Running => InstanceState::Running,
            InstanceStateName::ShuttingDown => InstanceState::ShuttingDown,
            InstanceStateName::Terminated => InstanceState::Terminated,
            InstanceStateName::Stopping => InstanceState::Stopping,
            InstanceStateName::Stopped => InstanceState::Stopped,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OwnedInstance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub state: InstanceState,
    pub capacity_type: CapacityType,
    pub launch_time: Option<jiff::Timestamp>,
    pub tags: BTreeMap<String, String>,
    pub private_dns_name: Option<String>,
    /// The subnet it runs in (drift: a subnet its class no longer selects).
    pub subnet_id: Option<String>,
    /// The AMI and security groups it runs with, as EC2 describes them: what an instance
    /// nodewright adopts is tagged with for drift (its own launches carry the launch's).
    pub image_id: Option<String>,
    pub security_groups: Vec<String>,
}

/// What [`InstanceInventory::terminate`] did with each id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminateOutcome {
    /// Terminated now (or already shutting down).
    pub terminated: Vec<String>,
    /// Not terminated: the instance does not carry this cluster's ownership tag.
    pub refused: Vec<String>,
    /// Already terminated or unknown to EC2: nothing to do.
    pub gone: Vec<String>,
}

/// The states of instances that still exist (DescribeInstances filter values).
const LIVE_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];
/// Ids per DescribeInstances/TerminateInstances call, well below EC2's filter and request
/// limits (1,000 ids per TerminateInstances).
const IDS_PER_CALL: usize = 100;

fn owned_instance(i: &Instance) -> Option<OwnedInstance> {
    Some(OwnedInstance {
        id: i.instance_id.clone()?,
        instance_type: i
            .instance_type
            .as_ref()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        zone: i
            .placement
            .as_ref()
            .and_then(|p| p.availability_zone.clone())
            .unwrap_or_default(),
        state: InstanceState::from_sdk(i.state.as_ref()?.name.as_ref()?)?,
        capacity_type: capacity_type_of(
            i.instance_lifecycle.as_ref().map(|l| l.as_str()),
            i.capacity_reservation_id.as_deref(),
        ),
        launch_time: i.launch_time.as_ref().and_then(timestamp),
        tags: tag_map(i.tags()),
        private_dns_name: i.private_dns_name.clone().filter(|n| !n.is_empty()),
        subnet_id: i.subnet_id.clone().filter(|s| !s.is_empty()),
        image_id: i.image_id.clone().filter(|s| !s.is_empty()),
        security_groups: i
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id.clone())
            .collect(),
    })
}

/// How to treat each described instance when asked to terminate it.
fn sort_for_termination(
    cluster: &str,
    asked: &[String],
    described: &[OwnedInstance],
) -> (Vec<String>, TerminateOutcome) {
    let mut to_terminate = Vec::new();
    let mut outcome = TerminateOutcome::default();
    for id in asked {
        match described.iter().find(|i| &i.id == id) {
            None => outcome.gone.push(id.clone()),
            Some(i) if i.state == InstanceState::Terminated => outcome.gone.push(id.clone()),
            Some(i)
                if i.tags
                    .get(crate::api::labels::OWNERSHIP_TAG)
                    .map(String::as_str)
                    != Some(cluster) =>
            {
                outcome.refused.push(id.clone())
            }
            Some(_) => to_terminate.push(id.clone()),
        }
    }
    (to_terminate, outcome)
}

impl Ec2Adapter {
    /// This cluster's ownership tag, and a state that is not terminated.
    fn live_owned_filters(&self) -> Vec<aws_sdk_ec2::types::Filter> {
        let (k, v) = self.ownership();
        let states: Vec<String> = LIVE_STATES.iter().map(|s| s.to_string()).collect();
        vec![
            filter(&format!("tag:{k}"), &[v]),
            filter("instance-state-name", &states),
        ]
    }

    pub(super) async fn describe(
        &self,
        filters: Vec<aws_sdk_ec2::types::Filter>,
    ) -> Result<Vec<OwnedInstance>, AwsError> {
        let reservations = self
            .client
            .describe_instances()
            .set_filters(Some(filters))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(api(|source| AwsError::DescribeInstances { source }))?;
        Ok(reservations
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(owned_instance)
            .collect())
    }
}

impl InstanceInventory for Ec2Adapter {
    async fn list_owned(&self) -> Result<Vec<OwnedInstance>, AwsError> {
        self.describe(self.live_owned_filters()).await
    }

    async fn list_owned_ids(&self, ids: &[String]) -> Result<Vec<OwnedInstance>, AwsError> {
        let mut owned = vec![];
        for chunk in ids.chunks(IDS_PER_CALL) {
            let mut filters = self.live_owned_filters();
            filters.push(filter("instance-id", chunk));
            owned.extend(self.describe(filters).await?);
        }
        Ok(owned)
    }

    async fn terminate(&self, ids: &[String]) -> Result<TerminateOutcome, AwsError> {
        let mut total = TerminateOutcome::default();
        for chunk in ids.chunks(IDS_PER_CALL) {
            // Re-describe just before acting, by filter: an unknown id is then simply
            // absent instead of failing the whole call.
            let described = self.describe(vec![filter("instance-id", chunk)]).await?;
            let (to_terminate, outcome) = sort_for_termination(&self.cluster, chunk, &described);
            total.refused.extend(outcome.refused);
            total.gone.extend(outcome.gone);
            if to_terminate.is_empty() {
                continue;
            }
            let result = self
                .client
                .terminate_instances()
                .set_instance_ids(Some(to_terminate.clone()))
                .send()
                .await;
            match result {
                Ok(_) => total.terminated.extend(to_terminate),
                Err(e) => {
                    let err = api(|source| AwsError::TerminateInstances {
                        ids: to_terminate.clone(),
                        source,
                    })(e);
                    // Gone between describe and terminate: that is what we wanted.
                    if err.class() != ErrorClass::NotFound {
                        return Err(err);
                    }
                    total.gone.extend(to_terminate);
                }
            }
        }
        Ok(total)
    }

    async fn states(
        &self,
        ids: &[String],
    ) -> Result<std::collections::HashMap<String, InstanceState>, AwsError> {
        let mut out = std::collections::HashMap::new();
        for chunk in ids.chunks(IDS_PER_CALL) {
            for i in self.describe(vec![filter("instance-id", chunk)]).await? {
                out.insert(i.id, i.state);
            }
        }
        Ok(out)
    }

    async fn create_tags(
        &self,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), AwsError> {
        if ids.is_empty() || tags.is_empty() {
            return Ok(());
        }
        let spec = super::convert::tag_spec(ResourceType::Instance, tags);
        self.client
            .create_tags()
            .set_resources(Some(ids.to_vec()))
            .set_tags(spec.tags)
            .send()
            .await
            .map_err(api(|source| AwsError::CreateTags {
                ids: ids.to_vec(),
                source,
            }))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str, cluster: Option<&str>, state: InstanceState) -> OwnedInstance {
        OwnedInstance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state,
            capacity_type: CapacityType::OnDemand,
            launch_time: None,
            tags: cluster
                .map(|c| (crate::api::labels::OWNERSHIP_TAG.to_string(), c.to_string()))
                .into_iter()
                .collect(),
            private_dns_name: None,
            subnet_id: None,
            image_id: None,
            security_groups: Vec::new(),
        }
    }

    #[test]
    fn only_instances_tagged_for_this_cluster_are_terminated() {
        let described = vec![
            instance("i-owned", Some("demo"), InstanceState::Running),
            instance("i-untagged", None, InstanceState::Running),
            instance("i-other-cluster", Some("prod"), InstanceState::Running),
            instance("i-done", Some("demo"), InstanceState::Terminated),
        ];
        let asked: Vec<String> = [
            "i-owned",
            "i-untagged",
            "i-other-cluster",
            "i-done",
            "i-unknown",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (to_terminate, outcome) = sort_for_termination("demo", &asked, &described);
        assert_eq!(to_terminate, ["i-owned"]);
        assert_eq!(outcome.refused, ["i-untagged", "i-other-cluster"]);
        assert_eq!(outcome.gone, ["i-done", "i-unknown"]);
    }

    #[test]
    fn spot_lifecycle_means_spot_a_reservation_reserved_and_anything_else_on_demand() {
        let cases = [
            (Some("spot"), None, CapacityType::Spot),
            (Some("capacity-block"), None, CapacityType::OnDemand),
            (None, None, CapacityType::OnDemand),
            (None, Some(""), CapacityType::OnDemand),
            (None, Some("cr-0aa"), CapacityType::Reserved),
            (
                Some("capacity-block"),
                Some("cr-0bb"),
                CapacityType::Reserved,
            ),
        ];
        for (lifecycle, reservation, want) in cases {
            assert_eq!(
                capacity_type_of(lifecycle, reservation),
                want,
                "{lifecycle:?} {reservation:?}"
            );
        }
    }
}
