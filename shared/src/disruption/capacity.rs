//! Scheduled capacity (what Karpenter does not have): a NodePool may keep a floor of nodes,
//! during windows (a daily peak) or always (a static minimum), through the annotation
//! [`CAPACITY_WINDOWS_ANNOTATION`]:
//!
//! ```yaml
//! metadata:
//!   annotations:
//!     nodewright.io/capacity-windows: |
//!       - schedule: "0 9 * * MON-FRI"   # cron, read in timeZone (default UTC)
//!         timeZone: Asia/Seoul
//!         duration: 9h
//!         lead: 15m                     # the floor holds from 15 minutes before
//!         nodes: 4
//!         headroom: {cpu: "8", memory: 16Gi}  # and keep this much free on top
//!       - nodes: 1                      # no schedule: always
//! ```
//!
//! [`floor`] is the number of nodes the pool keeps at `now`, [`headroom`] the CPU and
//! memory it keeps free (allocatable not requested by the pods on its nodes): each the
//! largest of the windows holding then. Emptiness and consolidation never take the pool
//! below either (`plan.rs`). The sweeper also launches both ahead of demand
//! (`functions/sweeper/src/floor.rs`): as real pods take the headroom, the next sweep
//! launches more, which is the "overprovisioning with placeholder pods" pattern without
//! anything running in the cluster.

use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Deserialize;

use super::budget::SettingError;
use super::cron::Cron;
use crate::api::NodePool;
use crate::resources::{CPU, MEMORY, Resources, parse_milli};

pub const CAPACITY_WINDOWS_ANNOTATION: &str = "nodewright.io/capacity-windows";

#[derive(Debug, Clone)]
pub struct CapacityWindow {
    /// `None`: always (a static minimum).
    pub schedule: Option<(Cron, TimeZone)>,
    pub duration: Duration,
    pub lead: Duration,
    pub nodes: usize,
    /// CPU and memory kept free (milli-units, as [`Resources`]); zero when not asked for.
    pub headroom: Resources,
}

impl CapacityWindow {
    /// Holds from `lead` before a firing until `duration` after it (half-open).
    pub fn holds(&self, now: Timestamp) -> bool {
        let Some((cron, tz)) = &self.schedule else {
            return true;
        };
        let Ok(at) = now.checked_add(self.lead) else {
            return false;
        };
        // A firing f holds over [f - lead, f + duration): the latest firing at or before
        // now + lead, if later than now - duration.
        let span = self.lead + self.duration;
        cron.last_fire(at, span, tz)
            .is_some_and(|f| at.duration_since(f).unsigned_abs() < span)
    }
}

/// The floor at `now`: the most nodes any holding window asks for (0 without any).
pub fn floor(windows: &[CapacityWindow], now: Timestamp) -> usize {
    windows
        .iter()
        .filter(|w| w.holds(now))
        .map(|w| w.nodes)
        .max()
        .unwrap_or(0)
}

/// The headroom at `now`: per resource, the most any holding window asks to keep free.
pub fn headroom(windows: &[CapacityWindow], now: Timestamp) -> Resources {
    let mut most = Resources::default();
    for w in windows.iter().filter(|w| w.holds(now)) {
        most.max(&w.headroom);
    }
    most
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    schedule: Option<String>,
    time_zone: Option<String>,
    duration: Option<crate::api::Duration>,
    lead: Option<crate::api::Duration>,
    nodes: Option<usize>,
    headroom: Option<HeadroomSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadroomSpec {
    cpu: Option<String>,
    memory: Option<String>,
}

/// A NodePool's capacity windows, or why they cannot be read, naming the annotation and
/// the entry's field.
pub fn pool_capacity(np: &NodePool) -> Result<Vec<CapacityWindow>, SettingError> {
    let Some(text) = np.metadata.annotations.get(CAPACITY_WINDOWS_ANNOTATION) else {
        return Ok(Vec::new());
    };
    let at = format!("metadata.annotations[{CAPACITY_WINDOWS_ANNOTATION}]");
    let specs: Vec<Spec> = serde_yaml::from_str(text).map_err(|e| SettingError {
        field: at.clone(),
        message: format!("not a list of windows: {e}"),
    })?;
    specs
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            window(s).map_err(|(field, message)| SettingError {
                field: format!("{at}[{i}].{field}"),
                message,
            })
        })
        .collect()
}

fn window(s: Spec) -> Result<CapacityWindow, (&'static str, String)> {
    let mut headroom = Resources::default();
    if let Some(h) = &s.headroom {
        for (field, name, value) in [
            ("headroom.cpu", CPU, &h.cpu),
            ("headroom.memory", MEMORY, &h.memory),
        ] {
            let Some(value) = value else { continue };
            let milli = parse_milli(value)
                .map_err(|e| (field, format!("{value:?} is not a quantity ({e})")))?;
            if milli < 0 {
                return Err((field, format!("{value:?} is negative")));
            }
            headroom.set(name, milli);
        }
        if headroom == Resources::default() {
            return Err(("headroom", "set cpu or memory (above zero)".into()));
        }
    }
    if s.nodes.is_none() && s.headroom.is_none() {
        return Err(("nodes", "required unless headroom is set".into()));
    }
    let lead = s.lead.map_or(Duration::ZERO, |d| d.0);
    let schedule = match (&s.schedule, s.duration) {
        (None, None) => {
            if s.time_zone.is_some() || s.lead.is_some() {
                return Err(("schedule", "required with timeZone or lead".into()));
            }
            None
        }
        (Some(c), Some(_)) => {
            let tz = match &s.time_zone {
                None => TimeZone::UTC,
                Some(name) => TimeZone::get(name.trim()).map_err(|e| {
                    (
                        "timeZone",
                        format!("{name:?} is not a known time zone ({e})"),
                    )
                })?,
            };
            Some((Cron::parse(c).map_err(|e| ("schedule", e))?, tz))
        }
        (Some(_), None) => return Err(("duration", "required when schedule is set".into())),
        (None, Some(_)) => return Err(("schedule", "required when duration is set".into())),
    };
    Ok(CapacityWindow {
        schedule,
        duration: s.duration.map_or(Duration::ZERO, |d| d.0),
        lead,
        nodes: s.nodes.unwrap_or(0),
        headroom,
    })
}
