use super::*;
use crate::api::Severity;
use crate::api::load::parse;

/// Converts every Provisioner and AWSNodeTemplate of a file, in document order.
fn convert_file(text: &str) -> (Vec<NodePool>, Vec<EC2NodeClass>, Vec<Note>) {
    let (mut pools, mut classes, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(doc).unwrap();
        match value["kind"].as_str() {
            Some("Provisioner") => {
                let c = convert_provisioner(&parse(value).unwrap());
                assert!(!has_errors(&c.notes), "{:?}", c.notes);
                pools.push(c.node_pool);
                classes.extend(c.node_class);
                notes.extend(c.notes);
            }
            Some("AWSNodeTemplate") => {
                let c = convert_node_template(&parse(value).unwrap());
                assert!(!has_errors(&c.notes), "{:?}", c.notes);
                classes.push(c.node_class);
                notes.extend(c.notes);
            }
            other => panic!("unexpected kind {other:?} in a golden input"),
        }
    }
    (pools, classes, notes)
}

/// Compares the conversion of `testdata/<name>.input.yaml` with `<name>.expected.yaml`, which
/// were written and reviewed by hand; `UPDATE_GOLDEN=1` rewrites the expected file instead.
fn golden(name: &str) -> Vec<Note> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api/testdata");
    let input = std::fs::read_to_string(dir.join(format!("{name}.input.yaml"))).unwrap();
    let (pools, classes, notes) = convert_file(&input);
    let actual = render_v1_yaml(&pools, &classes).unwrap();
    let expected_path = dir.join(format!("{name}.expected.yaml"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&expected_path, &actual).unwrap();
        return notes;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    assert_eq!(
        actual,
        expected,
        "{name}: conversion differs from {}",
        expected_path.display()
    );
    notes
}

#[test]
fn seed_test_network_and_its_node_template_convert_to_v1() {
    assert!(golden("test-network").is_empty());
}

#[test]
fn seed_provisioner1_with_inline_provider_converts_to_a_pool_and_a_class_of_its_name() {
    assert!(golden("provisioner1").is_empty());
}

#[test]
fn seed_provisioner2_with_taints_and_labels_converts_to_v1() {
    assert!(golden("provisioner2").is_empty());
}

#[test]
fn legacy_fields_the_seeds_do_not_use_convert_to_v1() {
    let notes = golden("legacy-full");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].field, "spec.kubeletConfiguration.containerRuntime");
    assert_eq!(notes[0].severity, Severity::Warning);
}

fn provisioner(spec: &str) -> V1Alpha5Provisioner {
    let yaml = format!("metadata: {{name: p}}\nspec: {spec}");
    parse(serde_yaml::from_str(&yaml).unwrap()).unwrap()
}

#[test]
fn disruption_settings_map_as_karpenters_migration_describes() {
    let cases = [
        (
            "{providerRef: {name: t}, ttlSecondsAfterEmpty: 30}",
            ConsolidationPolicy::WhenEmpty,
            "30s",
            "Never",
        ),
        (
            "{providerRef: {name: t}, consolidation: {enabled: true}}",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "0s",
            "Never",
        ),
        (
            "{providerRef: {name: t}, consolidation: {enabled: false}}",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "Never",
            "Never",
        ),
        (
            "{providerRef: {name: t}}",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "Never",
            "Never",
        ),
        (
            "{providerRef: {name: t}, ttlSecondsUntilExpired: 1209600}",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "Never",
            "336h",
        ),
        (
            "{providerRef: {name: t}, ttlSecondsAfterEmpty: 0, ttlSecondsUntilExpired: 2592000}",
            ConsolidationPolicy::WhenEmpty,
            "0s",
            "720h",
        ),
    ];
    for (spec, policy, after, expire) in cases {
        let c = convert_provisioner(&provisioner(spec));
        assert!(!has_errors(&c.notes), "{spec}: {:?}", c.notes);
        let np = c.node_pool;
        assert_eq!(np.spec.disruption.consolidation_policy, policy, "{spec}");
        assert_eq!(
            np.spec.disruption.consolidate_after.to_string(),
            after,
            "{spec}"
        );
        assert_eq!(
            np.spec.template.spec.expire_after.unwrap().to_string(),
            expire,
            "{spec}"
        );
    }
}

