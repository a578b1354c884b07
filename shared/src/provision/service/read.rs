//! A poll's read phase: what it needs to decide, gathered without writing anything. It
//! reads in two steps so that an idle poll (no pending pod, the batching window open)
//! costs two cluster reads, not six calls: [`Provisioner::read_pending`] first, then,
//! only when a plan is due, [`Provisioner::read_capacity`].

use std::collections::HashMap;
use std::time::SystemTime;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::super::in_flight::{missing_nodeclaim_labels, set_nodeclaim_label};
use super::super::planning_order::sort_for_planning;
use super::{ProvisionError, Provisioner, aws_err, kube_err};
use crate::api::{EC2NodeClass, NodePool, labels};
use crate::aws::{Cloud, OwnedInstance};
use crate::kube::{Cluster, ConfigOrigin, ObjectRef, usable};

/// The configuration and the pending pods, in planning order.
pub(super) struct Pending {
    pub(super) pools: Vec<NodePool>,
    pub(super) classes: Vec<EC2NodeClass>,
    /// Configuration objects left out, and why (reported as Events by the act phase).
    pub(super) dropped: Vec<(ObjectRef, String)>,
    pub(super) origin: ConfigOrigin,
    pub(super) pods: Vec<Pod>,
}

/// The capacity side: nodes (with the node-claim labels the act phase is about to write
/// already set), DaemonSets, bound pods, and this cluster's instances, those EC2 does not
/// list yet included.
pub(super) struct Capacity {
    pub(super) nodes: Vec<Node>,
    pub(super) daemon_sets: Vec<DaemonSet>,
    pub(super) bound: HashMap<String, Vec<Pod>>,
    pub(super) owned: Vec<OwnedInstance>,
    /// (node, node claim): labels to write.
    pub(super) unlabelled: Vec<(String, String)>,
}

/// The capacity side as listed, before this container's memory of unlisted launches.
pub(super) struct CapacityLists {
    pub(super) nodes: Vec<Node>,
    pub(super) daemon_sets: Vec<DaemonSet>,
    pub(super) bound: HashMap<String, Vec<Pod>>,
    pub(super) owned: Vec<OwnedInstance>,
}

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    pub(super) async fn read_pending(&self) -> Result<Pending, ProvisionError> {
        // Independent reads, asked at once.
        let config = async { self.kube.load().await.map_err(kube_err("NodePools")) };
        let pods = async {
            self.kube
                .pending_pods()
                .await
                .map_err(kube_err("pending pods"))
        };
        let (config, mut pods) = tokio::try_join!(config, pods)?;
        let (pools, classes, dropped) = usable(&config.inputs, &config.problems);
        sort_for_planning(&mut pods, &self.handled, &self.first_seen);
        Ok(Pending {
            pools,
            classes,
            dropped,
            origin: config.source,
            pods,
        })
    }

    /// Reads the capacity side. It writes nothing; it updates this container's memory of
    /// the launches EC2 does not list yet (those that registered, or were seen
    /// terminated, are forgotten).
    pub(super) async fn read_capacity(
        &mut self,
        now: SystemTime,
    ) -> Result<Capacity, ProvisionError> {
        // The holder's listing when it is young enough (no DescribeInstances on this
        // pod's path), else a listing asked for now, kept for the next polls.
        let kept = self.usable_listing(now).cloned();
        let from_listing = kept.is_some();
        let listed_at = kept.as_ref().map_or(now, |l| l.asked_at);
        let CapacityLists {
            mut nodes,
            daemon_sets,
            bound,
            mut owned,
        } = self.list_capacity(kept.map(|l| l.instances)).await?;
        if from_listing {
            self.add_recorded_replacements(&nodes, &mut owned).await?;
        } else {
            self.keep_listing(owned.clone(), now);
        }
        self.unseen.forget_registered(&nodes);
        // A launch after the listing was asked for is missing from it as a rule: in flight
        // until a listing shows it (or shows it gone). Only older ones are asked about.
        let unlisted = self.unseen.unlisted_before(&owned, listed_at);
        if !unlisted.is_empty() {
            // A launch that joined and was terminated before any poll listed it is not in
            // flight; one EC2 does not describe yet is (on error, keep counting it).
            if let Ok(states) = self.aws.states(&unlisted).await {
                self.unseen.forget_terminated(&states);
            }
        }
        let owned = self.unseen.merge(owned, now);
        let unlabelled = missing_nodeclaim_labels(&nodes, &owned);
        // This poll's snapshot sees the labels too, written or not: the instance tag
        // already says the node is ours, so a node that joined and is not Ready yet
        // counts as starting capacity now, not only from the next poll on (a failed
        // write is retried then).
        for (node, claim) in &unlabelled {
            set_nodeclaim_label(&mut nodes, node, claim);
        }
        Ok(Capacity {
            nodes,
            daemon_sets,
            bound,
            owned,
            unlabelled,
        })
    }

    /// The capacity side as the cluster and EC2 list it, for a poll and for a replacement
    /// alike: nodes, DaemonSets, bound pods by node, and this cluster's instances (without
    /// the launches EC2 does not list yet; the caller merges those in), or `owned` when
    /// the caller has a listing already. The lists are independent, so they are asked at
    /// once: a pending pod waits for the slowest, not for their sum. The first to fail
    /// fails it.
    pub(super) async fn list_capacity(
        &self,
        owned: Option<Vec<OwnedInstance>>,
    ) -> Result<CapacityLists, ProvisionError> {
        let nodes = async { self.kube.nodes().await.map_err(kube_err("nodes")) };
        let daemon_sets = async {
            self.kube
                .daemon_sets()
                .await
                .map_err(kube_err("DaemonSets"))
        };
        let bound = async {
            self.kube
                .bound_pods_by_node()
                .await
                .map_err(kube_err("bound pods"))
        };
        let owned = async {
            match owned {
                Some(kept) => Ok(kept),
                None => (self.aws.list_owned().await).map_err(aws_err("listing owned instances")),
            }
        };
        let (nodes, daemon_sets, bound, owned) =
            tokio::try_join!(nodes, daemon_sets, bound, owned)?;
        Ok(CapacityLists {
            nodes,
            daemon_sets,
            bound,
            owned,
        })
    }

    /// The act phase's first writes: the node-claim labels [`Self::read_capacity`] found
    /// missing. Returns how many were written; a failure is logged and retried next poll.
    pub(super) async fn label_nodes(&self, unlabelled: &[(String, String)]) -> usize {
        let mut written = 0;
        for (node, claim) in unlabelled {
            match self.kube.label(node, labels::NODECLAIM, claim).await {
                Ok(()) => written += 1,
                Err(e) => {
                    tracing::warn!(
                        node,
                        nodeclaim = claim,
                        error = crate::error_chain(&e),
                        "labelling node failed"
                    )
                }
            }
        }
        written
    }
}

impl<K: Cluster, A> Provisioner<K, A> {
    /// Reads the Namespaces' labels into `snapshot` when a pod (anti-)affinity term there
    /// selects namespaces by label; otherwise nothing is asked.
    pub(super) async fn read_namespace_labels(
        &self,
        snapshot: &mut crate::scheduling::Snapshot,
    ) -> Result<(), ProvisionError> {
        if snapshot.selects_namespaces() {
            snapshot.namespace_labels = self
                .kube
                .namespace_labels()
                .await
                .map_err(kube_err("Namespaces"))?;
        }
        Ok(())
    }
}
