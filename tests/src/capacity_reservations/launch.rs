//! Launching into a reservation: which template targets which reservation, whether a
//! CreateFleet from it may launch, and how DescribeInstances shows an instance in one
//! (see the parent module for which codes are EC2's and which are guesses).

use std::collections::BTreeMap;

use super::{Reservation, ReservationKind};
use crate::fleet_faults::{Override, escape, overrides, refusal_xml};

/// EC2's message for `ReservationCapacityExceeded`, as a RunInstances into a full
/// reservation got it.
const EXCEEDED: &str = "The requested reservation does not have sufficient compatible and available capacity for this request.";
/// EC2's message for a capacity block launched without its market type (RunInstances).
const WRONG_MARKET: &str = "The market type (purchasing) option is not valid. Choose a different market type and try again";

const DATA: &str = "LaunchTemplateData.CapacityReservationSpecification.";

/// The reservation a launch template's data targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub reservation: String,
    /// `InstanceMarketOptions.MarketType=capacity-block`, which a capacity block requires.
    pub capacity_block_market: bool,
}

/// What a CreateLaunchTemplate request's data targets: `None` when it names no reservation
/// or prefers `none`.
pub(super) fn target_of(params: &BTreeMap<String, String>) -> Option<Target> {
    let preference = params.get(&format!("{DATA}CapacityReservationPreference"));
    if preference.is_some_and(|p| p == "none") {
        return None;
    }
    let reservation = params
        .get(&format!(
            "{DATA}CapacityReservationTarget.CapacityReservationId"
        ))?
        .clone();
    let market = params.get("LaunchTemplateData.InstanceMarketOptions.MarketType");
    Some(Target {
        reservation,
        capacity_block_market: market.is_some_and(|m| m == "capacity-block"),
    })
}

/// The template id moto's CreateLaunchTemplate answer names.
pub(super) fn template_id_of(answer: &str) -> Option<String> {
    let (open, close) = ("<launchTemplateId>", "</launchTemplateId>");
    let start = answer.find(open)? + open.len();
    let len = answer[start..].find(close)?;
    Some(answer[start..start + len].to_string())
}

/// The template (id, else name) a CreateFleet request launches from.
pub(super) fn fleet_template(params: &BTreeMap<String, String>) -> Option<String> {
    let spec = "LaunchTemplateConfigs.1.LaunchTemplateSpecification.";
    params
        .get(&format!("{spec}LaunchTemplateId"))
        .or_else(|| params.get(&format!("{spec}LaunchTemplateName")))
        .cloned()
}

/// Whether a CreateFleet into a reservation goes on to moto.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// Forward it; it takes this many slots.
    Launch(u32),
    /// Answer this `instant` fleet answer that launched nothing.
    Refuse(String),
}

/// What the request asks of the reservation.
struct Ask<'a> {
    capacity_type: &'a str,
    slots: u32,
}

/// A CreateFleet launching from a template that targets `reservation` (`None`: unknown):
/// launched when its first override fits (moto launches the first), else refused with
/// each override's error.
pub(super) fn decide(
    target: &Target,
    reservation: Option<&Reservation>,
    params: &BTreeMap<String, String>,
) -> Decision {
    let ask = Ask {
        capacity_type: params
            .get("TargetCapacitySpecification.DefaultTargetCapacityType")
            .map_or("on-demand", String::as_str),
        slots: params
            .get("TargetCapacitySpecification.TotalTargetCapacity")
            .and_then(|n| n.parse().ok())
            .unwrap_or(1),
    };
    let error = |o: &Override| error_for(target, reservation, &ask, o);
    match overrides(params).first() {
        Some(first) if error(first).is_some() => Decision::Refuse(refusal_xml(params, error)),
        _ => Decision::Launch(ask.slots),
    }
}

/// EC2's (code, message) for launching `o` into the reservation, `None` when it fits.
fn error_for(
    target: &Target,
    reservation: Option<&Reservation>,
    ask: &Ask,
    o: &Override,
) -> Option<(String, String)> {
    let error = |code: &str, message: String| Some((code.to_string(), message));
    let Some(r) = reservation else {
        let message = format!(
            "The Capacity Reservation ID '{}' does not exist.",
            target.reservation
        );
        return error("InvalidCapacityReservationId.NotFound", message);
    };
    if r.state != "active" {
        let message = format!(
            "The Capacity Reservation {} is {}, not active.",
            r.id, r.state
        );
        return error("InvalidLaunchTargets", message);
    }
    let block = r.kind == ReservationKind::CapacityBlock;
    let block_launch = ask.capacity_type == "capacity-block" || target.capacity_block_market;
    let full_block_launch = ask.capacity_type == "capacity-block" && target.capacity_block_market;
    if (block && !full_block_launch) || (!block && block_launch) {
        return error("InvalidParameterValue", WRONG_MARKET.to_string());
    }
    let zone_differs = !o.zone.is_empty() && o.zone != r.zone;
    if o.instance_type != r.instance_type || zone_differs {
        let message = format!(
            "The instance type {} in {} does not match Capacity Reservation {} ({} in {}).",
            o.instance_type, o.zone, r.id, r.instance_type, r.zone
        );
        return error("InvalidParameterCombination", message);
    }
    if r.available < ask.slots {
        return error("ReservationCapacityExceeded", EXCEEDED.to_string());
    }
    None
}

