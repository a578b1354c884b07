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
    InVpc {
        groups: Vec<String>,
        /// The CIDR blocks of the functions' subnets.
        subnet_cidrs: Vec<String>,
    },
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

/// Judges the endpoint against where the functions run. `cluster_groups` names the groups
/// of the endpoint's interfaces (the cluster security group first); `inbound` their rules.
pub fn judge(
    e: &Endpoint,
    functions: &Functions,
    cluster_groups: &[String],
    inbound: &[Inbound],
) -> Reach {
    let open = e.public_cidrs.is_empty() || e.public_cidrs.iter().any(|c| c == "0.0.0.0/0");
    let public = e.public && open;
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
        Functions::InVpc { .. } if !e.private => Ok(format!(
            "{}: the functions in the VPC reach it through its NAT, whose addresses must be \
             allowed",
            if open {
                "public".to_string()
            } else {
                public_only(e)
            }
        )),
        Functions::InVpc {
            groups,
            subnet_cidrs,
        } => in_vpc(groups, subnet_cidrs, cluster_groups, inbound),
    }
}

fn public_only(e: &Endpoint) -> String {
    if e.public {
        format!("public only, limited to {}", e.public_cidrs.join(", "))
    } else {
        "private only".into()
    }
}

/// The private endpoint from the functions' groups: some rule on the endpoint's groups
/// must admit 443 from one of those groups, or from a block holding every function subnet.
fn in_vpc(
    groups: &[String],
    subnet_cidrs: &[String],
    cluster_groups: &[String],
    inbound: &[Inbound],
) -> Reach {
    let admitting = inbound.iter().filter(|r| r.admits_https()).find(|r| {
        r.from_groups.iter().any(|g| groups.contains(g))
            || (!subnet_cidrs.is_empty()
                && subnet_cidrs
                    .iter()
                    .all(|s| r.from_cidrs.iter().any(|c| contains(c, s))))
    });
    if let Some(rule) = admitting {
        return Ok(format!(
            "private, from the functions' VPC: {} accepts 443 from them",
            rule.group
        ));
    }
    let target = cluster_groups
        .first()
        .cloned()
        .unwrap_or_else(|| "<cluster security group>".into());
    let source = groups
        .first()
        .cloned()
        .unwrap_or_else(|| "<FunctionSecurityGroupIds>".into());
    Err((
        format!(
            "private: no rule of {} accepts TCP 443 from the functions' groups ({}) or subnets \
             ({})",
            if cluster_groups.is_empty() {
                "the cluster security group".to_string()
            } else {
                cluster_groups.join(", ")
            },
            groups.join(", "),
            subnet_cidrs.join(", ")
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
