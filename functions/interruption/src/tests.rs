//! The batch semantics of the handler, over recording fakes of the ports (emulated: the
//! cluster, EC2, the provisioning core and the queue are in-memory doubles here; the
//! end-to-end scenarios in `tests/tests/interruption.rs` and the binary's own tests in
//! `tests/as_lambda.rs` use the real adapters).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_lambda_events::event::sqs::SqsEvent;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use lambda_runtime::{Context, LambdaEvent};
use nodewright::api::Taint;
use nodewright::aws::{
    AwsError, FollowUpQueue, InstanceInventory, InstanceOwnership, InstanceState, OwnedInstance,
    TerminateOutcome,
};
use nodewright::catalog::CapacityType;
use nodewright::interruption::Origin;
use nodewright::kube::{
    ConfigLoad, ConfigSource, EventSink, EventType, Eviction, KubeError, Marks, NodeOps,
    NodeRemoval, NodeSource, ObjectKind, PodEviction, PodRef, RemovalMarks,
};
use nodewright::provision::{ProvisionError, ReplaceReport};
use nodewright::removal::{Avoid, Capacity};
use serde_json::json;

use super::{Settings, State, handler};

const CLUSTER: &str = "demo";
const ME: &str = "AROAEXAMPLE:InterruptionFunction";

fn instance(i: usize) -> String {
    format!("i-0b662ef9931388b{i:02x}")
}

/// Every call the handler made, in order.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn push(&self, s: impl Into<String>) {
        self.0.lock().unwrap().push(s.into());
    }
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn position(&self, what: &str) -> usize {
        let all = self.all();
        all.iter()
            .position(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no {what:?} in {all:?}"))
    }
    fn count(&self, what: &str) -> usize {
        self.all().iter().filter(|l| l.starts_with(what)).count()
    }
}

#[derive(Clone, Default)]
struct FakeNode {
    annotations: BTreeMap<String, String>,
    tainted: bool,
    pods: Vec<String>,
}

/// One shared in-memory world behind every port (cheap clones of the same state).
#[derive(Clone, Default)]
struct Fake {
    log: Arc<Log>,
    nodes: Arc<Mutex<BTreeMap<String, FakeNode>>>,
    /// Node name -> failures left for its next writes (a 500 each).
    failing: Arc<Mutex<HashMap<String, u32>>>,
}

fn node_name(i: usize) -> String {
    format!("n{i}")
}

/// `n` spot nodes, each with two pods, on instances `instance(0..n)`.
fn fake(n: usize) -> Fake {
    let f = Fake::default();
    for i in 0..n {
        f.nodes.lock().unwrap().insert(
            node_name(i),
            FakeNode {
                pods: vec![format!("a{i}"), format!("b{i}")],
                ..FakeNode::default()
            },
        );
    }
    f
}

fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap()
}

fn server_error() -> KubeError {
    KubeError::Api {
        verb: "patch",
        resource: "nodes".into(),
        source: ::kube::Error::Api(
            ::kube::core::Status::failure("injected", "InternalError")
                .with_code(500)
                .boxed(),
        ),
    }
}

impl NodeSource for Fake {
    async fn nodes(&self) -> Result<Vec<Node>, KubeError> {
        let nodes = self.nodes.lock().unwrap().clone();
        Ok(nodes
            .iter()
            .map(|(name, n)| {
                let i: usize = name[1..].parse().unwrap();
                let taints = if n.tainted {
                    json!([{"key": "nodewright.io/disrupted", "effect": "NoSchedule"}])
                } else {
                    json!([])
                };
                serde_json::from_value(json!({
                    "metadata": {"name": name, "annotations": n.annotations, "labels": {
                        "node.kubernetes.io/instance-type": "m5.large",
                        "topology.kubernetes.io/zone": "us-east-1b",
                        "karpenter.sh/capacity-type": "spot"}},
                    "spec": {"providerID": format!("aws:///us-east-1b/{}", instance(i)),
                             "taints": taints},
                }))
                .unwrap()
            })
            .collect())
    }
    async fn daemon_sets(&self) -> Result<Vec<DaemonSet>, KubeError> {
        Ok(Vec::new())
    }
}

