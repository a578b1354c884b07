//! EC2 capacity reservations (on-demand capacity reservations and capacity blocks for ML),
//! which moto 5.2.5 lacks, emulated in the AWS front for the reservations a test sets
//! ([`crate::aws_front::AwsFront::reserve`]):
//!
//! - **DescribeCapacityReservations** is answered from the table (`describe.rs`): by id, by
//!   filter, a page at a time. moto judges its IAM first, as for the emulated SQS: moto
//!   authorizes a call before it looks for the action, so an identity without
//!   `ec2:DescribeCapacityReservations` gets moto's `AccessDenied` (HTTP 403), and an allowed
//!   one moto's `NotImplementedError` (HTTP 500), which the world replaces with its answer.
//! - **Launching into a reservation**: a CreateLaunchTemplate whose data targets a
//!   reservation (`CapacityReservationTarget.CapacityReservationId`, preference not `none`)
//!   is remembered with the template id moto answers. A CreateFleet launching from such a
//!   template is judged against the reservation (`launch.rs`): refused as EC2
//!   refuses an `instant` fleet (HTTP 200, an `errorSet` item per override, no instance;
//!   moto never sees it, [`crate::fleet_faults::refusal_xml`]), or forwarded with the
//!   slots it asks for held, and then charged for each instance moto launched.
//! - **Giving a slot back**: a TerminateInstances moto accepted gives each named instance's
//!   slot back once.
//! - **DescribeInstances** shows an instance launched into a reservation as EC2 does: its
//!   `capacityReservationId` and `capacityReservationSpecification` (preference
//!   `capacity-reservations-only`, the reservation as target), and, in a capacity block,
//!   the instance lifecycle `capacity-block` (an `InstanceLifecycleType` of the API).
//!
//! The error codes EC2 documents ("Error codes for the Amazon EC2 API") are used as
//! documented: `InvalidCapacityReservationId.NotFound` (an unknown reservation),
//! `InvalidCapacityReservationId.Malformed`, `ReservationCapacityExceeded` (its message as
//! EC2 wrote it in a RunInstances error), `InvalidNextToken`, `InvalidParameterValue` (an
//! unknown filter). Guessed, where EC2 documents no code: a launch into a reservation
//! that is not `active` gets `InvalidLaunchTargets` (documented as "verify the capacity for
//! the Capacity Reservation selected or verify the ID"), an override whose type or zone is
//! not the reservation's gets `InvalidParameterCombination`, and a launch whose market
//! does not fit the reservation (a capacity block without the `capacity-block` capacity
//! type and market, or an ODCR with them) gets `InvalidParameterValue` with the message
//! EC2 gave RunInstances for a capacity block launched without its market type.
//!
//! Not emulated: `open` reservations taking matching untargeted launches (only a template
//! naming a reservation uses one), RunInstances and CreateLaunchTemplateVersion targeting
//! a reservation, stopping an instance freeing its slot, and a fleet asking for more than
//! the reservation has left launching part of it (it is refused whole). moto launches a
//! fleet's first override, so a CreateFleet is forwarded only when its first override
//! fits the reservation; otherwise every override that does not fit is reported and
//! nothing launches (nodewright sends one override per reservation). A CreateFleet
//! refused here is judged by no IAM, as a [`crate::fleet_faults::FleetFault`]'s, and its
//! answer is remembered under its ClientToken like any other ([`crate::ec2_idempotency`]).
//! moto launches nothing for the `capacity-block` capacity type; `moto/launch.py` (18)
//! launches those instances as on-demand ones.

mod describe;
mod launch;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

use crate::ec2_idempotency::form_params;

pub use describe::DESCRIBE;

/// Which launches a reservation takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchCriteria {
    /// Any launch with matching attributes (and one that names it).
    Open,
    /// Only a launch that names it.
    Targeted,
}

impl MatchCriteria {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchCriteria::Open => "open",
            MatchCriteria::Targeted => "targeted",
        }
    }
}

