//! What EC2NodeClass selectors resolve to (subnets, security groups), kept across polls
//! for a minute: while pods stay pending the provisioner polls every few seconds, and
//! asking EC2 each time for things that change in minutes, not seconds, costs API calls
//! (and throttling headroom) for nothing. One minute is karpenter-provider-aws's
//! `cache.DefaultTTL`, which its subnet and security group providers use. A class whose
//! launch fails is looked up afresh on the next poll (see [`Discovered::forget_class`]), so
//! a deleted subnet or group costs at most one failed launch.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::aws::{SecurityGroup, Subnet};

pub const DISCOVERY_TTL: Duration = Duration::from_secs(60);

/// One cached answer per EC2NodeClass, with when it was fetched.
#[derive(Debug, Clone)]
struct Entry<V> {
    at: SystemTime,
    /// The class's selector terms it answers, serialized: an edited class misses.
    terms: String,
    value: V,
}

#[derive(Debug, Default)]
pub struct Discovered {
    subnets: HashMap<String, Entry<Vec<Subnet>>>,
    groups: HashMap<String, Entry<Vec<SecurityGroup>>>,
}

fn fresh<'a, V>(
    map: &'a HashMap<String, Entry<V>>,
    class: &str,
    terms: &str,
    now: SystemTime,
) -> Option<&'a V> {
    let e = map.get(class)?;
    let age = now.duration_since(e.at).ok()?;
    (age < DISCOVERY_TTL && e.terms == terms).then_some(&e.value)
}

impl Discovered {
    pub fn subnets(&self, class: &str, terms: &str, now: SystemTime) -> Option<&Vec<Subnet>> {
        fresh(&self.subnets, class, terms, now)
    }

    pub fn put_subnets(&mut self, class: &str, terms: String, now: SystemTime, v: Vec<Subnet>) {
        let entry = Entry {
            at: now,
            terms,
            value: v,
        };
        self.subnets.insert(class.to_string(), entry);
    }

    pub fn groups(&self, class: &str, terms: &str, now: SystemTime) -> Option<&Vec<SecurityGroup>> {
        fresh(&self.groups, class, terms, now)
    }

    pub fn put_groups(
        &mut self,
        class: &str,
        terms: String,
        now: SystemTime,
        v: Vec<SecurityGroup>,
    ) {
        let entry = Entry {
            at: now,
            terms,
            value: v,
        };
        self.groups.insert(class.to_string(), entry);
    }

    /// The next lookup for `class` asks EC2 again.
    pub fn forget_class(&mut self, class: &str) {
        self.subnets.remove(class);
        self.groups.remove(class);
    }
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
    fn a_lookup_is_reused_for_a_minute_for_the_same_terms_and_until_forgotten() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut d = Discovered::default();
        d.put_subnets("default", "[a]".into(), t0, vec![subnet("subnet-1")]);
        let cases = [
            ("default", "[a]", 0, true),
            ("default", "[a]", 59, true),
            ("default", "[a]", 60, false),
            ("default", "[b]", 1, false),
            ("other", "[a]", 1, false),
        ];
        for (class, terms, after, hit) in cases {
            assert_eq!(
                d.subnets(class, terms, at(after)).is_some(),
                hit,
                "{class} {terms} +{after}s"
            );
        }
        d.forget_class("default");
        assert!(d.subnets("default", "[a]", at(1)).is_none());
    }
}
