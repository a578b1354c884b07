//! The interruption queue (with its dead-letter queue) and the EventBridge rules that feed
//! it, as the stack creates them in AWS.

use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;

use super::seed::{SeedError, SeedSpec};

/// Receives before a message moves to the dead-letter queue (DESIGN: "after a few
/// receives it lands in the dead-letter queue").
const MAX_RECEIVE_COUNT: u32 = 5;
/// template.yaml's `VisibilityTimeout` and `MessageRetentionPeriod` of the interruption queue.
const VISIBILITY_TIMEOUT: &str = "120";
const RETENTION: &str = "3600";

/// (rule name suffix, source, detail-type) of the events nodewright reacts to (DESIGN.md).
const RULES: [(&str, &str, &str); 5] = [
    (
        "spot-interruption",
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
    ),
    (
        "rebalance",
        "aws.ec2",
        "EC2 Instance Rebalance Recommendation",
    ),
    (
        "state-change",
        "aws.ec2",
        "EC2 Instance State-change Notification",
    ),
    (
        "capacity-reservation",
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
    ),
    ("scheduled-change", "aws.health", "AWS Health Event"),
];

pub(super) struct Queues {
    pub queue_url: String,
    pub queue_arn: String,
    pub dlq_url: String,
    pub dlq_arn: String,
    pub rule_names: Vec<String>,
}

fn err(step: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> SeedError {
    SeedError {
        step,
        source: Box::new(e),
    }
}

fn missing(step: &'static str, what: &str) -> SeedError {
    SeedError {
        step,
        source: format!("moto's answer has no {what}").into(),
    }
}

async fn queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    redrive_to: Option<&str>,
) -> Result<(String, String), SeedError> {
    let mut create = sqs.create_queue().queue_name(name);
    if let Some(dlq_arn) = redrive_to {
        // As template.yaml sets the interruption queue (the reasons are there).
        create = create
            .attributes(QueueAttributeName::VisibilityTimeout, VISIBILITY_TIMEOUT)
            .attributes(QueueAttributeName::MessageRetentionPeriod, RETENTION);
        let policy = serde_json::json!({
            "deadLetterTargetArn": dlq_arn,
            "maxReceiveCount": MAX_RECEIVE_COUNT.to_string(),
        });
        create = create.attributes(QueueAttributeName::RedrivePolicy, policy.to_string());
    }
    let url = create
        .send()
        .await
        .map_err(|e| err("CreateQueue", e))?
        .queue_url
        .ok_or_else(|| missing("CreateQueue", "QueueUrl"))?;
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| err("GetQueueAttributes", e))?;
    let arn = attrs
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| missing("GetQueueAttributes", "QueueArn"))?;
    Ok((url, arn))
}

pub(super) async fn seed_queue_and_rules(
    config: &SdkConfig,
    spec: &SeedSpec,
) -> Result<Queues, SeedError> {
    let sqs = aws_sdk_sqs::Client::new(config);
    let (dlq_url, dlq_arn) =
        queue(&sqs, &format!("{}-interruption-dlq", spec.cluster), None).await?;
    let (queue_url, queue_arn) = queue(
        &sqs,
        &format!("{}-interruption", spec.cluster),
        Some(&dlq_arn),
    )
    .await?;
    let events = aws_sdk_eventbridge::Client::new(config);
    let mut rule_names = Vec::new();
    for (suffix, source, detail_type) in RULES {
        let name = format!("{}-{suffix}", spec.cluster);
        let pattern = serde_json::json!({ "source": [source], "detail-type": [detail_type] });
        events
            .put_rule()
            .name(&name)
            .event_pattern(pattern.to_string())
            .send()
            .await
            .map_err(|e| err("PutRule", e))?;
        let target = aws_sdk_eventbridge::types::Target::builder()
            .id("interruption-queue")
            .arn(&queue_arn)
            .build()
            .map_err(|e| err("PutTargets", e))?;
        events
            .put_targets()
            .rule(&name)
            .targets(target)
            .send()
            .await
            .map_err(|e| err("PutTargets", e))?;
        rule_names.push(name);
    }
    Ok(Queues {
        queue_url,
        queue_arn,
        dlq_url,
        dlq_arn,
        rule_names,
    })
}
