//! Where one poll stands in its invocation, handed to the poll and never stored: the
//! provisioner keeps no flag that a handler must remember to set and clear.

use std::time::SystemTime;

use crate::ids::InstanceId;
use crate::lease::MayAct;

/// One poll's turn.
#[derive(Clone, Copy)]
pub struct Turn<'a> {
    /// From when a listing of this cluster's instances holds every launch an earlier
    /// holder of the Lease made (see [`super::fleet_view`]); `None` outside a Lease turn
    /// (a replacement, a provisioner without a Lease), where every read lists anew.
    pub since: Option<SystemTime>,
    /// The earlier holders' launches made since then, which such a listing may lack (the
    /// Lease carries them from holder to holder, see `lease::launches`).
    pub named: &'a [InstanceId],
    /// No CreateFleet is sent at or after this: the margin before the invocation's
    /// deadline begins (a launch sent later might not be answered before Lambda stops it).
    pub launch_by: Option<SystemTime>,
    /// Asked right before each CreateFleet: the Lease is still this invocation's.
    pub gate: Option<&'a dyn MayAct>,
}

impl Turn<'_> {
    /// A read or launch outside any Lease turn: a replacement, a provisioner without one.
    pub const OUTSIDE: Turn<'static> = Turn {
        since: None,
        named: &[],
        launch_by: None,
        gate: None,
    };
}

impl std::fmt::Debug for Turn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("since", &self.since)
            .field("named", &self.named)
            .field("launch_by", &self.launch_by)
            .field("gate", &self.gate.is_some())
            .finish()
    }
}