impl NodeOps for Fake {
    async fn taint(&self, _: &str, _: &Taint) -> Result<(), KubeError> {
        unreachable!("a removal takes a node through mark_removal")
    }
    async fn untaint(&self, _: &str, _: &str) -> Result<(), KubeError> {
        unreachable!("a removal gives a node back through mark_removal")
    }
    async fn cordon(&self, node: &str) -> Result<(), KubeError> {
        self.log.push(format!("cordon {node}"));
        Ok(())
    }
    async fn label(&self, _: &str, _: &str, _: &str) -> Result<(), KubeError> {
        Ok(())
    }
    async fn relabel(&self, _: &str, _: &[(&str, Option<&str>)]) -> Result<(), KubeError> {
        Ok(())
    }
}

impl RemovalMarks for Fake {
    async fn mark_removal(
        &self,
        node: &str,
        key: &str,
        value: Option<&str>,
        _: &[Taint],
        marks: Marks,
    ) -> Result<(), KubeError> {
        let tainted = marks.tainted;
        if let Some(left) = self
            .failing
            .lock()
            .unwrap()
            .get_mut(node)
            .filter(|n| **n > 0)
        {
            *left -= 1;
            self.log.push(format!("mark {node} failed"));
            return Err(server_error());
        }
        let mut nodes = self.nodes.lock().unwrap();
        let n = nodes.get_mut(node).unwrap();
        match value {
            Some(v) => n.annotations.insert(key.into(), v.into()),
            None => n.annotations.remove(key),
        };
        n.tainted = tainted;
        self.log.push(format!("mark {node} tainted={tainted}"));
        Ok(())
    }
}

impl PodEviction for Fake {
    async fn pods_on_node(&self, node: &str) -> Result<Vec<Pod>, KubeError> {
        let nodes = self.nodes.lock().unwrap();
        Ok(nodes
            .get(node)
            .map(|n| n.pods.iter().map(|p| pod(p, node)).collect())
            .unwrap_or_default())
    }
    async fn evict(&self, pod: &PodRef, grace: i64) -> Result<Eviction, KubeError> {
        self.log.push(format!("evict {} {grace}s", pod.name));
        Ok(Eviction::Evicted)
    }
    async fn delete_pod(&self, pod: &PodRef, grace: i64) -> Result<(), KubeError> {
        self.log.push(format!("delete pod {} {grace}s", pod.name));
        Ok(())
    }
}

impl nodewright::kube::KarpenterLeader for Fake {
    async fn karpenter_leases(
        &self,
    ) -> Result<Vec<k8s_openapi::api::coordination::v1::Lease>, KubeError> {
        Ok(Vec::new())
    }
}

impl NodeRemoval for Fake {
    async fn delete_node(&self, node: &str, _instance_gone: bool) -> Result<bool, KubeError> {
        self.log.push(format!("delete node {node}"));
        Ok(self.nodes.lock().unwrap().remove(node).is_some())
    }
    async fn annotate_node(&self, node: &str, key: &str, value: &str) -> Result<(), KubeError> {
        self.log.push(format!("annotate {node} {key}"));
        if let Some(n) = self.nodes.lock().unwrap().get_mut(node) {
            n.annotations.insert(key.into(), value.into());
        }
        Ok(())
    }
}

impl EventSink for Fake {
    async fn pod_event(&self, _: &PodRef, _: &str, _: &str, _: EventType) {}
    async fn object_event(&self, _: ObjectKind, name: &str, reason: &str, _: &str, _: EventType) {
        self.log.push(format!("event {name} {reason}"));
    }
}

impl ConfigSource for Fake {
    async fn load(&self) -> Result<ConfigLoad, KubeError> {
        Err(KubeError::Conflict {
            node: "no NodePools in this fake".into(),
            attempts: 0,
        })
    }
}

fn described(id: &str, state: InstanceState) -> OwnedInstance {
    OwnedInstance {
        id: id.to_string(),
        instance_type: "m5.large".into(),
        zone: "us-east-1b".into(),
        state,
        capacity_type: CapacityType::Spot,
        launch_time: None,
        tags: [("nodewright.io/cluster".to_string(), CLUSTER.to_string())].into(),
        private_dns_name: None,
        subnet_id: None,
        image_id: None,
        security_groups: Vec::new(),
    }
}

