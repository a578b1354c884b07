//! The batch semantics of the handler, over recording fakes of the ports (emulated: the
//! cluster, EC2, the provisioning core and the queue are in-memory doubles here; the
//! end-to-end scenarios in `tests/tests/interruption.rs` use the real adapters).

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
    ConfigLoad, ConfigSource, EventSink, EventType, Eviction, KubeError, NodeOps, NodeRemoval,
    NodeSource, ObjectKind, PodEviction, PodRef,
};
use nodewright::provision::{Offering, ProvisionError, ReplaceReport, Replacement};
use serde_json::json;

use super::{Settings, State, handler};

const CLUSTER: &str = "demo";
const OURS: &str = "i-0b662ef9931388ba0";
const STUCK: &str = "i-0a1b2c3d4e5f60718";

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
}

/// One shared in-memory world behind every port (cheap clones of the same state).
#[derive(Clone)]
struct Fake {
    log: Arc<Log>,
    annotations: Arc<Mutex<BTreeMap<String, String>>>,
}

fn node(name: &str, instance: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/zone": "us-east-1b",
            "karpenter.sh/capacity-type": "spot"}},
        "spec": {"providerID": format!("aws:///us-east-1b/{instance}")},
    }))
    .unwrap()
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap()
}

impl NodeSource for Fake {
    async fn nodes(&self) -> Result<Vec<Node>, KubeError> {
        let mut n1 = node("n1", OURS);
        n1.metadata.annotations = Some(self.annotations.lock().unwrap().clone());
        Ok(vec![n1, node("n2", STUCK)])
    }
    async fn daemon_sets(&self) -> Result<Vec<DaemonSet>, KubeError> {
        Ok(Vec::new())
    }
}

impl NodeOps for Fake {
    async fn taint(&self, node: &str, _: &Taint) -> Result<(), KubeError> {
        if node == "n2" {
            return Err(KubeError::Conflict {
                node: node.into(),
                attempts: 3,
            });
        }
        self.log.push(format!("taint {node}"));
        Ok(())
    }
    async fn untaint(&self, node: &str, _: &str) -> Result<(), KubeError> {
        self.log.push(format!("untaint {node}"));
        Ok(())
    }
    async fn cordon(&self, node: &str) -> Result<(), KubeError> {
        self.log.push(format!("cordon {node}"));
        Ok(())
    }
    async fn label(&self, _: &str, _: &str, _: &str) -> Result<(), KubeError> {
        Ok(())
    }
}

impl PodEviction for Fake {
    async fn pods_on_node(&self, node: &str) -> Result<Vec<Pod>, KubeError> {
        Ok(if node == "n1" {
            vec![pod("a"), pod("b")]
        } else {
            Vec::new()
        })
    }
    async fn evict(&self, pod: &PodRef, grace: i64) -> Result<Eviction, KubeError> {
        self.log.push(format!("evict {} {grace}s", pod.name));
        Ok(Eviction::Evicted)
    }
    async fn delete_pod(&self, pod: &PodRef, _: i64) -> Result<(), KubeError> {
        self.log.push(format!("delete pod {}", pod.name));
        Ok(())
    }
}

