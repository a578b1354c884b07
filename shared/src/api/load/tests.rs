use super::*;
use crate::api::{ConsolidationPolicy, validate};

fn load(text: &str) -> (Inputs, Vec<Problem>) {
    let mut inputs = Inputs::default();
    let problems = inputs.load_str("in.yaml", text);
    (inputs, problems)
}

const POOL: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec: {template: {spec: {nodeClassRef: {name: default}}}}";

#[test]
fn an_unknown_operator_is_reported_with_its_path_and_the_allowed_operators() {
    let (inputs, problems) = load(&format!(
        "---\n{POOL}\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: default}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{name: x}}\n      requirements: [{{key: a, operator: Equals, values: [b]}}]"
    ));
    assert_eq!(inputs.node_pools.len(), 1, "the valid document still loads");
    assert_eq!(problems.len(), 1);
    assert_eq!(
        problems[0].to_string(),
        "in.yaml: NodePool/default (document 2): spec.template.spec.requirements[0].operator: unknown operator \"Equals\"; allowed: In, NotIn, Exists, DoesNotExist, Gt, Lt"
    );
    assert!(problems[0].is_error());
}

#[test]
fn serde_failures_become_sentences_at_a_field() {
    let cases = [
        (
            "spec: {template: {spec: {nodeClassRef: {name: d}, colour: blue}}}",
            "spec.template.spec.colour",
            "unknown field \"colour\"; allowed fields here:",
        ),
        (
            "spec: {template: {spec: {}}}",
            "spec.template.spec.nodeClassRef",
            "required field \"nodeClassRef\" is missing",
        ),
        (
            "spec: {weight: heavy, template: {spec: {nodeClassRef: {name: d}}}}",
            "spec.weight",
            "wrong type: got string \"heavy\"",
        ),
        (
            "spec: {disruption: {consolidateAfter: 5 minutes}, template: {spec: {nodeClassRef: {name: d}}}}",
            "spec.disruption.consolidateAfter",
            "unknown unit",
        ),
        (
            "spec: {disruption: {consolidationPolicy: Sometimes}, template: {spec: {nodeClassRef: {name: d}}}}",
            "spec.disruption.consolidationPolicy",
            "unknown value \"Sometimes\"; allowed: WhenEmpty, WhenEmptyOrUnderutilized, Balanced",
        ),
        (
            "spec: {template: {spec: {nodeClassRef: {name: d}, taints: [{key: a, effect: NoScheduling}]}}}",
            "spec.template.spec.taints[0].effect",
            "unknown taint effect \"NoScheduling\"",
        ),
        (
            "spec: {limits: {cpu: [1]}, template: {spec: {nodeClassRef: {name: d}}}}",
            "spec.limits.cpu",
            "expected a quantity",
        ),
    ];
    for (spec, field, fragment) in cases {
        let (_, problems) = load(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: p}}\n{spec}"
        ));
        assert_eq!(problems.len(), 1, "{spec}: {problems:?}");
        assert_eq!(problems[0].field, field, "{spec}");
        assert!(
            problems[0].message.contains(fragment),
            "{spec}: {}",
            problems[0].message
        );
    }
}

#[test]
fn unknown_kinds_are_warnings_and_empty_documents_are_skipped() {
    let (inputs, problems) = load(
        "---\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\n# only a comment\n",
    );
    assert_eq!(inputs.documents, 1);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].severity, Severity::Warning);
    // A leading `---` opens the first document: the Service is the second.
    assert_eq!(problems[0].document, "Service/web (document 2)");
    assert!(problems[0].message.starts_with(
        "kind Service is not used by nodewright; expected one of NodePool, EC2NodeClass"
    ));
}

#[test]
fn a_known_kind_at_the_wrong_api_version_is_an_error_naming_the_allowed_versions() {
    let (_, problems) =
        load("apiVersion: karpenter.sh/v2\nkind: NodePool\nmetadata: {name: x}\nspec: {}");
    assert_eq!(problems[0].field, "apiVersion");
    assert!(
        problems[0]
            .message
            .contains("allowed: karpenter.sh/v1, karpenter.sh/v1beta1")
    );
    let (_, problems) = load("metadata: {name: x}");
    assert_eq!(problems[0].field, "kind");
}

#[test]
fn broken_yaml_is_one_problem_that_names_the_document() {
    let (_, problems) = load(&format!("{POOL}\n---\nkind: [unclosed\n"));
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].document, "document 2");
    assert!(problems[0].message.starts_with("not valid YAML"));
}

