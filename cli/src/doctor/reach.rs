//! Whether the functions can reach the cluster's API endpoint, from where the stack runs
//! them: outside any VPC (AWS's public addresses) or in the VPC of `FunctionSubnetIds`,
//! where the private endpoint's network interfaces carry the cluster security group (and
//! any additional groups), which must accept TCP 443 from the functions' groups or
//! subnets.

use std::net::Ipv4Addr;

use super::checks::Endpoint;

/// Where the deployed stack runs the functions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Functions {
    /// No stack yet: doctor runs before the deploy.
    NotDeployed,
    /// `FunctionSubnetIds` empty: Lambda's own network, AWS's public addresses.
    OutsideVpc,
    InVpc(InVpc),
}

/// The functions' network in a VPC.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InVpc {
    pub vpc: String,
    pub groups: Vec<String>,
    /// The CIDR blocks of the functions' subnets.
    pub subnet_cidrs: Vec<String>,
    /// The public addresses of the VPC's NAT gateways: where the functions reach a public
    /// endpoint from.
    pub nat_addresses: Vec<String>,
}

/// The cluster's side: its VPC and the security groups of the private endpoint's
/// interfaces (the cluster security group first) with their inbound rules.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterNetwork {
    pub vpc: Option<String>,
    pub groups: Vec<String>,
    pub inbound: Vec<Inbound>,
}

/// One inbound rule of a security group on the endpoint's network interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    pub group: String,
    /// `-1` (all traffic), `tcp`, `udp`, ...
    pub protocol: String,
    pub ports: Option<(i32, i32)>,
    pub from_groups: Vec<String>,
    pub from_cidrs: Vec<String>,
}

impl Inbound {
    fn admits_https(&self) -> bool {
        match self.protocol.as_str() {
            "-1" => true,
            "tcp" | "6" => self.ports.is_none_or(|(from, to)| from <= 443 && 443 <= to),
            _ => false,
        }
    }
}

/// The verdict on reaching the endpoint: `Ok(detail)` or `Err((why, fix))`.
pub type Reach = Result<String, (String, String)>;

const IN_VPC_FIX: &str = "enable the private endpoint and deploy with FunctionSubnetIds, \
     FunctionSecurityGroupIds and FunctionVpcId, or allow 0.0.0.0/0 on the public endpoint";

/// Judges the endpoint against where the functions run.
pub fn judge(e: &Endpoint, functions: &Functions, cluster: &ClusterNetwork) -> Reach {
    let public = e.public && open_to_all(e);
    match functions {
        _ if !e.public && !e.private => Err((
            "neither the public nor the private endpoint is enabled".into(),
            IN_VPC_FIX.into(),
        )),
        Functions::NotDeployed if public => {
            Ok("public, open to the functions outside a VPC".into())
        }
        Functions::NotDeployed if e.private => Ok(
            "private: deploy with FunctionSubnetIds and FunctionSecurityGroupIds, and let the \
             cluster security group accept 443 from those groups (run doctor again after the \
             deploy to check it)"
                .into(),
        ),
        Functions::NotDeployed | Functions::OutsideVpc if !public => Err((
            format!(
                "{}: functions outside a VPC connect from AWS's addresses, which are not \
                 among them",
                public_only(e)
            ),
            IN_VPC_FIX.into(),
        )),
        Functions::NotDeployed | Functions::OutsideVpc => {
            Ok("public, open to the functions outside a VPC".into())
        }
        // The private endpoint's DNS name answers only inside the cluster's VPC.
        Functions::InVpc(net) if e.private && cluster.vpc.as_deref() == Some(&net.vpc) => {
            private(net, cluster)
        }
        Functions::InVpc(net) => through_nat(e, net),
    }
}

/// The public endpoint's CIDRs let anyone in (none listed means EKS's default, all).
fn open_to_all(e: &Endpoint) -> bool {
    e.public_cidrs.is_empty() || e.public_cidrs.iter().any(|c| c == "0.0.0.0/0")
}

fn public_only(e: &Endpoint) -> String {
    if e.public {
        format!("public only, limited to {}", e.public_cidrs.join(", "))
    } else {
        "private only".into()
    }
}

