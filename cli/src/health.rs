//! The stack's health beside the fleet (`status --stack`): when each function last
//! succeeded, its errors and throttles in the last hour, the interruption queue's depth,
//! the dead-letter count and the alarms in ALARM. [`read`] asks AWS; everything here turns
//! what AWS answered into a [`Health`] and prints it.

pub mod read;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::status_view::age;
use crate::table;

/// How far back a function's last success is looked for: metrics at one-minute periods,
/// a day of them in one GetMetricData call.
pub const LOOKBACK: SignedDuration = SignedDuration::from_hours(24);
/// The window errors and throttles are counted over.
pub const RECENT: SignedDuration = SignedDuration::from_hours(1);

/// The template's logical ids of the parts `status` reads, and the names it shows.
const FUNCTIONS: [(&str, &str); 3] = [
    ("ProvisionerFunction", "provisioner"),
    ("InterruptionFunction", "interruption"),
    ("SweeperFunction", "sweeper"),
];
const QUEUE: &str = "InterruptionQueue";
const DEAD_LETTERS: &str = "InterruptionDeadLetterQueue";
const ALARM_TYPE: &str = "AWS::CloudWatch::Alarm";

/// One resource of the stack as CloudFormation lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub logical_id: String,
    pub resource_type: String,
    pub physical_id: String,
}

/// The parts of a deployed stack whose health `status` shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StackParts {
    /// (shown name, function name) of each function the stack has.
    pub functions: Vec<(String, String)>,
    pub queue_url: Option<String>,
    pub dead_letter_url: Option<String>,
    pub alarms: Vec<String>,
}

/// Picks the functions, queues and alarms out of the stack's resources.
pub fn stack_parts(resources: &[Resource]) -> StackParts {
    let physical = |logical: &str| {
        resources
            .iter()
            .find(|r| r.logical_id == logical)
            .map(|r| r.physical_id.clone())
    };
    let mut alarms: Vec<String> = resources
        .iter()
        .filter(|r| r.resource_type == ALARM_TYPE)
        .map(|r| r.physical_id.clone())
        .collect();
    alarms.sort();
    StackParts {
        functions: FUNCTIONS
            .iter()
            .filter_map(|(logical, shown)| Some((shown.to_string(), physical(logical)?)))
            .collect(),
        queue_url: physical(QUEUE),
        dead_letter_url: physical(DEAD_LETTERS),
        alarms,
    }
}

/// Per-minute sums of one function's AWS/Lambda metrics: (start of the minute, sum).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub invocations: Vec<(Timestamp, f64)>,
    pub errors: Vec<(Timestamp, f64)>,
    pub throttles: Vec<(Timestamp, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FunctionHealth {
    pub shown: String,
    pub name: String,
    /// `None` when its metrics could not be read.
    pub metrics: Option<Usage>,
}

/// What a function's metrics say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// The start of the last minute in which an invocation did not fail.
    pub last_success: Option<Timestamp>,
    pub last_invoked: Option<Timestamp>,
    pub errors: u64,
    pub throttles: u64,
}

/// A function's usage from its metrics at `now`. Lambda counts a failed invocation in
/// both `Invocations` and `Errors` (a throttled one in neither), so a minute with more
/// invocations than errors had a success in it.
pub fn usage(series: &Series, now: Timestamp) -> Usage {
    let at = |points: &[(Timestamp, f64)], t: Timestamp| {
        points
            .iter()
            .filter(|(p, _)| *p == t)
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    let invoked = || series.invocations.iter().filter(|(_, v)| *v > 0.0);
    let last_success = invoked()
        .filter(|(t, v)| *v > at(&series.errors, *t))
        .map(|(t, _)| *t)
        .max();
    let recent = |points: &[(Timestamp, f64)]| {
        points
            .iter()
            .filter(|(t, _)| *t >= now - RECENT && *t <= now)
            .map(|(_, v)| v)
            .sum::<f64>()
            .round() as u64
    };
    Usage {
        last_success,
        last_invoked: invoked().map(|(t, _)| *t).max(),
        errors: recent(&series.errors),
        throttles: recent(&series.throttles),
    }
}

/// Messages in a queue: waiting to be received, and received but not yet deleted.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Depth {
    pub waiting: u64,
    pub in_flight: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FiringAlarm {
    pub name: String,
    pub reason: String,
    pub since: Option<Timestamp>,
}

/// What `status --stack` shows; a part AWS did not answer is `None`, and why is in the
/// status's warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub stack: String,
    pub region: String,
    pub functions: Vec<FunctionHealth>,
    pub queue: Option<Depth>,
    pub dead_letters: Option<u64>,
    pub alarms: usize,
    pub firing: Option<Vec<FiringAlarm>>,
}

