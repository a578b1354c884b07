//! What a warm container knows of this cluster's instances, in one place, and the one rule
//! for "capacity on its way" that a poll and a replacement both read by.
//!
//! The truth is EC2's listing (DescribeInstances by the ownership tag), but a listing can
//! miss what was launched after it was asked for, and EC2 lists a new instance only after
//! a while. So a read is the listing and what it may lack:
//! - a listing: asked for now, or the one the holder of the Lease keeps between polls (so
//!   a pending pod need not wait for DescribeInstances), usable only in the turn it holds
//!   every earlier holder's launches for ([`Turn::since`]) and while it is young
//!   ([`super::owned_listing`]);
//! - this container's own launches it lacks ([`UnseenLaunches`]): counted as pending,
//!   unless EC2 says they are gone;
//! - with a kept listing, the launches others made that it lacks, described by id: the
//!   earlier holders' latest, which the Lease names ([`Turn::named`]); replacements
//!   recorded on the node they replace (`nodewright.io/replacement`); and every launch
//!   published in the cluster's `nodewright-state` ConfigMap (replacements and capacity
//!   windows alike, see [`super::shared_launches`]).
//!
//! It also keeps which attempt each node claim is at ([`LaunchAttempts`]): the launches
//! and their ClientTokens are this container's memory of the same fleet.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;

use super::attempts::LaunchAttempts;
use super::owned_listing::{OwnedListing, refresh_due, standby_refresh_due, usable};
use super::turn::Turn;
use super::unseen_launches::UnseenLaunches;
use crate::aws::OwnedInstance;
use crate::ids::InstanceId;

/// See the module documentation. Owned by the provisioner of a warm container; every
/// change goes through its methods.
#[derive(Debug, Default)]
pub struct FleetView {
    listing: Option<OwnedListing>,
    own: UnseenLaunches,
    /// Launches other functions published, by id, with when they were made.
    published: BTreeMap<InstanceId, SystemTime>,
    attempts: LaunchAttempts,
}

/// Where a read's listing comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The kept listing, asked for at `asked_at`.
    Kept(OwnedListing),
    /// DescribeInstances, asked now.
    List,
}

impl FleetView {
    /// The listing a read in `turn` at `now` plans with.
    pub fn source(&self, turn: &Turn<'_>, now: SystemTime) -> Source {
        match self.usable_listing(turn, now) {
            Some(l) => Source::Kept(l.clone()),
            None => Source::List,
        }
    }

    /// The kept listing a read in `turn` at `now` may plan with.
    pub fn usable_listing(&self, turn: &Turn<'_>, now: SystemTime) -> Option<&OwnedListing> {
        self.listing.as_ref().filter(|l| usable(l, turn.since, now))
    }

    /// Whether the holder (in `turn`) or an invocation standing by (`turn.since` is
    /// `None`) should list again between polls.
    pub fn listing_due(&self, turn: &Turn<'_>, standing_by: bool, now: SystemTime) -> bool {
        if standing_by {
            standby_refresh_due(self.listing.as_ref(), now)
        } else {
            refresh_due(self.listing.as_ref(), turn.since, now)
        }
    }

    /// Keeps a listing asked for at `asked_at`, for the polls of a Lease turn (including
    /// the turn a standing-by invocation is about to take); a read outside one keeps
    /// nothing.
    pub fn keep_listing(
        &mut self,
        instances: Vec<OwnedInstance>,
        asked_at: SystemTime,
        keep: bool,
    ) {
        if keep {
            self.listing = Some(OwnedListing {
                instances,
                asked_at,
            });
        }
    }

    /// The ids others recorded as launched, that a kept `listing` lacks: recorded on
    /// `nodes` as their replacement, published lately, or `named` by the Lease as an
    /// earlier holder's. (Only a kept listing is completed so: one asked for now holds
    /// what EC2 lists.)
    pub fn recorded_missing(
        &self,
        listing: &[OwnedInstance],
        nodes: &[Node],
        named: &[InstanceId],
    ) -> Vec<InstanceId> {
        let on_nodes = nodes
            .iter()
            .filter_map(|n| n.metadata.annotations.as_ref())
            .flat_map(crate::removal::recorded_replacement)
            .filter_map(|id| InstanceId::parse(&id));
        let mut missing: Vec<InstanceId> = on_nodes
            .chain(self.published.keys().cloned())
            .chain(named.iter().cloned())
            .filter(|id| !listing.iter().any(|i| i.id == id.as_str()))
            .collect();
        missing.sort();
        missing.dedup();
        missing
    }

    /// This container's launches, for the read that listed `listed` at `asked_at`:
    /// forgets those whose Node registered (the listing speaks for them now) and says
    /// which older ones it lacks (gone or not visible yet: only a describe by id tells).
    pub fn own_unlisted(
        &mut self,
        listed: &[OwnedInstance],
        asked_at: SystemTime,
        nodes: &[Node],
    ) -> Vec<String> {
        self.own.forget_registered(nodes);
        self.own.unlisted_before(listed, asked_at)
    }

    /// Forgets own launches EC2 describes as terminated.
    pub fn forget_terminated(
        &mut self,
        states: &std::collections::HashMap<String, crate::aws::InstanceState>,
    ) {
        self.own.forget_terminated(states);
    }

    /// `listed` with this container's launches it lacks added as pending: the instances
    /// on their way or running, as this read counts them.
    pub fn on_its_way(
        &mut self,
        listed: Vec<OwnedInstance>,
        now: SystemTime,
    ) -> Vec<OwnedInstance> {
        self.own.merge(listed, now)
    }

    /// The owned instances as the kept listing (at most `max_age` old) and the launches
    /// since say, without asking EC2 (a figure for a metric); `None`: no listing that
    /// young.
    pub fn estimate(&self, now: SystemTime) -> Option<Vec<OwnedInstance>> {
        let listing = self
            .listing
            .as_ref()
            .filter(|l| l.age(now) <= super::owned_listing::MAX_AGE)?;
        let mut owned = listing.instances.clone();
        owned.extend(self.own.made_since(&owned, listing.asked_at));
        Some(owned)
    }

    /// Remembers a launch of this container, sent at `at` with `tags`.
    pub fn launched(
        &mut self,
        instance: &crate::aws::LaunchedInstance,
        tags: BTreeMap<String, String>,
        at: SystemTime,
    ) {
        self.own.record(instance, tags, at);
    }

    /// Adopts the launches other functions published (see [`super::shared_launches`]).
    pub fn adopt_published(
        &mut self,
        launches: impl IntoIterator<Item = (InstanceId, SystemTime)>,
    ) {
        self.published = launches.into_iter().collect();
    }

    pub fn attempts(&self) -> &LaunchAttempts {
        &self.attempts
    }

    pub fn attempts_mut(&mut self) -> &mut LaunchAttempts {
        &mut self.attempts
    }
}

#[cfg(test)]
mod tests;
