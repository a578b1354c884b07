//! What EC2NodeClass selectors resolve to (subnets, security groups, AMIs), kept across
//! polls: while pods stay pending the provisioner polls every few seconds, and asking EC2
//! each time for things that change in minutes, not seconds, costs API calls (and
//! throttling headroom) for nothing.
//!
//! Each answer is a [`Swr`] with [`DISCOVERY_POLICY`]: fresh for [`DISCOVERY_TTL`] (one
//! minute: karpenter-provider-aws's `cache.DefaultTTL`, which its subnet and security
//! group providers use). Past that a
//! warm-up (off any pending pod's path: a standby invocation, a holder between polls)
//! asks again, while a poll keeps using the answer up to [`DISCOVERY_MAX_STALENESS`]
//! rather than wait on EC2 with pods pending: when EC2 is slow (a loaded endpoint timing
//! out after 10 s) a lookup on the poll's path is that pod's wait, and a failed one would
//! drop the class for the poll. A warm-up whose lookup fails waits
//! [`DISCOVERY_RETRY_AFTER`] before the next. A class whose launch fails is looked up
//! afresh on the next poll (see [`Discovered::forget_class`]), so a deleted subnet or group
//! costs at most one failed launch.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use super::swr::{BackOff, Policy, Purpose, Swr};
use crate::aws::{Image, SecurityGroup, Subnet};
use crate::catalog::Reservation;

pub const DISCOVERY_TTL: Duration = Duration::from_secs(60);
/// How old an answer a poll still uses rather than ask EC2 with pods pending.
pub const DISCOVERY_MAX_STALENESS: Duration = Duration::from_secs(600);
/// After a warm-up's lookup failed, how long until warm-ups look it up again.
pub const DISCOVERY_RETRY_AFTER: Duration = Duration::from_secs(30);

/// How a class's subnets, security groups and AMIs age: a warm-up asks again at the TTL,
/// a poll uses an answer up to [`DISCOVERY_MAX_STALENESS`], a failed lookup waits a fixed
/// [`DISCOVERY_RETRY_AFTER`].
pub const DISCOVERY_POLICY: Policy = Policy {
    ttl: DISCOVERY_TTL,
    refresh_after: DISCOVERY_TTL,
    max_staleness: DISCOVERY_MAX_STALENESS,
    warn_after: None,
    back_off: BackOff {
        first: DISCOVERY_RETRY_AFTER,
        max: DISCOVERY_RETRY_AFTER,
    },
};

/// One cached answer per EC2NodeClass and kind, for the class's selector terms (an edited
/// class misses).
#[derive(Debug, Default)]
pub struct Discovered {
    subnets: HashMap<String, Swr<Vec<Subnet>>>,
    groups: HashMap<String, Swr<Vec<SecurityGroup>>>,
    images: HashMap<String, Swr<Vec<Image>>>,
    reservations: HashMap<String, Swr<Vec<Reservation>>>,
}

fn usable<'a, V>(
    map: &'a HashMap<String, Swr<V>>,
    purpose: Purpose,
    class: &str,
    terms: &str,
    now: SystemTime,
) -> Option<&'a V> {
    map.get(class)?.usable(purpose, terms, now)
}

fn put<V>(map: &mut HashMap<String, Swr<V>>, class: &str, terms: String, at: SystemTime, v: V) {
    map.entry(class.to_string())
        .or_insert_with(|| Swr::new(DISCOVERY_POLICY))
        .store(terms, v, at);
}

fn any_due<V>(map: &HashMap<String, Swr<V>>, now: SystemTime) -> bool {
    map.values().any(|e| e.refresh_due(now))
}

fn failed<V>(map: &mut HashMap<String, Swr<V>>, now: SystemTime) {
    for e in map.values_mut().filter(|e| e.refresh_due(now)) {
        e.failed(now);
    }
}

impl Discovered {
    /// `class`'s subnets for `terms`, when an answer young enough for `purpose` is kept.
    pub fn subnets(
        &self,
        purpose: Purpose,
        class: &str,
        terms: &str,
        now: SystemTime,
    ) -> Option<&Vec<Subnet>> {
        usable(&self.subnets, purpose, class, terms, now)
    }

    pub fn put_subnets(&mut self, class: &str, terms: String, now: SystemTime, v: Vec<Subnet>) {
        put(&mut self.subnets, class, terms, now, v);
    }

    /// `class`'s security groups for `terms`, when an answer young enough is kept.
    pub fn groups(
        &self,
        purpose: Purpose,
        class: &str,
        terms: &str,
        now: SystemTime,
    ) -> Option<&Vec<SecurityGroup>> {
        usable(&self.groups, purpose, class, terms, now)
    }

    pub fn put_groups(
        &mut self,
        class: &str,
        terms: String,
        now: SystemTime,
        v: Vec<SecurityGroup>,
    ) {
        put(&mut self.groups, class, terms, now, v);
    }

    /// `class`'s newest image per architecture for `key` (its `amiSelectorTerms` and the
    /// Kubernetes version, see [`images_key`]), when an answer young enough is kept.
    pub fn images(
        &self,
        purpose: Purpose,
        class: &str,
        key: &str,
        now: SystemTime,
    ) -> Option<&Vec<Image>> {
        usable(&self.images, purpose, class, key, now)
    }

    pub fn put_images(&mut self, class: &str, key: String, now: SystemTime, v: Vec<Image>) {
        put(&mut self.images, class, key, now, v);
    }