impl InstanceOwnership for Fake {
    async fn describe_ids(&self, ids: &[String]) -> Result<Vec<OwnedInstance>, AwsError> {
        // This cluster's instances are the nodes' ones; any other id is unknown to EC2.
        let n = self.nodes.lock().unwrap().len();
        Ok(ids
            .iter()
            .filter(|id| (0..n.max(20)).any(|i| instance(i) == **id))
            .map(|id| described(id, InstanceState::Running))
            .collect())
    }
    async fn list_karpenter(&self) -> Result<Vec<OwnedInstance>, AwsError> {
        Ok(Vec::new())
    }
}

impl InstanceInventory for Fake {
    async fn list_owned(&self) -> Result<Vec<OwnedInstance>, AwsError> {
        Ok(Vec::new())
    }
    async fn list_owned_ids(&self, _: &[String]) -> Result<Vec<OwnedInstance>, AwsError> {
        Ok(Vec::new())
    }
    async fn terminate(&self, ids: &[String]) -> Result<TerminateOutcome, AwsError> {
        self.log.push(format!("terminate {}", ids.join(",")));
        Ok(TerminateOutcome {
            terminated: ids.to_vec(),
            ..TerminateOutcome::default()
        })
    }
    async fn create_tags(
        &self,
        _: &[String],
        _: &BTreeMap<String, String>,
    ) -> Result<(), AwsError> {
        Ok(())
    }
    async fn states(&self, _: &[String]) -> Result<HashMap<String, InstanceState>, AwsError> {
        Ok(HashMap::new())
    }
}

impl Capacity for Fake {
    async fn replace_for(
        &self,
        nodes: &[String],
        pods: &[Pod],
        avoid: &[Avoid],
        _: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        let avoided: Vec<String> = avoid
            .iter()
            .map(|a| format!("{} {} {}", a.instance_type, a.zone, a.capacity_type))
            .collect();
        self.log.push(format!(
            "replace {} for {} pods, avoiding {avoided:?}",
            nodes.join(","),
            pods.len()
        ));
        Ok(ReplaceReport {
            launched_instances: vec!["i-0ccccccccccccccc1".into()],
            claims: 1,
            ..ReplaceReport::default()
        })
    }
}

impl FollowUpQueue for Fake {
    async fn send_delayed(&self, body: &str, delay: Duration) -> Result<(), AwsError> {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        self.log.push(format!(
            "follow-up {} in {}s",
            v["detail"]["node"].as_str().unwrap_or("?"),
            delay.as_secs()
        ));
        Ok(())
    }
    async fn retry_soon(&self, handle: &str, after: Duration) -> Result<(), AwsError> {
        self.log
            .push(format!("retry {handle} in {}s", after.as_secs()));
        Ok(())
    }
}

fn state(f: &Fake) -> State<Fake, Fake, Fake, Fake> {
    State {
        clock: Arc::new(nodewright::clock::SystemClock),
        kube: f.clone(),
        ec2: f.clone(),
        replacer: f.clone(),
        queue: f.clone(),
        settings: Settings {
            cluster: CLUSTER.into(),
            origin: Origin {
                account: "123456789012".into(),
                region: "us-east-1".into(),
            },
            sender_id: Some(ME.into()),
            take_over_karpenter: false,
        },
    }
}

fn envelope(detail_type: &str, detail: serde_json::Value, account: &str) -> String {
    json!({
        "version": "0", "id": format!("{detail_type}-{account}"), "source": "aws.ec2",
        "detail-type": detail_type, "account": account, "region": "us-east-1",
        "time": jiff::Timestamp::now().to_string(), "resources": [], "detail": detail,
    })
    .to_string()
}

fn spot(i: usize) -> String {
    envelope(
        "EC2 Spot Instance Interruption Warning",
        json!({"instance-id": instance(i), "instance-action": "terminate"}),
        "123456789012",
    )
}

/// An SQS batch; each body with the sender `ME` unless given another.
fn batch(bodies: &[(&str, String)]) -> LambdaEvent<SqsEvent> {
    batch_from(bodies, ME)
}

