//! The ports: what the core asks of AWS, in the core's own types. Each trait is narrow so
//! a caller (and its test double) needs only the capability it uses.
//!
//! Futures are `Send` so adapters work from a multi-threaded tokio runtime.

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

/// Instance types, where they are offered, and what spot costs.
pub trait InstanceTypeSource {
    /// Every instance type of the region (DescribeInstanceTypes, all pages).
    fn instance_types(&self) -> impl Future<Output = Result<Vec<InstanceType>, AwsError>> + Send;
    /// Which types each zone offers (DescribeInstanceTypeOfferings by availability zone).
    fn offerings(&self) -> impl Future<Output = Result<Vec<TypeOffering>, AwsError>> + Send;
    /// The newest Linux/UNIX spot price per (type, zone).
    fn spot_prices(&self) -> impl Future<Output = Result<Vec<SpotPrice>, AwsError>> + Send;
}

/// Subnets, security groups and capacity reservations chosen by an EC2NodeClass's
/// selector terms.
pub trait NetworkDiscovery {
    /// Subnets matching any of the terms (terms are ORed, fields in a term ANDed).
    fn subnets(
        &self,
        terms: &[SelectorTerm],
    ) -> impl Future<Output = Result<Vec<Subnet>, AwsError>> + Send;
    /// Security groups matching any of the terms.
    fn security_groups(
        &self,
        terms: &[SelectorTerm],
    ) -> impl Future<Output = Result<Vec<SecurityGroup>, AwsError>> + Send;
    /// Active capacity reservations matching any of the terms, each once.
    fn capacity_reservations(
        &self,
        terms: &[CapacityReservationSelectorTerm],
    ) -> impl Future<Output = Result<Vec<Reservation>, AwsError>> + Send;
}

/// AMIs chosen by an EC2NodeClass's `amiSelectorTerms`.
pub trait ImageResolver {
    /// The newest image per architecture matching the terms, for a Kubernetes
    /// `major.minor` version (used by aliases).
    fn resolve(
        &self,
        terms: &[AmiSelectorTerm],
        kubernetes_version: &str,
    ) -> impl Future<Output = Result<Vec<Image>, AwsError>> + Send;
}

/// Launching capacity: one CreateFleet `instant` call per node claim.
pub trait Fleet {
    fn create_fleet(
        &self,
        request: &FleetRequest,
    ) -> impl Future<Output = Result<FleetOutcome, AwsError>> + Send;
}

/// Launch templates named `nodewright/<cluster>/<hash of the spec>`.
pub trait LaunchTemplates {
    /// The template for this spec, created if it does not exist yet.
    fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> impl Future<Output = Result<LaunchTemplateRef, AwsError>> + Send;
    /// This cluster's templates: those carrying the ownership tag
    /// `nodewright.io/cluster=<cluster>` AND named `nodewright/<cluster>/...`.
    fn list_launch_templates(
        &self,
    ) -> impl Future<Output = Result<Vec<OwnedLaunchTemplate>, AwsError>> + Send;
    /// Deletes one of this cluster's templates by name; a name without this cluster's
    /// prefix is refused, and already gone is success.
    fn delete_launch_template(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<(), AwsError>> + Send;
}

/// Instance profiles for EC2NodeClasses that name a `role`.
pub trait InstanceProfiles {
    /// The name of this cluster's instance profile for `role` (a role name, or a role ARN
    /// or path whose last segment is the name), created and given the role if needed.
    /// Safe to repeat and to race with another caller.
    fn ensure_instance_profile(
        &self,
        role: &str,
    ) -> impl Future<Output = Result<String, AwsError>> + Send;
}

/// This cluster's instance profiles, as the sweeper collects those nothing uses any more
/// (see `disruption::leftovers`).
pub trait InstanceProfileLeftovers {
    /// The profiles nodewright created for this cluster: under `/nodewright/`, named
    /// `nodewright_<cluster>_*`, and carrying this cluster's ownership tag.
    fn own_instance_profiles(
        &self,
    ) -> impl Future<Output = Result<Vec<OwnInstanceProfile>, AwsError>> + Send;
    /// The names of the instance profiles associated with an instance in the region,
    /// whoever's the instance is (DescribeIamInstanceProfileAssociations).
    fn instance_profiles_in_use(
        &self,
    ) -> impl Future<Output = Result<std::collections::BTreeSet<String>, AwsError>> + Send;
    /// Takes the roles it holds (read again here) out of the profile and deletes it. A
    /// profile that is not this cluster's (name, path or ownership tag) is refused;
    /// already gone is success, so repeating is safe.
    fn delete_instance_profile(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<(), AwsError>> + Send;
}

/// One of this cluster's instance profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnInstanceProfile {
    pub name: String,
    pub roles: Vec<String>,
    pub created: Option<jiff::Timestamp>,
}

/// The instances this cluster's nodewright owns (tag `nodewright.io/cluster=<cluster>`).
pub trait InstanceInventory {
    /// Owned instances that are not terminated.
    fn list_owned(&self) -> impl Future<Output = Result<Vec<OwnedInstance>, AwsError>> + Send;
    /// Those of `ids` that are owned instances not terminated: what [`Self::list_owned`]
    /// would say of them, asked of EC2 by id.
    fn list_owned_ids(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<OwnedInstance>, AwsError>> + Send;
    /// Terminates those of `ids` that still carry this cluster's ownership tag; the rest
    /// are refused. Already gone is success, so repeating is safe.
    fn terminate(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<TerminateOutcome, AwsError>> + Send;
    fn create_tags(
        &self,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), AwsError>> + Send;
    /// The state of each of `ids` EC2 still lists, terminated ones included (for as long
    /// as EC2 shows them), whoever owns them; an id it does not list is absent. Tells a
    /// replayed launch answer naming a dead instance from a live one.
    fn states(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<HashMap<String, InstanceState>, AwsError>> + Send;
}

/// One of EC2's two status checks of a running instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCheck {
    /// AWS's side: the host, its power and network.
    System,
    /// The instance's own: its operating system, memory, file systems, network setup.
    Instance,
}

impl StatusCheck {
    pub fn as_str(&self) -> &'static str {
        match self {
            StatusCheck::System => "SystemStatus",
            StatusCheck::Instance => "InstanceStatus",
        }
    }
}

/// A status check EC2 reports impaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impaired {
    pub instance_id: String,
    pub check: StatusCheck,
    /// The check's `impairedSince`, when EC2 gives one.
    pub since: Option<jiff::Timestamp>,
}

/// EC2's status checks (DescribeInstanceStatus), for node repair.
pub trait InstanceStatusChecks {
    /// The impaired checks of those of `ids` that are running.
    fn impaired(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<Impaired>, AwsError>> + Send;
}

/// On-demand prices of the region the functions run in (the AWS Pricing API).
pub trait OnDemandPriceSource {
    /// USD per hour by instance type, for Linux, shared tenancy, no pre-installed
    /// software, capacity status `Used`. A type missing from the answer has no known
    /// regional price; an empty answer means the source knows no prices for this region.
    fn on_demand_prices(
        &self,
    ) -> impl Future<Output = Result<HashMap<String, f64>, AwsError>> + Send;
}
