//! `template.yaml` deployed into moto as `sam deploy` deploys it (SAM transform, then a
//! CloudFormation stack): what the stack creates is what the world uses, events reach the
//! queue only through the stack's rules, and what moto records without modelling (access
//! entries, the queue policy, schedules) is checked in the deployed template.
//!
//! Real: moto's CloudFormation, EventBridge, SQS, IAM and STS behind the AWS SDK, the SAM
//! translator. Emulated: nothing here besides moto itself (see `moto/launch.py`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use nodewright_world::moto::stack::{self, Deployed};
use nodewright_world::moto::{Moto, SeedSpec, Stack, seed};
use nodewright_world::world::deploy_stack;
use serde_json::{Value, json};

const CLUSTER: &str = "stack-demo";

struct Account {
    moto: Moto,
    admin: aws_config::SdkConfig,
    stack: Stack,
}

async fn deployed(parameters: &[(&str, &str)]) -> Account {
    let moto = Moto::start().await.expect("moto starts");
    let admin = moto.sdk_config().await;
    seed(&admin, &SeedSpec::new(CLUSTER)).await.expect("seeded");
    let parameters: BTreeMap<String, String> = parameters
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let stack = deploy_stack(&moto, CLUSTER, &parameters)
        .await
        .expect("template.yaml deploys");
    Account { moto, admin, stack }
}

async fn described(account: &Account) -> (Deployed, Value) {
    let d = stack::describe(&account.moto, account.stack.name())
        .await
        .expect("DescribeStacks, DescribeStackResources and GetTemplate");
    let template = d.template.clone().expect("GetTemplate answered");
    (d, template)
}

fn resources_of_type<'a>(template: &'a Value, kind: &str) -> Vec<(&'a str, &'a Value)> {
    template["Resources"]
        .as_object()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .map(|(id, r)| (id.as_str(), r))
        .collect()
}

fn get_att(logical_id: &str, attribute: &str) -> Value {
    json!({"Fn::GetAtt": [logical_id, attribute]})
}

