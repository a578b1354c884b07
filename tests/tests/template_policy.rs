//! What moto cannot enforce about the functions' IAM policy, asserted by reading
//! `template.yaml`: moto checks actions only (see `nodewright_world::moto::iam`), so the
//! resource scoping and conditions that keep nodewright to its own instances are checked
//! here, statement by statement, for every function's role.
//!
//! The rules:
//! - every mutating EC2 or IAM action is allowed only on resources carrying this cluster's
//!   ownership tag (`aws:ResourceTag/nodewright.io/cluster`), or only when the request puts
//!   that tag on what it creates (`aws:RequestTag/nodewright.io/cluster`); the one exception
//!   is a launch *using* an image, snapshot, security group or subnet, which changes none;
//! - `ec2:CreateTags` is allowed either at launch only (`ec2:CreateAction` names launch
//!   actions, and the ownership tag is in the request) or on owned resources for listed
//!   keys only (`aws:TagKeys`, never the ownership key itself);
//! - `iam:PassRole` names its roles and passes them to EC2 only.
//!
//! One policy writes the ownership tag on existing instances, by design: adopting
//! Karpenter's (`TakeOverFromKarpenter`), checked on its own at the end.

use serde_json::Value;

use nodewright_world::template::{StackFacts, Template};

const CLUSTER: &str = "policy-cluster";
const OWNERSHIP: &str = "nodewright.io/cluster";
const LAUNCH_ACTIONS: [&str; 3] = ["CreateFleet", "RunInstances", "CreateLaunchTemplate"];
/// Resources a launch uses without changing them (Karpenter's controller policy scopes
/// them the same way: `AllowScopedEC2InstanceAccessActions`).
const USED_BY_LAUNCH: [&str; 5] = [
    "image/",
    "snapshot/",
    "security-group/",
    "subnet/",
    "capacity-reservation/",
];

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

