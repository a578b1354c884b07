//! Launches made outside the provisioner's Lease, shared with it. The interruption
//! function's and the sweeper's replacements, and the sweeper's capacity windows, launch
//! in other processes: the holder of the Lease, planning with a listing of instances it
//! asked for a few seconds earlier, would not count them and could launch for the same
//! pods again. So each such launch is written to nodewright's ConfigMap
//! (`kube-system/nodewright-state`, one key per instance, when it was launched as value)
//! next to the shared exclusions, and kept there for [`PUBLISHED_FOR`]; the holder reads
//! them with the exclusions and describes by id those its listing lacks
//! (see [`super::fleet_view`]).
//!
//! The pure half: key format, reading, merging. The adapter is `kube::StateConfigMap`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::ids::InstanceId;

/// Every key this module owns starts with it.
pub const KEY_PREFIX: &str = "launched.";

/// How long a launch stays published: longer than the oldest listing a poll plans with
/// ([`super::owned_listing::MAX_AGE`]), so every listing that may lack it is completed,
/// and as long as EC2 may take to list it ([`super::unseen_launches::VISIBILITY_WINDOW`]).
pub const PUBLISHED_FOR: Duration = super::unseen_launches::VISIBILITY_WINDOW;

/// One launch and when it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedLaunch {
    pub instance: InstanceId,
    pub at: SystemTime,
}

fn key_of(instance: &InstanceId) -> String {
    format!("{KEY_PREFIX}{instance}")
}

fn live(at: SystemTime, now: SystemTime) -> bool {
    now.duration_since(at)
        .map_or(true, |age| age < PUBLISHED_FOR)
}

/// The launches `data` holds that are still published at `now`, and one sentence per key
/// of ours that could not be read.
pub fn read(data: &BTreeMap<String, String>, now: SystemTime) -> (Vec<SharedLaunch>, Vec<String>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in data {
        let Some(id) = key.strip_prefix(KEY_PREFIX) else {
            continue;
        };
        let instance = InstanceId::parse(id);
        let at = value.trim().parse::<jiff::Timestamp>().ok();
        match (instance, at) {
            (Some(instance), Some(at)) => {
                let at = SystemTime::from(at);
                if live(at, now) {
                    found.push(SharedLaunch { instance, at });
                }
            }
            _ => problems.push(format!(
                "key {key:?}: not launched.<instance id> with an RFC 3339 time ({value:?})"
            )),
        }
    }
    (found, problems)
}

/// `current` with `add` merged in, our expired and unreadable keys pruned, every other key
/// kept as it is.
pub fn merge(
    current: &BTreeMap<String, String>,
    add: &[SharedLaunch],
    now: SystemTime,
) -> BTreeMap<String, String> {
    let (kept, _) = read(current, now);
    let mut out = super::shared_unavailable::others(current, KEY_PREFIX);
    for l in kept.iter().chain(add.iter().filter(|l| live(l.at, now))) {
        if let Ok(t) = jiff::Timestamp::try_from(l.at) {
            out.insert(key_of(&l.instance), t.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn launch(id: &str, s: u64) -> SharedLaunch {
        SharedLaunch {
            instance: InstanceId::parse(id).unwrap(),
            at: at(s),
        }
    }

    #[test]
    fn launches_are_published_for_two_minutes_and_other_keys_are_left_alone() {
        let current = BTreeMap::from([
            ("unavailable.zone.us-east-1a".to_string(), "x".to_string()),
            (
                "launched.i-0old".to_string(),
                "2027-01-15T08:00:00Z".to_string(),
            ),
            (
                "launched.not-an-id".to_string(),
                "2027-01-15T08:00:00Z".to_string(),
            ),
        ]);
        let data = merge(&current, &[launch("i-0a", 0), launch("i-0b", 100)], at(130));
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        // i-0a launched 130 s ago: past PUBLISHED_FOR; the old and unreadable keys pruned.
        assert_eq!(keys, ["launched.i-0b", "unavailable.zone.us-east-1a"]);
        let (found, problems) = read(&data, at(130));
        assert_eq!(found, [launch("i-0b", 100)]);
        assert!(problems.is_empty(), "{problems:?}");
        let (_, problems) = read(&current, at(130));
        assert_eq!(problems.len(), 1, "{problems:?}");
    }
}
