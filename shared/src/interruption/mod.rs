//! Interruption events: parse an EventBridge envelope into a typed [`Message`] (one small
//! module per kind, a dispatcher on (source, detail-type, version)), and map a message and
//! the node it names to an [`Intent`]. Pure: no I/O, no clock.

mod action;
mod budget_gate;
mod capacity_reservation;
mod follow_up;
mod health;
mod intent;
mod message;
mod parse;
mod rebalance;
mod spot;
mod state_change;

pub use action::{REBALANCE_ANNOTATION, Reason, RebalancePolicy};
pub use budget_gate::{Gate, PoolNodes, pool_nodes, rebalance_gate};
pub use follow_up::{FOLLOW_UP_DETAIL_TYPE, FOLLOW_UP_SOURCE, FollowUp, Step};
pub use intent::{DEFAULT_MAINTENANCE_WINDOW, Intent, NodeFacts, intent_for, maintenance_deadline};
pub use message::{Detail, InstanceAction, InstanceStateName, Kind, Message};
pub use parse::{IgnoreReason, Ignored, Origin, ParseError, Parsed, parse};
pub use spot::NOTICE as SPOT_NOTICE;

#[cfg(test)]
mod intent_tests;
#[cfg(test)]
mod parse_props;
#[cfg(test)]
mod parse_tests;
