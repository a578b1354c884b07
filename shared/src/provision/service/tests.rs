//! Service tests over fake ports, only for what the real world (moto, the simulated
//! cluster) cannot easily produce: insufficient capacity and throttled CreateFleet calls,
//! an instance profile EC2 cannot see yet, and launch templates of any age.
//! The end-to-end scale-up story is tested against moto and the simulated cluster.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;

use super::*;
use crate::api::{AmiSelectorTerm, SelectorTerm, Taint, labels};
use crate::aws::{
    ApiError, ErrorClass, Fleet, FleetError, FleetOutcome, FleetRequest, Image, ImageResolver,
    InstanceInventory, InstanceProfiles, InstanceTypeSource, LaunchTemplateRef, LaunchTemplateSpec,
    LaunchTemplates, LaunchedInstance, NetworkDiscovery, OnDemandPriceSource, OwnedInstance,
    OwnedLaunchTemplate, SecurityGroup, SpotPrice, Subnet, TerminateOutcome, TypeOffering,
};
use crate::catalog::{CapacityType, InstanceType, bundled_instance_types};
use crate::kube::{
    ConfigLoad, ConfigOrigin, ConfigSource, DefaultPoolParams, EventSink, EventType, NodeOps,
    NodeSource, ObjectKind, PodRef, PodSource, default_pool_inputs,
};
use crate::provision::PriceRefresh;

const ZONES: [&str; 2] = ["us-east-1a", "us-east-1b"];

/// A fake cluster: fixed pending pods and a default NodePool whose EC2NodeClass names
/// `node_role`; records events.
struct FakeCluster {
    pending: Vec<Pod>,
    nodes: Vec<Node>,
    node_role: String,
    events: Mutex<Vec<(String, String, String)>>,
}

impl PodSource for FakeCluster {
    async fn pending_pods(&self) -> Result<Vec<Pod>, KubeError> {
        Ok(self.pending.clone())
    }
    async fn bound_pods_by_node(&self) -> Result<HashMap<String, Vec<Pod>>, KubeError> {
        Ok(HashMap::new())
    }
    async fn namespace_labels(&self) -> Result<crate::scheduling::NamespaceLabels, KubeError> {
        Ok(Default::default())
    }
    async fn volume_objects(&self) -> Result<crate::scheduling::VolumeObjects, KubeError> {
        Ok(Default::default())
    }
}

impl NodeSource for FakeCluster {
    async fn nodes(&self) -> Result<Vec<Node>, KubeError> {
        Ok(self.nodes.clone())
    }
    async fn daemon_sets(&self) -> Result<Vec<DaemonSet>, KubeError> {
        Ok(vec![])
    }
}

impl ConfigSource for FakeCluster {
    async fn load(&self) -> Result<ConfigLoad, KubeError> {
        let (inputs, problems) = default_pool_inputs(&DefaultPoolParams {
            cluster_name: "demo".into(),
            node_role: self.node_role.clone(),
            capacity_types: vec!["spot".into(), "on-demand".into()],
            architectures: vec!["amd64".into()],
            ami_alias: "al2023@latest".into(),
            ..Default::default()
        });
        Ok(ConfigLoad {
            inputs,
            problems,
            source: ConfigOrigin::Default,
        })
    }
}

impl EventSink for FakeCluster {
    async fn pod_event(&self, pod: &PodRef, reason: &str, message: &str, _: EventType) {
        if let Ok(mut e) = self.events.lock() {
            e.push((pod.name.clone(), reason.into(), message.into()));
        }
    }
    async fn object_event(
        &self,
        _: ObjectKind,
        name: &str,
        reason: &str,
        message: &str,
        _: EventType,
    ) {
        if let Ok(mut e) = self.events.lock() {
            e.push((name.into(), reason.into(), message.into()));
        }
    }
}

impl NodeOps for FakeCluster {
    async fn taint(&self, _: &str, _: &Taint) -> Result<(), KubeError> {
        Ok(())
    }
    async fn untaint(&self, _: &str, _: &str) -> Result<(), KubeError> {
        Ok(())
    }
    async fn cordon(&self, _: &str) -> Result<(), KubeError> {
        Ok(())
    }
    async fn label(&self, _: &str, _: &str, _: &str) -> Result<(), KubeError> {
        Ok(())
    }
    async fn relabel(&self, _: &str, _: &[(&str, Option<&str>)]) -> Result<(), KubeError> {
        Ok(())
    }
}

