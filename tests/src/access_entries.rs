//! The deployed stack's EKS access entries as EKS would hold them. moto records
//! `AWS::EKS::AccessEntry` without modelling it, so the world reads each one from the
//! deployed template: its principal (a role of the stack), its Kubernetes groups and
//! whether it carries `AmazonEKSClusterAdminPolicy`, with `Fn::If` decided by the
//! template's conditions on the deployed parameters.

use anyhow::Context as _;
use serde_json::Value;

use crate::kube_sim::eks_auth::AccessEntry;
use crate::moto::stack::Deployed;

const ADMIN_POLICY: &str = "AmazonEKSClusterAdminPolicy";

/// Every access entry of `deployed` whose principal is one of the stack's functions' roles.
pub fn of_functions(deployed: &Deployed) -> anyhow::Result<Vec<AccessEntry>> {
    let template = deployed
        .template
        .as_ref()
        .context("the deployed stack carries no template")?;
    let facts = Facts { deployed, template };
    let resources = template["Resources"]
        .as_object()
        .context("the deployed template has no Resources")?;
    let mut entries = Vec::new();
    for (id, resource) in resources {
        if resource["Type"] != "AWS::EKS::AccessEntry" {
            continue;
        }
        let properties = &resource["Properties"];
        let Some(principal_arn) = facts.function_role(&properties["PrincipalArn"]) else {
            continue;
        };
        let groups = facts
            .value(&properties["KubernetesGroups"])
            .with_context(|| format!("{id}.KubernetesGroups"))?;
        let policies = facts
            .value(&properties["AccessPolicies"])
            .with_context(|| format!("{id}.AccessPolicies"))?;
        entries.push(AccessEntry {
            principal_arn,
            groups: strings(groups.as_ref()),
            cluster_admin: policies
                .iter()
                .flat_map(|p| p.as_array())
                .flatten()
                .any(|p| {
                    p["PolicyArn"].to_string().contains(ADMIN_POLICY)
                        && p["AccessScope"]["Type"] == "cluster"
                }),
        });
    }
    Ok(entries)
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(str::to_string))
        .collect()
}

struct Facts<'a> {
    deployed: &'a Deployed,
    template: &'a Value,
}

impl Facts<'_> {
    /// The ARN of the function role `!GetAtt <Role>.Arn` names, as Lambda holds it.
    fn function_role(&self, principal: &Value) -> Option<String> {
        let role = principal["Fn::GetAtt"].get(0)?;
        self.template["Resources"]
            .as_object()?
            .iter()
            .filter(|(_, r)| {
                r["Type"] == "AWS::Serverless::Function" || r["Type"] == "AWS::Lambda::Function"
            })
            .find(|(_, r)| r["Properties"]["Role"]["Fn::GetAtt"].get(0) == Some(role))
            .and_then(|(id, _)| self.deployed.functions.get(id))
            .map(|f| f.role.clone())
    }

    /// `value` with `Fn::If` decided; `None` for `AWS::NoValue`.
    fn value(&self, value: &Value) -> anyhow::Result<Option<Value>> {
        if value["Ref"] == "AWS::NoValue" || value.is_null() {
            return Ok(None);
        }
        if let Some([condition, yes, no]) = value["Fn::If"].as_array().map(Vec::as_slice) {
            let name = condition.as_str().context("Fn::If names no condition")?;
            let chosen = if self.condition(name)? { yes } else { no };
            return self.value(chosen);
        }
        Ok(Some(value.clone()))
    }

    /// A condition of the form `Fn::Equals [Ref <parameter>, <text>]` (either order).
    fn condition(&self, name: &str) -> anyhow::Result<bool> {
        let equals = self.template["Conditions"][name]["Fn::Equals"]
            .as_array()
            .with_context(|| format!("condition {name} is not Fn::Equals"))?;
        let side = |v: &Value| -> anyhow::Result<String> {
            match v["Ref"].as_str() {
                Some(parameter) => self.parameter(parameter),
                None => v
                    .as_str()
                    .map(str::to_string)
                    .context("a side that is not text"),
            }
        };
        match equals.as_slice() {
            [a, b] => Ok(side(a)? == side(b)?),
            _ => anyhow::bail!("condition {name}: Fn::Equals takes two values"),
        }
    }

    fn parameter(&self, name: &str) -> anyhow::Result<String> {
        self.deployed
            .parameters
            .get(name)
            .cloned()
            .or_else(|| {
                self.template["Parameters"][name]["Default"]
                    .as_str()
                    .map(str::to_string)
            })
            .with_context(|| format!("parameter {name} has no value and no default"))
    }
}
