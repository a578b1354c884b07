//! The launch policy (`template.yaml`, `LaunchOnlyTaggedAsOurs`) lets a launch create each
//! resource type only with the ownership tag in the request. moto checks IAM actions, not
//! conditions, so this test reads both sides: the resource types the policy conditions on,
//! and the tags the requests our code sends put on each type (the CreateFleet call and the
//! CreateLaunchTemplate call, with the template's data, as the AWS front recorded them). A
//! type the policy requires and no request tags is a launch AWS refuses with
//! UnauthorizedOperation.
//!
//! What each request can tag (EC2 API reference): CreateFleet's `TagSpecification` for an
//! `instant` fleet names `fleet`, `instance` and `volume`; a launch template's data names
//! `instance`, `volume`, `network-interface` and `spot-instances-request`, and a launch
//! fails if the template tags a type the launch does not create (an on-demand launch
//! creates no spot request). Karpenter does the same: CreateFleet tags
//! instance/volume/fleet, its templates the network interface and, for spot, the request.
//!
//! Emulated here: AWS is moto behind the AWS front, Kubernetes the simulated cluster; the
//! provisioner handler, the AWS SDK and `kube::Client` are real.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use nodewright_world::aws_front::Handling;
use nodewright_world::kit::{manual_world, quick_batch};
use nodewright_world::template::{StackFacts, Template};
use nodewright_world::world::provisioner::{invoke, quick};
use serde_json::Value;

const OWNERSHIP: &str = "nodewright.io/cluster";
const SPOT_REQUEST: &str = "spot-instances-request";