/// The health block under the fleet.
pub fn render(health: &Health, now: Timestamp) -> String {
    let since = |t: Option<Timestamp>| match t {
        Some(t) => format!("{} ago", age(Some(t), now)),
        None => format!("none in {}h", LOOKBACK.as_hours()),
    };
    let unknown = || "?".to_string();
    let rows: Vec<Vec<String>> = health
        .functions
        .iter()
        .map(|f| match &f.metrics {
            Some(u) => vec![
                f.shown.clone(),
                since(u.last_success),
                since(u.last_invoked),
                u.errors.to_string(),
                u.throttles.to_string(),
            ],
            None => vec![f.shown.clone(), unknown(), unknown(), unknown(), unknown()],
        })
        .collect();
    let mut out = format!("Stack {} ({})\n", health.stack, health.region);
    out.push_str(&table::render(
        &[
            "FUNCTION",
            "LAST SUCCESS",
            "LAST INVOKED",
            "ERRORS 1H",
            "THROTTLES 1H",
        ],
        &rows,
        &[3, 4],
    ));
    let queue = health.queue.map_or_else(unknown, |d| {
        format!("{} waiting, {} in flight", d.waiting, d.in_flight)
    });
    let dead = health.dead_letters.map_or_else(unknown, |n| n.to_string());
    out.push_str(&format!(
        "interruption queue: {queue}; dead letters: {dead}\n"
    ));
    match &health.firing {
        None => out.push_str(&format!("alarms: {} (states unknown)\n", health.alarms)),
        Some(firing) if firing.is_empty() => {
            out.push_str(&format!("alarms: none of {} in ALARM\n", health.alarms));
        }
        Some(firing) => {
            out.push_str(&format!(
                "alarms: {} of {} in ALARM\n",
                firing.len(),
                health.alarms
            ));
            for a in firing {
                let since = a
                    .since
                    .map_or_else(String::new, |t| format!(" (for {})", age(Some(t), now)));
                out.push_str(&format!("  {}{since}: {}\n", a.name, a.reason));
            }
        }
    }
    out
}

/// The health as data, for `-o json|yaml`.
pub fn to_json(health: &Health) -> Value {
    let time = |t: Option<Timestamp>| t.map(|t| t.to_string());
    json!({
        "stack": health.stack,
        "region": health.region,
        "functions": health.functions.iter().map(|f| json!({
            "function": f.shown,
            "name": f.name,
            "last_success": time(f.metrics.and_then(|u| u.last_success)),
            "last_invoked": time(f.metrics.and_then(|u| u.last_invoked)),
            "errors_last_hour": f.metrics.map(|u| u.errors),
            "throttles_last_hour": f.metrics.map(|u| u.throttles),
        })).collect::<Vec<_>>(),
        "queue": health.queue.map(|d| json!({"waiting": d.waiting, "in_flight": d.in_flight})),
        "dead_letters": health.dead_letters,
        "alarms": health.alarms,
        "alarms_firing": health.firing.as_ref().map(|f| f.iter().map(|a| json!({
            "name": a.name, "reason": a.reason, "since": time(a.since),
        })).collect::<Vec<_>>()),
    })
}

#[cfg(test)]
mod tests;