/// The public endpoint from a VPC: through its NAT gateways, whose addresses must be
/// allowed when the endpoint is limited.
fn through_nat(e: &Endpoint, net: &InVpc) -> Reach {
    let fix = || {
        "enable the private endpoint (with the functions in the cluster's VPC), or allow the \
         NAT gateways' addresses on the public endpoint"
            .to_string()
    };
    if !e.public {
        return Err((
            format!(
                "private only, and the functions run in {}, not the cluster's VPC",
                net.vpc
            ),
            "deploy with FunctionSubnetIds in the cluster's VPC, or enable the public \
             endpoint"
                .into(),
        ));
    }
    if net.nat_addresses.is_empty() {
        return Err((
            format!(
                "public, and {} has no NAT gateway to reach it through",
                net.vpc
            ),
            fix(),
        ));
    }
    let open = open_to_all(e);
    let refused: Vec<&String> = net
        .nat_addresses
        .iter()
        .filter(|a| {
            !open
                && !e
                    .public_cidrs
                    .iter()
                    .any(|c| contains(c, &format!("{a}/32")))
        })
        .collect();
    if refused.is_empty() {
        return Ok(format!(
            "public, reached through the NAT of {} ({})",
            net.vpc,
            net.nat_addresses.join(", ")
        ));
    }
    Err((
        format!(
            "{}: the functions reach it through the NAT of {}, whose {} is not among them",
            public_only(e),
            net.vpc,
            refused
                .iter()
                .map(|a| a.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        fix(),
    ))
}

/// The private endpoint from the functions' groups: the rules on the endpoint's groups
/// that admit 443 must admit one of those groups, or hold every function subnet in their
/// blocks between them.
fn private(net: &InVpc, cluster: &ClusterNetwork) -> Reach {
    let admitting: Vec<&Inbound> = cluster
        .inbound
        .iter()
        .filter(|r| r.admits_https())
        .collect();
    let by_group = admitting
        .iter()
        .find(|r| r.from_groups.iter().any(|g| net.groups.contains(g)));
    let by_block = !net.subnet_cidrs.is_empty()
        && net.subnet_cidrs.iter().all(|s| {
            admitting
                .iter()
                .any(|r| r.from_cidrs.iter().any(|c| contains(c, s)))
        });
    if let Some(rule) = by_group {
        return Ok(format!(
            "private, from the functions' VPC: {} accepts 443 from them",
            rule.group
        ));
    }
    if by_block {
        return Ok("private, from the functions' VPC: their subnets are admitted on 443".into());
    }
    let target = cluster
        .groups
        .first()
        .cloned()
        .unwrap_or_else(|| "<cluster security group>".into());
    let source = net
        .groups
        .first()
        .cloned()
        .unwrap_or_else(|| "<FunctionSecurityGroupIds>".into());
    let groups = if cluster.groups.is_empty() {
        "the cluster security group".to_string()
    } else {
        cluster.groups.join(", ")
    };
    Err((
        format!(
            "private: no rule of {groups} accepts TCP 443 from the functions' groups ({}) or \
             subnets ({})",
            net.groups.join(", "),
            net.subnet_cidrs.join(", ")
        ),
        format!(
            "aws ec2 authorize-security-group-ingress --group-id {target} --protocol tcp \
             --port 443 --source-group {source}"
        ),
    ))
}

/// Whether IPv4 block `outer` holds block `inner` (`10.0.0.0/16` holds `10.0.1.0/24`);
/// anything unparsable holds nothing.
fn contains(outer: &str, inner: &str) -> bool {
    let (Some((o, on)), Some((i, inn))) = (block(outer), block(inner)) else {
        return false;
    };
    if on > inn {
        return false;
    }
    let mask = if on == 0 { 0 } else { u32::MAX << (32 - on) };
    o & mask == i & mask
}

fn block(cidr: &str) -> Option<(u32, u32)> {
    let (addr, len) = cidr.split_once('/')?;
    let len: u32 = len.parse().ok().filter(|l| *l <= 32)?;
    Some((u32::from(addr.parse::<Ipv4Addr>().ok()?), len))
}

#[cfg(test)]
mod tests;