/// How the fake fleet answers each CreateFleet call, in order.
#[derive(Clone, Copy)]
enum Answer {
    NoCapacityAnywhere,
    Launch,
    Throttle,
    /// Every override fails as EC2 answers for an instance profile IAM has not
    /// propagated yet.
    ProfileNotVisible,
    /// The claim's ClientToken was used with other parameters: an earlier attempt
    /// launched, and with `listed` its instance (`i-earlier`) is in DescribeInstances.
    TokenReused {
        listed: bool,
    },
}

/// A fake AWS: a few bundled types in two zones, one subnet per zone, a scripted
/// CreateFleet that records every request, launch templates kept in a list (ensured ones
/// are created at `clock`), and instance profiles named after their role.
struct FakeAws {
    types: Vec<InstanceType>,
    script: Mutex<Vec<Answer>>,
    requests: Mutex<Vec<FleetRequest>>,
    /// Every call that changes or lists something, in order: "CreateFleet",
    /// "ListLaunchTemplates", "DeleteLaunchTemplate <name>", "EnsureInstanceProfile <role>".
    calls: Mutex<Vec<String>>,
    templates: Mutex<Vec<OwnedLaunchTemplate>>,
    specs: Mutex<Vec<LaunchTemplateSpec>>,
    clock: Mutex<SystemTime>,
    listing_fails: bool,
    /// What DescribeInstances lists.
    owned: Mutex<Vec<OwnedInstance>>,
}

impl FakeAws {
    fn new(type_names: &[&str], script: Vec<Answer>) -> Self {
        let types = bundled_instance_types()
            .unwrap_or_default()
            .into_iter()
            .map(|(t, _)| t)
            .filter(|t| type_names.contains(&t.name.as_str()))
            .collect();
        FakeAws {
            types,
            script: Mutex::new(script),
            requests: Mutex::new(vec![]),
            calls: Mutex::new(vec![]),
            templates: Mutex::new(vec![]),
            specs: Mutex::new(vec![]),
            clock: Mutex::new(SystemTime::UNIX_EPOCH),
            listing_fails: false,
            owned: Mutex::new(vec![]),
        }
    }
    fn requests(&self) -> Vec<FleetRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
    fn call(&self, what: String) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(what);
        }
    }
    fn template_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .templates
            .lock()
            .map(|t| t.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }
    fn specs(&self) -> Vec<LaunchTemplateSpec> {
        self.specs.lock().map(|s| s.clone()).unwrap_or_default()
    }
    fn set_clock(&self, now: SystemTime) {
        if let Ok(mut c) = self.clock.lock() {
            *c = now;
        }
    }
}

/// An API error as the SDK adapters produce it.
fn api_error(class: ErrorClass, code: &str, message: &str) -> ApiError {
    ApiError {
        class,
        code: Some(code.into()),
        message: message.into(),
        source: Box::new(std::io::Error::other("fake")),
    }
}

impl InstanceTypeSource for FakeAws {
    async fn instance_types(&self) -> Result<Vec<InstanceType>, AwsError> {
        Ok(self.types.clone())
    }
    async fn offerings(&self) -> Result<Vec<TypeOffering>, AwsError> {
        Ok(self
            .types
            .iter()
            .flat_map(|t| {
                ZONES.iter().map(|z| TypeOffering {
                    instance_type: t.name.clone(),
                    zone: z.to_string(),
                })
            })
            .collect())
    }
    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, AwsError> {
        Ok(vec![])
    }
}

impl NetworkDiscovery for FakeAws {
    async fn subnets(&self, _: &[SelectorTerm]) -> Result<Vec<Subnet>, AwsError> {
        Ok(ZONES
            .iter()
            .map(|z| Subnet {
                id: format!("subnet-{z}"),
                zone: z.to_string(),
                zone_id: String::new(),
                available_ips: 100,
                tags: Default::default(),
            })
            .collect())
    }
    async fn security_groups(&self, _: &[SelectorTerm]) -> Result<Vec<SecurityGroup>, AwsError> {
        Ok(vec![SecurityGroup {
            id: "sg-1".into(),
            name: "nodes".into(),
        }])
    }
    async fn capacity_reservations(
        &self,
        _: &[crate::api::CapacityReservationSelectorTerm],
    ) -> Result<Vec<crate::catalog::Reservation>, AwsError> {
        Ok(vec![])
    }
}

