//! Whether to create, acquire, renew, take over or wait on a Lease: a pure decision.

use std::time::{Duration, SystemTime};

/// A Lease as read, in our terms (`spec` of `coordination.k8s.io/v1` Lease).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `holderIdentity`; `None` (or empty) when released.
    pub holder: Option<String>,
    /// `renewTime`: the holder's last renewal.
    pub renewed: Option<SystemTime>,
    /// `acquireTime`: when the current holder took it.
    pub acquired: Option<SystemTime>,
    /// `leaseDurationSeconds`: how long past `renewed` the holder's claim stands.
    pub duration: Option<Duration>,
    /// `leaseTransitions`: how many times the holder changed.
    pub transitions: i32,
    /// The holders' launches, carried from holder to holder (nodewright's annotation
    /// `nodewright.io/launches`, see [`super::launches`]); `None`: none recorded.
    pub launches: Option<super::Launches>,
}

/// What to do about a Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// There is no Lease object: create it, held by me.
    Create,
    /// Nobody holds it (released): take it.
    Acquire,
    /// I hold it: renew it.
    Renew,
    /// Its holder let it expire (died, or is frozen): take it.
    TakeOver { from: String },
    /// Someone else holds it until `until`: do not act; look again then, or sooner.
    Wait { holder: String, until: SystemTime },
}

/// When the holder's claim ends: `renewTime + leaseDurationSeconds`. A Lease missing
/// either was not written by a live holder of this protocol, so it has already ended.
pub fn expires(lease: &LeaseRecord) -> Option<SystemTime> {
    lease.renewed?.checked_add(lease.duration?)
}

/// Given the Lease as just read (`None`: no such object), my identity and now.
pub fn decide(current: Option<&LeaseRecord>, me: &str, now: SystemTime) -> Step {
    let Some(lease) = current else {
        return Step::Create;
    };
    let holder = match lease.holder.as_deref() {
        None | Some("") => return Step::Acquire,
        Some(h) => h,
    };
    if holder == me {
        // Even when it has expired: nobody else wrote it since (the write carries the
        // resourceVersion just read, so if someone had, it would fail with a conflict).
        return Step::Renew;
    }
    match expires(lease) {
        Some(until) if until > now => Step::Wait {
            holder: holder.to_string(),
            until,
        },
        _ => Step::TakeOver {
            from: holder.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
    }

    fn held(holder: &str, renewed: u64, duration: u64) -> LeaseRecord {
        LeaseRecord {
            holder: Some(holder.into()),
            renewed: Some(at(renewed)),
            acquired: Some(at(0)),
            duration: Some(Duration::from_secs(duration)),
            transitions: 0,
            launches: None,
        }
    }

    #[test]
    fn each_lease_as_read_leads_to_one_step() {
        let released = LeaseRecord {
            holder: None,
            ..held("x", 0, 5)
        };
        let empty_holder = LeaseRecord {
            holder: Some(String::new()),
            ..held("x", 0, 5)
        };
        let no_renew_time = LeaseRecord {
            renewed: None,
            ..held("b", 0, 5)
        };
        let no_duration = LeaseRecord {
            duration: None,
            ..held("b", 9, 5)
        };
        let take_from_b = Step::TakeOver { from: "b".into() };
        let cases: &[(&str, Option<LeaseRecord>, u64, Step)] = &[
            ("no lease object yet is created", None, 10, Step::Create),
            (
                "a released lease is acquired",
                Some(released),
                10,
                Step::Acquire,
            ),
            (
                "an empty holder is a released lease",
                Some(empty_holder),
                10,
                Step::Acquire,
            ),
            (
                "my own live lease is renewed",
                Some(held("a", 8, 5)),
                10,
                Step::Renew,
            ),
            (
                "my own expired lease is renewed (the write fails if someone took it)",
                Some(held("a", 1, 5)),
                10,
                Step::Renew,
            ),
            (
                "another holder's live lease is waited on until it expires",
                Some(held("b", 8, 5)),
                10,
                Step::Wait {
                    holder: "b".into(),
                    until: at(13),
                },
            ),
            (
                "another holder's lease expiring exactly now is taken over",
                Some(held("b", 5, 5)),
                10,
                take_from_b.clone(),
            ),
            (
                "another holder's expired lease is taken over",
                Some(held("b", 1, 5)),
                10,
                take_from_b.clone(),
            ),
            (
                "a holder without a renew time holds nothing",
                Some(no_renew_time),
                10,
                take_from_b.clone(),
            ),
            (
                "a holder without a duration holds nothing",
                Some(no_duration),
                10,
                take_from_b,
            ),
        ];
        for (case, lease, now, want) in cases {
            assert_eq!(decide(lease.as_ref(), "a", at(*now)), *want, "{case}");
        }
    }
}