/// `xml` (a DescribeInstances answer) with instance `id`'s item showing it runs in
/// `reservation`, as EC2 shows an instance launched into one.
pub(super) fn show_reservation(
    xml: &str,
    id: &str,
    reservation: &str,
    kind: ReservationKind,
) -> String {
    let element = format!("<instanceId>{}</instanceId>", escape(id));
    let Some(at) = xml.find(&element).map(|at| at + element.len()) else {
        return xml.to_string();
    };
    let cr = escape(reservation);
    let lifecycle = match kind {
        ReservationKind::CapacityBlock => "<instanceLifecycle>capacity-block</instanceLifecycle>",
        ReservationKind::Default => "",
    };
    let shown = format!(
        "<capacityReservationId>{cr}</capacityReservationId><capacityReservationSpecification>\
         <capacityReservationPreference>capacity-reservations-only</capacityReservationPreference>\
         <capacityReservationTarget><capacityReservationId>{cr}</capacityReservationId>\
         </capacityReservationTarget></capacityReservationSpecification>{lifecycle}"
    );
    format!("{}{shown}{}", &xml[..at], &xml[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's form parameters.
    type Pairs<'a> = Vec<(&'a str, &'a str)>;
    /// (case, template target, reservation, capacity type, overrides (type, zone), outcome).
    type Row<'a> = (
        &'a str,
        Target,
        Option<&'a Reservation>,
        &'a str,
        &'a [(&'a str, &'a str)],
        &'a str,
    );

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn fleet(capacity_type: &str, overrides: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut p = params(&[
            (
                "TargetCapacitySpecification.DefaultTargetCapacityType",
                capacity_type,
            ),
            ("TargetCapacitySpecification.TotalTargetCapacity", "1"),
            (
                "LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateId",
                "lt-1",
            ),
            (
                "LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version",
                "$Latest",
            ),
        ]);
        for (n, (instance_type, zone)) in overrides.iter().enumerate() {
            let key = |field: &str| format!("LaunchTemplateConfigs.1.Overrides.{}.{field}", n + 1);
            p.insert(key("InstanceType"), instance_type.to_string());
            p.insert(key("SubnetId"), format!("subnet-{zone}"));
            p.insert(key("AvailabilityZone"), zone.to_string());
        }
        p
    }

    fn target(block_market: bool) -> Target {
        Target {
            reservation: "cr-0aa".into(),
            capacity_block_market: block_market,
        }
    }

    #[test]
    fn a_template_targets_the_reservation_it_names_unless_it_prefers_none() {
        let spec = "LaunchTemplateData.CapacityReservationSpecification.";
        let id = format!("{spec}CapacityReservationTarget.CapacityReservationId");
        let preference = format!("{spec}CapacityReservationPreference");
        let market = "LaunchTemplateData.InstanceMarketOptions.MarketType";
        let only = "capacity-reservations-only";
        let cases: Vec<(Pairs, Option<Target>)> = vec![
            (
                vec![(&preference, only), (&id, "cr-0aa")],
                Some(target(false)),
            ),
            (
                vec![
                    (&preference, only),
                    (&id, "cr-0aa"),
                    (market, "capacity-block"),
                ],
                Some(target(true)),
            ),
            (vec![(&preference, "none"), (&id, "cr-0aa")], None),
            (vec![(&preference, "open")], None),
            (vec![("LaunchTemplateData.ImageId", "ami-1")], None),
        ];
        for (pairs, want) in cases {
            assert_eq!(target_of(&params(&pairs)), want, "{pairs:?}");
        }
    }

    #[test]
    fn the_template_id_is_read_from_moto_s_answer_and_the_fleet_s_from_its_request() {
        let answer = "<CreateLaunchTemplateResponse><launchTemplate><launchTemplateId>lt-0f\
                      </launchTemplateId><launchTemplateName>x</launchTemplateName>";
        assert_eq!(template_id_of(answer).as_deref(), Some("lt-0f"));
        assert_eq!(template_id_of("<Response/>"), None);
        assert_eq!(
            fleet_template(&fleet("on-demand", &[])).as_deref(),
            Some("lt-1")
        );
        let by_name = params(&[(
            "LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName",
            "nodes",
        )]);
        assert_eq!(fleet_template(&by_name).as_deref(), Some("nodes"));
    }

    /// The one error code in a refusal, or "launch".
    fn outcome(decision: Decision) -> String {
        match decision {
            Decision::Launch(n) => format!("launch {n}"),
            Decision::Refuse(xml) => xml
                .split("<errorCode>")
                .skip(1)
                .filter_map(|s| s.split('<').next())
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    #[test]
    fn a_fleet_launches_into_its_reservation_only_when_it_fits_in_every_way() {
        let odcr = Reservation::open("cr-0aa", "m5.large", "us-east-1a", 2);
        let full = Reservation {
            available: 0,
            ..odcr.clone()
        };
        let expired = Reservation {
            state: "expired".into(),
            ..odcr.clone()
        };
        let end = "2030-01-01T00:00:00Z".parse().unwrap();
        let block = Reservation::capacity_block("cr-0aa", "m5.large", "us-east-1a", 1, end);
        let fits = [("m5.large", "us-east-1a")];
        let later_misfit = [fits[0], ("c5.large", "us-east-1a")];
        let first_misfit = [("c5.large", "us-east-1a"), fits[0]];
        let cases: Vec<Row> = vec![
            (
                "fits",
                target(false),
                Some(&odcr),
                "on-demand",
                &fits,
                "launch 1",
            ),
            (
                "unknown",
                target(false),
                None,
                "on-demand",
                &fits,
                "InvalidCapacityReservationId.NotFound",
            ),
            (
                "expired",
                target(false),
                Some(&expired),
                "on-demand",
                &fits,
                "InvalidLaunchTargets",
            ),
            (
                "full",
                target(false),
                Some(&full),
                "on-demand",
                &fits,
                "ReservationCapacityExceeded",
            ),
            (
                "other type",
                target(false),
                Some(&odcr),
                "on-demand",
                &[("c5.large", "us-east-1a")],
                "InvalidParameterCombination",
            ),
            (
                "other zone",
                target(false),
                Some(&odcr),
                "on-demand",
                &[("m5.large", "us-east-1b")],
                "InvalidParameterCombination",
            ),
            (
                "later misfit",
                target(false),
                Some(&odcr),
                "on-demand",
                &later_misfit,
                "launch 1",
            ),
            (
                "first misfit",
                target(false),
                Some(&full),
                "on-demand",
                &first_misfit,
                "InvalidParameterCombination,ReservationCapacityExceeded",
            ),
            (
                "block",
                target(true),
                Some(&block),
                "capacity-block",
                &fits,
                "launch 1",
            ),
            (
                "block as on-demand",
                target(true),
                Some(&block),
                "on-demand",
                &fits,
                "InvalidParameterValue",
            ),
            (
                "block without market",
                target(false),
                Some(&block),
                "capacity-block",
                &fits,
                "InvalidParameterValue",
            ),
            (
                "odcr as block",
                target(false),
                Some(&odcr),
                "capacity-block",
                &fits,
                "InvalidParameterValue",
            ),
        ];
        for (name, target, reservation, capacity_type, overrides, want) in cases {
            let got = outcome(decide(
                &target,
                reservation,
                &fleet(capacity_type, overrides),
            ));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn a_refusal_names_each_override_with_its_own_error_and_launches_nothing() {
        let full = Reservation {
            available: 0,
            ..Reservation::open("cr-0aa", "m5.large", "us-east-1a", 1)
        };
        let request = fleet("on-demand", &[("m5.large", "us-east-1a")]);
        let Decision::Refuse(xml) = decide(&target(false), Some(&full), &request) else {
            panic!("a full reservation refuses");
        };
        assert!(
            xml.contains("<launchTemplateId>lt-1</launchTemplateId><version>$Latest</version>"),
            "{xml}"
        );
        assert!(xml.contains("<instanceType>m5.large</instanceType><subnetId>subnet-us-east-1a</subnetId><availabilityZone>us-east-1a</availabilityZone>"), "{xml}");
        assert!(
            xml.contains(&format!("<errorMessage>{EXCEEDED}</errorMessage>")),
            "{xml}"
        );
        assert!(xml.contains("<fleetInstanceSet/>"), "{xml}");
    }

    #[test]
    fn describe_instances_shows_the_reservation_in_that_instance_s_item_only() {
        let xml = "<instancesSet><item><instanceId>i-1</instanceId><instanceType>m5.large\
                   </instanceType></item><item><instanceId>i-2</instanceId></item></instancesSet>";
        let out = show_reservation(xml, "i-2", "cr-0aa", ReservationKind::Default);
        let (first, second) = out.split_once("<instanceId>i-2</instanceId>").unwrap();
        assert!(!first.contains("capacityReservation"), "{out}");
        assert!(second.starts_with("<capacityReservationId>cr-0aa</capacityReservationId><capacityReservationSpecification><capacityReservationPreference>capacity-reservations-only</capacityReservationPreference><capacityReservationTarget><capacityReservationId>cr-0aa</capacityReservationId></capacityReservationTarget></capacityReservationSpecification></item>"), "{out}");
        let block = show_reservation(xml, "i-1", "cr-0bb", ReservationKind::CapacityBlock);
        assert!(block.contains("</capacityReservationSpecification><instanceLifecycle>capacity-block</instanceLifecycle><instanceType>"), "{block}");
        assert_eq!(
            show_reservation(xml, "i-3", "cr-0aa", ReservationKind::Default),
            xml
        );
    }
}
