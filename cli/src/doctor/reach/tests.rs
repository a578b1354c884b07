use super::*;

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|c| c.to_string()).collect()
}

fn endpoint(public: bool, cidrs: &[&str], private: bool) -> Endpoint {
    Endpoint {
        public,
        public_cidrs: strings(cidrs),
        private,
    }
}

fn in_vpc(vpc: &str, groups: &[&str], subnets: &[&str], nat: &[&str]) -> Functions {
    Functions::InVpc(InVpc {
        vpc: vpc.into(),
        groups: strings(groups),
        subnet_cidrs: strings(subnets),
        nat_addresses: strings(nat),
    })
}

fn rule(
    group: &str,
    protocol: &str,
    ports: Option<(i32, i32)>,
    from: &[&str],
    cidrs: &[&str],
) -> Inbound {
    Inbound {
        group: group.into(),
        protocol: protocol.into(),
        ports,
        from_groups: strings(from),
        from_cidrs: strings(cidrs),
    }
}

fn cluster(rules: Vec<Inbound>) -> ClusterNetwork {
    ClusterNetwork {
        vpc: Some("vpc-cluster".into()),
        groups: strings(&["sg-cluster", "sg-extra"]),
        inbound: rules,
    }
}

#[test]
fn before_the_deploy_and_outside_a_vpc_only_an_open_public_endpoint_is_reachable() {
    // (endpoint, where the functions run, reachable)
    let cases = [
        (
            endpoint(true, &["0.0.0.0/0"], false),
            Functions::NotDeployed,
            true,
        ),
        (endpoint(true, &[], false), Functions::NotDeployed, true),
        (
            endpoint(true, &["10.0.0.0/8", "0.0.0.0/0"], false),
            Functions::NotDeployed,
            true,
        ),
        // Before the deploy a private endpoint is advice: the stack does not exist yet.
        (endpoint(false, &[], true), Functions::NotDeployed, true),
        (
            endpoint(true, &["203.0.113.0/24"], true),
            Functions::NotDeployed,
            true,
        ),
        (
            endpoint(true, &["203.0.113.0/24"], false),
            Functions::NotDeployed,
            false,
        ),
        (endpoint(false, &[], false), Functions::NotDeployed, false),
        (
            endpoint(true, &["0.0.0.0/0"], true),
            Functions::OutsideVpc,
            true,
        ),
        // Deployed outside a VPC, a private endpoint does not help.
        (endpoint(false, &[], true), Functions::OutsideVpc, false),
        (
            endpoint(true, &["203.0.113.0/24"], true),
            Functions::OutsideVpc,
            false,
        ),
        (
            endpoint(false, &[], false),
            in_vpc("vpc-cluster", &["sg-fn"], &[], &[]),
            false,
        ),
    ];
    for (e, functions, reachable) in cases {
        let reach = judge(&e, &functions, &cluster(vec![]));
        assert_eq!(reach.is_ok(), reachable, "{e:?} {functions:?}: {reach:?}");
    }
    let Err((why, fix)) = judge(
        &endpoint(true, &["203.0.113.0/24"], false),
        &Functions::OutsideVpc,
        &cluster(vec![]),
    ) else {
        panic!()
    };
    assert!(
        why.contains("203.0.113.0/24") && fix.contains("FunctionSubnetIds"),
        "{why} / {fix}"
    );
}

