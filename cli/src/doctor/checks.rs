//! What `nodewright doctor` concludes from what it read: one pure judgement per check, each
//! a pass with what was found or a failure with why and the fix.

use nodewright::api::{NodePool, Operator, Problem, Severity};

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass(String),
    Fail { why: String, fix: String },
}

impl Check {
    pub fn pass(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            verdict: Verdict::Pass(detail.into()),
        }
    }

    pub fn fail(name: &'static str, why: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            verdict: Verdict::Fail {
                why: why.into(),
                fix: fix.into(),
            },
        }
    }

    pub fn failed(&self) -> bool {
        matches!(self.verdict, Verdict::Fail { .. })
    }
}

/// The EKS endpoint as DescribeCluster describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub public: bool,
    pub public_cidrs: Vec<String>,
    pub private: bool,
}

/// The cluster's authentication mode: access entries, which the stack creates, need the
/// EKS API among its sources.
pub fn authentication(cluster: &str, mode: Option<&str>) -> Check {
    const NAME: &str = "authentication mode";
    let fix = format!(
        "aws eks update-cluster-config --name {cluster} \
         --access-config authenticationMode=API_AND_CONFIG_MAP"
    );
    match mode {
        Some(m @ ("API" | "API_AND_CONFIG_MAP")) => Check::pass(NAME, m),
        Some(m) => Check::fail(
            NAME,
            format!("{m}: the access entries the stack creates are not read"),
            fix,
        ),
        None => Check::fail(NAME, "DescribeCluster did not say (accessConfig)", fix),
    }
}

/// Each function's group, `<prefix>-<function>`, mapped by some access entry (`mapped`:
/// every entry's groups).
pub fn access_entries(mapped: &[String], cluster_admin: bool, prefix: &str) -> Check {
    const NAME: &str = "access entries";
    if cluster_admin {
        return Check::pass(
            NAME,
            "not checked: with KubernetesAccess=cluster-admin the entries name no group",
        );
    }
    let missing: Vec<String> = ["provisioner", "interruption", "sweeper"]
        .iter()
        .map(|f| format!("{prefix}-{f}"))
        .filter(|g| !mapped.contains(g))
        .collect();
    if missing.is_empty() {
        return Check::pass(NAME, "each function's role is mapped to its group");
    }
    Check::fail(
        NAME,
        format!("no access entry maps a role to {}", missing.join(", ")),
        "deploy the stack (make deploy): it creates one access entry per function",
    )
}

/// The configuration the functions would read: its errors fail the check, each naming its
/// file, document and field; warnings are counted.
pub fn configuration(source: &str, problems: &[Problem]) -> Check {
    const NAME: &str = "configuration";
    let errors: Vec<&Problem> = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .collect();
    let warnings = problems.len() - errors.len();
    if errors.is_empty() {
        return Check::pass(
            NAME,
            format!("{source}, valid ({warnings} warnings: `nodewright validate` lists them)"),
        );
    }
    let listed: Vec<String> = errors.iter().take(5).map(|p| p.to_string()).collect();
    let more = errors.len().saturating_sub(listed.len());
    let tail = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    Check::fail(
        NAME,
        format!("{source}: {}{tail}", listed.join("; ")),
        "correct the fields named (check a file first with `nodewright validate -f FILE`)",
    )
}

/// Whether any pool may launch spot capacity (Karpenter's default without a
/// `karpenter.sh/capacity-type` requirement is on-demand).
pub fn wants_spot(pools: &[NodePool]) -> bool {
    pools.iter().any(|p| {
        p.spec
            .template
            .spec
            .requirements
            .iter()
            .filter(|r| r.key == "karpenter.sh/capacity-type")
            .any(|r| match r.operator {
                Operator::In => r.values.iter().any(|v| v == "spot"),
                Operator::NotIn => !r.values.iter().any(|v| v == "spot"),
                Operator::Exists => true,
                _ => false,
            })
    })
}

/// What an IAM lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Yes,
    No,
    /// The lookup itself failed (permissions, network): not a verdict on the thing.
    Unknown(String),
}

pub fn spot_role(found: &Found) -> Check {
    const NAME: &str = "spot service-linked role";
    match found {
        Found::Yes => Check::pass(NAME, "AWSServiceRoleForEC2Spot exists"),
        Found::No => Check::fail(
            NAME,
            "AWSServiceRoleForEC2Spot is missing and the functions' roles may not create it, \
             so every spot launch fails",
            "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com",
        ),
        Found::Unknown(e) => Check::fail(
            NAME,
            format!("could not look: {e}"),
            "run doctor with iam:GetRole",
        ),
    }
}

