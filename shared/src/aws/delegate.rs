//! Answering a port with one of a value's parts, without forwarding each method by hand.
//!
//! A value that bundles adapters ([`crate::provision::AwsPorts`]) or wraps one (the local
//! world's fault injection) says which part answers which port with [`Delegate`], keyed by
//! a marker of [`port`]; the blanket impls below then make it implement the port. Each
//! port's methods are forwarded once, here, for every such value.
//!
//! Coherence allows a type its own impl of a port beside these blanket impls as long as it
//! does not also delegate that port (the fault injection implements [`Fleet`] itself and
//! delegates the rest).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;

use crate::api::{AmiSelectorTerm, CapacityReservationSelectorTerm, SelectorTerm};
use crate::catalog::{InstanceType, Reservation};

use super::errors::AwsError;
use super::fleet::{FleetOutcome, FleetRequest};
use super::images::Image;
use super::instance_types::{SpotPrice, TypeOffering};
use super::instances::{InstanceState, OwnedInstance, TerminateOutcome};
use super::launch_templates::{LaunchTemplateRef, LaunchTemplateSpec, OwnedLaunchTemplate};
use super::network::{SecurityGroup, Subnet};
use super::ports::{
    Fleet, ImageResolver, InstanceInventory, InstanceProfiles, InstanceTypeSource, LaunchTemplates,
    NetworkDiscovery, OnDemandPriceSource,
};

/// One marker per port, naming it in [`Delegate`].
pub mod port {
    pub struct InstanceTypes;
    pub struct Network;
    pub struct Images;
    pub struct Fleet;
    pub struct LaunchTemplates;
    pub struct Inventory;
    pub struct Profiles;
    pub struct Prices;

    /// The ports EC2 itself answers ([`crate::aws::Ec2Adapter`]), so a bundle can hand
    /// them all to its EC2 part with one impl.
    pub trait Ec2 {}
    impl Ec2 for InstanceTypes {}
    impl Ec2 for Network {}
    impl Ec2 for Fleet {}
    impl Ec2 for LaunchTemplates {}
    impl Ec2 for Inventory {}
}

/// `Self` answers the port `P` (a marker of [`port`]) with [`Delegate::delegate`].
pub trait Delegate<P> {
    type To;
    fn delegate(&self) -> &Self::To;
}

impl<T: Delegate<port::InstanceTypes>> InstanceTypeSource for T
where
    T::To: InstanceTypeSource,
{
    fn instance_types(&self) -> impl Future<Output = Result<Vec<InstanceType>, AwsError>> + Send {
        self.delegate().instance_types()
    }
    fn offerings(&self) -> impl Future<Output = Result<Vec<TypeOffering>, AwsError>> + Send {
        self.delegate().offerings()
    }
    fn spot_prices(&self) -> impl Future<Output = Result<Vec<SpotPrice>, AwsError>> + Send {
        self.delegate().spot_prices()
    }
}

impl<T: Delegate<port::Network>> NetworkDiscovery for T
where
    T::To: NetworkDiscovery,
{
    fn subnets(
        &self,
        terms: &[SelectorTerm],
    ) -> impl Future<Output = Result<Vec<Subnet>, AwsError>> + Send {
        self.delegate().subnets(terms)
    }
    fn security_groups(
        &self,
        terms: &[SelectorTerm],
    ) -> impl Future<Output = Result<Vec<SecurityGroup>, AwsError>> + Send {
        self.delegate().security_groups(terms)
    }
    fn capacity_reservations(
        &self,
        terms: &[CapacityReservationSelectorTerm],
    ) -> impl Future<Output = Result<Vec<Reservation>, AwsError>> + Send {
        self.delegate().capacity_reservations(terms)
    }
}

impl<T: Delegate<port::Images>> ImageResolver for T
where
    T::To: ImageResolver,
{
    fn resolve(
        &self,
        terms: &[AmiSelectorTerm],
        kubernetes_version: &str,
    ) -> impl Future<Output = Result<Vec<Image>, AwsError>> + Send {
        self.delegate().resolve(terms, kubernetes_version)
    }
}

impl<T: Delegate<port::Fleet>> Fleet for T
where
    T::To: Fleet,
{
    fn create_fleet(
        &self,
        request: &FleetRequest,
    ) -> impl Future<Output = Result<FleetOutcome, AwsError>> + Send {
        self.delegate().create_fleet(request)
    }
}

impl<T: Delegate<port::LaunchTemplates>> LaunchTemplates for T
where
    T::To: LaunchTemplates,
{
    fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> impl Future<Output = Result<LaunchTemplateRef, AwsError>> + Send {
        self.delegate().ensure_launch_template(spec)
    }
    fn list_launch_templates(
        &self,
    ) -> impl Future<Output = Result<Vec<OwnedLaunchTemplate>, AwsError>> + Send {
        self.delegate().list_launch_templates()
    }
    fn delete_launch_template(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<(), AwsError>> + Send {
        self.delegate().delete_launch_template(name)
    }
}

impl<T: Delegate<port::Inventory>> InstanceInventory for T
where
    T::To: InstanceInventory,
{
    fn list_owned(&self) -> impl Future<Output = Result<Vec<OwnedInstance>, AwsError>> + Send {
        self.delegate().list_owned()
    }
    fn list_owned_ids(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<OwnedInstance>, AwsError>> + Send {
        self.delegate().list_owned_ids(ids)
    }
    fn terminate(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<TerminateOutcome, AwsError>> + Send {
        self.delegate().terminate(ids)
    }
    fn create_tags(
        &self,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), AwsError>> + Send {
        self.delegate().create_tags(ids, tags)
    }
    fn states(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<HashMap<String, InstanceState>, AwsError>> + Send {
        self.delegate().states(ids)
    }
}

impl<T: Delegate<port::Profiles>> InstanceProfiles for T
where
    T::To: InstanceProfiles,
{
    fn ensure_instance_profile(
        &self,
        role: &str,
    ) -> impl Future<Output = Result<String, AwsError>> + Send {
        self.delegate().ensure_instance_profile(role)
    }
}

impl<T: Delegate<port::Prices>> OnDemandPriceSource for T
where
    T::To: OnDemandPriceSource,
{
    fn on_demand_prices(
        &self,
    ) -> impl Future<Output = Result<HashMap<String, f64>, AwsError>> + Send {
        self.delegate().on_demand_prices()
    }
}