/// [`list`] of a statement as written in the template.
fn yaml_list(v: &serde_yaml::Value) -> Vec<String> {
    match v {
        serde_yaml::Value::String(s) => vec![s.clone()],
        serde_yaml::Value::Sequence(items) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// The values a condition operator (`StringEquals`) gives a key, if any.
fn condition(statement: &Value, operator: &str, key: &str) -> Option<Vec<String>> {
    let c = statement.get("Condition")?.get(operator)?.get(key)?;
    Some(list(c))
}

fn read_only(action: &str) -> bool {
    let verb = action.split_once(':').map_or(action, |(_, v)| v);
    ["Describe", "Get", "List"]
        .iter()
        .any(|p| verb.starts_with(p))
}

/// Every way `statement` breaks the rules of the module doc, as sentences naming it.
fn violations(statement: &Value, cluster: &str) -> Vec<String> {
    let mut out = Vec::new();
    if statement["Effect"] != "Allow" {
        return out;
    }
    let sid = statement["Sid"].as_str().unwrap_or("(no Sid)");
    let actions = list(&statement["Action"]);
    let resources = list(&statement["Resource"]);
    let ours = |key: &str| {
        condition(statement, "StringEquals", key).is_some_and(|v| v == [cluster.to_string()])
    };
    let owned = ours(&format!("aws:ResourceTag/{OWNERSHIP}"));
    let tagged_in_request = ours(&format!("aws:RequestTag/{OWNERSHIP}"));
    for action in &actions {
        let Some((service, verb)) = action.split_once(':') else {
            out.push(format!("{sid}: {action} is not service:Action"));
            continue;
        };
        if !matches!(service, "ec2" | "iam") || read_only(action) {
            continue;
        }
        if action == "iam:PassRole" {
            if resources.iter().any(|r| r == "*") {
                out.push(format!("{sid}: iam:PassRole on any role"));
            }
            if condition(statement, "StringEquals", "iam:PassedToService").is_none() {
                out.push(format!("{sid}: iam:PassRole without iam:PassedToService"));
            }
            continue;
        }
        let uses_only = LAUNCH_ACTIONS[..2].contains(&verb)
            && !resources.is_empty()
            && resources
                .iter()
                .all(|r| USED_BY_LAUNCH.iter().any(|t| r.contains(&format!(":{t}"))));
        if !(owned || tagged_in_request || uses_only) {
            out.push(format!(
                "{sid}: {action} is not scoped by the ownership tag {OWNERSHIP}={cluster}"
            ));
        }
        // Tagging in IAM: a profile another cluster's nodewright owns (whose name may match
        // this cluster's pattern: cluster `a` and cluster `a_b`) must not be re-tagged as ours.
        if service == "iam"
            && verb.starts_with("Tag")
            && !owned
            && condition(
                statement,
                "StringEqualsIfExists",
                &format!("aws:ResourceTag/{OWNERSHIP}"),
            )
            .is_none_or(|v| v != [cluster.to_string()])
        {
            out.push(format!(
                "{sid}: {action} may re-tag a resource another cluster owns (no StringEqualsIfExists aws:ResourceTag/{OWNERSHIP})"
            ));
        }
        if verb == "CreateTags" {
            let at_launch = condition(statement, "StringEquals", "ec2:CreateAction");
            let keys = condition(statement, "ForAllValues:StringEquals", "aws:TagKeys");
            match (at_launch, keys) {
                (Some(creating), _) => {
                    if creating.iter().any(|a| !LAUNCH_ACTIONS.contains(&a.as_str())) {
                        out.push(format!(
                            "{sid}: ec2:CreateTags at creation by {creating:?}, not only launches"
                        ));
                    }
                    if !tagged_in_request {
                        out.push(format!(
                            "{sid}: ec2:CreateTags at launch without the ownership tag in the request"
                        ));
                    }
                }
                (None, Some(keys)) => {
                    if keys.is_empty() || keys.iter().any(|k| k == OWNERSHIP || k.contains('*')) {
                        out.push(format!(
                            "{sid}: ec2:CreateTags may change {keys:?}, which must be listed and exclude {OWNERSHIP}"
                        ));
                    }
                }
                (None, None) => out.push(format!(
                    "{sid}: ec2:CreateTags without aws:TagKeys (nor limited to launches by ec2:CreateAction)"
                )),
            }
        }
    }
    out
}

fn facts() -> StackFacts {
    StackFacts::local(CLUSTER)
        .with_attribute(
            "NodeRole.Arn",
            "arn:aws:iam::123456789012:role/nodewright-node-x",
        )
        .with_attribute(
            "InterruptionQueue.Arn",
            "arn:aws:sqs:us-east-1:123456789012:q",
        )
}

#[test]
fn every_functions_mutating_ec2_and_iam_statement_is_scoped_by_the_ownership_tag() {
    let template = Template::load().expect("template.yaml renders");
    let functions = template.functions();
    assert!(
        functions.len() >= 3,
        "the stack's functions are found: {functions:?}"
    );
    let mut problems = Vec::new();
    for function in &functions {
        let role = template
            .function_role(function, &facts())
            .expect("the function's role renders");
        for s in role.statements() {
            problems.extend(
                violations(s, CLUSTER)
                    .into_iter()
                    .map(|v| format!("{function} ({}): {v}", role.role)),
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_launch_actions_are_allowed_on_created_resources_only_with_the_ownership_tag_in_the_request()
{
    let template = Template::load().expect("template.yaml renders");
    let role = template
        .function_role("ProvisionerFunction", &facts())
        .expect("the provisioner's role renders");
    for action in [
        "ec2:CreateFleet",
        "ec2:RunInstances",
        "ec2:CreateLaunchTemplate",
    ] {
        let allowing: Vec<&Value> = role
            .statements()
            .into_iter()
            .filter(|s| list(&s["Action"]).iter().any(|a| a == action))
            .collect();
        assert!(!allowing.is_empty(), "{action} is allowed somewhere");
        for created in ["instance/", "volume/", "fleet/", "launch-template/"] {
            if action == "ec2:CreateLaunchTemplate" && created != "launch-template/" {
                continue;
            }
            let on_created: Vec<&Value> = allowing
                .iter()
                .copied()
                .filter(|s| {
                    list(&s["Resource"])
                        .iter()
                        .any(|r| r == "*" || r.contains(&format!(":{created}")))
                })
                .collect();
            assert!(!on_created.is_empty(), "{action} is allowed on {created}*");
            for s in on_created {
                let request = condition(s, "StringEquals", &format!("aws:RequestTag/{OWNERSHIP}"));
                let resource =
                    condition(s, "StringEquals", &format!("aws:ResourceTag/{OWNERSHIP}"));
                assert!(
                    request.is_some() || (created == "launch-template/" && resource.is_some()),
                    "{action} on {created}* in {} does not require {OWNERSHIP} in the request",
                    s["Sid"]
                );
            }
        }
    }
}

#[test]
fn the_ami_aliases_are_read_with_the_ssm_action_the_image_adapter_calls() {
    // `aws::images` resolves every alias with one GetParameters call (plural); a grant of
    // ssm:GetParameter alone leaves every launch with AccessDenied.
    let template = Template::load().expect("template.yaml renders");
    let role = template
        .function_role("ProvisionerFunction", &facts())
        .expect("the provisioner's role renders");
    let ssm: Vec<&Value> = role
        .statements()
        .into_iter()
        .filter(|s| list(&s["Action"]).iter().any(|a| a == "ssm:GetParameters"))
        .collect();
    assert!(!ssm.is_empty(), "ssm:GetParameters is allowed");
    for s in ssm {
        let resources = list(&s["Resource"]);
        assert!(
            resources
                .iter()
                .all(|r| r.ends_with("::parameter/aws/service/*")),
            "public parameters only: {resources:?}"
        );
    }
}

#[test]
fn the_rules_catch_an_unscoped_terminate_an_unlisted_retag_an_untagged_launch_and_a_profile_retag()
{
    let cases = [
        (
            r#"{"Sid":"A","Effect":"Allow","Action":["ec2:TerminateInstances"],"Resource":"*"}"#,
            "not scoped by the ownership tag",
        ),
        (
            r#"{"Sid":"B","Effect":"Allow","Action":"ec2:CreateTags","Resource":"*",
                "Condition":{"StringEquals":{"aws:ResourceTag/nodewright.io/cluster":"policy-cluster"}}}"#,
            "without aws:TagKeys",
        ),
        (
            r#"{"Sid":"C","Effect":"Allow","Action":"ec2:CreateTags","Resource":"*",
                "Condition":{"StringEquals":{"aws:ResourceTag/nodewright.io/cluster":"policy-cluster"},
                             "ForAllValues:StringEquals":{"aws:TagKeys":["Name","nodewright.io/cluster"]}}}"#,
            "exclude nodewright.io/cluster",
        ),
        (
            r#"{"Sid":"D","Effect":"Allow","Action":["ec2:CreateFleet"],"Resource":["arn:aws:ec2:*:1:instance/*"]}"#,
            "not scoped by the ownership tag",
        ),
        (
            r#"{"Sid":"E","Effect":"Allow","Action":"ec2:CreateTags","Resource":"*",
                "Condition":{"StringEquals":{"aws:RequestTag/nodewright.io/cluster":"other-cluster",
                                             "ec2:CreateAction":["CreateFleet"]}}}"#,
            "without the ownership tag in the request",
        ),
        (
            r#"{"Sid":"F","Effect":"Allow","Action":"iam:PassRole","Resource":"*"}"#,
            "iam:PassRole on any role",
        ),
        (
            r#"{"Sid":"H","Effect":"Allow","Action":["iam:CreateInstanceProfile","iam:TagInstanceProfile"],
                "Resource":"arn:aws:iam::1:instance-profile/nodewright/nodewright_policy-cluster_*",
                "Condition":{"StringEquals":{"aws:RequestTag/nodewright.io/cluster":"policy-cluster"}}}"#,
            "may re-tag a resource another cluster owns",
        ),
    ];
    for (statement, want) in cases {
        let s: Value = serde_json::from_str(statement).unwrap();
        let got = violations(&s, CLUSTER);
        assert!(
            got.iter().any(|v| v.contains(want)),
            "{statement}: expected a violation containing {want:?}, got {got:?}"
        );
    }
    let fine: Value = serde_json::from_str(
        r#"{"Sid":"G","Effect":"Allow","Action":["ec2:RunInstances","ec2:CreateFleet"],
            "Resource":["arn:aws:ec2:us-east-1::image/*","arn:aws:ec2:*:1:subnet/*"]}"#,
    )
    .unwrap();
    assert_eq!(violations(&fine, CLUSTER), Vec::<String>::new());
}

// --- Each function's permissions against the AWS calls its code makes ------------------

/// Why an action is in a function's table.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Why {
    /// The function's code calls this operation: the SDK method (snake case of the
    /// action's verb) appears in an adapter under `shared/src/aws` or `shared/src/eks`.
    Called,
    /// IAM authorizes part of a call under another action: CreateFleet (type instant) as
    /// `ec2:RunInstances` too; tags in a CreateFleet / CreateLaunchTemplate request as
    /// `ec2:CreateTags`; tags in CreateInstanceProfile as `iam:TagInstanceProfile`; an
    /// instance profile in a launch, and a role added to a profile, as `iam:PassRole`.
    Implied,
    /// Lambda itself acts with the function's role: writing its logs, and the SQS event
    /// source mapping polling the queue.
    Platform,
}

