//! What doctor reads of the deployed stack (its parameters: where it runs the functions,
//! the default NodePool it builds) and the inbound rules of the endpoint's security groups
//! ([`super::reach`]).

use std::collections::BTreeMap;

use aws_sdk_cloudformation::error::ProvideErrorMetadata as _;

use super::reach::{Functions, InVpc, Inbound};

/// The deployed stack's parameters, or `None` before the deploy (no such stack).
pub async fn stack_parameters(
    aws: &aws_config::SdkConfig,
    stack: &str,
) -> Result<Option<BTreeMap<String, String>>, String> {
    let answer = aws_sdk_cloudformation::Client::new(aws)
        .describe_stacks()
        .stack_name(stack)
        .send()
        .await;
    let stacks = match answer {
        Ok(a) => a.stacks.unwrap_or_default(),
        // CloudFormation's answer for a stack that does not exist (its code also covers
        // other invalid requests, hence the message).
        Err(e)
            if e.code() == Some("ValidationError")
                && e.message().is_some_and(|m| m.contains("does not exist")) =>
        {
            return Ok(None);
        }
        Err(e) => {
            return Err(format!(
                "DescribeStacks {stack}: {}",
                nodewright::error_chain(&e)
            ));
        }
    };
    Ok(stacks.first().map(|found| {
        found
            .parameters()
            .iter()
            .filter_map(|p| {
                Some((
                    p.parameter_key()?.to_string(),
                    p.parameter_value().unwrap_or_default().to_string(),
                ))
            })
            .collect()
    }))
}

/// A comma-delimited parameter's values.
pub fn list(parameters: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    nodewright::kube::comma_separated(parameters.get(key).map(String::as_str).unwrap_or_default())
}

/// Where the stack runs the functions: its `FunctionSubnetIds` (their VPC and CIDR
/// blocks), `FunctionSecurityGroupIds`, and the public addresses of that VPC's NAT
/// gateways, unless that VPC is `private_in` (the cluster's, with the private endpoint
/// on): the functions then reach the endpoint without them.
pub async fn functions(
    aws: &aws_config::SdkConfig,
    parameters: Option<&BTreeMap<String, String>>,
    private_in: Option<&str>,
) -> Result<Functions, String> {
    let Some(parameters) = parameters else {
        return Ok(Functions::NotDeployed);
    };
    let subnets = list(parameters, "FunctionSubnetIds");
    if subnets.is_empty() {
        return Ok(Functions::OutsideVpc);
    }
    let ec2 = aws_sdk_ec2::Client::new(aws);
    let described = ec2
        .describe_subnets()
        .set_subnet_ids(Some(subnets.clone()))
        .send()
        .await
        .map_err(|e| failed("DescribeSubnets", &subnets.join(","), &e))?;
    let vpc = described
        .subnets()
        .iter()
        .find_map(|s| s.vpc_id())
        .unwrap_or_default()
        .to_string();
    let nat_addresses = match private_in {
        Some(cluster_vpc) if cluster_vpc == vpc => Vec::new(),
        _ => nat_addresses(&ec2, &vpc).await?,
    };
    Ok(Functions::InVpc(InVpc {
        nat_addresses,
        vpc,
        groups: list(parameters, "FunctionSecurityGroupIds"),
        subnet_cidrs: described
            .subnets()
            .iter()
            .filter_map(|s| s.cidr_block().map(str::to_string))
            .collect(),
    }))
}

/// The public addresses of `vpc`'s available NAT gateways.
async fn nat_addresses(ec2: &aws_sdk_ec2::Client, vpc: &str) -> Result<Vec<String>, String> {
    let filter = |name: &str, value: &str| {
        aws_sdk_ec2::types::Filter::builder()
            .name(name)
            .values(value)
            .build()
    };
    let gateways = ec2
        .describe_nat_gateways()
        .filter(filter("vpc-id", vpc))
        .filter(filter("state", "available"))
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| failed("DescribeNatGateways", vpc, &e))?;
    Ok(gateways
        .iter()
        .flat_map(|g| g.nat_gateway_addresses())
        .filter_map(|a| a.public_ip().map(str::to_string))
        .collect())
}

fn failed(call: &str, of: &str, e: &(dyn std::error::Error + 'static)) -> String {
    format!("{call} {of}: {}", nodewright::error_chain(e))
}

/// The inbound rules of `groups` (the endpoint's security groups).
pub async fn inbound(
    aws: &aws_config::SdkConfig,
    groups: &[String],
) -> Result<Vec<Inbound>, String> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let described = aws_sdk_ec2::Client::new(aws)
        .describe_security_groups()
        .set_group_ids(Some(groups.to_vec()))
        .send()
        .await
        .map_err(|e| {
            format!(
                "DescribeSecurityGroups {}: {}",
                groups.join(","),
                nodewright::error_chain(&e)
            )
        })?;
    let mut rules = Vec::new();
    for group in described.security_groups() {
        for p in group.ip_permissions() {
            rules.push(Inbound {
                group: group.group_id().unwrap_or_default().to_string(),
                protocol: p.ip_protocol().unwrap_or("-1").to_string(),
                ports: p.from_port().zip(p.to_port()),
                from_groups: p
                    .user_id_group_pairs()
                    .iter()
                    .filter_map(|g| g.group_id().map(str::to_string))
                    .collect(),
                from_cidrs: p
                    .ip_ranges()
                    .iter()
                    .filter_map(|r| r.cidr_ip().map(str::to_string))
                    .collect(),
            });
        }
    }
    Ok(rules)
}
