//! Unavailable offerings shared by every function of the stack. Each function keeps its own
//! [`UnavailableOfferings`](super::UnavailableOfferings) in memory, which a cold start
//! forgets and no other function sees: a spot warning handled by the interruption function
//! would not keep the provisioner (a different process) from launching the reclaimed
//! offering again a minute later. So the exclusions are also written to nodewright's own
//! ConfigMap (`kube-system/nodewright-state`, one key per exclusion, its expiry as value),
//! and read back before every plan.
//!
//! This module is the pure half: the key format, merging new exclusions into what the
//! ConfigMap holds (the later expiry wins; expired and unreadable entries are dropped) and
//! reading it back. The adapter (`kube::StateConfigMap`) does the I/O with optimistic
//! concurrency: a conflicting write (409) is re-read, merged again and retried.
//!
//! Quota exclusions (a vCPU quota group) stay per process: they are rare and their group
//! names are not instance types a key could name safely.

use std::collections::BTreeMap;
use std::time::SystemTime;

use futures::future::BoxFuture;

use super::unavailable::Exclusion;
use crate::catalog::CapacityType;
use crate::kube::KubeError;

/// Every key this module owns starts with it; other keys of the ConfigMap are left alone.
pub const KEY_PREFIX: &str = "unavailable.";

/// One exclusion and until when it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedExclusion {
    pub exclusion: Exclusion,
    pub until: SystemTime,
}

/// What the functions share through nodewright's ConfigMap: exclusions, and launches
/// made outside the provisioner's Lease (see [`super::shared_launches`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedFacts {
    pub exclusions: Vec<SharedExclusion>,
    pub launches: Vec<super::shared_launches::SharedLaunch>,
}

/// Where the functions share what they learn (the port; `kube::StateConfigMap` is the
/// adapter).
pub trait SharedState: Send + Sync {
    /// What is shared and still in force at `now`.
    fn load(&self, now: SystemTime) -> BoxFuture<'_, Result<SharedFacts, KubeError>>;
    /// Adds `add` to what is shared, pruning what has expired at `now`.
    fn publish(&self, add: SharedFacts, now: SystemTime) -> BoxFuture<'_, Result<(), KubeError>>;
}

/// The ConfigMap key of an exclusion; None for one that is not shared (a quota group) or
/// whose names a ConfigMap key cannot hold.
pub fn key_of(exclusion: &Exclusion) -> Option<String> {
    let key = match exclusion {
        Exclusion::Offering {
            instance_type,
            zone,
            capacity_type,
        } => format!("{KEY_PREFIX}offering.{capacity_type}.{zone}.{instance_type}"),
        Exclusion::Zone(zone) => format!("{KEY_PREFIX}zone.{zone}"),
        Exclusion::CapacityType(c) => format!("{KEY_PREFIX}capacity-type.{c}"),
        Exclusion::Quota { .. } => return None,
    };
    // A ConfigMap key is at most 253 of [-._a-zA-Z0-9]; a zone never holds a dot, so the
    // instance type (which does) can be the key's tail.
    let valid = key.len() <= 253
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    let zone_has_dot = match exclusion {
        Exclusion::Offering { zone, .. } | Exclusion::Zone(zone) => zone.contains('.'),
        _ => false,
    };
    (valid && !zone_has_dot).then_some(key)
}

fn capacity_type(s: &str) -> Result<CapacityType, String> {
    CapacityType::parse(s).ok_or_else(|| format!("unknown capacity type {s:?}"))
}

/// The exclusion a key names (the key without [`KEY_PREFIX`] is `rest`).
fn exclusion_of(rest: &str) -> Result<Exclusion, String> {
    let non_empty = |s: &str, what: &str| {
        if s.is_empty() {
            Err(format!("no {what}"))
        } else {
            Ok(s.to_string())
        }
    };
    match rest.split_once('.') {
        Some(("offering", tail)) => {
            let mut parts = tail.splitn(3, '.');
            let c = capacity_type(parts.next().unwrap_or_default())?;
            let zone = non_empty(parts.next().unwrap_or_default(), "zone")?;
            let instance_type = non_empty(parts.next().unwrap_or_default(), "instance type")?;
            Ok(Exclusion::Offering {
                instance_type,
                zone,
                capacity_type: c,
            })
        }
        Some(("zone", zone)) => Ok(Exclusion::Zone(non_empty(zone, "zone")?)),
        Some(("capacity-type", c)) => Ok(Exclusion::CapacityType(capacity_type(c)?)),
        _ => Err(
            "not offering.<capacity>.<zone>.<type>, zone.<zone> nor capacity-type.<capacity>"
                .into(),
        ),
    }
}

fn until_of(value: &str) -> Result<SystemTime, String> {
    let t: jiff::Timestamp = value
        .trim()
        .parse()
        .map_err(|e| format!("expiry {value:?} is not an RFC 3339 time: {e}"))?;
    Ok(SystemTime::from(t))
}

fn value_of(until: SystemTime) -> Option<String> {
    jiff::Timestamp::try_from(until).ok().map(|t| t.to_string())
}

/// What the ConfigMap's `data` holds, read: the exclusions in force at `now`, and one
/// sentence per key of ours that could not be read (naming the key).
pub fn read(
    data: &BTreeMap<String, String>,
    now: SystemTime,
) -> (Vec<SharedExclusion>, Vec<String>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in data {
        let Some(rest) = key.strip_prefix(KEY_PREFIX) else {
            continue;
        };
        match exclusion_of(rest).and_then(|x| until_of(value).map(|u| (x, u))) {
            Ok((exclusion, until)) if now < until => {
                found.push(SharedExclusion { exclusion, until })
            }
            Ok(_) => {}
            Err(why) => problems.push(format!("key {key:?}: {why}")),
        }
    }
    (found, problems)
}

/// The ConfigMap's new `data`: `current` with `add` merged in (for a key in both, the later
/// expiry), our expired and unreadable keys pruned, every other key kept as it is.
pub fn merge(
    current: &BTreeMap<String, String>,
    add: &[SharedExclusion],
    now: SystemTime,
) -> BTreeMap<String, String> {
    let (live, _) = read(current, now);
    let mut out = others(current, KEY_PREFIX);
    let mut until: BTreeMap<String, SystemTime> = BTreeMap::new();
    for x in live.iter().chain(add.iter().filter(|x| now < x.until)) {
        let Some(key) = key_of(&x.exclusion) else {
            continue;
        };
        let t = until.entry(key).or_insert(x.until);
        *t = (*t).max(x.until);
    }
    for (key, t) in until {
        if let Some(v) = value_of(t) {
            out.insert(key, v);
        }
    }
    out
}

/// The keys of `data` that do not start with `prefix`: another module's, kept as they are.
pub(super) fn others(data: &BTreeMap<String, String>, prefix: &str) -> BTreeMap<String, String> {
    data.iter()
        .filter(|(k, _)| !k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
