//! What the soak does and asks in EC2 as AWS or another team would: events sent through
//! EventBridge, an instance nodewright does not own, and what EC2 says of instances.

use std::collections::BTreeMap;

use anyhow::Context as _;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::world::World;

pub fn ec2(world: &World) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&world.sdk)
}

pub async fn spot_event(world: &World, id: &str, now: Timestamp) -> anyhow::Result<()> {
    world
        .put_event(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": id, "instance-action": "terminate"}),
            now,
        )
        .await
}

pub fn health(id: &str, start: Timestamp) -> Value {
    let rfc1123 = |t: Timestamp| t.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
    json!({
        "eventArn": format!("arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/soak-{id}"),
        "service": "EC2",
        "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": "scheduledChange",
        "startTime": rfc1123(start),
        "endTime": rfc1123(start + SignedDuration::from_hours(2)),
        "eventDescription": [{"language": "en_US", "latestDescription": "retirement"}],
        "affectedEntities": [{"entityValue": id}],
    })
}

/// An instance in the cluster's subnet without nodewright's ownership tag (a managed node
/// group's, say): it must outlive every warning.
pub async fn launch_foreign(world: &World) -> anyhow::Result<String> {
    let image = world.seeded.images.first().context("no seeded image")?;
    let subnet = world.seeded.subnets.first().context("no seeded subnet")?;
    let out = ec2(world)
        .run_instances()
        .image_id(&image.image_id)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .subnet_id(&subnet.id)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .context("RunInstances for the foreign instance")?;
    out.instances()
        .first()
        .and_then(|i| i.instance_id())
        .map(str::to_string)
        .context("RunInstances returned no instance")
}

pub async fn foreign_state(world: &World, id: &str) -> anyhow::Result<String> {
    let out = ec2(world)
        .describe_instances()
        .instance_ids(id)
        .send()
        .await?;
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| Some(i.state()?.name()?.as_str().to_string()))
        .unwrap_or_else(|| "gone".into()))
}

/// Every instance, terminated ones too, carrying this cluster's ownership tag: (id, the
/// launch decision it was run for).
pub async fn owned_instances(world: &World) -> anyhow::Result<Vec<(String, String)>> {
    let filter = aws_sdk_ec2::types::Filter::builder()
        .name("tag:nodewright.io/cluster")
        .values(&world.seeded.cluster)
        .build();
    let out = ec2(world)
        .describe_instances()
        .filters(filter)
        .send()
        .await?;
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| {
            let claim = i
                .tags()
                .iter()
                .find(|t| t.key() == Some("nodewright.io/nodeclaim"))?;
            Some((i.instance_id()?.to_string(), claim.value()?.to_string()))
        })
        .collect())
}

pub async fn common_spot_type(world: &World) -> anyhow::Result<Option<String>> {
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for i in world
        .instances()
        .await?
        .into_iter()
        .filter(|i| i.lifecycle == "spot")
    {
        *count.entry(i.instance_type).or_default() += 1;
    }
    Ok(count.into_iter().max_by_key(|(_, n)| *n).map(|(t, _)| t))
}
