use super::*;
use crate::api::Operator;
use crate::api::Severity;

const TWO_POOLS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: standard}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: standard}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: standard}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: orphan}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}
"#;

const FILE: &str = "configmap/kube-system/nodewright/pools.yaml";

fn loaded() -> (Inputs, Vec<Problem>) {
    let mut inputs = Inputs::default();
    let problems = inputs.load_str(FILE, TWO_POOLS);
    assert_eq!(problems, vec![], "the fixture itself loads cleanly");
    (inputs, problems)
}

fn error(file: &str, document: &str) -> Problem {
    Problem {
        file: file.into(),
        document: document.into(),
        field: "spec.weight".into(),
        message: "must be between 1 and 100".into(),
        severity: Severity::Error,
    }
}

fn names(pools: &[NodePool]) -> Vec<&str> {
    pools.iter().map(|p| p.metadata.name.as_str()).collect()
}

/// Dropped objects as `Kind/name`, the form the assertions spell them in.
fn shown(dropped: Vec<(ObjectRef, String)>) -> Vec<(String, String)> {
    dropped
        .into_iter()
        .map(|(o, why)| (o.to_string(), why))
        .collect()
}

#[test]
fn a_pool_whose_class_is_not_defined_is_dropped_and_the_rest_kept() {
    let (inputs, problems) = loaded();
    let (pools, classes, dropped) = usable(&inputs, &problems);
    let dropped = shown(dropped);
    assert_eq!(names(&pools), ["general", "gpu"]);
    assert_eq!(classes.len(), 1);
    assert_eq!(
        dropped,
        vec![(
            "NodePool/orphan".to_string(),
            "spec.template.spec.nodeClassRef.name: EC2NodeClass \"missing\" is not defined"
                .to_string()
        )]
    );
}

#[test]
fn an_invalid_pool_is_skipped_without_blocking_the_valid_ones() {
    let (inputs, mut problems) = loaded();
    problems.push(error(FILE, "NodePool/gpu (document 3)"));
    let (pools, _, dropped) = usable(&inputs, &problems);
    let dropped = shown(dropped);
    assert_eq!(names(&pools), ["general"]);
    assert!(dropped.contains(&(
        "NodePool/gpu".to_string(),
        "spec.weight: must be between 1 and 100".to_string()
    )));
}

/// Each NodePool's readiness as its conditions say it: its own errors, and its class's
/// state apart; a class not found is not the NodePool failing validation.
#[test]
fn a_pools_readiness_tells_its_own_errors_from_its_class() {
    let missing_class = Problem {
        field: crate::api::NODE_CLASS_REF_NAME.into(),
        message: "EC2NodeClass \"missing\" is not defined in the inputs".into(),
        ..error(FILE, "NodePool/orphan (document 4)")
    };
    /// A pool's name, its own errors and its class's readiness.
    type Readiness<'a> = (&'a str, Option<&'a str>, ClassReadiness);
    let cases: [(Vec<Problem>, [Readiness; 3]); 3] = [
        (
            vec![missing_class],
            [
                ("general", None, ClassReadiness::Ready),
                ("gpu", None, ClassReadiness::Ready),
                ("orphan", None, ClassReadiness::NotFound),
            ],
        ),
        (
            vec![error(FILE, "NodePool/gpu (document 3)")],
            [
                ("general", None, ClassReadiness::Ready),
                (
                    "gpu",
                    Some("spec.weight: must be between 1 and 100"),
                    ClassReadiness::Ready,
                ),
                ("orphan", None, ClassReadiness::NotFound),
            ],
        ),
        (
            vec![error(FILE, "EC2NodeClass/standard (document 1)")],
            [
                (
                    "general",
                    None,
                    ClassReadiness::NotReady("spec.weight: must be between 1 and 100".into()),
                ),
                (
                    "gpu",
                    None,
                    ClassReadiness::NotReady("spec.weight: must be between 1 and 100".into()),
                ),
                ("orphan", None, ClassReadiness::NotFound),
            ],
        ),
    ];
    let (inputs, _) = loaded();
    for (problems, want) in cases {
        let got = pool_readiness(&inputs, &problems);
        let want: Vec<(String, Option<String>, ClassReadiness)> = want
            .into_iter()
            .map(|(p, own, class)| (p.to_string(), own.map(str::to_string), class))
            .collect();
        assert_eq!(got, want, "{problems:?}");
    }
}

#[test]
fn pools_on_an_invalid_class_are_dropped_with_the_class() {
    let (inputs, mut problems) = loaded();
    problems.push(error(FILE, "EC2NodeClass/standard (document 1)"));
    let (pools, classes, dropped) = usable(&inputs, &problems);
    assert!(pools.is_empty());
    assert!(classes.is_empty());
    let dropped = shown(dropped);
    let keys: Vec<&str> = dropped.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "EC2NodeClass/standard",
            "NodePool/general",
            "NodePool/gpu",
            "NodePool/orphan"
        ]
    );
    assert!(
        dropped[1]
            .1
            .ends_with("EC2NodeClass \"standard\" is invalid")
    );
}

