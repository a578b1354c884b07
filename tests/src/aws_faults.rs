//! AWS-side fault injection for the local world: a test adapter that wraps the real EC2
//! adapter and makes chosen offerings (instance type x zone x capacity type) fail with
//! insufficient capacity, the one CreateFleet behaviour moto never produces. Everything
//! else is passed through to the real adapter, and so to moto.
//!
//! As EC2 does for an `instant` fleet, a request is served from the overrides that still
//! have capacity; the ones that do not come back as per-override errors.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use nodewright::aws::delegate::port;
use nodewright::aws::{
    AwsError, Delegate, ErrorClass, Fleet, FleetError, FleetOutcome, FleetRequest,
};
use nodewright::catalog::CapacityType;

type Offering = (String, String, CapacityType);

/// Offerings currently out of capacity, shared with the test that sets them.
#[derive(Debug, Clone, Default)]
pub struct CapacityFaults(Arc<Mutex<HashSet<Offering>>>);

impl CapacityFaults {
    pub fn exhaust(&self, instance_type: &str, zone: &str, capacity_type: CapacityType) {
        if let Ok(mut set) = self.0.lock() {
            set.insert((instance_type.to_string(), zone.to_string(), capacity_type));
        }
    }

    fn exhausted(&self, o: &Offering) -> bool {
        self.0.lock().map(|set| set.contains(o)).unwrap_or(false)
    }
}

/// The real adapter `E` with [`CapacityFaults`] applied to CreateFleet.
#[derive(Debug, Clone)]
pub struct WithFaults<E> {
    pub inner: E,
    pub faults: CapacityFaults,
}

impl<E: Fleet + Sync> Fleet for WithFaults<E> {
    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetOutcome, AwsError> {
        let key = |o: &nodewright::aws::FleetOverride| {
            (
                o.instance_type.clone(),
                o.zone.clone(),
                request.capacity_type,
            )
        };
        let (failed, kept): (Vec<_>, Vec<_>) = request
            .overrides
            .iter()
            .cloned()
            .partition(|o| self.faults.exhausted(&key(o)));
        let errors: Vec<FleetError> = failed
            .iter()
            .map(|o| FleetError {
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                code: "InsufficientInstanceCapacity".into(),
                message: "injected by the local world: no capacity for this offering".into(),
                class: ErrorClass::InsufficientCapacity,
            })
            .collect();
        if kept.is_empty() {
            return Ok(FleetOutcome {
                instances: vec![],
                errors,
            });
        }
        let mut outcome = self
            .inner
            .create_fleet(&FleetRequest {
                overrides: kept,
                ..request.clone()
            })
            .await?;
        outcome.errors.extend(errors);
        Ok(outcome)
    }
}

/// Every port but [`Fleet`] goes straight to the real adapter (see
/// [`nodewright::aws::delegate`]).
pub trait PassedThrough {}
impl PassedThrough for port::InstanceTypes {}
impl PassedThrough for port::Network {}
impl PassedThrough for port::LaunchTemplates {}
impl PassedThrough for port::Inventory {}

impl<E, X: PassedThrough> Delegate<X> for WithFaults<E> {
    type To = E;
    fn delegate(&self) -> &E {
        &self.inner
    }
}