/// EC2's `reservationType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationKind {
    /// An on-demand capacity reservation (ODCR).
    Default,
    /// A capacity block for ML: launched with the `capacity-block` market.
    CapacityBlock,
}

impl ReservationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationKind::Default => "default",
            ReservationKind::CapacityBlock => "capacity-block",
        }
    }
}

/// One capacity reservation as a test sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// `cr-...`.
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub total: u32,
    /// Slots not in use; launches take them, terminations give them back.
    pub available: u32,
    pub owner_id: String,
    pub tags: BTreeMap<String, String>,
    pub match_criteria: MatchCriteria,
    pub kind: ReservationKind,
    /// Its start and creation date.
    pub start: Timestamp,
    /// `None`: it runs until cancelled (`endDateType` `unlimited`).
    pub end: Option<Timestamp>,
    /// `active` takes launches; `scheduled`, `expired`, `cancelled`... do not.
    pub state: String,
}

impl Reservation {
    /// An active ODCR open to matching launches, all of it available, owned by moto's
    /// account, started now and without an end.
    pub fn open(id: &str, instance_type: &str, zone: &str, total: u32) -> Reservation {
        Reservation {
            id: id.to_string(),
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            total,
            available: total,
            owner_id: crate::moto::ACCOUNT_ID.to_string(),
            tags: BTreeMap::new(),
            match_criteria: MatchCriteria::Open,
            kind: ReservationKind::Default,
            start: Timestamp::now(),
            end: None,
            state: "active".to_string(),
        }
    }

    /// An active capacity block ending at `end`; a block takes only launches that name it.
    pub fn capacity_block(
        id: &str,
        instance_type: &str,
        zone: &str,
        total: u32,
        end: Timestamp,
    ) -> Reservation {
        Reservation {
            match_criteria: MatchCriteria::Targeted,
            kind: ReservationKind::CapacityBlock,
            end: Some(end),
            ..Reservation::open(id, instance_type, zone, total)
        }
    }

    /// This reservation taking only launches that name it.
    pub fn targeted(self) -> Reservation {
        Reservation {
            match_criteria: MatchCriteria::Targeted,
            ..self
        }
    }

    /// This reservation with the tag `key=value`.
    pub fn tagged(mut self, key: &str, value: &str) -> Reservation {
        self.tags.insert(key.to_string(), value.to_string());
        self
    }
}

/// An instance launched into a reservation.
#[derive(Debug, Clone)]
struct Slot {
    reservation: String,
    kind: ReservationKind,
    /// Its slot was given back (it terminated); it keeps showing the reservation.
    freed: bool,
}

#[derive(Debug, Default)]
struct Table {
    reservations: BTreeMap<String, Reservation>,
    /// Launch template id, and name, to the reservation its data targets.
    templates: HashMap<String, launch::Target>,
    instances: BTreeMap<String, Slot>,
}

/// The reservations, shared with the test that set them; the only owner of their counts.
#[derive(Debug, Clone, Default)]
pub struct Reservations(Arc<Mutex<Table>>);

/// Slots a forwarded CreateFleet holds until moto's answer says what it launched, so two
/// launches at once cannot both take the last slot.
#[derive(Debug)]
pub struct Hold {
    reservation: String,
    slots: u32,
}

/// What the front does with a call before moto sees it.
#[derive(Debug)]
pub enum Admission {
    /// Forward it, holding these slots (none for a call no reservation concerns).
    Forward(Option<Hold>),
    /// EC2's `instant` fleet answer that launched nothing: answer this (HTTP 200).
    Refused(String),
}

impl Reservations {
    /// Adds `reservation`, replacing one with its id (and its count).
    pub fn reserve(&self, reservation: Reservation) {
        if let Ok(mut t) = self.0.lock() {
            t.reservations.insert(reservation.id.clone(), reservation);
        }
    }