fn list(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// `network-interface` from `arn:aws:ec2:us-east-1:123456789012:network-interface/*`.
fn resource_type(arn: &str) -> Option<String> {
    let last = arn.rsplit(':').next()?;
    Some(last.split_once('/')?.0.to_string())
}

fn facts(cluster: &str) -> StackFacts {
    StackFacts::local(cluster)
        .with_attribute(
            "NodeRole.Arn",
            "arn:aws:iam::123456789012:role/nodewright-node-x",
        )
        .with_attribute(
            "InterruptionQueue.Arn",
            "arn:aws:sqs:us-east-1:123456789012:q",
        )
}

/// The resource types the provisioner's policy lets `action` create only with
/// `OWNERSHIP=<cluster>` in the request, minus those another statement lets it use when
/// they already carry the tag (`aws:ResourceTag`: the launch template a fleet launches
/// from is used, not created).
fn required_in_request(cluster: &str, action: &str) -> BTreeSet<String> {
    let template = Template::load().expect("template.yaml renders");
    let role = template
        .function_role("ProvisionerFunction", &facts(cluster))
        .expect("the provisioner's role renders");
    let key = |kind: &str| format!("aws:{kind}Tag/{OWNERSHIP}");
    let mut required = BTreeSet::new();
    let mut used_when_owned = BTreeSet::new();
    for s in role.statements() {
        if s["Effect"] != "Allow" || !list(&s["Action"]).iter().any(|a| a == action) {
            continue;
        }
        let equals = &s["Condition"]["StringEquals"];
        let types = list(&s["Resource"])
            .iter()
            .filter_map(|r| resource_type(r))
            .collect::<Vec<_>>();
        if list(&equals[key("Request")]) == [cluster] {
            required.extend(types);
        } else if list(&equals[key("Resource")]) == [cluster] {
            used_when_owned.extend(types);
        }
    }
    &required - &used_when_owned
}

/// The resource types a Query-protocol request's tag specifications (under `prefix`, e.g.
/// `TagSpecification` or `LaunchTemplateData.TagSpecification`) give `OWNERSHIP=<cluster>`.
fn tagged_types(params: &BTreeMap<String, String>, prefix: &str, cluster: &str) -> Vec<String> {
    let mut out = Vec::new();
    for n in 1.. {
        let Some(kind) = params.get(&format!("{prefix}.{n}.ResourceType")) else {
            break;
        };
        let owned = (1..).map_while(|m| {
            let k = params.get(&format!("{prefix}.{n}.Tag.{m}.Key"))?;
            let v = params.get(&format!("{prefix}.{n}.Tag.{m}.Value"));
            Some((k.clone(), v.cloned().unwrap_or_default()))
        });
        if owned
            .into_iter()
            .any(|(k, v)| k == OWNERSHIP && v == cluster)
        {
            out.push(kind.clone());
        }
    }
    out
}

struct Launched {
    /// Types tagged with the ownership tag by the CreateFleet request itself.
    fleet: Vec<String>,
    /// By the launch template's data.
    template_data: Vec<String>,
    /// By the CreateLaunchTemplate request.
    template: Vec<String>,
    lifecycle: String,
}

/// One provisioner invocation for two pods of a NodePool allowing only `capacity_type`.
async fn launch(cluster: &str, capacity_type: &str) -> Launched {
    let world = manual_world(cluster).await.expect("the local world starts");
    let only = format!("values: [\"{capacity_type}\"]");
    let example = world
        .example_edited(
            "getting-started.yaml",
            &[
                ("replicas: 10", "replicas: 2"),
                ("values: [\"on-demand\"]", only.as_str()),
            ],
        )
        .unwrap();
    world.apply_yaml(&example).unwrap();
    world.sim.step().await;
    // The tag value is the world's cluster name (the one the policy was rendered for).
    let cluster = world.seeded.cluster.as_str();
    let batch = quick_batch();
    let state = world
        .provisioner(quick(Duration::from_secs(2)), batch)
        .await
        .unwrap();
    let summary = invoke(&state).await.unwrap();
    let instances = world.instances().await.unwrap();
    assert_eq!(instances.len(), 1, "one node launched: {summary}");

    let sent = |action: &str| {
        let calls = world.front.calls(action);
        let forwarded: Vec<_> = calls
            .into_iter()
            .filter(|c| matches!(c.handling, Handling::Forwarded(200)))
            .collect();
        assert_eq!(forwarded.len(), 1, "one {action} reached EC2");
        forwarded.into_iter().next().map(|c| c.params).unwrap()
    };
    let fleet = sent("CreateFleet");
    let template = sent("CreateLaunchTemplate");
    Launched {
        fleet: tagged_types(&fleet, "TagSpecification", cluster),
        template_data: tagged_types(&template, "LaunchTemplateData.TagSpecification", cluster),
        template: tagged_types(&template, "TagSpecification", cluster),
        lifecycle: instances[0].lifecycle.clone(),
    }
}

fn untagged(required: &BTreeSet<String>, launched: &Launched, not_created: &[&str]) -> Vec<String> {
    required
        .iter()
        .filter(|t| !not_created.contains(&t.as_str()))
        .filter(|t| !launched.fleet.contains(t) && !launched.template_data.contains(t))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_launch_tags_every_resource_type_the_launch_policy_requires_tagged() {
    let cluster = "e2e-tags-spot";
    let required = required_in_request(cluster, "ec2:CreateFleet");
    assert!(
        [
            "fleet",
            "instance",
            "volume",
            "network-interface",
            SPOT_REQUEST
        ]
        .iter()
        .all(|t| required.contains(*t)),
        "the policy conditions on what Karpenter's does: {required:?}"
    );
    let launched = launch(cluster, "spot").await;
    assert_eq!(launched.lifecycle, "spot");
    assert_eq!(
        untagged(&required, &launched, &[]),
        Vec::<String>::new(),
        "CreateFleet tags {:?}, the template's data {:?}",
        launched.fleet,
        launched.template_data
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_demand_launch_tags_what_it_creates_and_its_template_names_no_spot_request() {
    let cluster = "e2e-tags-od";
    let required = required_in_request(cluster, "ec2:CreateFleet");
    let launched = launch(cluster, "on-demand").await;
    assert_eq!(launched.lifecycle, "on-demand");
    // An on-demand launch creates no spot request: nothing to tag, and EC2 fails a launch
    // whose template tags a type it does not create.
    assert_eq!(
        untagged(&required, &launched, &[SPOT_REQUEST]),
        Vec::<String>::new(),
        "CreateFleet tags {:?}, the template's data {:?}",
        launched.fleet,
        launched.template_data
    );
    assert!(
        !launched.template_data.iter().any(|t| t == SPOT_REQUEST),
        "{:?}",
        launched.template_data
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launch_template_itself_is_created_with_the_ownership_tag_the_policy_requires() {
    let cluster = "e2e-tags-lt";
    let required = required_in_request(cluster, "ec2:CreateLaunchTemplate");
    assert!(required.contains("launch-template"), "{required:?}");
    let launched = launch(cluster, "on-demand").await;
    // CreateLaunchTemplate creates the template only (the statement also lists what a
    // launch creates, for CreateFleet and RunInstances).
    assert!(
        launched.template.iter().any(|t| t == "launch-template"),
        "CreateLaunchTemplate tags {:?}",
        launched.template
    );
}