#[test]
fn impossible_provisioners_are_refused_with_the_field_to_fix() {
    let cases = [
        (
            "{providerRef: {name: t}, ttlSecondsAfterEmpty: 30, consolidation: {enabled: true}}",
            "spec.ttlSecondsAfterEmpty",
            "mutually exclusive",
        ),
        ("{}", "spec.providerRef", "needs providerRef"),
        (
            "{providerRef: {name: t}, provider: {}}",
            "spec.provider",
            "mutually exclusive",
        ),
        (
            "{providerRef: {name: t}, ttlSecondsUntilExpired: -1}",
            "spec.ttlSecondsUntilExpired",
            "0 or more",
        ),
        (
            "{provider: {launchTemplate: my-lt}}",
            "spec.provider.launchTemplate",
            "not supported",
        ),
        (
            "{provider: {amiFamily: Ubuntu}}",
            "spec.provider.amiFamily",
            "Ubuntu",
        ),
        (
            "{provider: {amiFamily: Custom}}",
            "spec.provider.amiFamily",
            "amiSelector",
        ),
    ];
    for (spec, field, fragment) in cases {
        let notes = convert_provisioner(&provisioner(spec)).notes;
        let errors: Vec<&Note> = notes
            .iter()
            .filter(|n| n.severity == Severity::Error)
            .collect();
        assert_eq!(errors[0].field, field, "{spec}");
        assert!(
            errors[0].message.contains(fragment),
            "{spec}: {}",
            errors[0].message
        );
    }
}

#[test]
fn a_provisioner_that_cannot_be_converted_is_still_converted_as_far_as_it_goes() {
    let c = convert_provisioner(&provisioner(
        "{providerRef: {name: missing}, ttlSecondsAfterEmpty: -5, labels: {team: a}}",
    ));
    assert!(has_errors(&c.notes));
    // What validation needs to report the rest: the reference and the labels.
    assert_eq!(
        c.node_pool.spec.template.spec.node_class_ref.name,
        "missing"
    );
    assert_eq!(c.node_pool.spec.template.metadata.labels["team"], "a");
}

#[test]
fn a_provisioner_with_provider_ref_hands_its_kubelet_settings_to_the_referenced_class() {
    let c = convert_provisioner(&provisioner(
        "{providerRef: {name: t}, kubeletConfiguration: {maxPods: 20}}",
    ));
    assert_eq!(c.notes, []);
    assert!(c.node_class.is_none());
    assert_eq!(c.kubelet_for_ref.and_then(|k| k.max_pods), Some(20));
    assert_eq!(c.node_pool.spec.template.spec.node_class_ref.name, "t");
}

#[test]
fn selector_ids_become_one_term_each_and_extra_tags_are_reported() {
    let mut notes = Vec::new();
    let selector = BTreeMap::from([
        ("aws-ids".to_owned(), "subnet-1, subnet-2".to_owned()),
        ("Name".to_owned(), "x".to_owned()),
    ]);
    let terms = selector_terms(&selector, "spec.subnetSelector", &mut notes);
    let ids: Vec<_> = terms.iter().map(|t| t.id.clone().unwrap()).collect();
    assert_eq!(ids, ["subnet-1", "subnet-2"]);
    assert!(terms.iter().all(|t| t.tags.is_empty()));
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].field, "spec.subnetSelector");
}

#[test]
fn v1beta1_node_pools_are_moved_to_the_v1_shape() {
    let value = serde_json::json!({
        "metadata": {"name": "b"},
        "spec": {
            "template": {"spec": {"nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "c"}, "kubelet": {"maxPods": 5}}},
            "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "48h"}
        }
    });
    let mut notes = Vec::new();
    let np: NodePool = parse(upgrade_v1beta1_node_pool(value, &mut notes)).unwrap();
    assert_eq!(
        np.spec.template.spec.node_class_ref.group,
        "karpenter.k8s.aws"
    );
    assert_eq!(
        np.spec.template.spec.expire_after.unwrap().to_string(),
        "48h"
    );
    assert_eq!(
        np.spec.disruption.consolidation_policy,
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].field, "spec.template.spec.kubelet");
}