    /// Cancels reservation `id`: its state becomes `cancelled`, and its instances run on
    /// as on-demand ones, which DescribeInstances no longer shows in it (as EC2 releases a
    /// cancelled or expired reservation's instances).
    pub fn cancel(&self, id: &str) {
        if let Ok(mut t) = self.0.lock() {
            if let Some(r) = t.reservations.get_mut(id) {
                r.state = "cancelled".to_string();
                r.available = 0;
            }
            t.instances.retain(|_, slot| slot.reservation != id);
        }
    }

    /// The reservation's available count now; `None` for an id never reserved.
    pub fn available(&self, id: &str) -> Option<u32> {
        let t = self.0.lock().ok()?;
        t.reservations.get(id).map(|r| r.available)
    }

    /// The answer to a DescribeCapacityReservations form body: (HTTP status, XML).
    pub fn describe(&self, request: &[u8]) -> (u16, String) {
        let Ok(t) = self.0.lock() else {
            return (
                500,
                describe::error_xml("InternalError", "the table is poisoned"),
            );
        };
        match describe::answer(&t.reservations, &form_params(request)) {
            Ok(xml) => (200, xml),
            Err(e) => (e.status, describe::error_xml(e.code, &e.message)),
        }
    }

    /// A CreateFleet launching from a template that targets a reservation: refused as EC2
    /// refuses it, or forwarded with its slots held. Any other call is forwarded.
    pub fn admit(&self, action: &str, request: &[u8]) -> Admission {
        if action != "CreateFleet" {
            return Admission::Forward(None);
        }
        let params = form_params(request);
        let Ok(mut t) = self.0.lock() else {
            return Admission::Forward(None);
        };
        let Some(target) = launch::fleet_template(&params).and_then(|lt| t.templates.get(&lt))
        else {
            return Admission::Forward(None);
        };
        let target = target.clone();
        let reservation = t.reservations.get_mut(&target.reservation);
        match launch::decide(&target, reservation.as_deref(), &params) {
            launch::Decision::Launch(slots) => {
                if let Some(r) = reservation {
                    r.available = r.available.saturating_sub(slots);
                }
                Admission::Forward(Some(Hold {
                    reservation: target.reservation,
                    slots,
                }))
            }
            launch::Decision::Refuse(xml) => Admission::Refused(xml),
        }
    }

    /// Charges `hold`'s reservation for the instances moto's CreateFleet answer (`status`,
    /// `answer`) launched and gives the rest of the hold back.
    pub fn settle(&self, hold: Option<Hold>, status: u16, answer: &[u8]) {
        let Some(hold) = hold else {
            return;
        };
        let launched = if (200..300).contains(&status) {
            crate::ec2_consistency::instance_ids(&String::from_utf8_lossy(answer))
        } else {
            Vec::new()
        };
        let Ok(mut t) = self.0.lock() else {
            return;
        };
        let Some(r) = t.reservations.get_mut(&hold.reservation) else {
            return;
        };
        let kind = r.kind;
        let used = u32::try_from(launched.len()).unwrap_or(u32::MAX);
        r.available = (r.available + hold.slots).saturating_sub(used).min(r.total);
        for id in launched {
            let slot = Slot {
                reservation: hold.reservation.clone(),
                kind,
                freed: false,
            };
            t.instances.insert(id, slot);
        }
    }

    /// Learns from a call moto answered (`status`, `answer`): the templates that target a
    /// reservation, the slots terminations give back; and returns the answer, with a
    /// DescribeInstances answer showing each instance's reservation.
    pub fn answered(&self, action: &str, request: &[u8], status: u16, answer: Vec<u8>) -> Vec<u8> {
        if !(200..300).contains(&status) {
            return answer;
        }
        match action {
            "CreateLaunchTemplate" => self.template_created(request, &answer),
            "TerminateInstances" => self.terminated(request),
            "DescribeInstances" => return self.shown(answer),
            _ => {}
        }
        answer
    }