#[test]
fn lists_json_and_workloads_load_together() {
    let json = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3, "selector": {}, "template": {"spec": {"containers": [{"name": "c"}]}}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "a"}]}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo"}, "spec": {"containers": [{"name": "s"}]}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": [{"name": "j"}]}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"}, "spec": {"containers": "nope"}}
    ]}"#;
    let (inputs, problems) = load(json);
    assert_eq!(inputs.documents, 1);
    assert_eq!(inputs.objects, 5, "each item counts, the bad one too");
    assert_eq!(inputs.pods.len(), 5);
    assert_eq!(inputs.daemon_sets.len(), 1);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].document, "Pod/bad (document 1, item 5)");
    assert_eq!(problems[0].field, "spec.containers");
}

#[test]
fn loaded_objects_carry_their_source_and_karpenters_defaults() {
    let (inputs, problems) = load(&format!(
        "{POOL}\n---\n{}",
        include_str!("../testdata/provisioner1.input.yaml")
    ));
    assert_eq!(problems, []);
    assert_eq!(
        inputs.node_pool_sources[1],
        Source {
            file: "in.yaml".into(),
            index: 2,
            kind: "Provisioner".into(),
            name: "provisioner1".into()
        }
    );
    assert_eq!(
        inputs.node_pools[0]
            .spec
            .template
            .spec
            .expire_after
            .map(|d| d.to_string())
            .as_deref(),
        Some("720h")
    );
    assert_eq!(
        inputs.node_pools[1]
            .spec
            .template
            .spec
            .expire_after
            .map(|d| d.to_string())
            .as_deref(),
        Some("Never")
    );
    assert_eq!(
        inputs.node_pools[1].spec.disruption.consolidation_policy,
        ConsolidationPolicy::WhenEmpty
    );
    assert_eq!(inputs.node_class_sources[0].kind, "Provisioner");
    let options = inputs.node_classes[0]
        .spec
        .metadata_options
        .as_ref()
        .unwrap();
    assert_eq!(options.http_tokens.as_deref(), Some("required"));
}

#[test]
fn kubelet_settings_follow_a_provider_ref_to_a_template_loaded_later() {
    let (inputs, problems) = load(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\nspec: {providerRef: {name: t}, kubeletConfiguration: {maxPods: 30}}
---
apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: t}\nspec: {subnetSelector: {a: b}, securityGroupSelector: {a: b}}",
    );
    assert_eq!(problems, []);
    assert!(inputs.pending_kubelet.is_empty());
    assert_eq!(
        inputs.node_classes[0]
            .spec
            .kubelet
            .as_ref()
            .and_then(|k| k.max_pods),
        Some(30)
    );
}

#[test]
fn two_provisioners_with_different_kubelets_on_one_template_are_an_error() {
    let (_, problems) = load(
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: t}\nspec: {subnetSelector: {a: b}, securityGroupSelector: {a: b}}
---
apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p1}\nspec: {providerRef: {name: t}, kubeletConfiguration: {maxPods: 30}}
---
apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p2}\nspec: {providerRef: {name: t}, kubeletConfiguration: {maxPods: 40}}",
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].document, "Provisioner/p2 (document 3)");
    assert!(
        problems[0]
            .message
            .contains("give each Provisioner its own AWSNodeTemplate")
    );
}

#[test]
fn an_unreadable_file_is_a_problem_and_the_other_files_still_load() {
    let dir = std::env::temp_dir().join(format!("nodewright-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.yaml");
    std::fs::write(&good, POOL).unwrap();
    let (inputs, problems) = Inputs::load_files(&[dir.join("missing.yaml"), good]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(inputs.node_pools.len(), 1);
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0]
            .to_string()
            .contains("missing.yaml: cannot read the file")
    );
}

fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

#[test]
fn every_valid_example_loads_and_validates_cleanly() {
    for (file, pools, classes, pods) in [
        ("seed-test-network.yaml", 1, 1, 2),
        ("seed-provisioner1-spot.yaml", 1, 1, 5),
        ("seed-provisioner2-cpu.yaml", 1, 1, 5),
        ("getting-started.yaml", 1, 1, 10),
    ] {
        let (inputs, problems) = Inputs::load_files(&[examples_dir().join(file)]);
        assert_eq!(problems, [], "{file}");
        assert_eq!(validate(&inputs), [], "{file}");
        assert_eq!(
            (
                inputs.node_pools.len(),
                inputs.node_classes.len(),
                inputs.pods.len()
            ),
            (pools, classes, pods),
            "{file}"
        );
    }
}