impl NodeRemoval for Fake {
    async fn delete_node(&self, node: &str) -> Result<bool, KubeError> {
        self.log.push(format!("delete node {node}"));
        Ok(true)
    }
    async fn annotate_node(&self, node: &str, key: &str, value: &str) -> Result<(), KubeError> {
        self.log.push(format!("annotate {node} {key}={value}"));
        self.annotations
            .lock()
            .unwrap()
            .insert(key.into(), value.into());
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

impl InstanceOwnership for Fake {
    async fn describe_ids(&self, ids: &[String]) -> Result<Vec<OwnedInstance>, AwsError> {
        Ok(ids
            .iter()
            .map(|id| OwnedInstance {
                id: id.clone(),
                instance_type: "m5.large".into(),
                zone: "us-east-1b".into(),
                state: InstanceState::Running,
                capacity_type: CapacityType::Spot,
                launch_time: None,
                tags: [("nodewright.io/cluster".to_string(), CLUSTER.to_string())].into(),
                private_dns_name: None,
                subnet_id: None,
            })
            .collect())
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
    /// The handler never asks (only the launch path does, for replayed tokens).
    async fn states(&self, _: &[String]) -> Result<HashMap<String, InstanceState>, AwsError> {
        Ok(HashMap::new())
    }
}

impl Replacement for Fake {
    async fn replace(
        &self,
        node: &str,
        pods: &[Pod],
        reclaimed: Option<&Offering>,
        _: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        let offering = reclaimed.map_or("none".to_string(), |o| {
            format!("{} {} {}", o.instance_type, o.zone, o.capacity_type)
        });
        self.log.push(format!(
            "replace {node} {} pods, excluding {offering}",
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
            v["detail"]["step"]["name"].as_str().unwrap_or("?"),
            delay.as_secs()
        ));
        Ok(())
    }
}

fn fake() -> Fake {
    Fake {
        log: Arc::new(Log::default()),
        annotations: Arc::new(Mutex::new(BTreeMap::new())),
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

fn batch(bodies: &[(&str, String)]) -> LambdaEvent<SqsEvent> {
    let records: Vec<_> = bodies
        .iter()
        .map(|(id, body)| json!({"messageId": id, "body": body, "attributes": {"ApproximateReceiveCount": "1"}}))
        .collect();
    LambdaEvent::new(
        serde_json::from_value(json!({ "Records": records })).unwrap(),
        Context::default(),
    )
}

#[tokio::test]
async fn only_the_message_whose_handling_failed_is_returned_for_retry() {
    let f = fake();
    let spot = |instance: &str, account: &str| {
        envelope(
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": instance, "instance-action": "terminate"}),
            account,
        )
    };
    let event = batch(&[
        ("garbage", "{\"version\": ".into()),
        ("foreign", spot(OURS, "999999999999")),
        ("stuck", spot(STUCK, "123456789012")),
        (
            "unknown",
            envelope("EC2 AMI State Change", json!({}), "123456789012"),
        ),
    ]);
    let response = handler(event, &state(&f)).await.unwrap();
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["stuck"]);
    assert!(
        !f.log.all().iter().any(|l| l.contains("n1")),
        "the foreign event touched the node: {:?}",
        f.log.all()
    );
}

#[tokio::test]
async fn a_spot_warning_taints_queues_the_drain_replaces_once_and_evicts() {
    let f = fake();
    let warning = envelope(
        "EC2 Spot Instance Interruption Warning",
        json!({"instance-id": OURS, "instance-action": "terminate"}),
        "123456789012",
    );
    let response = handler(batch(&[("m1", warning.clone())]), &state(&f))
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty());
    let log = f.log.all();
    let at = |what: &str| {
        log.iter()
            .position(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no {what:?} in {log:?}"))
    };
    assert!(at("taint n1") < at("follow-up drain"), "{log:?}");
    assert!(at("follow-up drain") < at("replace n1"), "{log:?}");
    assert!(at("replace n1") < at("evict a"), "{log:?}");
    assert!(
        log.contains(&"replace n1 2 pods, excluding m5.large us-east-1b spot".to_string()),
        "{log:?}"
    );
    assert!(log.contains(&"annotate n1 nodewright.io/replacement=i-0ccccccccccccccc1".to_string()));
    // Delivered again (at least once): no second replacement.
    handler(batch(&[("m1", warning)]), &state(&f))
        .await
        .unwrap();
    let replaces = f
        .log
        .all()
        .iter()
        .filter(|l| l.starts_with("replace"))
        .count();
    assert_eq!(replaces, 1, "{:?}", f.log.all());
}

#[tokio::test]
async fn a_stopping_instance_loses_its_node_and_pods_at_once() {
    let f = fake();
    let stopping = envelope(
        "EC2 Instance State-change Notification",
        json!({"instance-id": OURS, "state": "stopping"}),
        "123456789012",
    );
    let response = handler(batch(&[("m1", stopping)]), &state(&f))
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty());
    let log = f.log.all();
    for want in [
        "terminate i-0b662ef9931388ba0",
        "delete pod a",
        "delete pod b",
        "delete node n1",
    ] {
        assert!(log.contains(&want.to_string()), "{want} in {log:?}");
    }
}