#[test]
fn only_error_problems_on_the_same_file_and_document_drop_a_document() {
    let (inputs, base) = loaded();
    let warning = Problem {
        severity: Severity::Warning,
        ..error(FILE, "NodePool/gpu (document 3)")
    };
    let cases: Vec<(&str, Problem, Vec<&str>)> = vec![
        ("a warning", warning, vec!["general", "gpu"]),
        (
            "an error in another file",
            error("other.yaml", "NodePool/gpu (document 3)"),
            vec!["general", "gpu"],
        ),
        (
            "an error about the whole file",
            error(FILE, ""),
            vec!["general", "gpu"],
        ),
        (
            "an error on a List item",
            error(FILE, "NodePool/gpu (document 3, item 2)"),
            vec!["general"],
        ),
        (
            "an error on a document with a similar name",
            error(FILE, "NodePool/gpu-large (document 3)"),
            vec!["general", "gpu"],
        ),
    ];
    for (what, problem, want) in cases {
        let mut problems = base.clone();
        problems.push(problem);
        let (pools, _, _) = usable(&inputs, &problems);
        assert_eq!(names(&pools), want, "{what}");
    }
}

fn params() -> DefaultPoolParams {
    DefaultPoolParams {
        cluster_name: "demo".into(),
        node_role: "nodewright-node-demo".into(),
        capacity_types: vec!["spot".into(), "on-demand".into()],
        architectures: vec!["arm64".into()],
        instance_categories: vec![],
        cpu_limit: Some("64".into()),
        ami_alias: "al2023@latest".into(),
    }
}

#[test]
fn the_default_pool_loads_cleanly_and_is_usable() {
    let (inputs, problems) = default_pool_inputs(&params());
    assert_eq!(problems, vec![]);
    let (pools, classes, dropped) = usable(&inputs, &problems);
    assert_eq!((names(&pools), shown(dropped)), (vec!["default"], vec![]));
    let class = &classes[0];
    assert_eq!(class.metadata.name, "default");
    assert_eq!(class.spec.role.as_deref(), Some("nodewright-node-demo"));
    assert_eq!(
        class.spec.ami_selector_terms[0].alias.as_deref(),
        Some("al2023@latest")
    );
    for terms in [
        &class.spec.subnet_selector_terms,
        &class.spec.security_group_selector_terms,
    ] {
        assert_eq!(terms.len(), 1);
        assert_eq!(
            terms[0]
                .tags
                .get("karpenter.sh/discovery")
                .map(String::as_str),
            Some("demo")
        );
    }
}

#[test]
fn default_pool_requirements_follow_the_parameters_and_empty_ones_are_left_open() {
    let (inputs, _) = default_pool_inputs(&params());
    let pool = &inputs.node_pools[0];
    assert_eq!(pool.spec.template.spec.node_class_ref.name, "default");
    assert_eq!(
        pool.spec
            .limits
            .get("cpu")
            .map(ToString::to_string)
            .as_deref(),
        Some("64")
    );
    let reqs: Vec<(&str, Operator, Vec<&str>)> = pool
        .spec
        .template
        .spec
        .requirements
        .iter()
        .map(|r| {
            (
                r.key.as_str(),
                r.operator,
                r.values.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        reqs,
        vec![
            ("kubernetes.io/os", Operator::In, vec!["linux"]),
            (
                "karpenter.sh/capacity-type",
                Operator::In,
                vec!["spot", "on-demand"]
            ),
            ("kubernetes.io/arch", Operator::In, vec!["arm64"]),
        ]
    );
    let (unlimited, _) = default_pool_inputs(&DefaultPoolParams {
        cpu_limit: None,
        ..params()
    });
    assert!(unlimited.node_pools[0].spec.limits.is_empty());
}

#[test]
fn a_source_holds_a_node_pool_even_when_the_pool_failed_to_load() {
    let (inputs, problems) = loaded();
    assert!(holds_node_pool(&inputs, &problems));
    let empty = Inputs::default();
    assert!(!holds_node_pool(&empty, &[]));
    assert!(holds_node_pool(
        &empty,
        &[error(FILE, "NodePool/broken (document 1)")]
    ));
    assert!(holds_node_pool(
        &empty,
        &[error(FILE, "Provisioner/legacy (document 1)")]
    ));
    assert!(!holds_node_pool(
        &empty,
        &[error(FILE, "EC2NodeClass/x (document 1)")]
    ));
}

#[test]
fn a_comma_delimited_parameter_reads_as_its_non_empty_trimmed_values() {
    for (text, values) in [
        ("spot,on-demand", vec!["spot", "on-demand"]),
        (" spot , on-demand ", vec!["spot", "on-demand"]),
        ("", vec![]),
        (",", vec![]),
        ("subnet-1,,subnet-2", vec!["subnet-1", "subnet-2"]),
    ] {
        assert_eq!(comma_separated(text), values, "{text:?}");
    }
}
