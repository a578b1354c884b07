//! One instance of one message: find its node, check ownership with EC2 just before
//! acting, gather the NodePool's choices when the message needs them, decide the action
//! (the pure [`action_for`]) and hand it to the step executors.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use nodewright::api::NodePool;
use nodewright::api::labels::NODEPOOL;
use nodewright::aws::{AwsError, FollowUpQueue, OwnedInstances, is_owned};
use nodewright::disruption::pool_budgets;
use nodewright::interruption::{
    Action, Detail, Message, NodeFacts, REBALANCE_ANNOTATION, RebalancePolicy, action_for,
};
use nodewright::kube::{
    ConfigSource, EventType, KubeError, NodeDisruption, ObjectKind, parse_provider_id, usable,
};
use nodewright::provision::{ProvisionError, Replacement};

use super::State;
use super::steps::{self, Target};

#[derive(Debug, thiserror::Error)]
pub enum ActError {
    #[error("{what} (Kubernetes)")]
    Kube {
        what: &'static str,
        #[source]
        source: KubeError,
    },
    #[error("{what} (AWS)")]
    Aws {
        what: &'static str,
        #[source]
        source: AwsError,
    },
    #[error("launching replacement capacity for node {node}")]
    Replace {
        node: String,
        #[source]
        source: ProvisionError,
    },
}

pub(crate) fn kube_err(what: &'static str) -> impl FnOnce(KubeError) -> ActError {
    move |source| ActError::Kube { what, source }
}

pub(crate) fn aws_err(what: &'static str) -> impl FnOnce(AwsError) -> ActError {
    move |source| ActError::Aws { what, source }
}

/// What handling one instance did, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ignored(String),
    Cordoned,
    /// Replacement asked for (instances launched, possibly none when the pods fit
    /// elsewhere) and the drain begun or scheduled.
    Replacing {
        launched: Vec<String>,
    },
    Draining {
        evicted: usize,
        blocked: usize,
        deleted: usize,
    },
    /// Nothing to do now; a follow-up looks again.
    Waiting(&'static str),
    NodeDeleted {
        existed: bool,
    },
}

fn instance_of(node: &Node) -> Option<String> {
    let id = node.spec.as_ref()?.provider_id.as_deref()?;
    parse_provider_id(id).map(|p| p.instance_id)
}

pub(crate) async fn handle<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    message: &Message,
    instance_id: &str,
    now: Timestamp,
) -> Result<Outcome, ActError>
where
    K: NodeDisruption + ConfigSource,
    E: OwnedInstances,
    R: Replacement,
    Q: FollowUpQueue,
{
    let nodes = state
        .kube
        .nodes()
        .await
        .map_err(kube_err("listing nodes"))?;
    let Some(node) = nodes
        .into_iter()
        .find(|n| instance_of(n).as_deref() == Some(instance_id))
    else {
        return Ok(Outcome::Ignored("no node for this instance".into()));
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    let described = state
        .ec2
        .describe_ids(&[instance_id.to_string()])
        .await
        .map_err(aws_err("checking the instance's ownership"))?;
    let owned = described
        .iter()
        .any(|i| i.id == instance_id && is_owned(i, &state.settings.cluster));
    let pool = if owned && needs_pool(message) {
        node_pool(state, &node).await?
    } else {
        None
    };
    let rebalance = match pool.as_ref().map(|p| {
        RebalancePolicy::from_annotation(
            p.metadata
                .annotations
                .get(REBALANCE_ANNOTATION)
                .map(String::as_str),
        )
    }) {
        Some(Err(why)) => {
            let pool_name = pool
                .as_ref()
                .map(|p| p.metadata.name.as_str())
                .unwrap_or("");
            tracing::warn!(
                nodepool = pool_name,
                why,
                "using the default rebalance policy"
            );
            state
                .kube
                .object_event(
                    ObjectKind::NodePool,
                    pool_name,
                    "InvalidConfiguration",
                    &format!("{why}; using replace"),
                    EventType::Warning,
                )
                .await;
            RebalancePolicy::default()
        }
        Some(Ok(policy)) => policy,
        None => RebalancePolicy::default(),
    };
    let facts = NodeFacts {
        node: name.clone(),
        owned,
        rebalance,
    };
    let action = action_for(message, Some(&facts), now);
    let target = Target {
        node: name,
        instance_id: instance_id.to_string(),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        annotations: node.metadata.annotations.clone().unwrap_or_default(),
        termination_grace: pool
            .as_ref()
            .and_then(|p| p.spec.template.spec.termination_grace_period)
            .map(|d| d.0),
        budgets: pool
            .as_ref()
            .map(|p| pool_budgets(p).map_err(|e| format!("NodePool {}: {e}", p.metadata.name))),
    };
    if let Action::None { why, event } = &action {
        if let Some(reason) = event {
            state
                .kube
                .object_event(
                    ObjectKind::Node,
                    &target.node,
                    reason.event_reason(),
                    &format!(
                        "{} for instance {instance_id}: {why}",
                        message.kind().as_str()
                    ),
                    EventType::Normal,
                )
                .await;
        }
        return Ok(Outcome::Ignored(why.clone()));
    }
    steps::run(state, message, action, &target, now).await
}

/// The rebalance choice and the termination grace period live on the NodePool.
fn needs_pool(message: &Message) -> bool {
    match &message.detail {
        Detail::RebalanceRecommendation => true,
        Detail::FollowUp(f) => matches!(
            f.step,
            nodewright::interruption::Step::AwaitReplacement { .. }
        ),
        _ => false,
    }
}

async fn node_pool<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    node: &Node,
) -> Result<Option<NodePool>, ActError>
where
    K: ConfigSource,
{
    let Some(name) = node.metadata.labels.as_ref().and_then(|l| l.get(NODEPOOL)) else {
        return Ok(None);
    };
    let config = state
        .kube
        .load()
        .await
        .map_err(kube_err("loading NodePools"))?;
    let (pools, _, _) = usable(&config.inputs, &config.problems);
    Ok(pools.into_iter().find(|p| &p.metadata.name == name))
}