/// Receives what is in the queue now (one long poll), without deleting it.
async fn queued(account: &Account) -> Vec<Value> {
    let out = aws_sdk_sqs::Client::new(&account.admin)
        .receive_message()
        .queue_url(&account.stack.queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("ReceiveMessage on the stack's queue");
    out.messages()
        .iter()
        .map(|m| serde_json::from_str(m.body().unwrap_or_default()).expect("JSON event"))
        .collect()
}

async fn put_event(account: &Account, source: &str, detail_type: &str, detail: Value) {
    let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
        .source(source)
        .detail_type(detail_type)
        .detail(detail.to_string())
        .build();
    let out = aws_sdk_eventbridge::Client::new(&account.admin)
        .put_events()
        .entries(entry)
        .send()
        .await
        .expect("PutEvents");
    assert_eq!(out.failed_entry_count(), 0, "{out:?}");
}

#[tokio::test]
async fn the_deployed_stack_creates_the_queue_rules_roles_and_profile_the_world_uses() {
    let account = deployed(&[]).await;
    let d = &account.stack.deployed;
    assert_eq!(d.status, "CREATE_COMPLETE");
    let modelled: BTreeMap<&str, &str> = d.modelled().into_iter().collect();
    for (id, kind) in [
        ("InterruptionQueue", "AWS::SQS::Queue"),
        ("InterruptionDeadLetterQueue", "AWS::SQS::Queue"),
        ("SpotInterruptionRule", "AWS::Events::Rule"),
        ("RebalanceRule", "AWS::Events::Rule"),
        ("InstanceStateChangeRule", "AWS::Events::Rule"),
        ("ScheduledChangeRule", "AWS::Events::Rule"),
        ("CapacityReservationRule", "AWS::Events::Rule"),
        (
            "InterruptionFunctionQueue",
            "AWS::Lambda::EventSourceMapping",
        ),
        ("NodeRole", "AWS::IAM::Role"),
        ("NodeInstanceProfile", "AWS::IAM::InstanceProfile"),
        ("ProvisionerFunction", "AWS::Lambda::Function"),
        ("InterruptionFunction", "AWS::Lambda::Function"),
        ("SweeperFunction", "AWS::Lambda::Function"),
    ] {
        assert_eq!(modelled.get(id), Some(&kind), "{id} in {modelled:?}");
    }

    // The queue as the template sets it, dead-lettering into the stack's other queue.
    let sqs = aws_sdk_sqs::Client::new(&account.admin);
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&account.stack.queue_url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("GetQueueAttributes");
    let attrs = attrs.attributes().expect("attributes");
    assert_eq!(
        attrs.get(&QueueAttributeName::QueueArn),
        Some(&account.stack.queue_arn)
    );
    assert_eq!(
        attrs
            .get(&QueueAttributeName::VisibilityTimeout)
            .map(String::as_str),
        Some("360")
    );
    let redrive: Value = serde_json::from_str(
        attrs
            .get(&QueueAttributeName::RedrivePolicy)
            .expect("a redrive policy"),
    )
    .expect("JSON");
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&account.stack.dead_letter_queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("the dead-letter queue exists")
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .expect("its ARN");
    assert_eq!(redrive["deadLetterTargetArn"], dlq_arn.as_str());

    // Every rule of the stack sends to the stack's queue and nowhere else.
    let events = aws_sdk_eventbridge::Client::new(&account.admin);
    for id in [
        "SpotInterruptionRule",
        "RebalanceRule",
        "InstanceStateChangeRule",
        "ScheduledChangeRule",
        "CapacityReservationRule",
    ] {
        let rule = d
            .resources
            .iter()
            .find(|r| r.logical_id.as_deref() == Some(id))
            .and_then(|r| r.physical_id.clone())
            .expect("the rule's name");
        let targets = events
            .list_targets_by_rule()
            .rule(&rule)
            .send()
            .await
            .expect("ListTargetsByRule");
        let arns: Vec<&str> = targets.targets().iter().map(|t| t.arn()).collect();
        assert_eq!(arns, [account.stack.queue_arn.as_str()], "{id}");
    }

    // The node role is in the instance profile the default pool launches with.
    let profile = aws_sdk_iam::Client::new(&account.admin)
        .get_instance_profile()
        .instance_profile_name(&account.stack.instance_profile_name)
        .send()
        .await
        .expect("GetInstanceProfile");
    let roles: Vec<&str> = profile
        .instance_profile()
        .map(|p| p.roles().iter().map(|r| r.role_name()).collect())
        .unwrap_or_default();
    assert_eq!(roles, [account.stack.node_role_name.as_str()]);

    // Each function's role output is the role Lambda holds for it.
    for (function, output) in [
        ("ProvisionerFunction", "ProvisionerRoleArn"),
        ("InterruptionFunction", "InterruptionRoleArn"),
        ("SweeperFunction", "SweeperRoleArn"),
    ] {
        assert_eq!(
            d.function(function).expect("deployed").role,
            d.output(output).expect("output"),
            "{function}"
        );
    }
    let env = &d.function("InterruptionFunction").unwrap().environment;
    assert_eq!(env.get("QUEUE_URL"), Some(&account.stack.queue_url));
    assert_eq!(env.get("CLUSTER_NAME").map(String::as_str), Some(CLUSTER));
    assert_eq!(
        env.get("DEFAULT_CAPACITY_TYPES").map(String::as_str),
        Some("spot,on-demand"),
        "a list parameter left at its default is joined as a list"
    );
}

#[tokio::test]
async fn each_function_signs_as_its_stack_role_and_iam_refuses_what_that_role_does_not_grant() {
    let account = deployed(&[]).await;
    let d = &account.stack.deployed;
    let sign_as = |credentials: aws_credential_types::Credentials| {
        account
            .admin
            .to_builder()
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(credentials),
            )
            .build()
    };
    let mut configs = BTreeMap::new();
    for (function, deployed) in &d.functions {
        let credentials = nodewright_world::moto::iam::function_credentials(
            &account.admin,
            &deployed.role,
            function,
        )
        .await
        .expect("AssumeRole of the function's role");
        assert!(
            credentials.session_token().is_some(),
            "temporary credentials"
        );
        configs.insert(function.as_str(), sign_as(credentials));
    }
    // The interruption function reads its queue; the sweeper has no such grant.
    let receive = |config: &aws_config::SdkConfig| {
        let sqs = aws_sdk_sqs::Client::new(config);
        let url = account.stack.queue_url.clone();
        async move {
            sqs.receive_message()
                .queue_url(url)
                .wait_time_seconds(0)
                .send()
                .await
        }
    };
    receive(&configs["InterruptionFunction"])
        .await
        .expect("the interruption role may receive from its queue");
    let refused = receive(&configs["SweeperFunction"])
        .await
        .expect_err("the sweeper role has no sqs:ReceiveMessage");
    assert!(
        format!("{refused:?}").contains("AccessDenied"),
        "{refused:?}"
    );
    // The provisioner resolves AMI aliases with ssm:GetParameters, and so does the sweeper
    // (drift: what an `@latest` alias resolves to now; replacements launch as the
    // provisioner's).
    let name = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id";
    for function in ["ProvisionerFunction", "SweeperFunction"] {
        aws_sdk_ssm::Client::new(&configs[function])
            .get_parameters()
            .names(name)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{function}'s role may read AMI parameters: {e:?}"));
    }
}