/// The node role and its instance profile, as the stack creates them.
pub fn node_role(role: &str, role_found: &Found, profile: &str, holds_role: &Found) -> Check {
    const NAME: &str = "node role";
    match (role_found, holds_role) {
        (Found::Yes, Found::Yes) => {
            Check::pass(NAME, format!("{role}, in instance profile {profile}"))
        }
        (Found::No, _) => Check::fail(
            NAME,
            format!("role {role} does not exist"),
            "deploy the stack (make deploy): it creates the node role and its instance profile",
        ),
        (_, Found::No) => Check::fail(
            NAME,
            format!("instance profile {profile} is missing or does not hold {role}"),
            format!(
                "aws iam add-role-to-instance-profile --instance-profile-name {profile} \
                 --role-name {role}, or deploy the stack again"
            ),
        ),
        (Found::Unknown(e), _) | (_, Found::Unknown(e)) => Check::fail(
            NAME,
            format!("could not look: {e}"),
            "run doctor with iam:GetRole and iam:GetInstanceProfile",
        ),
    }
}

/// An EC2NodeClass's selectors against what EC2 found for them.
pub fn discovery(
    class: &str,
    subnets: Result<usize, String>,
    groups: Result<usize, String>,
) -> Check {
    const NAME: &str = "subnet and security group discovery";
    match (subnets, groups) {
        (Ok(s), Ok(g)) if s > 0 && g > 0 => Check::pass(
            NAME,
            format!("EC2NodeClass {class}: {s} subnets, {g} security groups"),
        ),
        (Ok(s), Ok(g)) => Check::fail(
            NAME,
            format!(
                "EC2NodeClass {class}: its selectors match {s} subnets and {g} security groups"
            ),
            "tag the subnets and the node security group as the class's subnetSelectorTerms and \
             securityGroupSelectorTerms ask (karpenter.sh/discovery: <cluster> in the examples)",
        ),
        (Err(e), _) | (_, Err(e)) => Check::fail(
            NAME,
            format!("EC2NodeClass {class}: EC2 could not be asked: {e}"),
            "run doctor with ec2:DescribeSubnets and ec2:DescribeSecurityGroups",
        ),
    }
}

/// The objects `nodewright rbac --group-prefix <prefix>` creates, by `kind/name`, and
/// which are missing or short of what it grants.
pub fn rbac(missing: &[String], cluster_admin: bool, prefix: &str) -> Check {
    const NAME: &str = "Kubernetes RBAC";
    if cluster_admin {
        return Check::pass(
            NAME,
            "not needed: the stack grants cluster-admin (KubernetesAccess=cluster-admin)",
        );
    }
    if missing.is_empty() {
        return Check::pass(
            NAME,
            "each function's roles, bindings, state ConfigMap and Leases are in place",
        );
    }
    let flag = if prefix == crate::rbac::DEFAULT_GROUP_PREFIX {
        String::new()
    } else {
        format!(" --group-prefix {prefix}")
    };
    Check::fail(
        NAME,
        format!("missing: {}", missing.join(", ")),
        format!("nodewright rbac{flag} | kubectl apply -f -"),
    )
}

/// Karpenter's instances of the cluster that are still running, as doctor counts them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KarpenterFleet {
    /// With the tags adoption needs (`takeover::karpenters`).
    pub adoptable: usize,
    /// Its NodePool tag and `kubernetes.io/cluster/<cluster>=owned`, without the rest
    /// (launched before Karpenter v1 wrote `eks:eks-cluster-name`).
    pub not_adoptable: Vec<String>,
}

/// Whether Karpenter is out of the way: its controller not running (two autoscalers would
/// launch for the same pods, and a takeover adopts nothing meanwhile), and every instance it
/// launched one that `TakeOverFromKarpenter` can adopt.
pub fn karpenter(
    running: &Result<Option<String>, String>,
    fleet: &Result<KarpenterFleet, String>,
) -> Check {
    const NAME: &str = "Karpenter";
    match (running, fleet) {
        (Err(e), _) | (_, Err(e)) => Check::fail(
            NAME,
            format!("could not look: {e}"),
            "run doctor with get on leases and ec2:DescribeInstances",
        ),
        (Ok(Some(why)), _) => Check::fail(
            NAME,
            why.clone(),
            "once every NodeClaim is Ready, kubectl -n <its namespace> scale deployment \
             karpenter --replicas=0 (docs/migrate-from-karpenter.md)",
        ),
        (Ok(None), Ok(f)) if !f.not_adoptable.is_empty() => Check::fail(
            NAME,
            format!(
                "{} of its instances lack eks:eks-cluster-name (launched before Karpenter v1) \
                 and cannot be adopted: {}",
                f.not_adoptable.len(),
                f.not_adoptable.join(", ")
            ),
            "replace them with Karpenter v1 before switching (drift or kubectl delete \
             nodeclaim), or drain them and terminate their instances",
        ),
        (Ok(None), Ok(f)) => Check::pass(
            NAME,
            format!(
                "not running; {} of its instances to adopt with TakeOverFromKarpenter=true",
                f.adoptable
            ),
        ),
    }
}

#[cfg(test)]
mod tests;
