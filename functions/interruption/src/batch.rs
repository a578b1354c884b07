//! One batch: the nodes its messages name are read once, each node's removal advanced at
//! once (taken, first evictions) through the one removal path, then the batch's replacement
//! capacity asked for in one request, then the follow-ups that bring each removal back.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use nodewright::api::NodePool;
use nodewright::api::labels::{CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, ZONE};
use nodewright::aws::{FollowUpQueue, OwnedInstance, OwnedInstances, is_owned};
use nodewright::disruption::pool_budgets;
use nodewright::interruption::{
    Detail, Gate, Intent, NodeFacts, REBALANCE_ANNOTATION, Reason, RebalancePolicy, intent_for,
    pool_nodes, rebalance_gate,
};
use nodewright::kube::{ConfigSource, EventType, NodeDisruption, ObjectKind, usable};
use nodewright::removal::{
    Advanced, Ask, Avoid, Budget, Capacity, Cause, Context, Ports, Record, RemovalError, advance,
    instance_of, record_of, record_replacement,
};
use nodewright::takeover::{Hashes, take_over};

use super::State;
use super::follow::{self, Look};
use super::read::{Incoming, Read};

/// How a message of the batch was handled.
#[derive(Debug, Clone, Default)]
pub struct Handled {
    /// To be delivered again.
    pub failed: bool,
    /// The earliest deadline of its nodes' removals: a failed message comes back before it.
    pub deadline: Option<Timestamp>,
}

/// How long past the look a record promises another function's removal is left to it.
const OVERDUE: Duration = Duration::from_secs(120);

/// What the batch asks of one node.
#[derive(Debug, Default)]
struct Work {
    messages: Vec<usize>,
    wanted: Option<Record>,
    /// Follow-ups: when each was due, its round, its cause and its deadline.
    looks: Vec<(Option<Timestamp>, u32, Cause, Option<Timestamp>)>,
    cordon: bool,
    notes: Vec<(Reason, String)>,
    instance_id: String,
    /// An event began the removal and this is its first delivery: its first look is
    /// queued before the node is touched (a redelivery's was queued the first time).
    first_delivery: bool,
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a String> {
    node.metadata.labels.as_ref()?.get(key)
}

/// The node's offering, from its labels.
fn offering_of(node: &Node) -> Option<Avoid> {
    Some(Avoid {
        instance_type: label(node, INSTANCE_TYPE)?.clone(),
        zone: label(node, ZONE)?.clone(),
        capacity_type: label(node, CAPACITY_TYPE)?.clone(),
    })
}

fn pool_of<'a>(node: &Node, pools: &'a [NodePool]) -> Option<&'a NodePool> {
    let name = label(node, NODEPOOL)?;
    pools.iter().find(|p| &p.metadata.name == name)
}

fn rebalance_policy(pool: Option<&NodePool>) -> RebalancePolicy {
    let value = pool.and_then(|p| p.metadata.annotations.get(REBALANCE_ANNOTATION));
    RebalancePolicy::from_annotation(value.map(String::as_str)).unwrap_or_else(|why| {
        tracing::warn!(why, "using the default rebalance policy");
        RebalancePolicy::default()
    })
}