#[test]
fn the_invalid_example_produces_exactly_the_expected_problems() {
    let (inputs, mut problems) = Inputs::load_files(&[examples_dir().join("invalid.yaml")]);
    problems.extend(validate(&inputs));
    let shown: Vec<String> = problems
        .iter()
        .map(|p| {
            let file = p.file.rsplit('/').next().unwrap_or_default();
            format!(
                "{:?} {file}: {}: {}: {}",
                p.severity, p.document, p.field, p.message
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            "Error invalid.yaml: NodePool/bad-operator (document 1): spec.template.spec.requirements[0].operator: unknown operator \"Equals\"; allowed: In, NotIn, Exists, DoesNotExist, Gt, Lt",
            "Warning invalid.yaml: Service/web (document 4): kind: kind Service is not used by nodewright; expected one of NodePool, EC2NodeClass, Provisioner, AWSNodeTemplate, NodeOverlay, Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet, Namespace, PersistentVolumeClaim, PersistentVolume, StorageClass, List",
            "Error invalid.yaml: NodePool/bad-weight (document 2): spec.weight: 0 is out of range; allowed: 1 to 100",
            "Error invalid.yaml: NodePool/bad-weight (document 2): spec.template.spec.nodeClassRef.name: EC2NodeClass \"missing\" is not defined in the inputs; defined: default",
        ]
    );
}

#[test]
fn a_bad_field_no_longer_hides_a_dangling_reference_or_a_second_bad_field() {
    let (inputs, mut problems) = load(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: web}\nspec:\n  weight: heavy\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: nowhere}\n      requirements:\n        - {key: a, operator: Equals, values: [b]}\n        - {key: b, operator: In, values: [c]}\n        - {key: c, operator: Maybe}\n",
    );
    problems.extend(validate(&inputs));
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.weight",
            "spec.template.spec.requirements[0].operator",
            "spec.template.spec.requirements[2].operator",
            "spec.template.spec.nodeClassRef.name",
        ],
        "{problems:#?}"
    );
    assert!(problems.iter().all(|p| p.is_error() && p.file == "in.yaml"));
    assert!(problems[3].message.contains("\"nowhere\" is not defined"));
    // A pool read only in part is never one to provision from.
    assert!(inputs.node_pools.is_empty());
    assert_eq!(inputs.partial_node_pools.len(), 1);
}

#[test]
fn a_node_pool_naming_a_class_read_only_in_part_is_not_told_the_class_is_missing() {
    let (inputs, mut problems) = load(&format!(
        "{POOL}\n---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: default}}\nspec:\n  role: r\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  subnetSelectorTerms: [{{tags: {{a: b}}}}]\n  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]\n  metadataOptions: {{httpPutResponseHopLimit: high}}\n"
    ));
    problems.extend(validate(&inputs));
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].document, "EC2NodeClass/default (document 2)");
    assert!(problems[0].field.starts_with("spec.metadataOptions"));
}

proptest::proptest! {
    #[test]
    fn any_text_loads_into_problems_never_a_panic(text in "\\PC{0,200}") {
        let (_, problems) = load(&text);
        for p in problems {
            proptest::prop_assert_eq!(p.file.as_str(), "in.yaml");
        }
    }

    #[test]
    fn any_value_under_a_known_kind_loads_into_problems_that_name_the_document(
        kind in proptest::sample::select(KNOWN_KINDS),
        spec in arbitrary_json(),
    ) {
        let api_version = match kind {
            "NodePool" => "karpenter.sh/v1",
            "EC2NodeClass" => "karpenter.k8s.aws/v1",
            "Provisioner" => "karpenter.sh/v1alpha5",
            "AWSNodeTemplate" => "karpenter.k8s.aws/v1alpha1",
            "Pod" => "v1",
            "Job" => "batch/v1",
            _ => "apps/v1",
        };
        let doc = serde_json::json!({"apiVersion": api_version, "kind": kind,
                                     "metadata": {"name": "x"}, "spec": spec});
        let mut inputs = Inputs::default();
        let mut problems = inputs.load_value("in.json", 0, doc);
        problems.extend(validate(&inputs));
        for p in &problems {
            proptest::prop_assert!(!p.document.is_empty(), "{}", p);
            proptest::prop_assert!(p.to_string().starts_with("in.json: "), "{}", p);
        }
    }
}

/// JSON values of any shape, with the strings and numbers Karpenter fields most often hold.
fn arbitrary_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        "(\\PC{0,12}|[0-9]{1,20}(h|m|s|Gi|Mi|m)?|In|Exists|Never|WhenEmpty|al2023@latest)"
            .prop_map(serde_json::Value::from),
    ];
    let keys = "(template|spec|requirements|nodeClassRef|name|key|operator|values|disruption|budgets|nodes|expireAfter|consolidateAfter|limits|cpu|taints|effect|amiSelectorTerms|alias|kubelet|maxPods|weight|\\PC{1,6})";
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(keys, inner, 0..5)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