    /// `class`'s capacity reservations for `terms`, when an answer young enough is kept.
    pub fn reservations(
        &self,
        purpose: Purpose,
        class: &str,
        terms: &str,
        now: SystemTime,
    ) -> Option<&Vec<Reservation>> {
        usable(&self.reservations, purpose, class, terms, now)
    }

    pub fn put_reservations(
        &mut self,
        class: &str,
        terms: String,
        now: SystemTime,
        v: Vec<Reservation>,
    ) {
        put(&mut self.reservations, class, terms, now, v);
    }

    /// One instance launched into reservation `id`: every class's kept answer has one
    /// less room in it, so the next poll does not plan into a reservation this one filled.
    pub fn launched_into(&mut self, id: &str) {
        for swr in self.reservations.values_mut() {
            crate::catalog::count_down(swr.value_mut().into_iter().flatten(), id);
        }
    }

    /// The next lookup for `class` asks EC2 again.
    pub fn forget_class(&mut self, class: &str) {
        self.subnets.remove(class);
        self.groups.remove(class);
        self.images.remove(class);
        self.reservations.remove(class);
    }

    /// Forgets the classes not in `classes` (deleted, or no longer usable): a warm-up
    /// refreshes only the classes in use.
    pub fn retain_classes(&mut self, classes: &HashSet<&str>) {
        self.subnets.retain(|c, _| classes.contains(c.as_str()));
        self.groups.retain(|c, _| classes.contains(c.as_str()));
        self.images.retain(|c, _| classes.contains(c.as_str()));
        self.reservations
            .retain(|c, _| classes.contains(c.as_str()));
    }

    /// A warm-up's lookups failed at `now`: the answers it was refreshing wait
    /// [`DISCOVERY_RETRY_AFTER`] before the next try.
    pub fn failed(&mut self, now: SystemTime) {
        failed(&mut self.subnets, now);
        failed(&mut self.groups, now);
        failed(&mut self.images, now);
        failed(&mut self.reservations, now);
    }

    /// Whether a warm-up at `now` has an answer to refresh: one is past
    /// [`DISCOVERY_TTL`] and its last failure is not backing off.
    pub fn refresh_due(&self, now: SystemTime) -> bool {
        any_due(&self.subnets, now)
            || any_due(&self.groups, now)
            || any_due(&self.images, now)
            || any_due(&self.reservations, now)
    }
}

/// The cache key of a class's images: its `amiSelectorTerms` and the Kubernetes version
/// (an alias resolves per version).
pub fn images_key<T: serde::Serialize>(terms: &T, kubernetes_version: &str) -> String {
    format!("{}@{kubernetes_version}", terms_key(terms))
}

/// A stable text for selector terms, as the cache key's second half.
pub fn terms_key<T: serde::Serialize>(terms: &T) -> String {
    serde_json::to_string(terms).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str) -> Subnet {
        Subnet {
            id: id.into(),
            zone: "us-east-1a".into(),
            zone_id: "use1-az1".into(),
            available_ips: 100,
            tags: Default::default(),
        }
    }

    #[test]
    fn a_poll_reuses_a_lookup_for_ten_minutes_a_warm_up_for_one_for_the_same_terms() {
        use Purpose::{Poll, WarmUp};
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut d = Discovered::default();
        d.put_subnets("default", "[a]".into(), t0, vec![subnet("subnet-1")]);
        let cases = [
            (WarmUp, "default", "[a]", 0, true),
            (WarmUp, "default", "[a]", 59, true),
            (WarmUp, "default", "[a]", 60, false),
            (Poll, "default", "[a]", 60, true),
            (Poll, "default", "[a]", 599, true),
            (Poll, "default", "[a]", 600, false),
            (Poll, "default", "[b]", 1, false),
            (Poll, "other", "[a]", 1, false),
        ];
        for (purpose, class, terms, after, hit) in cases {
            assert_eq!(
                d.subnets(purpose, class, terms, at(after)).is_some(),
                hit,
                "{purpose:?} {class} {terms} +{after}s"
            );
        }
        d.forget_class("default");
        assert!(d.subnets(Poll, "default", "[a]", at(1)).is_none());
    }

    #[test]
    fn a_warm_up_is_due_once_an_answer_is_a_minute_old_unless_a_failure_backs_off() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut d = Discovered::default();
        assert!(!d.refresh_due(t0), "nothing kept, nothing to refresh");
        d.put_subnets("default", "[a]".into(), t0, vec![subnet("subnet-1")]);
        d.put_images("default", images_key(&"[x]", "1.30"), at(30), Vec::new());
        let cases = [(59, false), (60, true), (89, true)];
        for (after, due) in cases {
            assert_eq!(d.refresh_due(at(after)), due, "+{after}s");
        }
        d.failed(at(60));
        let cases = [(61, false), (89, false), (90, true)];
        for (after, due) in cases {
            assert_eq!(d.refresh_due(at(after)), due, "after a failure, +{after}s");
        }
        d.put_subnets("default", "[a]".into(), at(90), vec![subnet("subnet-1")]);
        d.put_images("default", images_key(&"[x]", "1.30"), at(90), Vec::new());
        assert!(!d.refresh_due(at(91)), "refreshed");
        d.retain_classes(&HashSet::new());
        assert!(
            !d.refresh_due(at(1000)),
            "a class no longer in use is not refreshed"
        );
    }
}
