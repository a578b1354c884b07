//! `spec.providerID` of an EKS node: `aws:///<zone>/<instance-id>`, as the AWS cloud
//! provider sets it. It is how a Node is matched to the EC2 instance behind it.

/// The zone and instance id named by an AWS provider ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsProviderId {
    pub zone: String,
    pub instance_id: String,
}

/// The instance id a Node runs on, from its provider ID.
pub fn instance_of(node: &k8s_openapi::api::core::v1::Node) -> Option<String> {
    let id = node.spec.as_ref()?.provider_id.as_deref()?;
    parse_provider_id(id).map(|p| p.instance_id)
}

/// Parses `aws:///us-east-1a/i-0123456789abcdef0`. Returns `None` for anything else (other
/// clouds, Fargate's `aws:///us-east-1a/<hash>/fargate-ip-...`, a missing instance id),
/// because such a node is simply not one of ours.
pub fn parse_provider_id(provider_id: &str) -> Option<AwsProviderId> {
    let rest = provider_id.strip_prefix("aws://")?;
    // The documented form has an empty host (three slashes); the two-slash form some tools
    // write parses the same, so accept both.
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let mut parts = rest.split('/');
    let zone = parts.next()?;
    let instance_id = parts.next()?;
    if parts.next().is_some() || zone.is_empty() || !is_instance_id(instance_id) {
        return None;
    }
    Some(AwsProviderId {
        zone: zone.to_owned(),
        instance_id: instance_id.to_owned(),
    })
}

/// EC2 instance ids are `i-` followed by 8 or 17 lowercase hex digits.
fn is_instance_id(s: &str) -> bool {
    s.strip_prefix("i-").is_some_and(|hex| {
        matches!(hex.len(), 8 | 17)
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The provider ID an instance's node will carry, for matching in the other direction.
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_parse_to_zone_and_instance_or_nothing() {
        let ok = |zone: &str, id: &str| {
            Some(AwsProviderId {
                zone: zone.into(),
                instance_id: id.into(),
            })
        };
        let cases: &[(&str, Option<AwsProviderId>)] = &[
            (
                "aws:///us-east-1a/i-0123456789abcdef0",
                ok("us-east-1a", "i-0123456789abcdef0"),
            ),
            (
                "aws:///eu-west-1c/i-01234567",
                ok("eu-west-1c", "i-01234567"),
            ),
            (
                "aws://us-west-2b/i-0123456789abcdef0",
                ok("us-west-2b", "i-0123456789abcdef0"),
            ),
            ("aws:///us-east-1a/", None),
            ("aws:///us-east-1a", None),
            ("aws:////i-0123456789abcdef0", None),
            ("aws:///us-east-1a/i-0123456789ABCDEF0", None),
            ("aws:///us-east-1a/i-xyz", None),
            (
                "aws:///us-east-1a/a1b2c3/fargate-ip-10-0-0-1.ec2.internal",
                None,
            ),
            ("gce://project/zone/instance", None),
            ("kind://docker/kind/kind-worker", None),
            ("", None),
        ];
        for (input, want) in cases {
            assert_eq!(&parse_provider_id(input), want, "{input}");
        }
    }

    #[test]
    fn a_formatted_provider_id_parses_back() {
        let id = provider_id("ap-south-1b", "i-0fedcba9876543210");
        assert_eq!(
            parse_provider_id(&id),
            Some(AwsProviderId {
                zone: "ap-south-1b".into(),
                instance_id: "i-0fedcba9876543210".into()
            })
        );
    }
}