#[tokio::test]
async fn an_event_of_each_rule_reaches_the_queue_and_one_for_another_source_or_detail_type_does_not()
 {
    let account = deployed(&[]).await;
    // None of these matches a rule of the stack: another detail-type of aws.ec2, the
    // spot warning's detail-type from another source, a Health event of another category.
    put_event(
        &account,
        "aws.ec2",
        "EC2 Instance Scheduled Event",
        json!({"instance-id": "i-0"}),
    )
    .await;
    put_event(
        &account,
        "acme.billing",
        "EC2 Spot Instance Interruption Warning",
        json!({"instance-id": "i-0"}),
    )
    .await;
    put_event(
        &account,
        "aws.health",
        "AWS Health Event",
        json!({"service": "EC2", "eventTypeCategory": "issue"}),
    )
    .await;
    assert_eq!(queued(&account).await, Vec::<Value>::new());

    let ours = [
        (
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": "i-1"}),
        ),
        (
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            json!({"instance-id": "i-2"}),
        ),
        (
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": "i-3", "state": "stopping"}),
        ),
        (
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning",
            json!({"instance-id": "i-4"}),
        ),
        (
            "aws.health",
            "AWS Health Event",
            json!({"service": "EC2", "eventTypeCategory": "scheduledChange"}),
        ),
    ];
    for (source, detail_type, detail) in &ours {
        put_event(&account, source, detail_type, detail.clone()).await;
    }
    let mut got: Vec<String> = Vec::new();
    for _ in 0..5 {
        got.extend(
            queued(&account)
                .await
                .iter()
                .map(|e| format!("{} / {}", e["source"], e["detail-type"])),
        );
        if got.len() >= ours.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    got.sort();
    let mut want: Vec<String> = ours
        .iter()
        .map(|(s, t, _)| format!("{:?} / {:?}", s, t))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

#[tokio::test]
async fn what_moto_records_without_modelling_is_checked_in_the_deployed_template() {
    let account = deployed(&[]).await;
    let (d, template) = described(&account).await;

    // moto lists a resource with no id when nothing exists behind it, for one of two
    // reasons: it does not model the type, or the resource's `Condition` is false for
    // these parameters (AWS leaves such a resource out of the stack; moto lists it
    // empty). If moto starts modelling a type, this fails and the README's local-world
    // section needs updating.
    let listed: BTreeSet<&str> = d.modelled().into_iter().map(|(id, _)| id).collect();
    let all = template["Resources"].as_object().expect("Resources");
    let unlisted: BTreeSet<&str> = all
        .keys()
        .map(String::as_str)
        .filter(|id| !listed.contains(id))
        .collect();
    assert_eq!(
        d.resources
            .iter()
            .filter(|r| r.logical_id.is_none())
            .count(),
        unlisted.len(),
        "one id-less entry per template resource moto did not create"
    );
    let unmodelled_kinds = [
        "AWS::EKS::AccessEntry",
        "AWS::SQS::QueuePolicy",
        "AWS::Scheduler::Schedule",
        "AWS::Logs::MetricFilter",
        "AWS::SNS::Subscription",
        "AWS::Lambda::EventInvokeConfig",
    ];
    // All false here: no FunctionSubnetIds, no AlarmEmail, no EbsKmsKeyArns, no takeover,
    // no dashboard.
    let conditions_off = [
        "WithDashboard",
        "PrivateEndpoints",
        "HasAlarmEmail",
        "HasEbsKmsKeys",
        "TakesOverFromKarpenter",
    ];
    let expected: BTreeSet<&str> = all
        .iter()
        .filter(|(_, r)| {
            unmodelled_kinds.iter().any(|k| r["Type"] == *k)
                || conditions_off.iter().any(|c| r["Condition"] == *c)
        })
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(unlisted, expected);
    assert!(
        expected.contains("PrivateEndpointsPolicy"),
        "a modelled type (AWS::IAM::ManagedPolicy) left out by its false condition"
    );

    // Access entries: each function's role as a STANDARD entry, cluster admin only when
    // KubernetesAccess asks for it, the node role as EC2_LINUX, all on this cluster.
    let entries: BTreeMap<&str, &Value> = resources_of_type(&template, "AWS::EKS::AccessEntry")
        .into_iter()
        .collect();
    let cluster = json!({"Ref": "ClusterName"});
    for (entry, role) in [
        ("ProvisionerAccessEntry", "ProvisionerRole"),
        ("InterruptionAccessEntry", "InterruptionRole"),
        ("SweeperAccessEntry", "SweeperRole"),
    ] {
        let p = &entries[entry]["Properties"];
        assert_eq!(p["PrincipalArn"], get_att(role, "Arn"), "{entry}");
        assert_eq!(p["ClusterName"], cluster, "{entry}");
        assert_eq!(p["Type"], "STANDARD", "{entry}");
        assert_eq!(
            p["AccessPolicies"]["Fn::If"][0], "ClusterAdminAccess",
            "{entry}"
        );
    }
    assert_eq!(
        entries["NodeAccessEntry"]["Properties"]["PrincipalArn"],
        get_att("NodeRole", "Arn")
    );
    assert_eq!(
        entries["NodeAccessEntry"]["Properties"]["Type"],
        "EC2_LINUX"
    );
    assert_eq!(entries.len(), 4, "{:?}", entries.keys());
    // As EKS holds them (what the world's API server authenticates by): by default each
    // function's role in a group of its own and none an administrator; with
    // KubernetesAccess=cluster-admin, administrators in no group.
    let held = |deployed: &Deployed| -> BTreeMap<String, (Vec<String>, bool)> {
        nodewright_world::access_entries::of_functions(deployed)
            .expect("the access entries read")
            .into_iter()
            .map(|e| (e.principal_arn, (e.groups, e.cluster_admin)))
            .collect()
    };
    let roles = &account.stack.deployed.functions;
    let default = held(&account.stack.deployed);
    for (function, group) in [
        ("ProvisionerFunction", "nodewright-provisioner"),
        ("InterruptionFunction", "nodewright-interruption"),
        ("SweeperFunction", "nodewright-sweeper"),
    ] {
        assert_eq!(
            default[&roles[function].role],
            (vec![group.to_string()], false),
            "{function}"
        );
    }
    let mut admin = account.stack.deployed.clone();
    admin
        .parameters
        .insert("KubernetesAccess".into(), "cluster-admin".into());
    assert!(
        held(&admin).values().all(|e| *e == (vec![], true)),
        "{:?}",
        held(&admin)
    );

    // The queue policy: EventBridge may send to the stack's queue from exactly its rules.
    let policies = resources_of_type(&template, "AWS::SQS::QueuePolicy");
    assert_eq!(policies.len(), 1);
    let policy = &policies[0].1["Properties"];
    assert_eq!(policy["Queues"], json!([{"Ref": "InterruptionQueue"}]));
    let from_rules = policy["PolicyDocument"]["Statement"]
        .as_array()
        .expect("statements")
        .iter()
        .find(|s| s["Principal"] == json!({"Service": "events.amazonaws.com"}))
        .expect("a statement for EventBridge");
    assert_eq!(from_rules["Action"], "sqs:SendMessage");
    assert_eq!(from_rules["Resource"], get_att("InterruptionQueue", "Arn"));
    let mut sources: Vec<&Value> = from_rules["Condition"]["ArnEquals"]["aws:SourceArn"]
        .as_array()
        .expect("source ARNs")
        .iter()
        .collect();
    sources.sort_by_key(|v| v.to_string());
    let mut rules: Vec<Value> = resources_of_type(&template, "AWS::Events::Rule")
        .into_iter()
        .map(|(id, _)| get_att(id, "Arn"))
        .collect();
    rules.sort_by_key(|v| v.to_string());
    assert_eq!(sources, rules.iter().collect::<Vec<_>>());

    // Schedules (made by the SAM transform from ScheduleV2 events): the provisioner and the
    // sweeper every minute, each with a role that may invoke exactly its function.
    let schedules: BTreeMap<&str, &Value> =
        resources_of_type(&template, "AWS::Scheduler::Schedule")
            .into_iter()
            .collect();
    assert_eq!(schedules.len(), 2, "{:?}", schedules.keys());
    for function in ["ProvisionerFunction", "SweeperFunction"] {
        let schedule = &schedules[format!("{function}EveryMinute").as_str()]["Properties"];
        assert_eq!(schedule["ScheduleExpression"], "rate(1 minute)");
        assert_eq!(schedule["Target"]["Arn"], get_att(function, "Arn"));
        let role_id = schedule["Target"]["RoleArn"]["Fn::GetAtt"][0]
            .as_str()
            .expect("the schedule's role");
        let role = &template["Resources"][role_id]["Properties"];
        let statement = &role["Policies"][0]["PolicyDocument"]["Statement"][0];
        assert_eq!(statement["Action"], "lambda:InvokeFunction", "{role_id}");
        assert_eq!(statement["Resource"], get_att(function, "Arn"), "{role_id}");
    }
}

/// The value of `!Sub` string `value` with `${ClusterName}` set to `cluster`; any other
/// reference is left as is, so a comparison with a plain name fails on it.
fn with_cluster(value: &Value, cluster: &str) -> String {
    value["Fn::Sub"]
        .as_str()
        .unwrap_or_else(|| panic!("a !Sub string, not {value}"))
        .replace("${ClusterName}", cluster)
}

#[tokio::test]
async fn each_schedule_is_named_for_its_cluster_so_two_stacks_in_one_region_do_not_collide() {
    let account = deployed(&[]).await;
    let (_, template) = described(&account).await;
    // EventBridge Scheduler names are unique per account, region and group; SAM names a
    // schedule from its logical id unless told, the same in every stack.
    let schedules: BTreeMap<&str, &Value> =
        resources_of_type(&template, "AWS::Scheduler::Schedule")
            .into_iter()
            .collect();
    let names = |cluster: &str| -> BTreeMap<&str, String> {
        schedules
            .iter()
            .map(|(id, s)| (*id, with_cluster(&s["Properties"]["Name"], cluster)))
            .collect()
    };
    let here = names(CLUSTER);
    assert_eq!(
        here.get("ProvisionerFunctionEveryMinute")
            .map(String::as_str),
        Some("nodewright-poll-stack-demo")
    );
    assert_eq!(
        here.get("SweeperFunctionEveryMinute").map(String::as_str),
        Some("nodewright-sweep-stack-demo")
    );
    let other = names("other-cluster");
    for (id, name) in &here {
        assert!(
            !other.values().any(|n| n == name),
            "{id}: {name} again in another cluster's stack"
        );
        assert!(other[id].contains("other-cluster"), "{id}: {}", other[id]);
    }
    // The longest cluster name the template accepts still gives names within 64 characters.
    let longest = template["Parameters"]["ClusterName"]["MaxLength"]
        .as_u64()
        .expect("ClusterName has a MaxLength");
    let longest = "c".repeat(usize::try_from(longest).expect("small"));
    for (id, name) in names(&longest) {
        assert!(name.len() <= 64, "{id}: {name} is {} long", name.len());
    }
}

#[tokio::test]
async fn an_update_of_the_poll_interval_reaches_the_provisioners_environment_in_place() {
    let account = deployed(&[("PollInterval", "5")]).await;
    let before = &account.stack.deployed;
    assert_eq!(
        before.function("ProvisionerFunction").unwrap().environment["POLL_INTERVAL"],
        "5"
    );
    let mut parameters = BTreeMap::new();
    parameters.insert("ClusterName".to_string(), CLUSTER.to_string());
    parameters.insert("PollInterval".to_string(), "9".to_string());
    let after = stack::deploy(&account.moto, account.stack.name(), &parameters)
        .await
        .expect("the stack updates");
    assert_eq!(after.status, "UPDATE_COMPLETE");
    assert_eq!(after.parameters["PollInterval"], "9");
    let provisioner = after.function("ProvisionerFunction").unwrap();
    assert_eq!(provisioner.environment["POLL_INTERVAL"], "9");
    // Updated in place: the same function, role and queue, so nothing the world holds
    // (credentials, queue URL) goes stale.
    let was = before.function("ProvisionerFunction").unwrap();
    assert_eq!(
        (&provisioner.name, &provisioner.role),
        (&was.name, &was.role)
    );
    assert_eq!(
        after.output("InterruptionQueueUrl").unwrap(),
        account.stack.queue_url
    );
}

/// The world deploys with the capabilities of the Makefile's own `sam deploy` line
/// (`stack::deploy`); acknowledging less, as `sam deploy --guided` alone does, fails as
/// CloudFormation fails it, because the template names its node role and instance profile.
#[tokio::test]
async fn the_makefile_s_deploy_acknowledges_the_capabilities_the_template_needs() {
    let moto = Moto::start().await.expect("moto starts");
    let admin = moto.sdk_config().await;
    seed(&admin, &SeedSpec::new(CLUSTER)).await.expect("seeded");
    let parameters: BTreeMap<String, String> =
        [("ClusterName".to_string(), CLUSTER.to_string())].into();
    let refused = stack::deploy_acknowledging(
        &moto,
        &stack::stack_name(CLUSTER),
        &parameters,
        &["CAPABILITY_IAM".to_string()],
    )
    .await
    .expect_err("CAPABILITY_IAM alone does not cover named IAM resources");
    let why = format!("{refused}");
    assert!(
        why.contains("InsufficientCapabilitiesException") && why.contains("CAPABILITY_NAMED_IAM"),
        "{why}"
    );
    let makefile =
        std::fs::read_to_string(nodewright_world::moto::workspace_root().join("Makefile"))
            .expect("the Makefile");
    let capabilities =
        stack::deploy_capabilities(&makefile).expect("make deploy names capabilities");
    assert!(
        capabilities.contains(&"CAPABILITY_NAMED_IAM".to_string()),
        "{capabilities:?}"
    );
    let deployed = stack::deploy(&moto, &stack::stack_name(CLUSTER), &parameters)
        .await
        .expect("deployed as make deploy deploys");
    assert_eq!(deployed.status, "CREATE_COMPLETE");
}

/// The documents of the managed policies attached to `role`, as IAM answers them.
async fn attached_documents(account: &Account, role: &str) -> Vec<String> {
    let iam = aws_sdk_iam::Client::new(&account.admin);
    let attached = iam
        .list_attached_role_policies()
        .role_name(role)
        .send()
        .await
        .expect("ListAttachedRolePolicies");
    let mut documents = Vec::new();
    for p in attached.attached_policies() {
        let arn = p.policy_arn().expect("an ARN");
        let policy = iam
            .get_policy()
            .policy_arn(arn)
            .send()
            .await
            .expect("GetPolicy");
        let version = policy
            .policy()
            .and_then(|p| p.default_version_id())
            .expect("a version");
        let document = iam
            .get_policy_version()
            .policy_arn(arn)
            .version_id(version)
            .send()
            .await
            .expect("GetPolicyVersion");
        let text = document
            .policy_version()
            .and_then(|v| v.document())
            .unwrap_or_default();
        documents.push(
            percent_encoding::percent_decode_str(text)
                .decode_utf8_lossy()
                .into_owned(),
        );
    }
    documents
}

/// With EbsKmsKeyArns, each function's role holds the key policy, naming the keys given.
#[tokio::test]
async fn the_ebs_key_policy_is_attached_to_every_function_role_when_keys_are_named() {
    let key = "arn:aws:kms:us-east-1:123456789012:key/0b6f6b8e-1a2b-4c3d-9e8f-001122334455";
    let account = deployed(&[("EbsKmsKeyArns", key)]).await;
    for (function, f) in &account.stack.deployed.functions {
        let role = f.role.rsplit('/').next().expect("a role name");
        let documents = attached_documents(&account, role).await;
        assert!(
            documents
                .iter()
                .any(|d| d.contains("kms:CreateGrant") && d.contains(key)),
            "{function} ({role}) holds the EBS key policy: {documents:?}"
        );
    }
}

/// With TakeOverFromKarpenter=true, the interruption and sweeper roles may adopt
/// Karpenter's instances; the provisioner's may not, and without the parameter none may.
#[tokio::test]
async fn the_takeover_policy_is_attached_to_the_removing_functions_only_when_asked() {
    let adopts = |d: &String| d.contains("AdoptKarpenterInstances");
    let on = deployed(&[("TakeOverFromKarpenter", "true")]).await;
    for (function, f) in &on.stack.deployed.functions {
        let role = f.role.rsplit('/').next().expect("a role name");
        let documents = attached_documents(&on, role).await;
        let want = function != "ProvisionerFunction";
        assert_eq!(
            documents.iter().any(adopts),
            want,
            "{function} ({role}): {documents:?}"
        );
    }
    let off = deployed(&[]).await;
    for f in off.stack.deployed.functions.values() {
        let role = f.role.rsplit('/').next().expect("a role name");
        assert!(
            !attached_documents(&off, role).await.iter().any(adopts),
            "{role}"
        );
    }
}

/// The dashboard costs $3.00 a month, so it is there only with CreateDashboard=true; its body is
/// the JSON CloudWatch stores, with every widget's references resolved.
#[tokio::test]
async fn the_dashboard_is_created_only_when_asked() {
    let dashboard = format!("nodewright-{CLUSTER}");
    let listed = |account: &Account| {
        let cloudwatch = aws_sdk_cloudwatch::Client::new(&account.admin);
        async move {
            cloudwatch
                .list_dashboards()
                .send()
                .await
                .expect("ListDashboards")
                .dashboard_entries()
                .iter()
                .filter_map(|d| d.dashboard_name().map(str::to_string))
                .collect::<Vec<_>>()
        }
    };
    let off = deployed(&[]).await;
    assert_eq!(listed(&off).await, Vec::<String>::new());

    let on = deployed(&[("CreateDashboard", "true")]).await;
    assert_eq!(listed(&on).await, std::slice::from_ref(&dashboard));
    let body = aws_sdk_cloudwatch::Client::new(&on.admin)
        .get_dashboard()
        .dashboard_name(&dashboard)
        .send()
        .await
        .expect("GetDashboard")
        .dashboard_body
        .expect("a body");
    let body: Value = serde_json::from_str(&body).expect("the body is JSON");
    let widgets = body["widgets"].as_array().expect("widgets");
    let log_group = format!("/nodewright/{CLUSTER}/provisioner");
    assert!(
        widgets.iter().any(|w| w["properties"]["query"]
            .as_str()
            .is_some_and(|q| q.contains(&log_group))),
        "a Logs Insights widget reads the provisioner's log group: {body:#}"
    );
    assert!(!body.to_string().contains("${"), "{body:#}");
}

/// PreferencePolicy and MinValuesPolicy reach every function (the interruption function
/// and the sweeper plan replacements, the sweeper consolidation), as each binary reads them.
#[tokio::test]
async fn the_scheduling_policies_reach_all_three_functions() {
    use nodewright::scheduling::{MinValuesPolicy, PreferencePolicy};
    for (parameters, preferences, min_values) in [
        (vec![], PreferencePolicy::Respect, MinValuesPolicy::Strict),
        (
            vec![
                ("PreferencePolicy", "Ignore"),
                ("MinValuesPolicy", "BestEffort"),
            ],
            PreferencePolicy::Ignore,
            MinValuesPolicy::BestEffort,
        ),
    ] {
        let account = deployed(&parameters).await;
        assert_eq!(account.stack.deployed.functions.len(), 3);
        for (function, f) in &account.stack.deployed.functions {
            let env = &f.environment;
            let read = env.get("PREFERENCE_POLICY").map(|v| v.parse());
            assert_eq!(read, Some(Ok(preferences)), "{function}: {env:?}");
            let read = env.get("MIN_VALUES_POLICY").map(|v| v.parse());
            assert_eq!(read, Some(Ok(min_values)), "{function}: {env:?}");
        }
    }
}
