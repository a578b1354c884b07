//! EC2's status checks for node repair: read for the running instances of this cluster and
//! added to their nodes (`nodewright::disruption::mark_impaired`). A failed read leaves
//! repair to the node conditions alone for this sweep.

use jiff::Timestamp;
use nodewright::aws::{InstanceState, InstanceStatusChecks, OwnedInstance};
use nodewright::disruption::{Snapshot, mark_impaired};

use super::State;

pub(crate) async fn mark_status_checks<K, E: InstanceStatusChecks, R>(
    state: &State<K, E, R>,
    snapshot: &mut Snapshot,
    instances: &[OwnedInstance],
    now: Timestamp,
) {
    let running: Vec<String> = instances
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .map(|i| i.id.clone())
        .collect();
    if running.is_empty() {
        return;
    }
    match state.ec2.impaired(&running).await {
        Ok(impaired) => {
            for i in &impaired {
                tracing::warn!(
                    instance_id = i.instance_id,
                    check = i.check.as_str(),
                    since = ?i.since,
                    "EC2 status check impaired"
                );
            }
            mark_impaired(snapshot, &impaired, now);
        }
        Err(e) => tracing::warn!(
            error = nodewright::error_chain(&e),
            "reading EC2 status checks failed; repair goes by node conditions this sweep"
        ),
    }
}
