use super::*;
use crate::api::load::parse;
use crate::api::{EC2NodeClass, Inputs};

/// A valid NodePool with `patch` merged in (YAML flow mapping under `spec`).
fn pool(spec_yaml: &str) -> NodePool {
    let mut value: serde_json::Value = serde_yaml::from_str(
        "metadata: {name: p}\nspec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: c}}}}",
    )
    .unwrap();
    let patch: serde_json::Value = serde_yaml::from_str(spec_yaml).unwrap();
    merge(&mut value["spec"], patch);
    parse(value).unwrap()
}

fn merge(into: &mut serde_json::Value, patch: serde_json::Value) {
    match (into, patch) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

fn class(spec_yaml: &str) -> EC2NodeClass {
    let mut value: serde_json::Value = serde_yaml::from_str(
        "metadata: {name: c}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]",
    )
    .unwrap();
    let patch: serde_json::Value = serde_yaml::from_str(spec_yaml).unwrap();
    merge(&mut value["spec"], patch);
    parse(value).unwrap()
}

fn assert_one(errors: &[FieldError], field: &str, fragment: &str, case: &str) {
    assert!(
        errors
            .iter()
            .any(|e| e.field == field && e.message.contains(fragment)),
        "{case}: expected {field}: ...{fragment}...; got {errors:?}"
    );
}

#[test]
fn the_base_pool_and_class_of_these_tables_are_valid() {
    assert_eq!(node_pool_errors(&pool("{}")), []);
    assert_eq!(node_class_errors(&class("{}"), false), []);
}

#[test]
fn node_pool_rules_name_the_field_and_what_is_allowed() {
    let req = "spec.template.spec.requirements[0]";
    let cases: &[(&str, &str, &str)] = &[
        ("{weight: 0}", "spec.weight", "allowed: 1 to 100"),
        ("{weight: 101}", "spec.weight", "allowed: 1 to 100"),
        (
            "{replicas: -1}",
            "spec.replicas",
            "allowed: 0 or more nodes",
        ),
        (
            "{replicas: 2, weight: 10}",
            "spec.weight",
            "not allowed on a static NodePool",
        ),
        (
            "{replicas: 2, limits: {cpu: '10'}}",
            "spec.limits.cpu",
            "only limits.nodes is",
        ),
        (
            "{template: {spec: {requirements: [{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: [a]}]}}}",
            ".values",
            "exactly one non-negative integer",
        ),
        (
            "{template: {spec: {requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ['1', '2']}]}}}",
            ".values",
            "exactly one",
        ),
        (
            "{template: {spec: {requirements: [{key: karpenter.sh/capacity-type, operator: In}]}}}",
            ".values",
            "at least one value",
        ),
        (
            "{template: {spec: {requirements: [{key: kubernetes.io/arch, operator: Exists, values: [amd64]}]}}}",
            ".values",
            "takes no values",
        ),
        (
            "{template: {spec: {requirements: [{key: kubernetes.io/arch, operator: DoesNotExist, values: [amd64]}]}}}",
            ".values",
            "takes no values",
        ),
        (
            "{template: {spec: {requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64], minValues: 0}]}}}",
            ".minValues",
            "allowed: 1 to 50",
        ),
        (
            "{template: {spec: {requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [a, b], minValues: 3}]}}}",
            ".minValues",
            "more than the 2 values",
        ),
        (
            "{template: {spec: {requirements: [{key: karpenter.sh/nodepool, operator: In, values: [x]}]}}}",
            ".key",
            "\"karpenter.sh/nodepool\" is restricted",
        ),
        (
            "{template: {spec: {requirements: [{key: kubernetes.io/hostname, operator: Exists}]}}}",
            ".key",
            "\"kubernetes.io/hostname\" is restricted",
        ),
        (
            "{template: {spec: {requirements: [{key: example.kubernetes.io/x, operator: Exists}]}}}",
            ".key",
            "domain \"kubernetes.io\" is restricted",
        ),
        (
            "{template: {spec: {requirements: [{key: karpenter.sh/custom, operator: Exists}]}}}",
            ".key",
            "domain \"karpenter.sh\" is restricted",
        ),
        (
            "{template: {spec: {requirements: [{key: karpenter.k8s.aws/made-up, operator: Exists}]}}}",
            ".key",
            "domain \"karpenter.k8s.aws\" is restricted",
        ),
        (
            "{template: {spec: {requirements: [{key: 'bad key', operator: Exists}]}}}",
            ".key",
            "not a valid key",
        ),
        (
            "{template: {spec: {requirements: [{key: team, operator: In, values: ['-bad-']}]}}}",
            ".values[0]",
            "not a valid label value",
        ),
    ];
    for (spec, field, fragment) in cases {
        let field = if field.starts_with('.') {
            format!("{req}{field}")
        } else {
            field.to_string()
        };
        assert_one(&node_pool_errors(&pool(spec)), &field, fragment, spec);
    }
}

#[test]
fn labels_taints_limits_and_budgets_are_checked() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "{template: {metadata: {labels: {karpenter.sh/nodepool: x}}}}",
            "spec.template.metadata.labels[karpenter.sh/nodepool]",
            "restricted",
        ),
        (
            "{template: {metadata: {labels: {kubernetes.io/hostname: x}}}}",
            "spec.template.metadata.labels[kubernetes.io/hostname]",
            "restricted",
        ),
        (
            "{template: {metadata: {labels: {k8s.io/team: x}}}}",
            "spec.template.metadata.labels[k8s.io/team]",
            "domain \"k8s.io\"",
        ),
        (
            "{template: {metadata: {labels: {team: 'a b'}}}}",
            "spec.template.metadata.labels[team]",
            "not a valid label value",
        ),
        (
            "{template: {metadata: {labels: {'Bad_Prefix/x': y}}}}",
            "spec.template.metadata.labels[Bad_Prefix/x]",
            "DNS subdomain",
        ),
        (
            "{template: {spec: {taints: [{key: a, effect: NoSchedule}, {key: a, value: b, effect: NoSchedule}]}}}",
            "spec.template.spec.taints[1]",
            "duplicate taint a:NoSchedule",
        ),
        (
            "{template: {spec: {taints: [{key: a, effect: NoSchedule}], startupTaints: [{key: a, effect: NoSchedule}]}}}",
            "spec.template.spec.startupTaints[0]",
            "duplicate taint",
        ),
        (
            "{template: {spec: {taints: [{key: 'a b', effect: NoSchedule}]}}}",
            "spec.template.spec.taints[0].key",
            "not a valid key",
        ),
        (
            "{limits: {cpu: lots}}",
            "spec.limits.cpu",
            "invalid quantity",
        ),
        (
            "{disruption: {budgets: [{nodes: '10%', schedule: '@daily'}]}}",
            "spec.disruption.budgets[0].duration",
            "required when schedule is set",
        ),
        (
            "{disruption: {budgets: [{nodes: '10%', duration: 1h}]}}",
            "spec.disruption.budgets[0].schedule",
            "required when duration is set",
        ),
        (
            "{disruption: {budgets: [{nodes: ten}]}}",
            "spec.disruption.budgets[0].nodes",
            "neither a node count nor a percentage",
        ),
        (
            "{disruption: {budgets: [{nodes: '150%'}]}}",
            "spec.disruption.budgets[0].nodes",
            "percentage",
        ),
        (
            "{disruption: {budgets: [{nodes: '1', schedule: '0 9 * *', duration: 8h}]}}",
            "spec.disruption.budgets[0].schedule",
            "has 4 fields",
        ),
        (
            "{disruption: {budgets: [{nodes: '1', schedule: '0 25 * * *', duration: 8h}]}}",
            "spec.disruption.budgets[0].schedule",
            "hour field",
        ),
        (
            "{disruption: {budgets: [{nodes: '1', schedule: '@often', duration: 8h}]}}",
            "spec.disruption.budgets[0].schedule",
            "not a known macro",
        ),
        (
            "{disruption: {budgets: [{nodes: '1', reasons: [Expired]}]}}",
            "spec.disruption.budgets[0].reasons[0]",
            "allowed: Underutilized, Empty, Drifted",
        ),
    ];
    for (spec, field, fragment) in cases {
        assert_one(&node_pool_errors(&pool(spec)), field, fragment, spec);
    }
}

