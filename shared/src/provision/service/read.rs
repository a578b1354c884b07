//! A poll's read phase: what it needs to decide, gathered without writing anything. It
//! reads in two steps so that an idle poll (no pending pod, the batching window open)
//! costs two cluster reads, not six calls: [`Provisioner::read_pending`] first, then,
//! only when a plan is due, [`Provisioner::read_capacity`].

use std::collections::HashMap;
use std::time::SystemTime;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::super::fleet_view::Source;
use super::super::in_flight::{missing_nodeclaim_labels, set_nodeclaim_label};
use super::super::planning_order::sort_for_planning;
use super::super::turn::Turn;
use super::{ProvisionError, Provisioner, aws_err, kube_err};
use crate::api::{EC2NodeClass, NodePool, labels};
use crate::aws::{Cloud, OwnedInstance};
use crate::kube::{Cluster, ConfigOrigin, ObjectRef, usable};

/// The configuration and the pending pods, in planning order.
pub(super) struct Pending {
    pub(super) pools: Vec<NodePool>,
    pub(super) classes: Vec<EC2NodeClass>,
    /// The NodeOverlays the pools' types are priced and sized with.
    pub(super) overlays: crate::scheduling::Overlays,
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

/// The capacity side as listed, before what the listing may lack is added.
pub(super) struct CapacityLists {
    pub(super) nodes: Vec<Node>,
    pub(super) daemon_sets: Vec<DaemonSet>,
    pub(super) bound: HashMap<String, Vec<Pod>>,
    pub(super) owned: Listed,
}

/// This cluster's instances as one read got them.
pub(super) enum Listed {
    /// The listing kept between polls, asked for at `asked_at`.
    Kept {
        instances: Vec<OwnedInstance>,
        asked_at: SystemTime,
    },
    /// Listed now.
    Now(Vec<OwnedInstance>),
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
            overlays: crate::scheduling::Overlays::new(&config.inputs.node_overlays),
            dropped,
            origin: config.source,
            pods,
        })
    }

    /// Reads the capacity side for a poll of `turn`. It writes nothing to the cluster; it
    /// updates this container's view of the fleet (see [`Self::capacity_on_its_way`]).
    pub(super) async fn read_capacity(
        &mut self,
        turn: &Turn<'_>,
        now: SystemTime,
    ) -> Result<Capacity, ProvisionError> {
        let CapacityLists {
            mut nodes,
            daemon_sets,
            bound,
            owned,
        } = self.list_capacity(turn, now).await?;
        let owned = self.capacity_on_its_way(turn, owned, &nodes, now).await?;
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
    /// alike: nodes, DaemonSets, bound pods by node, and this cluster's instances (the
    /// listing `turn` may plan with, else one asked for now), with what the functions
    /// share adopted (exclusions, launches made outside the Lease). The reads are
    /// independent, so they are asked at once: a pending pod waits for the slowest, not
    /// for their sum. The first to fail fails it.
    pub(super) async fn list_capacity(
        &mut self,
        turn: &Turn<'_>,
        now: SystemTime,
    ) -> Result<CapacityLists, ProvisionError> {
        let source = self.fleet.source(turn, now);
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
            match &source {
                Source::Kept(kept) => Ok(kept.instances.clone()),
                Source::List => {
                    (self.aws.list_owned().await).map_err(aws_err("listing owned instances"))
                }
            }
        };
        let shared = self.load_shared(now);
        let (nodes, daemon_sets, bound, owned, shared) =
            tokio::try_join!(nodes, daemon_sets, bound, owned, async { Ok(shared.await) })?;
        self.adopt_shared(shared);
        let owned = match source {
            Source::Kept(kept) => Listed::Kept {
                instances: owned,
                asked_at: kept.asked_at,
            },
            Source::List => {
                self.fleet
                    .keep_listing(owned.clone(), now, turn.since.is_some());
                Listed::Now(owned)
            }
        };
        Ok(CapacityLists {
            nodes,
            daemon_sets,
            bound,
            owned,
        })
    }

    /// Capacity on its way, the one rule a poll and a replacement count by (see
    /// [`super::super::fleet_view`]): the listing, the launches others recorded that a
    /// kept listing lacks (described by id), and this container's launches it lacks
    /// (unless EC2 says they are gone).
    pub(super) async fn capacity_on_its_way(
        &mut self,
        turn: &Turn<'_>,
        listed: Listed,
        nodes: &[Node],
        now: SystemTime,
    ) -> Result<Vec<OwnedInstance>, ProvisionError> {
        let (mut owned, asked_at, kept) = match listed {
            Listed::Kept {
                instances,
                asked_at,
            } => (instances, asked_at, true),
            Listed::Now(instances) => (instances, now, false),
        };
        if kept {
            let missing: Vec<String> = (self.fleet.recorded_missing(&owned, nodes, turn.named))
                .into_iter()
                .map(String::from)
                .collect();
            if !missing.is_empty() {
                let found = (self.aws.list_owned_ids(&missing).await)
                    .map_err(aws_err("describing launches recorded by others"))?;
                owned.extend(found);
            }
        }
        // A launch after the listing was asked for is missing from it as a rule: in flight
        // until a listing shows it (or shows it gone). Only older ones are asked about.
        let unlisted = self.fleet.own_unlisted(&owned, asked_at, nodes);
        if !unlisted.is_empty() {
            // A launch that joined and was terminated before any read listed it is not in
            // flight; one EC2 does not describe yet is (on error, keep counting it).
            if let Ok(states) = self.aws.states(&unlisted).await {
                self.fleet.forget_terminated(&states);
            }
        }
        Ok(self.fleet.on_its_way(owned, now))
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

    /// Holds the pods planned in `snapshot` to where their volumes allow; the claims,
    /// volumes and classes are read only when one of `pods` has a claim. Returns the pods
    /// that cannot be planned for: a claim that cannot be used, or, when the read fails,
    /// every pod with a claim (the others are still planned).
    pub(super) async fn read_volume_topology(
        &self,
        snapshot: &mut crate::scheduling::Snapshot,
        pods: &[Pod],
    ) -> Vec<crate::scheduling::PodError> {
        if !crate::scheduling::claims_volumes(pods) {
            return Vec::new();
        }
        match self.kube.volume_objects().await {
            Ok(objects) => snapshot.narrow_to_volumes(pods, &objects),
            Err(e) => {
                let why = format!(
                    "its volumes' claims could not be read: {}",
                    crate::error_chain(&e)
                );
                let claiming: Vec<String> = pods
                    .iter()
                    .filter(|p| crate::scheduling::claims_volumes([*p]))
                    .map(super::pod_key)
                    .collect();
                snapshot.pods.retain(|d| !claiming.contains(&d.key()));
                claiming
                    .into_iter()
                    .map(|pod| crate::scheduling::PodError {
                        pod,
                        field: "spec.volumes".into(),
                        message: why.clone(),
                    })
                    .collect()
            }
        }
    }
}
