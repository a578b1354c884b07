use super::*;

fn problem(severity: Severity, field: &str) -> Problem {
    Problem {
        file: "cluster".into(),
        document: "NodePool/default".into(),
        field: field.into(),
        message: "bad".into(),
        severity,
    }
}

#[test]
fn configuration_errors_fail_naming_each_field_and_warnings_only_count() {
    assert!(!configuration("Karpenter's CRDs", &[]).failed());
    let warned = configuration("Karpenter's CRDs", &[problem(Severity::Warning, "spec.x")]);
    assert_eq!(
        warned.verdict,
        Verdict::Pass(
            "Karpenter's CRDs, valid (1 warnings: `nodewright validate` lists them)".into()
        )
    );
    let errors: Vec<Problem> = (0..7)
        .map(|i| problem(Severity::Error, &format!("spec.f{i}")))
        .collect();
    let c = configuration("Karpenter's CRDs", &errors);
    let Verdict::Fail { why, .. } = c.verdict else {
        panic!("{c:?}")
    };
    assert!(
        why.contains("spec.f0") && why.contains("spec.f4") && !why.contains("spec.f5"),
        "{why}"
    );
    assert!(why.ends_with("and 2 more"), "{why}");
}

/// A `karpenter.sh/capacity-type` requirement.
type CapacityTypes = Option<(Operator, &'static [&'static str])>;

fn pool(capacity_types: CapacityTypes) -> NodePool {
    let mut np: NodePool = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\n\
         spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: c}, requirements: []}}}\n",
    )
    .unwrap();
    if let Some((operator, values)) = capacity_types {
        np.spec
            .template
            .spec
            .requirements
            .push(nodewright::api::NodeSelectorRequirement {
                key: "karpenter.sh/capacity-type".into(),
                operator,
                values: values.iter().map(|v| v.to_string()).collect(),
                min_values: None,
            });
    }
    np
}

#[test]
fn spot_is_wanted_only_where_a_pool_allows_it() {
    let cases: [(CapacityTypes, bool); 6] = [
        (None, false),
        (Some((Operator::In, &["on-demand"])), false),
        (Some((Operator::In, &["spot", "on-demand"])), true),
        (Some((Operator::NotIn, &["spot"])), false),
        (Some((Operator::NotIn, &["reserved"])), true),
        (Some((Operator::Exists, &[])), true),
    ];
    for (requirement, want) in cases {
        assert_eq!(wants_spot(&[pool(requirement)]), want, "{requirement:?}");
    }
}

#[test]
fn iam_lookups_fail_with_the_command_that_fixes_them() {
    assert!(!spot_role(&Found::Yes).failed());
    let Verdict::Fail { fix, .. } = spot_role(&Found::No).verdict else {
        panic!()
    };
    assert!(fix.contains("create-service-linked-role"), "{fix}");
    assert!(spot_role(&Found::Unknown("denied".into())).failed());
    assert!(!node_role("r", &Found::Yes, "p", &Found::Yes).failed());
    let Verdict::Fail { fix, .. } = node_role("r", &Found::Yes, "p", &Found::No).verdict else {
        panic!()
    };
    assert!(
        fix.contains("add-role-to-instance-profile --instance-profile-name p --role-name r"),
        "{fix}"
    );
    assert!(node_role("r", &Found::No, "p", &Found::No).failed());
}

#[test]
fn discovery_and_rbac_fail_on_nothing_found_and_on_anything_missing() {
    assert!(!discovery("c", Ok(2), Ok(1)).failed());
    assert!(discovery("c", Ok(0), Ok(1)).failed());
    assert!(discovery("c", Ok(2), Ok(0)).failed());
    assert!(discovery("c", Err("throttled".into()), Ok(1)).failed());
    assert!(!rbac(&[], false, "nodewright").failed());
    assert!(
        !rbac(
            &["clusterrole/nodewright-sweeper".into()],
            true,
            "nodewright"
        )
        .failed()
    );
    let c = rbac(
        &["clusterrole/nodewright-sweeper".into()],
        false,
        "nodewright",
    );
    let Verdict::Fail { why, fix } = c.verdict else {
        panic!()
    };
    assert!(
        why.contains("clusterrole/nodewright-sweeper")
            && fix == "nodewright rbac | kubectl apply -f -"
    );
    // Another prefix is repeated in the fix, so the bindings name the entries' groups.
    let c = rbac(
        &["rolebinding/nodewright-sweeper".into()],
        false,
        "platform",
    );
    let Verdict::Fail { fix, .. } = c.verdict else {
        panic!()
    };
    assert_eq!(
        fix,
        "nodewright rbac --group-prefix platform | kubectl apply -f -"
    );
}

#[test]
fn access_needs_the_eks_api_and_an_entry_for_each_function_s_group() {
    for (mode, fails) in [
        (Some("API"), false),
        (Some("API_AND_CONFIG_MAP"), false),
        (Some("CONFIG_MAP"), true),
        (None, true),
    ] {
        assert_eq!(authentication("c", mode).failed(), fails, "{mode:?}");
    }
    let Verdict::Fail { fix, .. } = authentication("c", Some("CONFIG_MAP")).verdict else {
        panic!()
    };
    assert!(
        fix.contains("--name c") && fix.contains("authenticationMode=API_AND_CONFIG_MAP"),
        "{fix}"
    );
    let all: Vec<String> = [
        "nodewright-provisioner",
        "nodewright-interruption",
        "nodewright-sweeper",
    ]
    .map(String::from)
    .to_vec();
    assert!(!access_entries(&all, false, "nodewright").failed());
    let c = access_entries(&all[..2], false, "nodewright");
    let Verdict::Fail { why, .. } = c.verdict else {
        panic!()
    };
    assert!(why.ends_with("nodewright-sweeper"), "{why}");
    assert!(!access_entries(&[], true, "nodewright").failed());
    // Entries mapping the functions to the groups of another prefix.
    let platform: Vec<String> = all
        .iter()
        .map(|g| g.replace("nodewright", "platform"))
        .collect();
    assert!(!access_entries(&platform, false, "platform").failed());
    assert!(access_entries(&platform, false, "nodewright").failed());
}

#[test]
fn karpenter_passes_only_stopped_and_with_every_instance_adoptable() {
    let fleet = |adoptable, old: &[&str]| {
        Ok(KarpenterFleet {
            adoptable,
            not_adoptable: old.iter().map(|i| i.to_string()).collect(),
        })
    };
    let running = Ok(Some(
        "Karpenter's controller k holds kube-system/karpenter-leader-election".to_string(),
    ));
    let cases = [
        (Ok(None), fleet(0, &[]), false, "not running; 0"),
        (Ok(None), fleet(3, &[]), false, "3 of its instances"),
        (running.clone(), fleet(3, &[]), true, "holds kube-system"),
        (Ok(None), fleet(2, &["i-old"]), true, "i-old"),
        (Err("403".to_string()), fleet(0, &[]), true, "403"),
        (
            Ok(None),
            Err("AccessDenied".to_string()),
            true,
            "AccessDenied",
        ),
    ];
    for (running, fleet, fails, says) in cases {
        let c = karpenter(&running, &fleet);
        assert_eq!(c.failed(), fails, "{c:?}");
        let text = match &c.verdict {
            Verdict::Pass(d) => d.clone(),
            Verdict::Fail { why, .. } => why.clone(),
        };
        assert!(text.contains(says), "{text}");
    }
}