fn batch_from(bodies: &[(&str, String)], sender: &str) -> LambdaEvent<SqsEvent> {
    let records: Vec<_> = bodies
        .iter()
        .map(|(id, body)| {
            json!({"messageId": id, "receiptHandle": format!("rh-{id}"), "body": body,
            "attributes": {"ApproximateReceiveCount": "1", "SenderId": sender}})
        })
        .collect();
    LambdaEvent::new(
        serde_json::from_value(json!({ "Records": records })).unwrap(),
        Context::default(),
    )
}

fn failed(response: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<&str> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect()
}

#[tokio::test]
async fn only_the_message_whose_handling_failed_is_returned_for_retry() {
    let f = fake(2);
    f.failing.lock().unwrap().insert("n1".into(), 100);
    let event = batch(&[
        ("garbage", "{\"version\": ".into()),
        (
            "foreign",
            envelope(
                "EC2 Spot Instance Interruption Warning",
                json!({"instance-id": instance(0), "instance-action": "terminate"}),
                "999999999999",
            ),
        ),
        ("stuck", spot(1)),
        (
            "unknown",
            envelope("EC2 AMI State Change", json!({}), "123456789012"),
        ),
    ]);
    let response = handler(event, &state(&f)).await.unwrap();
    assert_eq!(failed(&response), ["stuck"]);
    assert!(
        !f.log.all().iter().any(|l| l.contains("n0")),
        "the foreign event touched the node: {:?}",
        f.log.all()
    );
    // Failing with a deadline two minutes out: made visible again in seconds, not after
    // the queue's visibility timeout.
    assert_eq!(f.log.count("retry rh-stuck in 20s"), 1, "{:?}", f.log.all());
}

#[tokio::test]
async fn a_spot_warning_takes_the_node_evicts_at_once_then_asks_for_capacity_once() {
    let f = fake(1);
    let response = handler(batch(&[("m1", spot(0))]), &state(&f))
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty());
    let l = &f.log;
    // The first look is queued before the node is touched: a crash from here on is
    // resumed in seconds.
    assert!(
        l.position("follow-up n0") < l.position("mark n0 tainted=true"),
        "{:?}",
        l.all()
    );
    assert!(
        l.position("mark n0 tainted=true") < l.position("evict a0"),
        "{:?}",
        l.all()
    );
    assert!(
        l.position("evict a0") < l.position("replace n0"),
        "{:?}",
        l.all()
    );
    assert_eq!(
        l.count("follow-up n0"),
        1,
        "one look, one chain: {:?}",
        l.all()
    );
    assert!(
        l.all().contains(
            &r#"replace n0 for 2 pods, avoiding ["m5.large us-east-1b spot"]"#.to_string()
        ),
        "{:?}",
        l.all()
    );
    // Delivered again (at least once): no second replacement.
    handler(batch(&[("m1", spot(0))]), &state(&f))
        .await
        .unwrap();
    assert_eq!(l.count("replace"), 1, "{:?}", l.all());
}

#[tokio::test]
async fn ten_warnings_in_a_batch_each_evict_before_one_request_asks_capacity_for_all() {
    let f = fake(10);
    let bodies: Vec<(String, String)> = (0..10).map(|i| (format!("m{i}"), spot(i))).collect();
    let bodies: Vec<(&str, String)> = bodies
        .iter()
        .map(|(id, b)| (id.as_str(), b.clone()))
        .collect();
    let response = handler(batch(&bodies), &state(&f)).await.unwrap();
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let l = &f.log;
    assert_eq!(l.count("replace"), 1, "{:?}", l.all());
    let ask = l.position("replace");
    for i in 0..10 {
        assert!(
            l.position(&format!("evict a{i}")) < ask,
            "node {i}: {:?}",
            l.all()
        );
    }
    let request = &l.all()[ask];
    assert!(request.contains("for 20 pods"), "{request}");
    assert_eq!(l.count("follow-up"), 10);
}