pub async fn run<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    messages: &[Incoming],
    now: Timestamp,
    answer_by: Timestamp,
) -> Vec<Handled>
where
    K: NodeDisruption + ConfigSource,
    E: OwnedInstances,
    R: Capacity,
    Q: FollowUpQueue,
{
    let mut handled = vec![Handled::default(); messages.len()];
    let mut ids: Vec<String> = Vec::new();
    for m in messages {
        match &m.read {
            Read::Act(msg) => ids.extend(msg.instance_ids.iter().cloned()),
            Read::Unreadable { instance_ids, .. } => ids.extend(instance_ids.iter().cloned()),
            Read::Done => {}
        }
    }
    if ids.is_empty() {
        return handled;
    }
    ids.sort();
    ids.dedup();
    let read = async {
        let nodes = state
            .kube
            .nodes()
            .await
            .map_err(|e| nodewright::error_chain(&e))?;
        let described = state
            .ec2
            .describe_ids(&ids)
            .await
            .map_err(|e| nodewright::error_chain(&e))?;
        Ok::<_, String>((nodes, described))
    };
    let (nodes, mut described) = match read.await {
        Ok(r) => r,
        Err(why) => {
            tracing::error!(
                error = why,
                "reading the batch's nodes and instances failed"
            );
            for (h, m) in handled.iter_mut().zip(messages) {
                h.failed = !matches!(m.read, Read::Done);
            }
            return handled;
        }
    };
    if state.settings.take_over_karpenter {
        let adopted = take_over(
            &state.ec2,
            &state.kube,
            &state.settings.cluster,
            &nodes,
            &mut described,
            |_| Hashes::default(),
            now,
        )
        .await;
        if let Err(why) = adopted {
            tracing::warn!(why, "not adopting Karpenter's instances");
        }
    }
    let owned = |id: &str| {
        described
            .iter()
            .any(|i: &OwnedInstance| i.id == id && is_owned(i, &state.settings.cluster))
    };
    for (h, m) in handled.iter_mut().zip(messages) {
        if let Read::Unreadable { why, instance_ids } = &m.read {
            let ours: Vec<&String> = instance_ids.iter().filter(|i| owned(i)).collect();
            // Retried, then dead-lettered (alarmed): never acknowledged unread.
            h.failed = !ours.is_empty();
            tracing::error!(message_id = m.id, receives = m.receives, instances = ?ours, error = why,
                "unreadable message; {}", if h.failed { "it names an instance of this cluster: retried" } else { "dropped" });
        }
    }
    let pools = pools_if_needed(state, messages).await;
    let work = gather(state, messages, &nodes, &owned, &pools, now);
    act(
        state,
        work,
        &nodes,
        &pools,
        messages,
        &mut handled,
        now,
        answer_by,
    )
    .await;
    handled
}

/// The NodePools, when a message needs them (a rebalance's policy and budget, a drain's
/// `terminationGracePeriod`); none when they cannot be read (the defaults apply, logged).
async fn pools_if_needed<K: ConfigSource, E, R, Q>(
    state: &State<K, E, R, Q>,
    messages: &[Incoming],
) -> Vec<NodePool> {
    if !messages.iter().any(|m| matches!(m.read, Read::Act(_))) {
        return Vec::new();
    }
    match state.kube.load().await {
        Ok(config) => usable(&config.inputs, &config.problems).0,
        Err(e) => {
            tracing::warn!(
                error = nodewright::error_chain(&e),
                "loading NodePools failed; defaults apply"
            );
            Vec::new()
        }
    }
}

fn gather<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    messages: &[Incoming],
    nodes: &[Node],
    owned: &dyn Fn(&str) -> bool,
    pools: &[NodePool],
    now: Timestamp,
) -> BTreeMap<String, Work> {
    let _ = state;
    let mut work: BTreeMap<String, Work> = BTreeMap::new();
    for (i, m) in messages.iter().enumerate() {
        let Read::Act(message) = &m.read else {
            continue;
        };
        for id in &message.instance_ids {
            let node = nodes.iter().find(|n| instance_of(n).as_deref() == Some(id));
            let facts = node.map(|n| NodeFacts {
                node: n.metadata.name.clone().unwrap_or_default(),
                owned: owned(id),
                rebalance: rebalance_policy(pool_of(n, pools)),
                offering: offering_of(n),
            });
            let intent = intent_for(message, facts.as_ref(), now);
            let Some(facts) = facts else {
                tracing::info!(
                    message_id = m.id,
                    instance_id = id,
                    "no node for this instance"
                );
                continue;
            };
            let w = work.entry(facts.node.clone()).or_default();
            w.messages.push(i);
            w.instance_id = id.clone();
            match intent {
                Intent::Remove(r) => {
                    w.wanted = nodewright::removal::merge(w.wanted.take(), Some(*r));
                    w.first_delivery |= m.receives == "1";
                }
                Intent::Continue { due } => {
                    if let Detail::FollowUp(f) = &message.detail {
                        w.looks.push((due, f.round, f.reason, f.deadline));
                    }
                }
                Intent::Cordon(_) => w.cordon = true,
                Intent::None { why, event } => {
                    tracing::info!(message_id = m.id, instance_id = id, why, "nothing to do");
                    if let Some(reason) = event {
                        w.notes
                            .push((reason, format!("{}: {why}", message.kind().as_str())));
                    }
                }
            }
        }
    }
    work
}