#[test]
fn well_known_and_exception_keys_are_accepted() {
    for key in [
        "karpenter.sh/capacity-type",
        "karpenter.k8s.aws/instance-family",
        "node.kubernetes.io/instance-type",
        "node-restriction.kubernetes.io/team",
        "topology.kubernetes.io/zone",
        "kops.k8s.io/instancegroup",
        "example.com/team",
        "team",
    ] {
        assert_eq!(restricted_key(key), None, "{key}");
    }
    for schedule in [
        "@daily",
        "0 9 * * 1-5",
        "*/15 * * * *",
        "0 0 1 JAN,JUL ?",
        "30 2 * * SUN",
    ] {
        assert_eq!(cron_error(schedule), None, "{schedule}");
    }
}

#[test]
fn node_class_rules_name_the_field_and_what_is_allowed() {
    let cases: &[(&str, &str, &str)] = &[
        ("{instanceProfile: P}", "spec.role", "mutually exclusive"),
        ("{role: null}", "spec.role", "exactly one of role"),
        (
            "{amiSelectorTerms: []}",
            "spec.amiSelectorTerms",
            "at least one term",
        ),
        (
            "{amiSelectorTerms: [{alias: ubuntu@latest}]}",
            "spec.amiSelectorTerms[0].alias",
            "allowed: al2, al2023, bottlerocket",
        ),
        (
            "{amiSelectorTerms: [{alias: al2023}]}",
            "spec.amiSelectorTerms[0].alias",
            "family@version",
        ),
        (
            "{amiSelectorTerms: [{alias: windows2022@latest}]}",
            "spec.amiSelectorTerms[0].alias",
            "Linux nodes only",
        ),
        (
            "{amiFamily: Windows2019, amiSelectorTerms: [{id: ami-1}]}",
            "spec.amiFamily",
            "Linux nodes only",
        ),
        (
            "{instanceStorePolicy: RAID10}",
            "spec.instanceStorePolicy",
            "allowed: RAID0",
        ),
        (
            "{amiSelectorTerms: [{alias: al2023@latest, id: ami-1}]}",
            "spec.amiSelectorTerms[0].alias",
            "cannot be combined",
        ),
        (
            "{amiSelectorTerms: [{alias: al2023@latest}, {id: ami-1}]}",
            "spec.amiSelectorTerms",
            "must be the only term",
        ),
        (
            "{amiSelectorTerms: [{id: ami-1}]}",
            "spec.amiFamily",
            "required when no amiSelectorTerms has an alias",
        ),
        (
            "{amiFamily: AL2, amiSelectorTerms: [{owner: self}]}",
            "spec.amiSelectorTerms[0]",
            "expected at least one of alias",
        ),
        (
            "{amiFamily: Ubuntu, amiSelectorTerms: []}",
            "spec.amiFamily",
            "unknown AMI family",
        ),
        (
            "{subnetSelectorTerms: []}",
            "spec.subnetSelectorTerms",
            "at least one term",
        ),
        (
            "{subnetSelectorTerms: [{}]}",
            "spec.subnetSelectorTerms[0]",
            "expected at least one of id, tags",
        ),
        (
            "{subnetSelectorTerms: [{name: x}]}",
            "spec.subnetSelectorTerms[0].name",
            "id or tags only",
        ),
        (
            "{securityGroupSelectorTerms: [{id: sg-1, tags: {a: b}}]}",
            "spec.securityGroupSelectorTerms[0].id",
            "cannot be combined",
        ),
        (
            "{securityGroupSelectorTerms: []}",
            "spec.securityGroupSelectorTerms",
            "at least one term",
        ),
        (
            "{securityGroupSelectorTerms: [{tags: {a: ''}}]}",
            "spec.securityGroupSelectorTerms[0].tags",
            "empty tag keys or values",
        ),
        (
            "{tags: {kubernetes.io/cluster/demo: owned}}",
            "spec.tags[kubernetes.io/cluster/demo]",
            "restricted",
        ),
        (
            "{tags: {karpenter.sh/nodepool: x}}",
            "spec.tags[karpenter.sh/nodepool]",
            "restricted",
        ),
        (
            "{tags: {karpenter.sh/nodeclaim: x}}",
            "spec.tags[karpenter.sh/nodeclaim]",
            "restricted",
        ),
        (
            "{tags: {eks:eks-cluster-name: x}}",
            "spec.tags[eks:eks-cluster-name]",
            "restricted",
        ),
        (
            &format!(
                "{{tags: {{{}}}}}",
                (0..41)
                    .map(|i| format!("t{i}: v"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "spec.tags",
            "41 tags; EC2 allows 50 per instance and nodewright adds 10 of its own, so at most 40",
        ),
        (
            "{tags: {nodewright.io/cluster: x}}",
            "spec.tags[nodewright.io/cluster]",
            "restricted",
        ),
        (
            "{metadataOptions: {httpTokens: maybe}}",
            "spec.metadataOptions.httpTokens",
            "allowed: required, optional",
        ),
        (
            "{metadataOptions: {httpPutResponseHopLimit: 65}}",
            "spec.metadataOptions.httpPutResponseHopLimit",
            "1 to 64",
        ),
        (
            "{kubelet: {imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}}",
            "spec.kubelet.imageGCHighThresholdPercent",
            "greater than",
        ),
    ];
    for (spec, field, fragment) in cases {
        assert_one(
            &node_class_errors(&class(spec), false),
            field,
            fragment,
            spec,
        );
    }
}

#[test]
fn a_legacy_class_without_role_or_instance_profile_uses_the_stack_default() {
    assert_eq!(node_class_errors(&class("{role: null}"), true), []);
}

#[test]
fn a_node_class_ref_to_a_class_not_in_the_inputs_is_reported_with_what_exists() {
    let mut inputs = Inputs::default();
    let problems = inputs.load_str(
        "pools.yaml",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {template: {spec: {nodeClassRef: {name: nope}}}}",
    );
    assert_eq!(problems, []);
    let problems = validate(&inputs);
    assert_eq!(problems.len(), 1);
    assert_eq!(
        problems[0].to_string(),
        "pools.yaml: NodePool/p (document 1): spec.template.spec.nodeClassRef.name: EC2NodeClass \"nope\" is not defined in the inputs; defined: none"
    );
}

#[test]
fn problems_in_converted_provisioners_point_at_the_fields_the_user_wrote() {
    let mut inputs = Inputs::default();
    let problems = inputs.load_str(
        "legacy.yaml",
        "apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: old}
spec:
  weight: 500
  labels: {kubernetes.io/hostname: x}
  requirements: [{key: kubernetes.io/arch, operator: Gt, values: [amd64]}]
  provider: {subnetSelector: {a: b}}",
    );
    assert_eq!(problems, []);
    let fields: Vec<String> = validate(&inputs).into_iter().map(|p| p.field).collect();
    assert_eq!(
        fields,
        [
            "spec.weight",
            "spec.labels[kubernetes.io/hostname]",
            "spec.requirements[0].values",
            "spec.requirements[0].operator",
            "spec.provider.securityGroupSelector",
        ]
    );
}

#[test]
fn duplicate_names_are_reported_with_the_first_definition() {
    let mut inputs = Inputs::default();
    let doc = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {template: {spec: {nodeClassRef: {name: c}}}}";
    inputs.load_str("a.yaml", doc);
    inputs.load_str("b.yaml", doc);
    let problems = validate(&inputs);
    assert!(
        problems.iter().any(|p| p.file == "b.yaml"
            && p.message
                .contains("already defined by NodePool/p (document 1) in a.yaml")),
        "{problems:?}"
    );
}

#[test]
fn a_provisioner_that_cannot_be_converted_still_has_every_other_problem_reported() {
    let mut inputs = Inputs::default();
    let loaded = inputs.load_str(
        "legacy.yaml",
        "apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: old}
spec:
  ttlSecondsAfterEmpty: -30
  weight: 500
  providerRef: {name: gone}",
    );
    let checked = crate::api::not_yet_reported(&loaded, validate(&inputs));
    let found: Vec<(String, String)> = loaded
        .iter()
        .chain(&checked)
        .map(|p| (p.field.clone(), p.message.clone()))
        .collect();
    let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.ttlSecondsAfterEmpty",
            "spec.weight",
            "spec.providerRef.name"
        ],
        "{found:?}"
    );
    assert!(
        found[2]
            .1
            .starts_with("AWSNodeTemplate \"gone\" is not defined"),
        "{found:?}"
    );
    assert!(inputs.node_pools.is_empty(), "never used");
}

#[test]
fn a_provisioner_without_a_provider_is_told_so_once() {
    let mut inputs = Inputs::default();
    let loaded = inputs.load_str(
        "legacy.yaml",
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: old}\nspec: {}",
    );
    let checked = crate::api::not_yet_reported(&loaded, validate(&inputs));
    let fields: Vec<&str> = loaded
        .iter()
        .chain(&checked)
        .map(|p| p.field.as_str())
        .collect();
    assert_eq!(fields, ["spec.providerRef"]);
}