#[tokio::test]
async fn two_warnings_for_one_node_in_a_batch_take_it_once() {
    let f = fake(1);
    let response = handler(batch(&[("m1", spot(0)), ("m2", spot(0))]), &state(&f))
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(f.log.count("replace"), 1, "{:?}", f.log.all());
    assert_eq!(f.log.count("follow-up"), 1, "{:?}", f.log.all());
    let record = f.nodes.lock().unwrap()["n0"].annotations["nodewright.io/removal"].clone();
    assert!(
        record.contains("i-0ccccccccccccccc1"),
        "the launch is recorded: {record}"
    );
}

#[tokio::test]
async fn a_step_that_fails_once_is_tried_again_within_the_invocation() {
    let f = fake(1);
    f.failing.lock().unwrap().insert("n0".into(), 1);
    let response = handler(batch(&[("m1", spot(0))]), &state(&f))
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty(), "{:?}", f.log.all());
    let l = &f.log;
    assert!(l.position("mark n0 failed") < l.position("mark n0 tainted=true"));
    assert!(l.position("mark n0 tainted=true") < l.position("evict a0"));
}

#[tokio::test]
async fn a_look_at_a_node_no_removal_records_begins_the_removal_again() {
    // The invocation that queued the first look died before taking the node.
    let f = fake(1);
    let look = json!({
        "version": "0", "id": "look", "detail-type": "Interruption Follow-up",
        "source": "nodewright.io", "account": "123456789012", "region": "us-east-1",
        "time": jiff::Timestamp::now().to_string(), "resources": [],
        "detail": {"instance-id": instance(0), "node": "n0", "step": {"name": "continue"},
                   "reason": "spot-interrupted", "origin-event": "e",
                   "deadline": (jiff::Timestamp::now() + std::time::Duration::from_secs(100)).to_string()},
    })
    .to_string();
    let response = handler(batch(&[("m1", look)]), &state(&f)).await.unwrap();
    assert!(response.batch_item_failures.is_empty());
    let l = &f.log;
    assert!(
        l.position("mark n0 tainted=true") < l.position("evict a0"),
        "{:?}",
        l.all()
    );
    assert_eq!(l.count("replace n0"), 1, "{:?}", l.all());
}

#[tokio::test]
async fn a_stopping_instance_loses_its_node_and_pods_at_once() {
    let f = fake(1);
    let stopping = envelope(
        "EC2 Instance State-change Notification",
        json!({"instance-id": instance(0), "state": "stopping"}),
        "123456789012",
    );
    let response = handler(batch(&[("m1", stopping)]), &state(&f))
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty());
    let log = f.log.all();
    for want in [
        "terminate i-0b662ef9931388b00",
        "delete pod a0 0s",
        "delete pod b0 0s",
        "delete node n0",
    ] {
        assert!(log.contains(&want.to_string()), "{want} in {log:?}");
    }
}

#[tokio::test]
async fn an_unreadable_message_naming_this_cluster_s_instance_is_retried_not_dropped() {
    let f = fake(1);
    let truncated = format!(
        r#"{{"detail-type": "EC2 Spot Instance Interruption Warning", "detail": {{"instance-id": "{}""#,
        instance(0)
    );
    let stranger = r#"{"detail": {"instance-id": "i-0000000000000dead""#.to_string();
    let response = handler(
        batch(&[("ours", truncated), ("theirs", stranger)]),
        &state(&f),
    )
    .await
    .unwrap();
    assert_eq!(failed(&response), ["ours"]);
}

#[tokio::test]
async fn a_follow_up_this_function_did_not_send_is_ignored() {
    let f = fake(1);
    let forged = json!({
        "version": "0", "id": "forged", "detail-type": "Interruption Follow-up",
        "source": "nodewright.io", "account": "123456789012", "region": "us-east-1",
        "time": jiff::Timestamp::now().to_string(), "resources": [],
        "detail": {"instance-id": instance(0), "node": "n0", "step": {"name": "delete-node"},
                   "reason": "spot-interrupted", "origin-event": "e"},
    })
    .to_string();
    let response = handler(
        batch_from(&[("m1", forged)], "AIDAANOTHERPRINCIPAL"),
        &state(&f),
    )
    .await
    .unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert!(f.log.all().is_empty(), "{:?}", f.log.all());
}
