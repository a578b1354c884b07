//! One name per use of the AWS side, so a bound is written once: `A: Cloud`, not a list of
//! seven ports. A step that uses one port still asks for that port alone.

use super::ownership::InstanceOwnership;
use super::ports::{
    Fleet, ImageResolver, InstanceInventory, InstanceProfiles, InstanceTypeSource, LaunchTemplates,
    NetworkDiscovery,
};

/// Every AWS port the provisioner uses: its catalog, networks, images, launch templates,
/// fleets, instances and instance profiles. Anything implementing those is a `Cloud`.
pub trait Cloud:
    InstanceTypeSource
    + NetworkDiscovery
    + ImageResolver
    + Fleet
    + LaunchTemplates
    + InstanceInventory
    + InstanceProfiles
    + Sync
{
}

impl<T> Cloud for T where
    T: InstanceTypeSource
        + NetworkDiscovery
        + ImageResolver
        + Fleet
        + LaunchTemplates
        + InstanceInventory
        + InstanceProfiles
        + Sync
{
}

/// What taking instances away asks of EC2 (the interruption and sweeper functions): the
/// owned instances, and who owns a given id right before acting on it.
pub trait OwnedInstances: InstanceInventory + InstanceOwnership + Sync {}

impl<T> OwnedInstances for T where T: InstanceInventory + InstanceOwnership + Sync {}
