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

fn in_vpc(groups: &[&str], subnets: &[&str]) -> Functions {
    Functions::InVpc {
        groups: strings(groups),
        subnet_cidrs: strings(subnets),
    }
}

fn rule(protocol: &str, ports: Option<(i32, i32)>, groups: &[&str], cidrs: &[&str]) -> Inbound {
    Inbound {
        group: "sg-cluster".into(),
        protocol: protocol.into(),
        ports,
        from_groups: strings(groups),
        from_cidrs: strings(cidrs),
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
        (endpoint(false, &[], false), in_vpc(&["sg-fn"], &[]), false),
    ];
    for (e, functions, reachable) in cases {
        let reach = judge(&e, &functions, &[], &[]);
        assert_eq!(reach.is_ok(), reachable, "{e:?} {functions:?}: {reach:?}");
    }
    let Err((why, fix)) = judge(
        &endpoint(true, &["203.0.113.0/24"], false),
        &Functions::OutsideVpc,
        &[],
        &[],
    ) else {
        panic!()
    };
    assert!(
        why.contains("203.0.113.0/24") && fix.contains("FunctionSubnetIds"),
        "{why} / {fix}"
    );
}

#[test]
fn in_the_vpc_the_private_endpoint_needs_a_rule_admitting_443_from_the_functions() {
    let functions = in_vpc(&["sg-fn"], &["10.0.1.0/24", "10.0.2.0/24"]);
    let private = endpoint(false, &[], true);
    // (rules of the endpoint's groups, reachable)
    let cases = [
        (vec![rule("tcp", Some((443, 443)), &["sg-fn"], &[])], true),
        (vec![rule("tcp", Some((0, 65535)), &["sg-fn"], &[])], true),
        (vec![rule("-1", None, &["sg-fn"], &[])], true),
        // A block holding every function subnet.
        (
            vec![rule("tcp", Some((443, 443)), &[], &["10.0.0.0/16"])],
            true,
        ),
        // A block holding only one of them.
        (
            vec![rule("tcp", Some((443, 443)), &[], &["10.0.1.0/24"])],
            false,
        ),
        (vec![rule("tcp", Some((80, 80)), &["sg-fn"], &[])], false),
        (vec![rule("udp", Some((443, 443)), &["sg-fn"], &[])], false),
        // EKS's own rule: all traffic from the cluster group itself, not the functions'.
        (vec![rule("-1", None, &["sg-cluster"], &[])], false),
        (vec![], false),
    ];
    for (rules, reachable) in cases {
        let reach = judge(&private, &functions, &strings(&["sg-cluster"]), &rules);
        assert_eq!(reach.is_ok(), reachable, "{rules:?}: {reach:?}");
    }
    // Functions in the cluster group itself are admitted by EKS's own rule.
    let own = judge(
        &private,
        &in_vpc(&["sg-cluster"], &["10.0.1.0/24"]),
        &strings(&["sg-cluster"]),
        &[rule("-1", None, &["sg-cluster"], &[])],
    );
    assert!(own.is_ok(), "{own:?}");
    let Err((why, fix)) = judge(
        &private,
        &functions,
        &strings(&["sg-cluster", "sg-extra"]),
        &[],
    ) else {
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
    // A public endpoint from the VPC goes through its NAT, which doctor cannot see.
    let public = judge(&endpoint(true, &["0.0.0.0/0"], false), &functions, &[], &[]);
    assert!(
        public.as_ref().is_ok_and(|d| d.contains("NAT")),
        "{public:?}"
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
        ("10.0.0.0/33", "10.0.0.0/24", false),
        ("::/0", "10.0.0.0/24", false),
    ];
    for (outer, inner, want) in cases {
        assert_eq!(contains(outer, inner), want, "{outer} holds {inner}");
    }
}