impl ImageResolver for FakeAws {
    async fn resolve(&self, _: &[AmiSelectorTerm], _: &str) -> Result<Vec<Image>, AwsError> {
        Ok(vec![Image {
            id: "ami-amd64".into(),
            name: "al2023".into(),
            arch: "amd64".into(),
            creation_date: "2026-01-01T00:00:00.000Z".into(),
        }])
    }
}

impl LaunchTemplates for FakeAws {
    async fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, AwsError> {
        let name = spec.name("demo");
        let created = self.clock.lock().map(|c| *c).ok();
        if let Ok(mut t) = self.templates.lock()
            && !t.iter().any(|t| t.name == name)
        {
            let id = format!("lt-{}", t.len());
            t.push(OwnedLaunchTemplate {
                name: name.clone(),
                id,
                created,
            });
        }
        if let Ok(mut s) = self.specs.lock() {
            s.push(spec.clone());
        }
        Ok(LaunchTemplateRef {
            id: "lt-1".into(),
            name,
        })
    }
    async fn list_launch_templates(&self) -> Result<Vec<OwnedLaunchTemplate>, AwsError> {
        self.call("ListLaunchTemplates".into());
        if self.listing_fails {
            return Err(AwsError::DescribeLaunchTemplates {
                name: "nodewright/demo/*".into(),
                source: api_error(
                    ErrorClass::Unauthorized,
                    "UnauthorizedOperation",
                    "not authorized to perform ec2:DescribeLaunchTemplates",
                ),
            });
        }
        // As the adapter: this cluster's prefix only.
        Ok(self
            .templates
            .lock()
            .map(|t| {
                t.iter()
                    .filter(|t| t.name.starts_with("nodewright/demo/"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }
    async fn delete_launch_template(&self, name: &str) -> Result<(), AwsError> {
        self.call(format!("DeleteLaunchTemplate {name}"));
        if let Ok(mut t) = self.templates.lock() {
            t.retain(|t| t.name != name);
        }
        Ok(())
    }
}

impl InstanceProfiles for FakeAws {
    async fn ensure_instance_profile(&self, role: &str) -> Result<String, AwsError> {
        self.call(format!("EnsureInstanceProfile {role}"));
        Ok(format!("profile-for-{role}"))
    }
}

impl InstanceInventory for FakeAws {
    /// Lists nothing: the fake's launches are known to the provisioner from CreateFleet.
    async fn list_owned(&self) -> Result<Vec<OwnedInstance>, AwsError> {
        self.call("DescribeInstances".into());
        Ok(self.owned.lock().map(|o| o.clone()).unwrap_or_default())
    }
    /// Every id asked for is a running instance of this cluster.
    async fn list_owned_ids(&self, ids: &[String]) -> Result<Vec<OwnedInstance>, AwsError> {
        self.call(format!("DescribeInstances {}", ids.join(",")));
        Ok(ids
            .iter()
            .map(|id| OwnedInstance {
                id: id.clone(),
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                state: crate::aws::InstanceState::Running,
                capacity_type: CapacityType::OnDemand,
                launch_time: None,
                tags: BTreeMap::new(),
                private_dns_name: None,
                subnet_id: None,
                image_id: None,
                security_groups: Vec::new(),
            })
            .collect())
    }
    async fn terminate(&self, _: &[String]) -> Result<TerminateOutcome, AwsError> {
        Ok(TerminateOutcome::default())
    }
    async fn create_tags(
        &self,
        _: &[String],
        _: &BTreeMap<String, String>,
    ) -> Result<(), AwsError> {
        Ok(())
    }
    /// Every instance this fake launched is running.
    async fn states(
        &self,
        ids: &[String],
    ) -> Result<HashMap<String, crate::aws::InstanceState>, AwsError> {
        Ok(ids
            .iter()
            .map(|id| (id.clone(), crate::aws::InstanceState::Running))
            .collect())
    }
}

impl Fleet for FakeAws {
    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetOutcome, AwsError> {
        self.call("CreateFleet".into());
        let n = match self.requests.lock() {
            Ok(mut r) => {
                r.push(request.clone());
                r.len()
            }
            Err(_) => 0,
        };
        let answer = self
            .script
            .lock()
            .ok()
            .and_then(|s| s.get(n.saturating_sub(1)).copied())
            .unwrap_or(Answer::Launch);
        match answer {
            Answer::Launch => {
                let o = &request.overrides[0];
                Ok(FleetOutcome {
                    instances: vec![LaunchedInstance {
                        id: format!("i-{n:08x}"),
                        instance_type: o.instance_type.clone(),
                        zone: o.zone.clone(),
                        capacity_type: request.capacity_type,
                    }],
                    errors: vec![],
                })
            }
            Answer::NoCapacityAnywhere => Ok(FleetOutcome {
                instances: vec![],
                errors: request
                    .overrides
                    .iter()
                    .map(|o| FleetError {
                        instance_type: o.instance_type.clone(),
                        zone: o.zone.clone(),
                        code: "InsufficientInstanceCapacity".into(),
                        message: "no capacity".into(),
                        class: ErrorClass::InsufficientCapacity,
                    })
                    .collect(),
            }),
            Answer::Throttle => Err(AwsError::CreateFleet {
                client_token: request.client_token.clone(),
                source: api_error(
                    ErrorClass::Throttled,
                    "RequestLimitExceeded",
                    "Request limit exceeded.",
                ),
            }),
            Answer::TokenReused { listed } => {
                if listed && let Ok(mut owned) = self.owned.lock() {
                    let o = &request.overrides[0];
                    owned.push(OwnedInstance {
                        id: "i-earlier".into(),
                        instance_type: o.instance_type.clone(),
                        zone: o.zone.clone(),
                        state: crate::aws::InstanceState::Running,
                        capacity_type: request.capacity_type,
                        launch_time: None,
                        tags: request.tags.clone(),
                        private_dns_name: None,
                        subnet_id: None,
                        image_id: None,
                        security_groups: Vec::new(),
                    });
                }
                Err(AwsError::CreateFleet {
                    client_token: request.client_token.clone(),
                    source: api_error(
                        ErrorClass::TokenReused,
                        "IdempotentParameterMismatch",
                        "The client token has been used with different parameters.",
                    ),
                })
            }
            Answer::ProfileNotVisible => {
                let message = "Value (profile) for parameter iamInstanceProfile.name is \
                               invalid. Invalid IAM Instance Profile name";
                Ok(FleetOutcome {
                    instances: vec![],
                    errors: request
                        .overrides
                        .iter()
                        .map(|o| FleetError {
                            instance_type: o.instance_type.clone(),
                            zone: o.zone.clone(),
                            code: "InvalidParameterValue".into(),
                            message: message.into(),
                            // As the adapter classifies it.
                            class: crate::aws::classify_error("InvalidParameterValue", message),
                        })
                        .collect(),
                })
            }
        }
    }
}

fn pod(name: &str, cpu: &str) -> Pod {
    let value = serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "image": "app",
            "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]},
        "status": {"phase": "Pending"},
    });
    match serde_json::from_value(value) {
        Ok(p) => p,
        Err(e) => panic!("test pod: {e}"),
    }
}

fn settings() -> ProvisionerSettings {
    ProvisionerSettings {
        cluster: ClusterFacts {
            name: "demo".into(),
            endpoint: "https://demo.eks.example.com".into(),
            ca_bundle_base64: "Y2E=".into(),
            service_cidr: "10.100.0.0/16".into(),
            kubernetes_version: "1.31".into(),
        },
        default_instance_profile: "demo-node-profile".into(),
        default_node_role: "demo-node".into(),
        batch: BatchWindow::fixed(Duration::ZERO, Duration::ZERO),
        preferences: Default::default(),
        min_values: Default::default(),
    }
}

/// A provisioner over `aws` whose default EC2NodeClass names `node_role`; the stack's node
/// role is `demo-node`, its profile `demo-node-profile`.
fn provisioner_over<A>(pending: Vec<Pod>, aws: A, node_role: &str) -> Provisioner<FakeCluster, A>
where
    A: Cloud,
{
    let cluster = FakeCluster {
        pending,
        nodes: vec![],
        node_role: node_role.into(),
        events: Mutex::new(vec![]),
    };
    match Provisioner::new(cluster, aws, settings()) {
        Ok(p) => p,
        Err(e) => panic!("provisioner: {e}"),
    }
}

fn provisioner(pending: Vec<Pod>, aws: FakeAws) -> Provisioner<FakeCluster, FakeAws> {
    provisioner_with_role(pending, aws, "demo-node")
}

fn provisioner_with_role(
    pending: Vec<Pod>,
    aws: FakeAws,
    node_role: &str,
) -> Provisioner<FakeCluster, FakeAws> {
    provisioner_over(pending, aws, node_role)
}

fn offered(r: &FleetRequest) -> HashSet<(String, String, CapacityType)> {
    r.overrides
        .iter()
        .map(|o| (o.instance_type.clone(), o.zone.clone(), r.capacity_type))
        .collect()
}

#[tokio::test]
async fn after_insufficient_capacity_the_same_poll_relaunches_on_other_offerings() {
    let aws = FakeAws::new(
        &["m5.large", "c5.large", "m5.xlarge"],
        vec![Answer::NoCapacityAnywhere, Answer::Launch],
    );
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let report = match p.poll(&Turn::OUTSIDE, now).await {
        Ok(r) => r,
        Err(e) => panic!("poll: {e}"),
    };
    let requests = p.aws().requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let (first, second) = (&requests[0], &requests[1]);
    assert!(
        offered(first).is_disjoint(&offered(second)),
        "{first:#?} {second:#?}"
    );
    assert!(!offered(second).is_empty());
    assert_ne!(first.client_token, second.client_token);
    // Both attempts are the same node claim.
    assert_eq!(
        first.tags.get(labels::NODECLAIM),
        second.tags.get(labels::NODECLAIM)
    );
    assert_eq!(report.launched_instances, ["i-00000002"]);
    assert_eq!((report.claims, report.failed_claims), (2, 1));
    assert_eq!(report.pending_to_fleet.len(), 1);
    let events = p
        .kube()
        .events
        .lock()
        .map(|e| e.clone())
        .unwrap_or_default();
    assert!(
        events.iter().any(|(pod, reason, msg)| pod == "web-1"
            && reason == "Launching"
            && msg.contains("for 1 pods")),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_throttled_create_fleet_stops_launching_for_this_poll() {
    // 1.5 vCPU each on 2-vCPU types: every pod needs its own node, so three claims.
    let aws = FakeAws::new(&["m5.large", "c5.large"], vec![Answer::Throttle]);
    let pending = vec![pod("a", "1500m"), pod("b", "1500m"), pod("c", "1500m")];
    let mut p = provisioner(pending, aws);
    let report = match p
        .poll(
            &Turn::OUTSIDE,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1),
        )
        .await
    {
        Ok(r) => r,
        Err(e) => panic!("poll: {e}"),
    };
    assert_eq!(report.claims, 3);
    assert!(report.throttled);
    assert_eq!(p.aws().requests().len(), 1);
    assert!(report.launched_instances.is_empty());
}

#[tokio::test]
async fn capacity_that_never_comes_is_reported_once_per_pod_not_every_poll() {
    let aws = FakeAws::new(&["m5.large"], vec![Answer::NoCapacityAnywhere; 100]);
    let mut p = provisioner(vec![pod("web-1", "500m")], aws);
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    for i in 0..2 {
        if let Err(e) = p
            .poll(&Turn::OUTSIDE, t0 + Duration::from_secs(5 * i))
            .await
        {
            panic!("poll: {e}")
        }
    }
    let events = p
        .kube()
        .events
        .lock()
        .map(|e| e.clone())
        .unwrap_or_default();
    let warnings: Vec<_> = events
        .iter()
        .filter(|(_, r, _)| r == "FailedScheduling")
        .collect();
    assert_eq!(warnings.len(), 1, "{events:?}");
    // m5.large spot, then on-demand, each in both zones at once: nothing is left after two.
    assert_eq!(p.aws().requests().len(), 2);
}

/// A price source with the region's own prices: it stands in for the Price List API to
/// show its prices reaching the provisioner's decisions.
struct RegionalPrices(HashMap<String, f64>);

impl OnDemandPriceSource for RegionalPrices {
    async fn on_demand_prices(&self) -> Result<HashMap<String, f64>, AwsError> {
        Ok(self.0.clone())
    }
}

#[tokio::test]
async fn after_a_price_refresh_the_cheapest_type_is_judged_by_the_regions_own_prices() {
    // Bundled (us-east-1): c5.large 0.085 < m5.large 0.096. Here m5.large is the cheaper.
    let regional = HashMap::from([("m5.large".to_string(), 0.05)]);
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    for (refresh_first, want) in [(false, "c5.large"), (true, "m5.large")] {
        let aws = crate::provision::AwsPorts {
            ec2: FakeAws::new(&["m5.large", "c5.large"], vec![Answer::Launch]),
            images: FakeAws::new(&[], vec![]),
            prices: RegionalPrices(regional.clone()),
            iam: FakeAws::new(&[], vec![]),
        };
        let mut p = provisioner_over(vec![pod("web-1", "500m")], aws, "demo-node");
        if refresh_first {
            let refresh = p.refresh_prices(t0).await;
            assert!(matches!(refresh, PriceRefresh::Updated { priced: 1, .. }));
        }
        if let Err(e) = p.poll(&Turn::OUTSIDE, t0).await {
            panic!("poll: {e}")
        }
        let first_choice: Vec<String> = p
            .aws()
            .ec2
            .requests()
            .iter()
            .filter_map(|r| r.overrides.first().map(|o| o.instance_type.clone()))
            .collect();
        assert_eq!(first_choice, [want], "refreshed first: {refresh_first}");
    }
}

/// A replacement whose claim an earlier attempt already launched (EC2 answers its token as
/// used with other parameters) names that instance, so its caller waits for it; when
/// DescribeInstances does not show it yet, the claim counts as not launched, so a
/// voluntary removal or a consolidation does not drain without it.
#[tokio::test]
async fn a_replacement_launched_by_an_earlier_attempt_is_named_or_counted_as_not_launched() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let pods = vec![pod("web-1", "500m")];
    let going = ["old-1".to_string()];
    for (listed, launched, failed) in [(true, vec!["i-earlier"], 0), (false, vec![], 1)] {
        let aws = FakeAws::new(&["m5.large"], vec![Answer::TokenReused { listed }]);
        let mut p = provisioner(vec![], aws);
        let report = match p.replace_nodes(&going, &pods, &[], None, t0).await {
            Ok(r) => r,
            Err(e) => panic!("replace: {e}"),
        };
        assert_eq!(
            report.launched_instances, launched,
            "listed {listed}: {report:?}"
        );
        assert_eq!(report.failed_claims, failed, "listed {listed}: {report:?}");
        assert_eq!(p.aws().requests().len(), 1, "nothing launched again");
    }
}

/// Pods a replacement places on capacity not Ready yet (an instance launched earlier whose
/// Node has not registered) make that instance one the caller waits for: it may never join.
#[tokio::test]
async fn a_replacement_onto_capacity_still_on_its_way_names_the_instance_to_wait_for() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let aws = FakeAws::new(&["m5.large", "m5.xlarge"], vec![]);
    if let Ok(mut owned) = aws.owned.lock() {
        owned.push(OwnedInstance {
            id: "i-joining".into(),
            instance_type: "m5.xlarge".into(),
            zone: "us-east-1a".into(),
            state: crate::aws::InstanceState::Pending,
            capacity_type: CapacityType::OnDemand,
            launch_time: None,
            tags: [
                (labels::NODEPOOL.to_string(), "default".to_string()),
                (labels::NODECLAIM.to_string(), "nw-joining".to_string()),
            ]
            .into(),
            private_dns_name: None,
            subnet_id: None,
            image_id: None,
            security_groups: Vec::new(),
        });
    }
    let mut p = provisioner(vec![], aws);
    let pods = vec![pod("web-1", "500m")];
    let report = match p
        .replace_nodes(&["old-1".into()], &pods, &[], None, t0)
        .await
    {
        Ok(r) => r,
        Err(e) => panic!("replace: {e}"),
    };
    assert_eq!(report.nominated_pods, 1, "{report:?}");
    assert_eq!(report.waiting_on, ["i-joining"], "{report:?}");
    assert!(report.launched_instances.is_empty(), "{report:?}");
    assert!(p.aws().requests().is_empty(), "nothing launched");
}

#[tokio::test]
async fn a_replacement_over_its_price_ceiling_launches_nothing_and_says_what_it_would_cost() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let pods = vec![pod("web-1", "500m"), pod("web-2", "500m")];
    let going = ["old-1".to_string(), "old-2".to_string()];
    // c5.large on demand is $0.085/h in the bundled table, spot less: one claim for both.
    for (ceiling, launches) in [(Some(0.001), false), (Some(10.0), true), (None, true)] {
        let aws = FakeAws::new(&["m5.large", "c5.large"], vec![Answer::Launch]);
        let mut p = provisioner(vec![], aws);
        let report = match p.replace_nodes(&going, &pods, &[], ceiling, t0).await {
            Ok(r) => r,
            Err(e) => panic!("replace: {e}"),
        };
        let requests = p.aws().requests();
        if launches {
            assert_eq!(
                report.launched_instances.len(),
                1,
                "{ceiling:?}: {report:?}"
            );
            assert_eq!(report.over_ceiling, None, "{ceiling:?}");
            assert_eq!(requests.len(), 1, "{ceiling:?}");
            // Several nodes replaced are one decision, named by all of them.
            let claim = requests[0].tags.get(labels::NODECLAIM).cloned();
            assert!(claim.is_some(), "{:?}", requests[0].tags);
        } else {
            assert!(report.launched_instances.is_empty(), "{report:?}");
            assert!(requests.is_empty(), "nothing sent to EC2: {requests:#?}");
            let price = report.over_ceiling.unwrap_or_default();
            assert!(price > 0.001 && price < 0.2, "{report:?}");
            assert_eq!(report.claims, 1);
        }
    }
}

mod floor;
mod listing;
mod profile_and_gc;
mod tokens;

/// The types a replacement under `ceiling` offers EC2, for one 500m pod.
async fn offered_under(ceiling: Option<f64>) -> Vec<String> {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let aws = FakeAws::new(&["m5.large", "c5.large"], vec![Answer::Launch]);
    let mut p = provisioner(vec![], aws);
    let pods = [pod("web-1", "500m")];
    if let Err(e) = p
        .replace_nodes(&["old-1".to_string()], &pods, &[], ceiling, t0)
        .await
    {
        panic!("replace: {e}")
    }
    let types: std::collections::BTreeSet<String> = p
        .aws()
        .requests()
        .iter()
        .flat_map(|r| r.overrides.iter().map(|o| o.instance_type.clone()))
        .collect();
    types.into_iter().collect()
}

#[tokio::test]
async fn a_replacement_under_a_ceiling_offers_ec2_only_the_types_that_cost_less() {
    // Spot at the bundled us-east-1 prices less the estimated 60%: c5.large $0.034/h,
    // m5.large $0.0384/h.
    assert_eq!(offered_under(None).await, ["c5.large", "m5.large"]);
    assert_eq!(offered_under(Some(0.036)).await, ["c5.large"]);
}

#[tokio::test]
async fn several_replacement_nodes_share_what_the_plan_leaves_under_the_ceiling() {
    // Two 1500m pods need a node each: two spot c5.large at $0.034/h, $0.068/h in all
    // (m5.large $0.0384/h). Each launch may cost its own price plus half of what is left
    // under the ceiling, so the pair stays under it whichever type each launch gets.
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let pods = [pod("web-1", "1500m"), pod("web-2", "1500m")];
    let going = ["old-1".to_string(), "old-2".to_string()];
    for (ceiling, offered) in [
        (0.072, vec!["c5.large"]),
        (0.080, vec!["c5.large", "m5.large"]),
        (0.060, vec![]),
    ] {
        let aws = FakeAws::new(&["m5.large", "c5.large"], vec![]);
        let mut p = provisioner(vec![], aws);
        let report = match p.replace_nodes(&going, &pods, &[], Some(ceiling), t0).await {
            Ok(r) => r,
            Err(e) => panic!("replace: {e}"),
        };
        let requests = p.aws().requests();
        assert_eq!(report.claims, 2, "{ceiling}: {report:?}");
        if offered.is_empty() {
            assert!(requests.is_empty(), "{ceiling}: {requests:#?}");
            let price = report.over_ceiling.unwrap_or_default();
            assert!((price - 0.068).abs() < 1e-6, "{report:?}");
            continue;
        }
        assert_eq!(report.launched_instances.len(), 2, "{ceiling}: {report:?}");
        assert_eq!(requests.len(), 2, "{ceiling}");
        for r in &requests {
            let mut types: Vec<&str> = r
                .overrides
                .iter()
                .map(|o| o.instance_type.as_str())
                .collect();
            types.sort();
            types.dedup();
            assert_eq!(types, offered, "{ceiling}");
        }
    }
}
