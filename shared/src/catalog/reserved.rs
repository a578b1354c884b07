//! Capacity reservations as offerings: each reservation an EC2NodeClass selects (an
//! on-demand capacity reservation or a capacity block) offers its instance type in its zone
//! with capacity type `reserved`, for as many instances as it has available.
//!
//! A reservation is paid for whether it is used or not, so its marginal price is near zero:
//! the on-demand price divided by [`RESERVED_PRICE_DIVISOR`], as Karpenter prices it. The
//! solver then fills reserved capacity before buying any, and among reservations still
//! prefers the type that would cost least to buy, which keeps consolidation's comparisons
//! meaningful.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{CapacityType, Catalog, Offering};

/// Karpenter's divisor (karpenter-provider-aws `ReservedCapacityResolver`).
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

/// How long before a capacity block ends its instances are given up: EC2 starts reclaiming
/// them 30 minutes before the end and warns 40 minutes before; Karpenter's
/// `capacityreservation.expiration` controller removes them at the warning, and no new
/// instance is launched into a block that close to its end.
pub const CAPACITY_BLOCK_NOTICE: Duration = Duration::from_secs(40 * 60);

/// The hourly price a reserved instance is planned at.
pub fn reserved_price(on_demand: f64) -> f64 {
    on_demand / RESERVED_PRICE_DIVISOR
}

/// EC2's `ReservationType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReservationKind {
    /// An on-demand capacity reservation (ODCR).
    Default,
    /// A capacity block for ML: a fixed window, launched with market type `capacity-block`.
    CapacityBlock,
}

impl ReservationKind {
    /// The `karpenter.k8s.aws/capacity-reservation-type` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationKind::Default => "default",
            ReservationKind::CapacityBlock => "capacity-block",
        }
    }

    pub fn parse(text: &str) -> Option<ReservationKind> {
        match text {
            "default" => Some(ReservationKind::Default),
            "capacity-block" => Some(ReservationKind::CapacityBlock),
            _ => None,
        }
    }
}

/// One active capacity reservation, as DescribeCapacityReservations describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub owner_id: String,
    /// Instances it can still take.
    pub available: u32,
    pub kind: ReservationKind,
    /// When it ends, if it does.
    pub end: Option<SystemTime>,
}

impl Reservation {
    /// An on-demand capacity reservation without an end.
    pub fn odcr(id: &str, instance_type: &str, zone: &str, available: u32) -> Reservation {
        Reservation {
            id: id.into(),
            instance_type: instance_type.into(),
            zone: zone.into(),
            owner_id: String::new(),
            available,
            kind: ReservationKind::Default,
            end: None,
        }
    }

    /// Whether it ends within [`CAPACITY_BLOCK_NOTICE`] of `now`: no launch goes into it (and
    /// a capacity block's instances are given up, `disruption::expiring_blocks`).
    pub fn expiring(&self, now: SystemTime) -> bool {
        self.end
            .is_some_and(|end| end <= now + CAPACITY_BLOCK_NOTICE)
    }

    /// Whether a launch may go into it now.
    pub fn launchable(&self, now: SystemTime) -> bool {
        self.available > 0 && !self.expiring(now)
    }
}

impl Catalog {
    /// Adds `class`'s reservations that can take an instance `now`: a `reserved` offering
    /// of each one's type in its zone. A type the catalog does not know is left out (it
    /// cannot be planned for). Offerings are shared by every class; which class may use
    /// which is [`Catalog::reserved_for`]'s answer.
    pub fn add_reservations(
        &mut self,
        class: &str,
        reservations: Vec<Reservation>,
        now: SystemTime,
    ) {
        let usable: Vec<Reservation> = reservations
            .into_iter()
            .filter(|r| r.launchable(now))
            .collect();
        for r in &usable {
            let Some(entry) = self
                .entries
                .iter_mut()
                .find(|e| e.instance_type.name == r.instance_type)
            else {
                continue;
            };
            let on_demand = entry
                .offerings
                .iter()
                .filter(|o| o.capacity_type == CapacityType::OnDemand)
                .map(|o| o.price)
                .reduce(f64::min);
            match entry
                .offerings
                .iter_mut()
                .find(|o| o.zone == r.zone && o.capacity_type == CapacityType::Reserved)
            {
                Some(o) => o.available = true,
                None => entry.offerings.push(Offering {
                    zone: r.zone.clone(),
                    capacity_type: CapacityType::Reserved,
                    price: on_demand.map_or(0.0, reserved_price),
                    available: true,
                }),
            }
        }
        self.reservations.insert(class.to_string(), usable);
    }

    /// `class`'s reservations of `instance_type` in `zone` with room, the one with the most
    /// first (Karpenter launches into the zone's reservation with the most capacity).
    pub fn reserved_for(&self, class: &str, instance_type: &str, zone: &str) -> Vec<&Reservation> {
        let mut found: Vec<&Reservation> = self
            .reservations
            .get(class)
            .into_iter()
            .flatten()
            .filter(|r| r.instance_type == instance_type && r.zone == zone && r.available > 0)
            .collect();
        found.sort_by(|a, b| b.available.cmp(&a.available).then(a.id.cmp(&b.id)));
        found
    }

    /// One instance launched into reservation `id`: it has one less to give, for every
    /// class that selects it, until the next DescribeCapacityReservations says otherwise.
    pub fn launched_into(&mut self, id: &str) {
        count_down(self.reservations.values_mut().flatten(), id);
    }
}

/// One instance launched into reservation `id`: each copy of it among `reservations` has
/// one less room. Every holder of a reservation list counts a launch down this way.
pub fn count_down<'a>(reservations: impl IntoIterator<Item = &'a mut Reservation>, id: &str) {
    for r in reservations.into_iter().filter(|r| r.id == id) {
        r.available = r.available.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests;
