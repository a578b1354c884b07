//! CreateFleet answered with errors, as EC2 answers an `instant` fleet that launched
//! nothing: HTTP 200 with one `errorSet` item per override, each naming the override
//! (type, subnet, zone), the lifecycle and the error code (API reference,
//! `CreateFleetError`). moto launches whatever it is asked, so the AWS front writes these
//! answers itself for the requests a test names; the element names are those of EC2's
//! service model (`CreateFleetResult`: `fleetId`, `errorSet`, `fleetInstanceSet`).

use std::collections::BTreeMap;

/// Which CreateFleet requests fail, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetFault {
    /// The request's `DefaultTargetCapacityType` this fault answers (`spot`,
    /// `on-demand`); `None` answers every request.
    pub capacity_type: Option<String>,
    /// Only overrides of these instance types fail (the others are left out of the
    /// answer, and the request then launches nothing); empty fails every override.
    pub instance_types: Vec<String>,
    pub code: String,
    pub message: String,
}

impl FleetFault {
    /// True when this fault answers the request with these form parameters: its
    /// capacity type matches and one of its overrides is of a failing type.
    pub fn answers(&self, params: &BTreeMap<String, String>) -> bool {
        let capacity_type = params
            .get("TargetCapacitySpecification.DefaultTargetCapacityType")
            .map(String::as_str);
        let type_matches =
            self.capacity_type.is_none() || self.capacity_type.as_deref() == capacity_type;
        type_matches
            && overrides(params)
                .iter()
                .any(|o| self.fails(&o.instance_type))
    }

    fn fails(&self, instance_type: &str) -> bool {
        self.instance_types.is_empty() || self.instance_types.iter().any(|t| t == instance_type)
    }
}

/// One override of a CreateFleet request, as its form parameters name it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Override {
    pub instance_type: String,
    pub subnet_id: String,
    /// Empty when the request names only the subnet.
    pub zone: String,
}

/// The overrides of the request's first launch template config (nodewright sends one), in
/// the request's order.
pub fn overrides(params: &BTreeMap<String, String>) -> Vec<Override> {
    let prefix = "LaunchTemplateConfigs.1.Overrides.";
    let mut by_index: BTreeMap<u32, Override> = BTreeMap::new();
    for (key, value) in params {
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        let Some((index, field)) = rest.split_once('.') else {
            continue;
        };
        let Ok(index) = index.parse::<u32>() else {
            continue;
        };
        let o = by_index.entry(index).or_default();
        match field {
            "InstanceType" => o.instance_type = value.clone(),
            "SubnetId" => o.subnet_id = value.clone(),
            "AvailabilityZone" => o.zone = value.clone(),
            _ => {}
        }
    }
    by_index.into_values().collect()
}

/// `s` as XML text.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// EC2's answer to the request: every failing override in `errorSet`, no instance.
pub fn answer_xml(params: &BTreeMap<String, String>, fault: &FleetFault) -> String {
    refusal_xml(params, |o| {
        fault
            .fails(&o.instance_type)
            .then(|| (fault.code.clone(), fault.message.clone()))
    })
}

/// EC2's answer to an `instant` fleet that launched nothing: an `errorSet` item for each
/// override `error` gives a (code, message) for, no instance.
pub fn refusal_xml(
    params: &BTreeMap<String, String>,
    error: impl Fn(&Override) -> Option<(String, String)>,
) -> String {
    let template = params
        .get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateId")
        .cloned()
        .unwrap_or_default();
    let version = params
        .get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version")
        .cloned()
        .unwrap_or_default();
    let lifecycle = params
        .get("TargetCapacitySpecification.DefaultTargetCapacityType")
        .cloned()
        .unwrap_or_else(|| "on-demand".into());
    let mut items = String::new();
    for o in overrides(params) {
        let Some((code, message)) = error(&o) else {
            continue;
        };
        items.push_str(&format!(
            "<item><launchTemplateAndOverrides><launchTemplateSpecification>\
             <launchTemplateId>{}</launchTemplateId><version>{}</version>\
             </launchTemplateSpecification><overrides><instanceType>{}</instanceType>\
             <subnetId>{}</subnetId><availabilityZone>{}</availabilityZone></overrides>\
             </launchTemplateAndOverrides><lifecycle>{}</lifecycle><errorCode>{}</errorCode>\
             <errorMessage>{}</errorMessage></item>",
            escape(&template),
            escape(&version),
            escape(&o.instance_type),
            escape(&o.subnet_id),
            escape(&o.zone),
            escape(&lifecycle),
            escape(&code),
            escape(&message),
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
         <requestId>00000000-0000-0000-0000-00000000f1ee</requestId>\
         <fleetId>fleet-00000000-0000-0000-0000-000000000000</fleetId>\
         <errorSet>{items}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(capacity_type: &str) -> BTreeMap<String, String> {
        [
            ("Action", "CreateFleet"),
            (
                "TargetCapacitySpecification.DefaultTargetCapacityType",
                capacity_type,
            ),
            (
                "LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateId",
                "lt-1",
            ),
            (
                "LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version",
                "$Latest",
            ),
            (
                "LaunchTemplateConfigs.1.Overrides.1.InstanceType",
                "c5.large",
            ),
            ("LaunchTemplateConfigs.1.Overrides.1.SubnetId", "subnet-a"),
            (
                "LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone",
                "us-east-1a",
            ),
            (
                "LaunchTemplateConfigs.1.Overrides.2.InstanceType",
                "m5.large",
            ),
            ("LaunchTemplateConfigs.1.Overrides.2.SubnetId", "subnet-b"),
            (
                "LaunchTemplateConfigs.1.Overrides.2.AvailabilityZone",
                "us-east-1b",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn fault(capacity_type: Option<&str>, types: &[&str]) -> FleetFault {
        FleetFault {
            capacity_type: capacity_type.map(str::to_string),
            instance_types: types.iter().map(|t| t.to_string()).collect(),
            code: "AuthFailure.ServiceLinkedRoleCreationNotPermitted".into(),
            message: "no <role>".into(),
        }
    }

    #[test]
    fn a_fault_answers_only_requests_of_its_capacity_type_and_types() {
        assert!(fault(Some("spot"), &[]).answers(&request("spot")));
        assert!(!fault(Some("spot"), &[]).answers(&request("on-demand")));
        assert!(fault(None, &[]).answers(&request("on-demand")));
        assert!(fault(None, &["m5.large"]).answers(&request("spot")));
        assert!(!fault(None, &["r5.large"]).answers(&request("spot")));
    }

    #[test]
    fn the_answer_names_each_failing_override_with_the_code_escaped_as_xml() {
        let xml = answer_xml(&request("spot"), &fault(None, &["m5.large"]));
        assert_eq!(xml.matches("<item>").count(), 1, "{xml}");
        assert!(xml.contains("<instanceType>m5.large</instanceType><subnetId>subnet-b</subnetId><availabilityZone>us-east-1b</availabilityZone>"), "{xml}");
        assert!(xml.contains("<lifecycle>spot</lifecycle><errorCode>AuthFailure.ServiceLinkedRoleCreationNotPermitted</errorCode><errorMessage>no &lt;role&gt;</errorMessage>"), "{xml}");
        assert!(xml.contains("<fleetInstanceSet/>"));
    }
}
