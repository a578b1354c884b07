//! One value with every AWS port the provisioner uses: the EC2 adapter for most of them,
//! the image adapter (EC2 + SSM) for AMIs, a price source for on-demand prices, and the IAM
//! adapter for instance profiles.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;

use crate::api::{AmiSelectorTerm, SelectorTerm};
use crate::aws::{
    AwsError, BundledPrices, Fleet, FleetOutcome, FleetRequest, IamAdapter, Image, ImageResolver,
    InstanceInventory, InstanceProfiles, InstanceTypeSource, LaunchTemplateRef, LaunchTemplateSpec,
    LaunchTemplates, NetworkDiscovery, OnDemandPriceSource, OwnedInstance, OwnedLaunchTemplate,
    SecurityGroup, SpotPrice, Subnet, TerminateOutcome, TypeOffering,
};
use crate::catalog::InstanceType;

/// `ec2` answers every port but [`ImageResolver`], which `images` answers, and
/// [`OnDemandPriceSource`], which `prices` answers: the Price List API in AWS
/// ([`crate::aws::PricingAdapter`]), or [`BundledPrices`] (the default) where there is none;
/// [`InstanceProfiles`], which `iam` answers.
#[derive(Debug, Clone)]
pub struct AwsPorts<E, I, P = BundledPrices, M = IamAdapter> {
    pub ec2: E,
    pub images: I,
    pub prices: P,
    pub iam: M,
}

// Forwards the price source's own future, so the price port asks nothing of the others.
impl<E, I, P: OnDemandPriceSource, M> OnDemandPriceSource for AwsPorts<E, I, P, M> {
    fn on_demand_prices(
        &self,
    ) -> impl Future<Output = Result<HashMap<String, f64>, AwsError>> + Send {
        self.prices.on_demand_prices()
    }
}

impl<E: InstanceTypeSource + Sync, I: Sync, P: Sync, M: Sync> InstanceTypeSource
    for AwsPorts<E, I, P, M>
{
    async fn instance_types(&self) -> Result<Vec<InstanceType>, AwsError> {
        self.ec2.instance_types().await
    }
    async fn offerings(&self) -> Result<Vec<TypeOffering>, AwsError> {
        self.ec2.offerings().await
    }
    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, AwsError> {
        self.ec2.spot_prices().await
    }
}

impl<E: NetworkDiscovery + Sync, I: Sync, P: Sync, M: Sync> NetworkDiscovery
    for AwsPorts<E, I, P, M>
{
    async fn subnets(&self, terms: &[SelectorTerm]) -> Result<Vec<Subnet>, AwsError> {
        self.ec2.subnets(terms).await
    }
    async fn security_groups(
        &self,
        terms: &[SelectorTerm],
    ) -> Result<Vec<SecurityGroup>, AwsError> {
        self.ec2.security_groups(terms).await
    }
}

impl<E: Sync, I: ImageResolver + Sync, P: Sync, M: Sync> ImageResolver for AwsPorts<E, I, P, M> {
    async fn resolve(
        &self,
        terms: &[AmiSelectorTerm],
        kubernetes_version: &str,
    ) -> Result<Vec<Image>, AwsError> {
        self.images.resolve(terms, kubernetes_version).await
    }
}

impl<E: Fleet + Sync, I: Sync, P: Sync, M: Sync> Fleet for AwsPorts<E, I, P, M> {
    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetOutcome, AwsError> {
        self.ec2.create_fleet(request).await
    }
}

impl<E: LaunchTemplates + Sync, I: Sync, P: Sync, M: Sync> LaunchTemplates
    for AwsPorts<E, I, P, M>
{
    async fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, AwsError> {
        self.ec2.ensure_launch_template(spec).await
    }
    async fn list_launch_templates(&self) -> Result<Vec<OwnedLaunchTemplate>, AwsError> {
        self.ec2.list_launch_templates().await
    }
    async fn delete_launch_template(&self, name: &str) -> Result<(), AwsError> {
        self.ec2.delete_launch_template(name).await
    }
}

impl<E: InstanceInventory + Sync, I: Sync, P: Sync, M: Sync> InstanceInventory
    for AwsPorts<E, I, P, M>
{
    async fn list_owned(&self) -> Result<Vec<OwnedInstance>, AwsError> {
        self.ec2.list_owned().await
    }
    async fn terminate(&self, ids: &[String]) -> Result<TerminateOutcome, AwsError> {
        self.ec2.terminate(ids).await
    }
    async fn create_tags(
        &self,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), AwsError> {
        self.ec2.create_tags(ids, tags).await
    }
    async fn states(
        &self,
        ids: &[String],
    ) -> Result<std::collections::HashMap<String, crate::aws::InstanceState>, AwsError> {
        self.ec2.states(ids).await
    }
}

impl<E: Sync, I: Sync, P: Sync, M: InstanceProfiles + Sync> InstanceProfiles
    for AwsPorts<E, I, P, M>
{
    async fn ensure_instance_profile(&self, role: &str) -> Result<String, AwsError> {
        self.iam.ensure_instance_profile(role).await
    }
}