use Why::*;

/// Function -> the actions it needs, derived by reading each function's wiring and the
/// core it drives:
/// - provisioner: `functions/provisioner/src/main.rs` builds `describe_cluster`,
///   `Ec2Adapter`, `ImageAdapter`, `PricingAdapter` and `IamAdapter`; `Provisioner::poll`
///   lists owned instances (`instances.rs`), refreshes the live catalog
///   (`instance_types.rs`), discovers subnets, security groups and capacity reservations
///   (`network.rs`, `capacity_reservations.rs`), resolves
///   AMI aliases (`images.rs`), ensures launch templates and collects unused ones
///   (`launch_templates.rs`, `template_gc.rs`), ensures instance profiles
///   (`instance_profiles.rs`) and calls CreateFleet (`fleet.rs`); `refresh_prices` calls
///   the Price List (`pricing.rs`). It never terminates (no call of
///   `InstanceInventory::terminate` outside the interruption function).
/// - interruption: `functions/interruption/src/main.rs` builds the same adapters for
///   `Provisioner::replace` (the launch path, without `poll`: no template collection, no
///   price refresh) plus `SqsQueue` (follow-ups); `steps.rs` terminates the drained
///   instance.
/// - sweeper: `functions/sweeper/src/main.rs` builds `describe_cluster`, `Ec2Adapter`
///   (owned instances, TerminateInstances), `ProfileLeftoversAdapter` (the instance
///   profiles it collects, `profile_leftovers.rs`) and the interruption function's
///   adapters for `Provisioner::replace` (the replacement an expired or drifted node gets
///   before it drains), whose launch rows are the interruption function's, and describes
///   the capacity blocks its nodes run in (`capacity_blocks.rs`). It refreshes
///   no prices (the bundled ones price its plan), collects no launch templates (the
///   provisioner does) and sends no follow-ups (a drain continues at the next sweep).
const CALLS: &[(&str, &[(&str, Why)])] = &[
    (
        "ProvisionerFunction",
        &[
            ("eks:DescribeCluster", Called),
            ("ec2:DescribeInstances", Called),
            ("ec2:DescribeInstanceTypes", Called),
            ("ec2:DescribeInstanceTypeOfferings", Called),
            ("ec2:DescribeSpotPriceHistory", Called),
            ("ec2:DescribeSubnets", Called),
            ("ec2:DescribeSecurityGroups", Called),
            ("ec2:DescribeCapacityReservations", Called),
            ("ec2:DescribeImages", Called),
            ("ssm:GetParameters", Called),
            ("ec2:DescribeLaunchTemplates", Called),
            ("ec2:CreateLaunchTemplate", Called),
            ("ec2:DeleteLaunchTemplate", Called),
            ("ec2:CreateFleet", Called),
            ("iam:GetInstanceProfile", Called),
            ("iam:CreateInstanceProfile", Called),
            ("iam:AddRoleToInstanceProfile", Called),
            ("pricing:GetProducts", Called),
            ("ec2:RunInstances", Implied),
            ("ec2:CreateTags", Implied),
            ("iam:TagInstanceProfile", Implied),
            ("iam:PassRole", Implied),
            ("logs:CreateLogStream", Platform),
            ("logs:PutLogEvents", Platform),
        ],
    ),
    (
        "InterruptionFunction",
        &[
            ("eks:DescribeCluster", Called),
            ("ec2:DescribeInstances", Called),
            ("ec2:TerminateInstances", Called),
            ("sqs:SendMessage", Called),
            ("sqs:ChangeMessageVisibility", Called),
            ("ec2:DescribeInstanceTypes", Called),
            ("ec2:DescribeInstanceTypeOfferings", Called),
            ("ec2:DescribeSpotPriceHistory", Called),
            ("ec2:DescribeSubnets", Called),
            ("ec2:DescribeSecurityGroups", Called),
            ("ec2:DescribeCapacityReservations", Called),
            ("ec2:DescribeImages", Called),
            ("ssm:GetParameters", Called),
            ("ec2:DescribeLaunchTemplates", Called),
            ("ec2:CreateLaunchTemplate", Called),
            ("ec2:CreateFleet", Called),
            ("iam:GetInstanceProfile", Called),
            ("iam:CreateInstanceProfile", Called),
            ("iam:AddRoleToInstanceProfile", Called),
            ("ec2:RunInstances", Implied),
            ("ec2:CreateTags", Implied),
            ("iam:TagInstanceProfile", Implied),
            ("iam:PassRole", Implied),
            ("logs:CreateLogStream", Platform),
            ("logs:PutLogEvents", Platform),
            ("sqs:ReceiveMessage", Platform),
            ("sqs:DeleteMessage", Platform),
            ("sqs:GetQueueAttributes", Platform),
        ],
    ),
    (
        "SweeperFunction",
        &[
            ("eks:DescribeCluster", Called),
            ("ec2:DescribeInstances", Called),
            ("ec2:DescribeInstanceStatus", Called),
            ("ec2:DescribeInstanceTypes", Called),
            ("ec2:DescribeInstanceTypeOfferings", Called),
            ("ec2:DescribeSpotPriceHistory", Called),
            ("ec2:DescribeSubnets", Called),
            ("ec2:DescribeLaunchTemplates", Called),
            ("ec2:DescribeSecurityGroups", Called),
            ("ec2:DescribeCapacityReservations", Called),
            ("ec2:DescribeImages", Called),
            ("ssm:GetParameters", Called),
            ("ec2:CreateLaunchTemplate", Called),
            ("ec2:CreateFleet", Called),
            ("iam:CreateInstanceProfile", Called),
            ("iam:AddRoleToInstanceProfile", Called),
            ("ec2:RunInstances", Implied),
            ("ec2:CreateTags", Implied),
            ("iam:TagInstanceProfile", Implied),
            ("iam:PassRole", Implied),
            ("ec2:TerminateInstances", Called),
            ("iam:GetInstanceProfile", Called),
            ("iam:ListInstanceProfiles", Called),
            ("iam:RemoveRoleFromInstanceProfile", Called),
            ("iam:DeleteInstanceProfile", Called),
            ("ec2:DescribeIamInstanceProfileAssociations", Called),
            ("logs:CreateLogStream", Platform),
            ("logs:PutLogEvents", Platform),
        ],
    ),
];

