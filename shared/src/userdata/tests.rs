//! User data tests: golden files per family x custom user data, and the merge rules.
//!
//! Golden files live in `shared/src/userdata/testdata/`; `UPDATE_GOLDEN=1 cargo test
//! --workspace --lib userdata::` rewrites them (then read the diff).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::api::{KubeletConfiguration, Taint, TaintEffect};

use super::mime::{MimeArchive, NODE_CONFIG_CONTENT_TYPE, SHELL_CONTENT_TYPE};
use super::{AmiFamily, NodeBootstrap, UserDataError, render_user_data};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/userdata/testdata")
}

fn input_file(name: &str) -> String {
    let path = testdata().join("input").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn check_golden(name: &str, actual: &str) {
    let path = testdata().join(format!("{name}.golden"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "{name}: output differs from {}",
        path.display()
    );
}

fn taint(key: &str, value: Option<&str>, effect: TaintEffect) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(str::to_owned),
        effect,
    }
}

/// The seed's `test-network` Provisioner (taint networkNode=true:NoSchedule, labels phase
/// and nodeType, c5n.4xlarge on-demand) as nodewright would launch it.
fn seed_test_network() -> NodeBootstrap {
    let labels: BTreeMap<String, String> = [
        ("karpenter.sh/capacity-type", "on-demand"),
        ("karpenter.sh/nodepool", "test-network"),
        ("nodeType", "network-node"),
        ("nodewright.io/nodeclaim", "test-network-7xk2p"),
        ("phase", "test"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    NodeBootstrap {
        cluster_name: "test-cluster".into(),
        endpoint: "https://0123456789ABCDEF0123456789ABCDEF.gr7.ap-northeast-2.eks.amazonaws.com"
            .into(),
        ca_bundle_base64: "Y2EtYnVuZGxlCg==".into(),
        service_cidr: "172.20.0.0/16".into(),
        cluster_dns: vec!["172.20.0.10".into()],
        labels,
        taints: vec![taint("networkNode", Some("true"), TaintEffect::NoSchedule)],
        // c5n.4xlarge: 8 ENIs x (30 - 1) IPs + 2 (the EKS max-pods formula).
        max_pods: Some(234),
        kubelet: None,
    }
}

/// A NodePool with a startup taint, kubelet reservations and eviction thresholds.
fn with_kubelet() -> NodeBootstrap {
    let mut input = seed_test_network();
    input.taints.push(taint(
        "example.com/agent-not-ready",
        None,
        TaintEffect::NoExecute,
    ));
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    input.kubelet = Some(KubeletConfiguration {
        system_reserved: map(&[("cpu", "100m"), ("memory", "100Mi")]),
        kube_reserved: map(&[
            ("cpu", "200m"),
            ("ephemeral-storage", "1Gi"),
            ("memory", "512Mi"),
        ]),
        eviction_hard: map(&[("memory.available", "5%"), ("nodefs.available", "10%")]),
        ..KubeletConfiguration::default()
    });
    input
}

#[test]
fn golden_user_data_for_every_family_and_kind_of_custom_user_data() {
    let seed = input_file("seed_enable_ipvs_test.mime");
    let shell = input_file("custom_shell.sh");
    let nodeconfig = input_file("custom_nodeconfig.yaml");
    let toml = input_file("custom_bottlerocket.toml");
    let cases: Vec<(&str, AmiFamily, NodeBootstrap, Option<&str>)> = vec![
        ("al2_no_custom", AmiFamily::Al2, seed_test_network(), None),
        (
            "al2_custom_shell",
            AmiFamily::Al2,
            seed_test_network(),
            Some(&shell),
        ),
        (
            "al2_seed_enable_ipvs_test",
            AmiFamily::Al2,
            seed_test_network(),
            Some(&seed),
        ),
        ("al2_kubelet", AmiFamily::Al2, with_kubelet(), None),
        (
            "al2023_no_custom",
            AmiFamily::Al2023,
            seed_test_network(),
            None,
        ),
        (
            "al2023_custom_shell",
            AmiFamily::Al2023,
            seed_test_network(),
            Some(&shell),
        ),
        (
            "al2023_seed_enable_ipvs_test",
            AmiFamily::Al2023,
            seed_test_network(),
            Some(&seed),
        ),
        (
            "al2023_custom_nodeconfig",
            AmiFamily::Al2023,
            seed_test_network(),
            Some(&nodeconfig),
        ),
        ("al2023_kubelet", AmiFamily::Al2023, with_kubelet(), None),
        (
            "bottlerocket_no_custom",
            AmiFamily::Bottlerocket,
            seed_test_network(),
            None,
        ),
        (
            "bottlerocket_custom_toml",
            AmiFamily::Bottlerocket,
            with_kubelet(),
            Some(&toml),
        ),
        (
            "custom_seed_passthrough",
            AmiFamily::Custom,
            seed_test_network(),
            Some(&seed),
        ),
    ];
    for (name, family, input, custom) in cases {
        let out =
            render_user_data(family, &input, custom).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_golden(name, &out);
    }
}

#[test]
fn seed_shell_part_is_kept_verbatim_before_the_bootstrap_part() {
    let seed = input_file("seed_enable_ipvs_test.mime");
    let seed_parts = MimeArchive::parse(&seed).unwrap().parts;
    assert_eq!(seed_parts.len(), 1);
    assert!(
        seed_parts[0]
            .content
            .contains("sudo modprobe nf_conntrack_ipv4\n")
    );
    for family in [AmiFamily::Al2, AmiFamily::Al2023] {
        let out = render_user_data(family, &seed_test_network(), Some(&seed)).unwrap();
        let parts = MimeArchive::parse(&out).unwrap().parts;
        assert_eq!(parts.len(), 2, "{family:?}");
        assert_eq!(parts[0], seed_parts[0], "{family:?}");
    }
}

#[test]
fn al2_bootstrap_passes_labels_taints_and_max_pods_as_kubelet_flags() {
    let out = render_user_data(AmiFamily::Al2, &seed_test_network(), None).unwrap();
    let parts = MimeArchive::parse(&out).unwrap().parts;
    let script = &parts.last().unwrap().content;
    assert_eq!(
        parts.last().unwrap().content_type(),
        Some(SHELL_CONTENT_TYPE)
    );
    assert!(script.contains("/etc/eks/bootstrap.sh 'test-cluster' --apiserver-endpoint 'https://"));
    assert!(script.contains("--dns-cluster-ip '172.20.0.10'"));
    assert!(script.contains("--use-max-pods false"));
    assert!(script.contains(
        "--kubelet-extra-args '--node-labels=\"karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=test-network,nodeType=network-node,nodewright.io/nodeclaim=test-network-7xk2p,phase=test\" --register-with-taints=\"networkNode=true:NoSchedule\" --max-pods=234'"
    ));
}

#[test]
fn al2023_node_config_is_last_and_carries_cluster_kubelet_config_and_flags() {
    let out = render_user_data(
        AmiFamily::Al2023,
        &with_kubelet(),
        Some("#!/bin/bash\necho hi\n"),
    )
    .unwrap();
    let parts = MimeArchive::parse(&out).unwrap().parts;
    assert_eq!(parts[0].content_type(), Some(SHELL_CONTENT_TYPE));
    let last = parts.last().unwrap();
    assert_eq!(last.content_type(), Some(NODE_CONFIG_CONTENT_TYPE));
    let doc: serde_yaml::Value = serde_yaml::from_str(&last.content).unwrap();
    assert_eq!(doc["apiVersion"], "node.eks.aws/v1alpha1");
    assert_eq!(doc["kind"], "NodeConfig");
    let spec = &doc["spec"];
    assert_eq!(spec["cluster"]["name"], "test-cluster");
    assert_eq!(spec["cluster"]["certificateAuthority"], "Y2EtYnVuZGxlCg==");
    assert_eq!(spec["cluster"]["cidr"], "172.20.0.0/16");
    assert_eq!(spec["kubelet"]["config"]["maxPods"], 234);
    assert_eq!(spec["kubelet"]["config"]["clusterDNS"][0], "172.20.0.10");
    assert_eq!(
        spec["kubelet"]["config"]["evictionHard"]["memory.available"],
        "5%"
    );
    assert_eq!(spec["kubelet"]["config"]["systemReserved"]["cpu"], "100m");
    let flags: Vec<&str> = spec["kubelet"]["flags"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert!(flags[0].starts_with("--node-labels=\"karpenter.sh/capacity-type=on-demand,"));
    assert_eq!(
        flags[1],
        "--register-with-taints=\"example.com/agent-not-ready:NoExecute,networkNode=true:NoSchedule\""
    );
}

#[test]
fn al2023_bare_node_config_yaml_becomes_a_node_config_part_and_shell_a_shell_part() {
    let yaml = input_file("custom_nodeconfig.yaml");
    let out = render_user_data(AmiFamily::Al2023, &seed_test_network(), Some(&yaml)).unwrap();
    let parts = MimeArchive::parse(&out).unwrap().parts;
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].content_type(), Some(NODE_CONFIG_CONTENT_TYPE));
    assert_eq!(parts[0].content, yaml);
}

#[test]
fn label_and_taint_order_does_not_change_the_user_data() {
    let a = with_kubelet();
    let mut b = with_kubelet();
    b.taints.reverse();
    for family in [AmiFamily::Al2, AmiFamily::Al2023, AmiFamily::Bottlerocket] {
        assert_eq!(
            render_user_data(family, &a, None).unwrap(),
            render_user_data(family, &b, None).unwrap(),
            "{family:?}"
        );
    }
}

#[test]
fn bottlerocket_keeps_custom_settings_but_nodewright_cluster_fields_labels_and_taints_win() {
    let toml_in = input_file("custom_bottlerocket.toml");
    let out = render_user_data(AmiFamily::Bottlerocket, &with_kubelet(), Some(&toml_in)).unwrap();
    let doc: toml::Table = out.parse().unwrap();
    let k8s = &doc["settings"]["kubernetes"];
    assert_eq!(k8s["cluster-name"].as_str(), Some("test-cluster"));
    assert_eq!(
        k8s["cluster-certificate"].as_str(),
        Some("Y2EtYnVuZGxlCg==")
    );
    assert_eq!(k8s["max-pods"].as_integer(), Some(234));
    assert_eq!(k8s["unknown-setting"].as_str(), Some("kept"));
    assert_eq!(k8s["cluster-dns-ip"].as_str(), Some("172.20.0.10"));
    let labels = &k8s["node-labels"];
    assert_eq!(labels["team"].as_str(), Some("payments"));
    assert_eq!(
        labels["karpenter.sh/nodepool"].as_str(),
        Some("test-network")
    );
    let taints = k8s["node-taints"].as_table().unwrap();
    assert!(!taints.contains_key("dropped"));
    assert_eq!(
        taints["networkNode"].as_array().unwrap()[0].as_str(),
        Some("true:NoSchedule")
    );
    assert_eq!(
        taints["example.com/agent-not-ready"].as_array().unwrap()[0].as_str(),
        Some(":NoExecute")
    );
    assert_eq!(
        k8s["eviction-hard"]["memory.available"].as_str(),
        Some("5%")
    );
    assert_eq!(
        doc["settings"]["autoscaling"]["should-wait"].as_bool(),
        Some(false)
    );
    assert_eq!(
        doc["settings"]["ntp"]["time-servers"][0].as_str(),
        Some("169.254.169.123")
    );
}

#[test]
fn invalid_custom_user_data_is_a_clear_error() {
    let input = seed_test_network();
    let err =
        render_user_data(AmiFamily::Bottlerocket, &input, Some("[settings\nx = ")).unwrap_err();
    assert!(matches!(err, UserDataError::BadToml(_)));
    assert!(err.to_string().contains("not valid TOML"));

    let err = render_user_data(
        AmiFamily::Bottlerocket,
        &input,
        Some("[settings]\nkubernetes = 3\n"),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("`settings.kubernetes` must be a table")
    );

    let unclosed =
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\n\necho\n";
    let err = render_user_data(AmiFamily::Al2, &input, Some(unclosed)).unwrap_err();
    assert!(err.to_string().contains("no closing '--B--' line"));

    let not_multipart = "Content-Type: text/plain\n\nhello\n";
    let err = render_user_data(AmiFamily::Al2023, &input, Some(not_multipart)).unwrap_err();
    assert!(err.to_string().contains("not multipart"));
}

#[test]
fn values_that_could_escape_shell_or_yaml_quoting_are_refused() {
    let mut input = seed_test_network();
    input
        .labels
        .insert("team".into(), "a' ; rm -rf / ; '".into());
    let err = render_user_data(AmiFamily::Al2, &input, None).unwrap_err();
    assert!(err.to_string().contains("label value"));

    let mut input = seed_test_network();
    input.kubelet = Some(KubeletConfiguration {
        eviction_hard: [("memory.available".to_owned(), "5%'".to_owned())].into(),
        ..KubeletConfiguration::default()
    });
    let err = render_user_data(AmiFamily::Al2, &input, None).unwrap_err();
    assert!(err.to_string().contains("kubelet.evictionHard"));
}

#[test]
fn al2023_without_the_service_cidr_is_refused_because_nodeadm_needs_it() {
    let mut input = seed_test_network();
    input.service_cidr.clear();
    let err = render_user_data(AmiFamily::Al2023, &input, None).unwrap_err();
    assert!(err.to_string().contains("spec.cluster.cidr"));
}

#[test]
fn custom_family_passes_the_user_data_through_unchanged() {
    let seed = input_file("seed_enable_ipvs_test.mime");
    let out = render_user_data(AmiFamily::Custom, &seed_test_network(), Some(&seed)).unwrap();
    assert_eq!(out, seed);
}

#[test]
fn ipv6_cluster_dns_selects_the_ipv6_family_for_bootstrap_sh() {
    let mut input = seed_test_network();
    input.cluster_dns = vec!["fd00:10:96::a".into()];
    let out = render_user_data(AmiFamily::Al2, &input, None).unwrap();
    assert!(out.contains("--ip-family ipv6 \\\n--dns-cluster-ip 'fd00:10:96::a'"));
}