    fn template_created(&self, request: &[u8], answer: &[u8]) {
        let params = form_params(request);
        let Some(target) = launch::target_of(&params) else {
            return;
        };
        let names = launch::template_id_of(&String::from_utf8_lossy(answer))
            .into_iter()
            .chain(params.get("LaunchTemplateName").cloned());
        if let Ok(mut t) = self.0.lock() {
            for name in names {
                t.templates.insert(name, target.clone());
            }
        }
    }

    fn terminated(&self, request: &[u8]) {
        let Ok(mut t) = self.0.lock() else {
            return;
        };
        let Table {
            reservations,
            instances,
            ..
        } = &mut *t;
        let named = form_params(request)
            .into_iter()
            .filter(|(k, _)| k.starts_with("InstanceId."))
            .map(|(_, id)| id);
        for id in named {
            let Some(slot) = instances.get_mut(&id).filter(|s| !s.freed) else {
                continue;
            };
            slot.freed = true;
            if let Some(r) = reservations.get_mut(&slot.reservation) {
                r.available = (r.available + 1).min(r.total);
            }
        }
    }

    fn shown(&self, answer: Vec<u8>) -> Vec<u8> {
        let slots = match self.0.lock() {
            Ok(t) if !t.instances.is_empty() => t.instances.clone(),
            _ => return answer,
        };
        let Ok(mut xml) = String::from_utf8(answer.clone()) else {
            return answer;
        };
        for (id, slot) in slots {
            xml = launch::show_reservation(&xml, &id, &slot.reservation, slot.kind);
        }
        xml.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &[u8] = b"Action=CreateLaunchTemplate&LaunchTemplateName=nodes\
&LaunchTemplateData.CapacityReservationSpecification.CapacityReservationPreference=capacity-reservations-only\
&LaunchTemplateData.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId=cr-0aa";
    const CREATED: &[u8] =
        b"<CreateLaunchTemplateResponse><launchTemplate><launchTemplateId>lt-0f</launchTemplateId>";
    const FLEET: &[u8] = b"Action=CreateFleet&Type=instant\
&TargetCapacitySpecification.TotalTargetCapacity=1\
&TargetCapacitySpecification.DefaultTargetCapacityType=on-demand\
&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateId=lt-0f\
&LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large\
&LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone=us-east-1a";

    fn launched(id: &str) -> Vec<u8> {
        format!("<CreateFleetResponse><fleetInstanceSet><item><instanceIds><item>{id}</item></instanceIds></item></fleetInstanceSet></CreateFleetResponse>").into_bytes()
    }

    fn held(admission: Admission) -> Hold {
        match admission {
            Admission::Forward(Some(hold)) => hold,
            other => panic!("expected a hold, got {other:?}"),
        }
    }

    fn table_with_template(total: u32) -> Reservations {
        let table = Reservations::default();
        table.reserve(Reservation::open("cr-0aa", "m5.large", "us-east-1a", total));
        table.answered("CreateLaunchTemplate", TEMPLATE, 200, CREATED.to_vec());
        table
    }

    #[test]
    fn a_launch_takes_a_slot_a_termination_gives_it_back_once() {
        let table = table_with_template(1);
        let hold = held(table.admit("CreateFleet", FLEET));
        assert_eq!(
            table.available("cr-0aa"),
            Some(0),
            "held while moto launches"
        );
        table.settle(Some(hold), 200, &launched("i-0a1"));
        assert_eq!(table.available("cr-0aa"), Some(0));
        assert!(
            matches!(table.admit("CreateFleet", FLEET), Admission::Refused(xml) if xml.contains("ReservationCapacityExceeded"))
        );

        let terminate = b"Action=TerminateInstances&InstanceId.1=i-0a1";
        table.answered("TerminateInstances", terminate, 400, Vec::new());
        assert_eq!(
            table.available("cr-0aa"),
            Some(0),
            "a refused termination frees nothing"
        );
        table.answered("TerminateInstances", terminate, 200, Vec::new());
        table.answered("TerminateInstances", terminate, 200, Vec::new());
        assert_eq!(table.available("cr-0aa"), Some(1), "freed once");
    }

    #[test]
    fn a_hold_moto_launched_nothing_for_is_given_back() {
        let table = table_with_template(2);
        let first = held(table.admit("CreateFleet", FLEET));
        let second = held(table.admit("CreateFleet", FLEET));
        assert!(
            matches!(table.admit("CreateFleet", FLEET), Admission::Refused(_)),
            "both slots held"
        );
        table.settle(Some(first), 500, b"<Error/>");
        table.settle(
            Some(second),
            200,
            b"<CreateFleetResponse><fleetInstanceSet/></CreateFleetResponse>",
        );
        assert_eq!(table.available("cr-0aa"), Some(2));
    }

    #[test]
    fn only_fleets_from_a_targeting_template_are_judged() {
        let table = table_with_template(1);
        let plain = b"Action=CreateLaunchTemplate&LaunchTemplateName=plain&LaunchTemplateData.ImageId=ami-1";
        let answer = b"<launchTemplate><launchTemplateId>lt-0e</launchTemplateId>".to_vec();
        table.answered("CreateLaunchTemplate", plain, 200, answer);
        let from_plain = String::from_utf8_lossy(FLEET).replace("lt-0f", "lt-0e");
        assert!(matches!(
            table.admit("CreateFleet", from_plain.as_bytes()),
            Admission::Forward(None)
        ));
        assert!(matches!(
            table.admit("RunInstances", FLEET),
            Admission::Forward(None)
        ));
        let by_name = String::from_utf8_lossy(FLEET)
            .replace("LaunchTemplateId=lt-0f", "LaunchTemplateName=nodes");
        assert!(matches!(
            table.admit("CreateFleet", by_name.as_bytes()),
            Admission::Forward(Some(_))
        ));
        assert_eq!(table.available("cr-0bb"), None);
    }

    #[test]
    fn describe_instances_shows_the_reservation_of_an_instance_launched_into_it() {
        let table = table_with_template(1);
        let hold = held(table.admit("CreateFleet", FLEET));
        table.settle(Some(hold), 200, &launched("i-0a1"));
        let answer = b"<instancesSet><item><instanceId>i-0a1</instanceId></item><item><instanceId>i-0b2</instanceId></item></instancesSet>";
        let shown = table.answered(
            "DescribeInstances",
            b"Action=DescribeInstances",
            200,
            answer.to_vec(),
        );
        let shown = String::from_utf8(shown).unwrap();
        assert_eq!(
            shown
                .matches("<capacityReservationId>cr-0aa</capacityReservationId>")
                .count(),
            2,
            "{shown}"
        );
        assert!(
            shown.ends_with("<instanceId>i-0b2</instanceId></item></instancesSet>"),
            "{shown}"
        );
    }

    #[test]
    fn describe_answers_the_current_counts_and_errors_with_ec2_s_status() {
        let table = table_with_template(1);
        let hold = held(table.admit("CreateFleet", FLEET));
        table.settle(Some(hold), 200, &launched("i-0a1"));
        let (status, xml) =
            table.describe(b"Action=DescribeCapacityReservations&CapacityReservationId.1=cr-0aa");
        assert_eq!(status, 200);
        assert!(
            xml.contains("<availableInstanceCount>0</availableInstanceCount>"),
            "{xml}"
        );
        let (status, xml) =
            table.describe(b"Action=DescribeCapacityReservations&CapacityReservationId.1=cr-0ff");
        assert_eq!(status, 400);
        assert!(
            xml.contains("<Code>InvalidCapacityReservationId.NotFound</Code>"),
            "{xml}"
        );
    }
}
