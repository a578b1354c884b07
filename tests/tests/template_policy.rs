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

use serde_json::Value;

use nodewright_world::template::{StackFacts, Template};

const CLUSTER: &str = "policy-cluster";
const OWNERSHIP: &str = "nodewright.io/cluster";
const LAUNCH_ACTIONS: [&str; 3] = ["CreateFleet", "RunInstances", "CreateLaunchTemplate"];
/// Resources a launch uses without changing them (Karpenter's controller policy scopes
/// them the same way: `AllowScopedEC2InstanceAccessActions`).
const USED_BY_LAUNCH: [&str; 4] = ["image/", "snapshot/", "security-group/", "subnet/"];

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
fn the_rules_catch_an_unscoped_terminate_an_unlisted_retag_and_an_untagged_launch() {
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