/// The removal a follow-up begins again on a node that records none (see [`act`]).
fn restart(
    node: &Node,
    looks: &[(Option<Timestamp>, u32, Cause, Option<Timestamp>)],
    now: Timestamp,
) -> Option<Record> {
    let (.., cause, deadline) = looks.iter().min_by_key(|(.., d)| *d)?;
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let backed_off = nodewright::removal::Backoff::read(&annotations).is_some_and(|b| b.holds(now));
    if cause.voluntary() && backed_off {
        return None;
    }
    let mut r = Record::new(*cause, now, *deadline);
    r.avoid = offering_of(node);
    Some(r)
}

/// Whether a follow-up-only look at `node` is this function's to make: its record expects
/// one of these looks, or no one has looked for too long.
fn looks_expected(
    node: &Node,
    looks: &[(Option<Timestamp>, u32, Cause, Option<Timestamp>)],
    now: Timestamp,
) -> bool {
    match record_of(node) {
        Ok(Some(r)) => {
            r.next_look.is_none()
                || looks.iter().any(|(due, ..)| *due == r.next_look)
                || r.overdue(now, OVERDUE)
        }
        _ => true,
    }
}

#[allow(clippy::too_many_arguments)]
async fn act<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    work: BTreeMap<String, Work>,
    nodes: &[Node],
    pools: &[NodePool],
    messages: &[Incoming],
    handled: &mut [Handled],
    now: Timestamp,
    answer_by: Timestamp,
) where
    K: NodeDisruption + ConfigSource,
    E: OwnedInstances,
    R: Capacity,
    Q: FollowUpQueue,
{
    let node_of = |name: &str| {
        nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
    };
    let mut removals = Vec::new();
    for (name, w) in &work {
        let Some(node) = node_of(name) else { continue };
        for (reason, note) in &w.notes {
            state
                .kube
                .object_event(
                    ObjectKind::Node,
                    name,
                    reason.event_reason(),
                    note,
                    EventType::Normal,
                )
                .await;
        }
        if w.cordon {
            let cordoned = state.kube.cordon(name).await;
            if let Err(e) = &cordoned {
                tracing::warn!(
                    node = name,
                    error = nodewright::error_chain(e),
                    "cordoning failed"
                );
                mark_failed(handled, &w.messages, None);
            }
            continue;
        }
        let mut wanted = w.wanted.clone();
        if wanted.is_none() && !w.looks.is_empty() {
            if matches!(record_of(node), Ok(None)) {
                // A look at a node with no removal: the invocation that queued it died before
                // taking the node, or a budget held a rebalance back. It begins the removal
                // again, unless a voluntary one was given up since.
                wanted = restart(node, &w.looks, now);
            } else if !looks_expected(node, &w.looks, now) {
                tracing::info!(
                    node = name,
                    "a follow-up of a chain the node's removal no longer expects; dropped"
                );
                continue;
            }
        }
        if wanted.is_none() && w.looks.is_empty() {
            continue;
        }
        let pool = pool_of(node, pools);
        let ctx = Context {
            grace: pool
                .and_then(|p| p.spec.template.spec.termination_grace_period)
                .map(|d| d.0),
            budget: budget(node, pool, nodes, now),
        };
        removals.push((name.clone(), w, node, wanted, ctx));
    }
    // A removal with a deadline gets its first look queued before any of its pods is
    // touched: if this invocation dies mid-way, that look resumes it in seconds (the
    // message itself would come back only after the visibility timeout).
    let mut early: BTreeMap<String, Timestamp> = BTreeMap::new();
    for (name, w, node, wanted, _) in &removals {
        let Some(r) = wanted
            .as_ref()
            .filter(|r| r.deadline.is_some() && w.first_delivery)
        else {
            continue;
        };
        let taken = record_of(node)
            .ok()
            .flatten()
            .is_some_and(|r| r.next_look.is_some());
        if taken {
            continue;
        }
        let at = now + nodewright::removal::decide::DEADLINE_DRAIN_RECHECK;
        let look = Look {
            node: name,
            instance_id: &w.instance_id,
            cause: r.cause,
            deadline: r.deadline,
            at,
            origin: &r.origin,
            round: 0,
        };
        match follow::send(state, &look, now).await {
            Ok(()) => {
                early.insert(name.clone(), at);
            }
            Err(e) => {
                tracing::error!(
                    node = name,
                    error = nodewright::error_chain(&e),
                    "queueing the first look failed"
                );
                mark_failed(handled, &w.messages, r.deadline);
            }
        }
    }
    // Every node at once: no node's first evictions wait on another's calls.
    let advanced =
        futures::future::join_all(removals.iter().map(|(name, _, node, wanted, ctx)| {
            advance_with_retries(
                state,
                node,
                nodes,
                wanted.clone(),
                ctx,
                now,
                answer_by,
                name,
            )
        }))
        .await;
    let mut asks: Vec<Ask> = Vec::new();
    let mut looks: Vec<(String, String, Advanced, u32, Option<Record>)> = Vec::new();
    for ((name, w, node, wanted, _), result) in removals.iter().zip(advanced) {
        let record = wanted.clone().or_else(|| record_of(node).ok().flatten());
        let deadline = record.as_ref().and_then(|r| r.deadline);
        match result {
            Ok(a) => {
                tracing::info!(node = name, state = a.state, note = a.note, recheck = ?a.recheck,
                    evicted = a.drained.evicted.len(), deleted = a.drained.deleted.len(),
                    blocked = a.drained.blocked.len(), "removal advanced");
                if let Some(ask) = a.ask.clone() {
                    asks.push(ask);
                }
                let round = w.looks.iter().map(|(_, r, ..)| *r).max().unwrap_or(0);
                looks.push((name.clone(), w.instance_id.clone(), a, round, record));
            }
            Err(e) => {
                tracing::error!(
                    node = name,
                    error = nodewright::error_chain(&e),
                    "advancing the removal failed; the message will be delivered again"
                );
                mark_failed(handled, &w.messages, deadline);
            }
        }
    }
    replace_together(state, &asks, now).await;
    for (name, instance_id, a, round, record) in looks {
        let (Some(at), Some(r)) = (a.recheck, record) else {
            continue;
        };
        // The first look already queued is the one the record expects.
        if early.get(&name) == Some(&at) {
            continue;
        }
        let look = Look {
            node: &name,
            instance_id: &instance_id,
            cause: r.cause,
            deadline: r.deadline,
            at,
            origin: &r.origin,
            round,
        };
        if let Err(e) = follow::send(state, &look, now).await {
            tracing::error!(
                node = name,
                error = nodewright::error_chain(&e),
                "queueing the follow-up failed"
            );
            let w = &work[&name];
            mark_failed(handled, &w.messages, r.deadline);
        }
    }
    let _ = messages;
}