#[test]
fn a_windows_node_template_is_refused_at_the_family_the_user_wrote() {
    let mut inputs = Inputs::default();
    let loaded = inputs.load_str(
        "legacy.yaml",
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: win}\nspec: {amiFamily: Windows2022, subnetSelector: {a: b}, securityGroupSelector: {a: b}}",
    );
    assert_eq!(loaded, []);
    let problems = validate(&inputs);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].field, "spec.amiFamily");
    assert!(
        problems[0].message.contains("Linux nodes only"),
        "{problems:?}"
    );
}

#[test]
fn a_static_pool_takes_limits_nodes_and_says_its_consolidation_settings_are_ignored() {
    let fixed = pool("{replicas: 3, limits: {nodes: '5'}}");
    assert_eq!(node_pool_errors(&fixed), []);
    assert_eq!(warnings::node_pool_warnings(&fixed), []);
    let told = warnings::node_pool_warnings(&pool(
        "{replicas: 3, disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 5m}}",
    ));
    let fields: Vec<&str> = told.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.disruption.consolidationPolicy",
            "spec.disruption.consolidateAfter"
        ]
    );
    // The same settings on a dynamic pool are what it runs on: no warning.
    let dynamic = pool("{disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 5m}}");
    assert_eq!(warnings::node_pool_warnings(&dynamic), []);
}