#[test]
fn in_the_clusters_vpc_the_private_endpoint_needs_443_admitted_from_the_functions() {
    let functions = in_vpc(
        "vpc-cluster",
        &["sg-fn"],
        &["10.0.1.0/24", "10.0.2.0/24"],
        &[],
    );
    let private = endpoint(false, &[], true);
    // (rules of the endpoint's groups, reachable)
    let cases = [
        (
            vec![rule("sg-cluster", "tcp", Some((443, 443)), &["sg-fn"], &[])],
            true,
        ),
        (
            vec![rule("sg-extra", "tcp", Some((0, 65535)), &["sg-fn"], &[])],
            true,
        ),
        (vec![rule("sg-cluster", "-1", None, &["sg-fn"], &[])], true),
        // A block holding every function subnet.
        (
            vec![rule(
                "sg-cluster",
                "tcp",
                Some((443, 443)),
                &[],
                &["10.0.0.0/16"],
            )],
            true,
        ),
        // Two rules, on two groups, each holding one of the subnets.
        (
            vec![
                rule("sg-cluster", "tcp", Some((443, 443)), &[], &["10.0.1.0/24"]),
                rule("sg-extra", "-1", None, &[], &["10.0.2.0/24"]),
            ],
            true,
        ),
        // A block holding only one of them.
        (
            vec![rule(
                "sg-cluster",
                "tcp",
                Some((443, 443)),
                &[],
                &["10.0.1.0/24"],
            )],
            false,
        ),
        // The other subnet admitted, but not on 443.
        (
            vec![
                rule("sg-cluster", "tcp", Some((443, 443)), &[], &["10.0.1.0/24"]),
                rule("sg-extra", "tcp", Some((80, 80)), &[], &["10.0.2.0/24"]),
            ],
            false,
        ),
        (
            vec![rule("sg-cluster", "tcp", Some((80, 80)), &["sg-fn"], &[])],
            false,
        ),
        (
            vec![rule("sg-cluster", "udp", Some((443, 443)), &["sg-fn"], &[])],
            false,
        ),
        // EKS's own rule: all traffic from the cluster group itself, not the functions'.
        (
            vec![rule("sg-cluster", "-1", None, &["sg-cluster"], &[])],
            false,
        ),
        (vec![], false),
    ];
    for (rules, reachable) in cases {
        let reach = judge(&private, &functions, &cluster(rules.clone()));
        assert_eq!(reach.is_ok(), reachable, "{rules:?}: {reach:?}");
    }
    // Functions in the cluster group itself are admitted by EKS's own rule.
    let own = judge(
        &private,
        &in_vpc("vpc-cluster", &["sg-cluster"], &["10.0.1.0/24"], &[]),
        &cluster(vec![rule("sg-cluster", "-1", None, &["sg-cluster"], &[])]),
    );
    assert!(own.is_ok(), "{own:?}");
    let Err((why, fix)) = judge(&private, &functions, &cluster(vec![])) else {
        panic!()
    };
    assert!(
        why.contains("sg-cluster, sg-extra") && why.contains("sg-fn"),
        "{why}"
    );
    assert_eq!(
        fix,
        "aws ec2 authorize-security-group-ingress --group-id sg-cluster --protocol tcp --port \
         443 --source-group sg-fn"
    );
}

#[test]
fn from_another_vpc_or_to_a_public_endpoint_the_functions_go_through_nat() {
    let open = endpoint(true, &["0.0.0.0/0"], false);
    let limited = endpoint(true, &["203.0.113.0/24"], false);
    let both_limited = endpoint(true, &["203.0.113.0/24"], true);
    let private = endpoint(false, &[], true);
    let here = |nat: &[&str]| in_vpc("vpc-cluster", &["sg-fn"], &["10.0.1.0/24"], nat);
    let elsewhere = |nat: &[&str]| in_vpc("vpc-other", &["sg-fn"], &["10.9.1.0/24"], nat);
    // Everything the private endpoint's groups would need: it must not matter here.
    let admitted = cluster(vec![rule("sg-cluster", "-1", None, &["sg-fn"], &[])]);
    // (endpoint, functions, reachable)
    let cases = [
        (&open, here(&["198.51.100.7"]), true),
        (&open, here(&[]), false),
        (&limited, here(&["203.0.113.9"]), true),
        (&limited, here(&["203.0.113.9", "198.51.100.7"]), false),
        // Another VPC cannot use the private endpoint: its NAT must reach the public one.
        (&both_limited, elsewhere(&["203.0.113.9"]), true),
        (&both_limited, elsewhere(&["198.51.100.7"]), false),
        (&private, elsewhere(&["203.0.113.9"]), false),
        (&both_limited, here(&[]), true),
    ];
    for (e, functions, reachable) in cases {
        let reach = judge(e, &functions, &admitted);
        assert_eq!(reach.is_ok(), reachable, "{e:?} {functions:?}: {reach:?}");
    }
    let Err((why, _)) = judge(&limited, &here(&["203.0.113.9", "198.51.100.7"]), &admitted) else {
        panic!()
    };
    assert!(
        why.contains("198.51.100.7") && !why.contains("203.0.113.9,"),
        "{why}"
    );
}

#[test]
fn a_block_holds_the_blocks_inside_it() {
    let cases = [
        ("10.0.0.0/16", "10.0.1.0/24", true),
        ("10.0.0.0/16", "10.0.0.0/16", true),
        ("10.0.1.0/24", "10.0.0.0/16", false),
        ("10.1.0.0/16", "10.0.1.0/24", false),
        ("0.0.0.0/0", "192.168.0.0/24", true),
        ("203.0.113.0/24", "203.0.113.9/32", true),
        ("10.0.0.0/33", "10.0.0.0/24", false),
        ("::/0", "10.0.0.0/24", false),
    ];
    for (outer, inner, want) in cases {
        assert_eq!(contains(outer, inner), want, "{outer} holds {inner}");
    }
}