fn mark_failed(handled: &mut [Handled], messages: &[usize], deadline: Option<Timestamp>) {
    for &i in messages {
        handled[i].failed = true;
        handled[i].deadline = match (handled[i].deadline, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// A rebalance's NodePool budget: whether it may begin now.
fn budget(node: &Node, pool: Option<&NodePool>, nodes: &[Node], now: Timestamp) -> Budget {
    let Some(pool) = pool else {
        return Budget::Allows;
    };
    let name = &pool.metadata.name;
    let this = node.metadata.name.as_deref().unwrap_or_default();
    let budgets = pool_budgets(pool).map_err(|e| format!("NodePool {name}: {e}"));
    let budgets = budgets.as_deref().map_err(String::as_str);
    match rebalance_gate(name, budgets, pool_nodes(nodes, name, this), now) {
        Gate::Go => Budget::Allows,
        Gate::Hold(why) => Budget::Holds(why),
    }
}

/// How often a failed step is tried again within the invocation, and how long it waits.
const RETRIES: [Duration; 3] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

#[allow(clippy::too_many_arguments)]
async fn advance_with_retries<K, E, R, Q>(
    state: &State<K, E, R, Q>,
    node: &Node,
    nodes: &[Node],
    wanted: Option<Record>,
    ctx: &Context,
    now: Timestamp,
    answer_by: Timestamp,
    name: &str,
) -> Result<Advanced, RemovalError>
where
    K: NodeDisruption,
    E: OwnedInstances,
{
    let cluster = &state.settings.cluster;
    let ports = Ports {
        kube: &state.kube,
        ec2: &state.ec2,
        cluster,
    };
    let mut result = advance(ports, node, nodes, wanted.clone(), ctx, now).await;
    for wait in RETRIES {
        match &result {
            Err(e) if e.is_transient() && state.clock.now() + wait < answer_by => {
                tracing::warn!(
                    node = name,
                    error = nodewright::error_chain(e),
                    ?wait,
                    "retrying the removal's step"
                );
                state.clock.sleep(wait).await;
                // The node as it is now: the failed step may have half happened.
                let fresh = state.kube.nodes().await;
                let node = fresh
                    .as_ref()
                    .ok()
                    .and_then(|ns| ns.iter().find(|n| n.metadata.name.as_deref() == Some(name)))
                    .unwrap_or(node);
                result = advance(ports, node, nodes, wanted.clone(), ctx, state.clock.now()).await;
            }
            _ => break,
        }
    }
    result
}

/// One request for the batch's replacement capacity, its answer recorded on each node.
async fn replace_together<K, E, R, Q>(state: &State<K, E, R, Q>, asks: &[Ask], now: Timestamp)
where
    K: NodeDisruption,
    R: Capacity,
{
    if asks.is_empty() {
        return;
    }
    let nodes: Vec<String> = asks.iter().map(|a| a.node.clone()).collect();
    let pods: Vec<_> = asks.iter().flat_map(|a| a.pods.iter().cloned()).collect();
    let avoid: Vec<Avoid> = asks.iter().filter_map(|a| a.avoid.clone()).collect();
    let answer = state
        .replacer
        .replace_for(&nodes, &pods, &avoid, now.into())
        .await;
    if let Err(e) = &answer {
        tracing::warn!(nodes = ?nodes, error = nodewright::error_chain(e), "replacement launch failed");
    }
    let answer: Result<&_, String> = answer.as_ref().map_err(|e| nodewright::error_chain(e));
    for ask in asks {
        let recorded = record_replacement(&state.kube, ask, answer.clone(), now).await;
        match recorded {
            Ok(r) => tracing::info!(node = ask.node, replacement = ?r, "replacement recorded"),
            Err(e) => tracing::warn!(
                node = ask.node,
                error = nodewright::error_chain(&e),
                "recording the replacement failed; the next look asks again (the launch is idempotent)"
            ),
        }
    }
}
