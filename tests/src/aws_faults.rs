//! AWS-side fault injection for the local world: a test adapter that wraps the real EC2
//! adapter and makes chosen offerings (instance type x zone x capacity type) fail with
//! insufficient capacity, the one CreateFleet behaviour moto never produces. Everything
//! else is passed through to the real adapter, and so to moto.
//!
//! As EC2 does for an `instant` fleet, a request is served from the overrides that still
//! have capacity; the ones that do not come back as per-override errors.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use nodewright::api::SelectorTerm;
use nodewright::aws::{
    AwsError, ErrorClass, Fleet, FleetError, FleetOutcome, FleetRequest, InstanceInventory,
    InstanceTypeSource, LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplates, NetworkDiscovery,
    OwnedInstance, OwnedLaunchTemplate, SecurityGroup, SpotPrice, Subnet, TerminateOutcome,
    TypeOffering,
};
use nodewright::catalog::{CapacityType, InstanceType};

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

impl<E: InstanceTypeSource + Sync> InstanceTypeSource for WithFaults<E> {
    async fn instance_types(&self) -> Result<Vec<InstanceType>, AwsError> {
        self.inner.instance_types().await
    }
    async fn offerings(&self) -> Result<Vec<TypeOffering>, AwsError> {
        self.inner.offerings().await
    }
    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, AwsError> {
        self.inner.spot_prices().await
    }
}

impl<E: NetworkDiscovery + Sync> NetworkDiscovery for WithFaults<E> {
    async fn subnets(&self, terms: &[SelectorTerm]) -> Result<Vec<Subnet>, AwsError> {
        self.inner.subnets(terms).await
    }
    async fn security_groups(
        &self,
        terms: &[SelectorTerm],
    ) -> Result<Vec<SecurityGroup>, AwsError> {
        self.inner.security_groups(terms).await
    }
}

impl<E: LaunchTemplates + Sync> LaunchTemplates for WithFaults<E> {
    async fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, AwsError> {
        self.inner.ensure_launch_template(spec).await
    }
    async fn list_launch_templates(&self) -> Result<Vec<OwnedLaunchTemplate>, AwsError> {
        self.inner.list_launch_templates().await
    }
    async fn delete_launch_template(&self, name: &str) -> Result<(), AwsError> {
        self.inner.delete_launch_template(name).await
    }
}

impl<E: InstanceInventory + Sync> InstanceInventory for WithFaults<E> {
    async fn list_owned(&self) -> Result<Vec<OwnedInstance>, AwsError> {
        self.inner.list_owned().await
    }
    async fn terminate(&self, ids: &[String]) -> Result<TerminateOutcome, AwsError> {
        self.inner.terminate(ids).await
    }
    async fn create_tags(
        &self,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), AwsError> {
        self.inner.create_tags(ids, tags).await
    }
    async fn states(
        &self,
        ids: &[String],
    ) -> Result<std::collections::HashMap<String, nodewright::aws::InstanceState>, AwsError> {
        self.inner.states(ids).await
    }
}
