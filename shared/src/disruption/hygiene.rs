//! Hygiene: instances of nodewright's that never became a Node, and Nodes of nodewright's
//! whose instance is gone. Only ever about what is nodewright's: the instances here are
//! those EC2 lists with this cluster's ownership tag, and a Node is nodewright's when it
//! carries `nodewright.io/nodeclaim` (set by the user data nodewright writes).

use std::collections::HashSet;
use std::time::Duration;

use jiff::Timestamp;

use super::snapshot::{InstanceView, NodeView};

/// How long an instance may run without its Node before it is taken for lost. Karpenter
/// waits 15 minutes for a NodeClaim to register (`registrationTTL` in its lifecycle
/// controller); a healthy node joins in one to three.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeverJoined {
    pub instance_id: String,
    pub launched: Timestamp,
}

impl NeverJoined {
    pub fn reason(&self) -> String {
        format!(
            "instance {} launched at {} has no Node after {} minutes",
            self.instance_id,
            self.launched,
            JOIN_TIMEOUT.as_secs() / 60
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanNode {
    pub node: String,
    pub instance_id: String,
}

pub(super) fn never_joined(
    nodes: &[NodeView],
    instances: &[InstanceView],
    now: Timestamp,
) -> Vec<NeverJoined> {
    let joined: HashSet<&str> = nodes
        .iter()
        .filter_map(|n| n.instance_id.as_deref())
        .collect();
    instances
        .iter()
        .filter(|i| !joined.contains(i.id.as_str()))
        .filter_map(|i| {
            let launched = i.launched?;
            (now > launched && now.duration_since(launched).unsigned_abs() >= JOIN_TIMEOUT).then(
                || NeverJoined {
                    instance_id: i.id.clone(),
                    launched,
                },
            )
        })
        .collect()
}

/// How long a new Node's instance may be missing from DescribeInstances before the Node
/// counts as an orphan: EC2 is eventually consistent, and a Node that registered right
/// after its launch may name an instance EC2 does not list yet.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(2 * 60);

/// Nodes of nodewright's, older than [`ORPHAN_GRACE`], whose instance is not among this
/// cluster's live instances. The executor asks EC2 again about each before deleting (an
/// instance it still describes as live, owned or not, keeps its Node).
pub(super) fn orphan_nodes(
    nodes: &[NodeView],
    instances: &[InstanceView],
    now: Timestamp,
) -> Vec<OrphanNode> {
    let live: HashSet<&str> = instances.iter().map(|i| i.id.as_str()).collect();
    nodes
        .iter()
        .filter(|n| n.launched_by_nodewright)
        .filter(|n| now > n.created && now.duration_since(n.created).unsigned_abs() >= ORPHAN_GRACE)
        .filter_map(|n| {
            let id = n.instance_id.as_deref()?;
            (!live.contains(id)).then(|| OrphanNode {
                node: n.name.clone(),
                instance_id: id.into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::testkit::{node, t};

    fn instance(id: &str, launched: &str) -> InstanceView {
        InstanceView {
            id: id.into(),
            launched: Some(t(launched)),
        }
    }

    #[test]
    fn an_instance_without_a_node_goes_only_after_fifteen_minutes() {
        let instances = [
            instance("i-00000001", "10:00:00"),
            instance("i-00000002", "10:10:00"),
        ];
        let got = never_joined(&[], &instances, t("10:15:00"));
        assert_eq!(
            got,
            vec![NeverJoined {
                instance_id: "i-00000001".into(),
                launched: t("10:00:00")
            }]
        );
        assert!(got[0].reason().contains("no Node after 15 minutes"));
    }

    #[test]
    fn an_instance_whose_node_exists_is_never_taken_for_lost() {
        let mut n = node("a", "default");
        n.instance_id = Some("i-00000001".into());
        assert!(
            never_joined(&[n], &[instance("i-00000001", "08:00:00")], t("10:00:00")).is_empty()
        );
    }

    #[test]
    fn a_nodewright_node_whose_instance_is_gone_is_an_orphan_and_a_foreign_node_never_is() {
        let mut ours = node("ours", "default");
        ours.instance_id = Some("i-0000000a".into());
        let mut alive = node("alive", "default");
        alive.instance_id = Some("i-0000000b".into());
        let mut foreign = node("foreign", "default");
        foreign.instance_id = Some("i-0000000c".into());
        foreign.launched_by_nodewright = false;
        let mut no_provider_id = node("fargate", "default");
        no_provider_id.instance_id = None;
        let got = orphan_nodes(
            &[ours, alive, foreign, no_provider_id],
            &[instance("i-0000000b", "08:00:00")],
            t("10:00:00"),
        );
        assert_eq!(
            got,
            vec![OrphanNode {
                node: "ours".into(),
                instance_id: "i-0000000a".into()
            }]
        );
    }

    #[test]
    fn a_new_node_whose_instance_ec2_does_not_list_yet_is_an_orphan_only_after_the_grace() {
        let mut young = node("young", "default");
        young.instance_id = Some("i-0000000d".into());
        young.created = t("10:00:00");
        let within = t("10:01:59");
        assert!(orphan_nodes(std::slice::from_ref(&young), &[], within).is_empty());
        let got = orphan_nodes(&[young], &[], t("10:02:00"));
        assert_eq!(got.len(), 1, "{got:?}");
    }
}