/// Adapter calls no function makes today, so no role is granted them.
const CALLED_BY_NO_FUNCTION: &[(&str, &str)] = &[(
    "create_tags",
    "InstanceInventory::create_tags (re-tagging an existing instance) has no caller",
)];

/// `ec2:DescribeInstanceTypeOfferings` -> `describe_instance_type_offerings`.
fn sdk_method(action: &str) -> String {
    let verb = action.split_once(':').map_or(action, |(_, v)| v);
    let mut out = String::new();
    for (i, c) in verb.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Every `client.<operation>()` call in `source` outside its `#[cfg(test)]` module: with
/// the builder chain joined into one line, an operation on the client (`client`, `ssm`, `iam`,
/// `ec2`) followed by more of the chain (`.send()`, a setter), as every SDK call in the
/// adapters is written.
fn sdk_calls(source: &str) -> Vec<String> {
    let production = source.split("#[cfg(test)]").next().unwrap_or("");
    let mut joined = String::new();
    for line in production.lines().map(str::trim) {
        if !line.starts_with('.') {
            joined.push('\n');
        }
        joined.push_str(line);
    }
    let mut out = Vec::new();
    for receiver in ["client.", "ssm.", "ec2.", "iam."] {
        for (at, _) in joined.match_indices(receiver) {
            let rest = &joined[at + receiver.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != "clone" && rest[name.len()..].starts_with("().") {
                out.push(name);
            }
        }
    }
    out
}

/// The SDK calls of the adapters every function is built from.
fn adapter_calls() -> std::collections::BTreeSet<String> {
    let root = nodewright_world::moto::workspace_root();
    let mut out = std::collections::BTreeSet::new();
    for dir in ["shared/src/aws", "shared/src/eks"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("the adapters' directory") {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.ends_with(".rs") || name.contains("tests") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("an adapter source");
            out.extend(sdk_calls(&text));
        }
    }
    out
}

/// The actions a role's statements allow, each with a wildcard flagged.
fn allowed_actions(statements: &[&Value]) -> std::collections::BTreeSet<String> {
    statements
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .flat_map(|s| list(&s["Action"]))
        .collect()
}

/// How a role's allowed actions differ from its function's table: sentences naming
/// each action missing (the function would fail with AccessDenied) or extra (allowed but
/// never called), and each wildcard action.
fn permission_mismatches(
    granted: &std::collections::BTreeSet<String>,
    needed: &[(&str, Why)],
) -> Vec<String> {
    let needed: std::collections::BTreeSet<String> =
        needed.iter().map(|(a, _)| a.to_string()).collect();
    let mut out = Vec::new();
    for a in needed.difference(granted) {
        out.push(format!("{a} is needed but not allowed"));
    }
    for a in granted.difference(&needed) {
        out.push(format!("{a} is allowed but never called"));
    }
    for a in granted.iter().filter(|a| a.contains('*')) {
        out.push(format!("{a} is a wildcard action"));
    }
    out
}

#[test]
fn each_function_is_allowed_exactly_the_actions_its_code_calls() {
    let template = Template::load().expect("template.yaml renders");
    let functions = template.functions();
    let mut problems = Vec::new();
    for function in &functions {
        let Some((_, needed)) = CALLS.iter().find(|(f, _)| f == function) else {
            problems.push(format!("{function} has no row in CALLS"));
            continue;
        };
        let role = template
            .function_role(function, &facts())
            .expect("the function's role renders");
        if !role.managed.is_empty() {
            problems.push(format!(
                "{function}: managed policies from outside the stack {:?} cannot be checked",
                role.managed
            ));
        }
        let granted = allowed_actions(&role.statements());
        problems.extend(
            permission_mismatches(&granted, needed)
                .into_iter()
                .map(|p| format!("{function} ({}): {p}", role.role)),
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_functions_roles_are_three_distinct_roles() {
    let template = Template::load().expect("template.yaml renders");
    let mut roles: Vec<String> = template
        .functions()
        .iter()
        .map(|f| template.function_role(f, &facts()).expect("renders").role)
        .collect();
    roles.sort();
    roles.dedup();
    assert_eq!(
        roles,
        ["InterruptionRole", "ProvisionerRole", "SweeperRole"],
        "one role per function"
    );
}

#[test]
fn every_call_in_the_table_is_made_by_an_adapter_and_every_adapter_call_is_in_the_table() {
    let calls = adapter_calls();
    assert!(
        calls.contains("create_fleet") && calls.contains("describe_cluster"),
        "the scan finds the adapters' calls: {calls:?}"
    );
    let mut problems = Vec::new();
    let mut tabled = std::collections::BTreeSet::new();
    for (function, needed) in CALLS {
        for (action, why) in *needed {
            if *why != Called {
                continue;
            }
            let method = sdk_method(action);
            if !calls.contains(&method) {
                problems.push(format!(
                    "{function}: {action} is tabled as called, but no adapter calls .{method}()"
                ));
            }
            tabled.insert(method);
        }
    }
    for call in &calls {
        let excused = CALLED_BY_NO_FUNCTION.iter().any(|(m, _)| m == call);
        if !tabled.contains(call) && !excused {
            problems.push(format!(
                ".{call}() is called by an adapter but no function's row has it"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_permission_checkers_catch_a_missing_action_an_extra_one_a_wildcard_and_an_untabled_call() {
    let granted: std::collections::BTreeSet<String> = [
        "ec2:DescribeInstances",
        "ec2:TerminateInstances",
        "ec2:Describe*",
    ]
    .map(String::from)
    .into();
    let needed = [
        ("ec2:DescribeInstances", Called),
        ("eks:DescribeCluster", Called),
    ];
    let got = permission_mismatches(&granted, &needed);
    for want in [
        "eks:DescribeCluster is needed but not allowed",
        "ec2:TerminateInstances is allowed but never called",
        "ec2:Describe* is a wildcard action",
    ] {
        assert!(got.iter().any(|g| g == want), "{want:?} not in {got:?}");
    }
    assert_eq!(
        sdk_method("ec2:DescribeInstanceTypeOfferings"),
        "describe_instance_type_offerings"
    );
    let source = "let out = self\n    .client\n    .terminate_instances()\n    .send();\n\
                  let c = self.client.clone();\n\
                  self.client.create_fleet().spot_options(x);\n\
                  #[cfg(test)]\nmod tests { client\n.delete_everything().send() }";
    assert_eq!(sdk_calls(source), ["terminate_instances", "create_fleet"]);
}

// --- Conditions on mutating statements ----------------------------------------------------

/// Statements that change something without a condition, each for a reason: the resources
/// are used, not changed, or are the stack's own.
const UNCONDITIONED: &[(&str, &str)] = &[
    (
        "LaunchUsingSharedResources",
        "a launch uses the image, snapshots, security groups and subnet; it changes none",
    ),
    (
        "OwnLogs",
        "the function's own log group, named by the stack",
    ),
    ("ConsumeQueue", "the stack's own queue"),
    ("FollowUps", "the stack's own queue"),
];

/// Every mutating statement of `statements` that has no condition and is not one of
/// `excused` (by Sid), and every mutating action on `Resource: "*"` without a condition.
fn unconditioned_mutations(statements: &[&Value], excused: &[(&str, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    for s in statements.iter().filter(|s| s["Effect"] == "Allow") {
        let sid = s["Sid"].as_str().unwrap_or("(no Sid)");
        let mutating: Vec<String> = list(&s["Action"])
            .into_iter()
            .filter(|a| !read_only(a))
            .collect();
        if mutating.is_empty() || s.get("Condition").is_some() {
            continue;
        }
        if list(&s["Resource"]).iter().any(|r| r == "*") {
            out.push(format!(
                "{sid}: {mutating:?} on Resource \"*\" without a condition"
            ));
        }
        if !excused.iter().any(|(e, _)| *e == sid) {
            out.push(format!("{sid}: {mutating:?} without a condition"));
        }
    }
    out
}

#[test]
fn every_mutating_statement_has_a_condition_or_a_stated_reason_and_none_is_unscoped() {
    let template = Template::load().expect("template.yaml renders");
    let mut problems = Vec::new();
    for function in template.functions() {
        let role = template
            .function_role(&function, &facts())
            .expect("the function's role renders");
        problems.extend(
            unconditioned_mutations(&role.statements(), UNCONDITIONED)
                .into_iter()
                .map(|p| format!("{function} ({}): {p}", role.role)),
        );
        // An excused statement is excused for its own resources only.
        for s in role.statements() {
            let sid = s["Sid"].as_str().unwrap_or("");
            let resources = list(&s["Resource"]);
            let own = |r: &String| {
                r == "arn:aws:sqs:us-east-1:123456789012:q"
                    || r.contains(&format!(":log-group:/nodewright/{CLUSTER}/"))
            };
            if ["OwnLogs", "ConsumeQueue", "FollowUps"].contains(&sid) && !resources.iter().all(own)
            {
                problems.push(format!(
                    "{function}: {sid} names {resources:?}, not only the stack's own"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_condition_checker_catches_an_unconditioned_write_and_a_write_on_any_resource() {
    let statements: Vec<Value> = [
        r#"{"Sid":"A","Effect":"Allow","Action":"sqs:SendMessage","Resource":"arn:aws:sqs:us-east-1:1:other"}"#,
        r#"{"Sid":"OwnLogs","Effect":"Allow","Action":"logs:PutLogEvents","Resource":"*"}"#,
        r#"{"Sid":"C","Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"}"#,
        r#"{"Sid":"D","Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"*",
            "Condition":{"StringEquals":{"aws:ResourceTag/nodewright.io/cluster":"c"}}}"#,
    ]
    .iter()
    .map(|s| serde_json::from_str(s).unwrap())
    .collect();
    let refs: Vec<&Value> = statements.iter().collect();
    let got = unconditioned_mutations(&refs, UNCONDITIONED);
    assert_eq!(
        got,
        [
            r#"A: ["sqs:SendMessage"] without a condition"#,
            r#"OwnLogs: ["logs:PutLogEvents"] on Resource "*" without a condition"#,
        ]
    );
}

#[test]
fn eks_describe_cluster_names_this_clusters_arn_only() {
    let template = Template::load().expect("template.yaml renders");
    let want = format!("arn:aws:eks:us-east-1:123456789012:cluster/{CLUSTER}");
    for function in template.functions() {
        let role = template.function_role(&function, &facts()).unwrap();
        for s in role.statements() {
            if list(&s["Action"])
                .iter()
                .any(|a| a == "eks:DescribeCluster")
            {
                assert_eq!(
                    list(&s["Resource"]),
                    std::slice::from_ref(&want),
                    "{function}: {}",
                    s["Sid"]
                );
            }
        }
    }
}

#[test]
fn pass_role_is_scoped_to_this_clusters_node_roles() {
    let template = Template::load().expect("template.yaml renders");
    for function in template.functions() {
        let role = template.function_role(&function, &facts()).unwrap();
        for s in role.statements() {
            if !list(&s["Action"]).iter().any(|a| a == "iam:PassRole") {
                continue;
            }
            for r in list(&s["Resource"]) {
                let per_cluster = r.ends_with(&format!("role/KarpenterNodeRole-{CLUSTER}"))
                    || r.ends_with(&format!("role/nodewright/{CLUSTER}/*"))
                    || r == "arn:aws:iam::123456789012:role/nodewright-node-x";
                assert!(
                    per_cluster,
                    "{function}: PassRole on {r}, not this cluster's"
                );
            }
        }
    }
}

#[test]
fn a_policy_attached_only_under_a_stack_condition_also_conditions_every_mutating_statement() {
    // PrivateEndpointsPolicy (FunctionSubnetIds) attaches itself to the roles with `Roles`
    // and `Condition`, so the rendered roles above do not include it: read as written.
    let template = Template::load().expect("template.yaml renders");
    let t = template.as_written();
    let mut checked = 0;
    for (name, r) in t["Resources"].as_mapping().expect("Resources") {
        let kind = r["Type"].as_str().unwrap_or_default();
        if !matches!(kind, "AWS::IAM::ManagedPolicy" | "AWS::IAM::Policy")
            || r.get("Condition").is_none()
        {
            continue;
        }
        let statements = r["Properties"]["PolicyDocument"]["Statement"]
            .as_sequence()
            .expect("statements");
        for s in statements {
            let actions = yaml_list(&s["Action"]);
            checked += 1;
            assert!(
                actions.iter().all(|a| read_only(a)) || s.get("Condition").is_some(),
                "{name:?} {:?}: {actions:?} without a condition",
                s["Sid"]
            );
            assert!(
                s.get("Condition").is_some() || s["Resource"].as_str() != Some("*"),
                "{name:?} {:?}: Resource \"*\" without a condition",
                s["Sid"]
            );
        }
    }
    assert!(
        checked >= 5,
        "the private endpoints and EBS key policies are found"
    );
}

#[test]
fn the_ebs_keys_are_usable_through_ec2_only_and_only_the_keys_named() {
    let template = Template::load().expect("template.yaml renders");
    let t = template.as_written();
    let policy = &t["Resources"]["EbsKmsKeysPolicy"];
    assert_eq!(policy["Condition"].as_str(), Some("HasEbsKmsKeys"));
    let statements = policy["Properties"]["PolicyDocument"]["Statement"]
        .as_sequence()
        .expect("statements");
    let mut actions = Vec::new();
    for s in statements {
        let resource = match &s["Resource"] {
            serde_yaml::Value::Tagged(t) => {
                (t.tag.to_string(), t.value.as_str().map(str::to_string))
            }
            other => panic!(
                "{:?}: Resource {other:?} is not !Ref EbsKmsKeyArns",
                s["Sid"]
            ),
        };
        assert_eq!(
            resource,
            ("!Ref".to_string(), Some("EbsKmsKeyArns".to_string())),
            "{:?}",
            s["Sid"]
        );
        let via = &s["Condition"]["StringEquals"]["kms:ViaService"];
        assert!(
            matches!(via, serde_yaml::Value::Tagged(t) if t.value.as_str() == Some("ec2.${AWS::Region}.amazonaws.com")),
            "{:?}: kms:ViaService is EC2 in the stack's region: {via:?}",
            s["Sid"]
        );
        let listed = yaml_list(&s["Action"]);
        if listed.iter().any(|a| a == "kms:CreateGrant") {
            assert_eq!(
                s["Condition"]["Bool"]["kms:GrantIsForAWSResource"].as_str(),
                Some("true"),
                "a grant only for the instance's volumes"
            );
        }
        actions.extend(listed);
    }
    actions.sort();
    // What EC2 asks of the caller of a launch with a customer-managed EBS key.
    assert_eq!(
        actions,
        [
            "kms:CreateGrant",
            "kms:Decrypt",
            "kms:DescribeKey",
            "kms:GenerateDataKeyWithoutPlaintext",
            "kms:ReEncryptFrom",
            "kms:ReEncryptTo"
        ]
    );
}

/// The one exception to the ownership rules above, and only with `TakeOverFromKarpenter`:
/// adopting Karpenter's instances of this cluster writes the ownership tag on instances
/// that do not carry it yet. It is scoped to Karpenter's NodePool tag and this cluster's
/// name, never to another cluster's nodewright's instances, and to exactly the keys the
/// adoption writes (asked of `takeover::missing_tags` for an instance lacking them all).
#[test]
fn adoption_may_tag_only_karpenters_instances_of_this_cluster_and_only_with_the_adoption_keys() {
    use nodewright::aws::{InstanceState, OwnedInstance};
    use nodewright::takeover::{Hashes, missing_tags};
    let template = Template::load().expect("template.yaml renders");
    let t = template.as_written();
    let policy = &t["Resources"]["KarpenterTakeoverPolicy"];
    assert_eq!(policy["Condition"].as_str(), Some("TakesOverFromKarpenter"));
    let roles: Vec<String> = policy["Properties"]["Roles"]
        .as_sequence()
        .expect("Roles")
        .iter()
        .map(|r| match r {
            serde_yaml::Value::Tagged(t) => t.value.as_str().unwrap_or_default().to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(roles, ["InterruptionRole", "SweeperRole"]);
    let statements = policy["Properties"]["PolicyDocument"]["Statement"]
        .as_sequence()
        .expect("statements");
    assert_eq!(statements.len(), 1);
    let s = &statements[0];
    assert_eq!(yaml_list(&s["Action"]), ["ec2:CreateTags"]);
    let resource = match &s["Resource"] {
        serde_yaml::Value::Tagged(t) => t.value.as_str().unwrap_or_default().to_string(),
        other => format!("{other:?}"),
    };
    assert!(resource.ends_with(":instance/*"), "{resource}");
    let is_cluster = |v: &serde_yaml::Value| matches!(v, serde_yaml::Value::Tagged(t) if t.tag == "!Ref" && t.value.as_str() == Some("ClusterName"));
    let c = &s["Condition"];
    assert!(
        is_cluster(&c["StringEquals"]["aws:ResourceTag/eks:eks-cluster-name"]),
        "{c:?}"
    );
    for tag in ["karpenter.sh/nodepool", "karpenter.k8s.aws/ec2nodeclass"] {
        let present = &c["Null"][format!("aws:ResourceTag/{tag}").as_str()];
        assert_eq!(present.as_str(), Some("false"), "{tag}: {c:?}");
    }
    for key in ["aws:ResourceTag", "aws:RequestTag"] {
        let v = &c["StringEqualsIfExists"][format!("{key}/{OWNERSHIP}").as_str()];
        assert!(is_cluster(v), "{key}: {c:?}");
    }
    let mut allowed = yaml_list(&c["ForAllValues:StringEquals"]["aws:TagKeys"]);
    allowed.sort();
    let karpenters = OwnedInstance {
        id: "i-1".into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        state: InstanceState::Running,
        capacity_type: nodewright::catalog::CapacityType::OnDemand,
        launch_time: None,
        tags: [
            ("karpenter.sh/nodepool", "default"),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
            ("eks:eks-cluster-name", CLUSTER),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
        private_dns_name: None,
        subnet_id: None,
        image_id: Some("ami-1".into()),
        security_groups: vec!["sg-1".into()],
    };
    let known = Hashes {
        nodepool: Some("p".into()),
        nodeclass: Some("c".into()),
        images: Some(vec!["ami-1".into()]),
    };
    let written: Vec<String> = missing_tags(&karpenters, CLUSTER, &known)
        .into_keys()
        .collect();
    assert_eq!(allowed, written, "the policy's keys are the adoption's");
}
