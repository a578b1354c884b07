//! Room that is already spoken for. A replacement is planned for one node's pods, but other
//! pods are on their way to the same capacity: pods still pending (the provisioner launched,
//! or will launch, for them) and the pods of other nodes being drained, whose own
//! replacements may be the very instances now in flight, launched while those pods were
//! bound elsewhere and so invisible in them. Counting that room as free let a second spot
//! warning in a NodePool nominate its pods onto the first warning's replacement and launch
//! nothing.
//!
//! A draining node that records its replacement (`nodewright.io/replacement`) has its room
//! reserved whole: its pods may already be evicted and their successors not yet created,
//! so they cannot be counted one by one. A draining node without one (its pods fit on
//! existing nodes, or its replacement is still being launched) has its pods booked where
//! the solver would put them, as pending pods are.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::drain::reschedulable;
use crate::ids::InstanceId;
use crate::kube::{InFlight, in_flight_name, parse_provider_id, tainted_for_disruption};
use crate::scheduling::{ExistingNode, Nomination, PodDemand};

/// What other pods have claimed, seen from the replacement of one node.
#[derive(Debug, Default, PartialEq)]
pub struct SpokenFor {
    /// Pods that will need room: the pending ones and those of draining nodes without a
    /// recorded replacement, unbound as the scheduler will see them.
    pub pods: Vec<Pod>,
    /// Instances recorded as another node's replacement: no room for this node's pods.
    pub instances: HashSet<InstanceId>,
}

/// See the module documentation. `replacing` are the nodes whose replacement is planned:
/// their own recorded replacement stays capacity for their own pods.
pub fn spoken_for(
    replacing: &[String],
    nodes: &[Node],
    bound: &HashMap<String, Vec<Pod>>,
    pending: Vec<Pod>,
) -> SpokenFor {
    let mut out = SpokenFor {
        pods: pending,
        instances: HashSet::new(),
    };
    let draining = nodes.iter().filter(|n| {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        !replacing.iter().any(|r| r == name) && tainted_for_disruption(n)
    });
    for node in draining {
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        match crate::removal::replacement_on(&annotations) {
            Some(crate::removal::Replacement::Launched { instances, .. }) => out
                .instances
                .extend(instances.iter().filter_map(|i| InstanceId::parse(i))),
            Some(_) => {}
            None => {
                let pods = node.metadata.name.as_deref().and_then(|n| bound.get(n));
                out.pods.extend(
                    reschedulable(pods.map(Vec::as_slice).unwrap_or_default()).map(unbound),
                );
            }
        }
    }
    out
}

/// The pod as the scheduler will see it once evicted.
pub(crate) fn unbound(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = None;
    }
    pod
}

impl SpokenFor {
    /// Marks the nodes that are another node's replacement, in flight or registered, as
    /// taking no new pod in this plan. They stay in it: NodePool limits still count them.
    pub fn withhold(&self, flying: &[InFlight], registered: &[Node], nodes: &mut [ExistingNode]) {
        let in_flight = flying
            .iter()
            .filter(|f| self.instances.contains(f.instance_id.as_str()))
            .map(in_flight_name);
        let joined = registered
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(parse_provider_id)
                    .is_some_and(|p| self.instances.contains(p.instance_id.as_str()))
            })
            .filter_map(|n| n.metadata.name.clone());
        let names: HashSet<String> = in_flight.chain(joined).collect();
        for node in nodes.iter_mut().filter(|n| names.contains(&n.name)) {
            node.schedulable = false;
        }
    }
}

/// Books each nominated pod's requests on the node the solver nominated it to, so a plan
/// made next sees only the room that is left. A nomination naming a pod or node that is
/// not in the inputs changes nothing.
pub fn book(nodes: &mut [ExistingNode], pods: &[PodDemand], nominations: &[Nomination]) {
    let by_key: HashMap<String, &PodDemand> = pods.iter().map(|p| (p.key(), p)).collect();
    for nomination in nominations {
        let Some(node) = nodes.iter_mut().find(|n| n.name == nomination.node) else {
            continue;
        };
        for pod in nomination.pods.iter().filter_map(|k| by_key.get(k)) {
            node.requested.add(&pod.requests);
            node.pods.push((pod.namespace.clone(), pod.labels.clone()));
            node.anti_affinity.extend(pod.anti_affinity.iter().cloned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::labels::DISRUPTED_TAINT;
    use crate::api::labels::REPLACEMENT_ANNOTATION;
    use crate::resources::Resources;
    use serde_json::json;

    fn node(name: &str, tainted: bool, replacement: Option<&str>) -> Node {
        let taints = if tainted {
            json!([{"key": DISRUPTED_TAINT, "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        let annotations = match replacement {
            Some(r) => json!({REPLACEMENT_ANNOTATION: r}),
            None => json!({}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"taints": taints, "providerID": format!("aws:///us-east-1a/{}", instance_of(name))},
        }))
        .unwrap()
    }

    /// The instance a test node runs on.
    fn instance_of(node: &str) -> String {
        format!("i-{:017x}", node.bytes().map(u64::from).sum::<u64>())
    }

    fn pod(name: &str, on: &str, owner: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner,
                                              "name": "x", "uid": "u", "controller": true}]},
            "spec": {"nodeName": (!on.is_empty()).then_some(on), "containers": [{"name": "c"}]},
        }))
        .unwrap()
    }

    fn names(pods: &[Pod]) -> Vec<&str> {
        pods.iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect()
    }

    fn bound(pods: &[(&str, &str, &str)]) -> HashMap<String, Vec<Pod>> {
        let mut out: HashMap<String, Vec<Pod>> = HashMap::new();
        for (name, on, owner) in pods {
            out.entry(on.to_string())
                .or_default()
                .push(pod(name, on, owner));
        }
        out
    }

    #[test]
    fn what_is_on_its_way_besides_the_replaced_nodes_own_pods() {
        // (case, nodes as (name, tainted, recorded replacement), expected pods, instances)
        type NodeRow<'a> = (&'a str, bool, Option<&'a str>);
        type Case<'a> = (&'a str, Vec<NodeRow<'a>>, Vec<&'a str>, Vec<&'a str>);
        let cases: [Case; 5] = [
            (
                "the replaced node's own pods and recorded replacement stay its own",
                vec![("a", true, Some("i-r1"))],
                vec!["p1"],
                vec![],
            ),
            (
                "a draining node without a recorded replacement: its movable pods, not its DaemonSet pod",
                vec![("a", true, None), ("b", true, None)],
                vec!["p1", "b1"],
                vec![],
            ),
            (
                "a draining node with a recorded replacement: that room, not its pods",
                vec![("a", true, None), ("b", true, Some("i-r1,i-r2"))],
                vec!["p1"],
                vec!["i-r1", "i-r2"],
            ),
            (
                "a replacement recorded as none reserves nothing",
                vec![("a", true, None), ("b", true, Some("none"))],
                vec!["p1"],
                vec![],
            ),
            (
                "a node that is not draining is nobody's business",
                vec![("a", true, None), ("c", false, Some("i-r3"))],
                vec!["p1"],
                vec![],
            ),
        ];
        let pods = bound(&[
            ("a1", "a", "ReplicaSet"),
            ("b1", "b", "ReplicaSet"),
            ("b-ds", "b", "DaemonSet"),
            ("c1", "c", "ReplicaSet"),
        ]);
        for (case, rows, want_pods, want_instances) in cases {
            let nodes: Vec<Node> = rows.iter().map(|(n, t, r)| node(n, *t, *r)).collect();
            let out = spoken_for(
                &["a".into()],
                &nodes,
                &pods,
                vec![pod("p1", "", "ReplicaSet")],
            );
            assert_eq!(names(&out.pods), want_pods, "{case}");
            let want: HashSet<InstanceId> =
                want_instances.iter().map(|s| InstanceId::new(*s)).collect();
            assert_eq!(out.instances, want, "{case}");
            assert!(
                out.pods
                    .iter()
                    .all(|p| p.spec.as_ref().unwrap().node_name.is_none()),
                "{case}: pods on their way are unbound"
            );
        }
    }

    #[test]
    fn another_nodes_replacement_takes_no_new_pod_whether_in_flight_or_registered() {
        let spoken = SpokenFor {
            pods: vec![],
            instances: HashSet::from([
                InstanceId::new("i-flying"),
                InstanceId::new(instance_of("joined")),
            ]),
        };
        let flight = |id: &str| InFlight {
            instance_id: id.into(),
            instance_type: "c6a.xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: None,
            nodepool: None,
            nodeclaim: format!("claim-{id}"),
            labels: Default::default(),
            taints: vec![],
            capacity: Resources::default(),
            allocatable: Resources::default(),
        };
        let flying = [flight("i-flying"), flight("i-other")];
        let registered = [node("joined", false, None), node("free", false, None)];
        let mut nodes = [
            existing("nodeclaim/claim-i-flying"),
            existing("nodeclaim/claim-i-other"),
            existing("joined"),
            existing("free"),
        ];
        spoken.withhold(&flying, &registered, &mut nodes);
        let schedulable: Vec<&str> = nodes
            .iter()
            .filter(|n| n.schedulable)
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(schedulable, ["nodeclaim/claim-i-other", "free"]);
    }

    fn existing(name: &str) -> ExistingNode {
        ExistingNode {
            name: name.into(),
            nodepool: Some("default".into()),
            instance_type: "c6a.xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: None,
            labels: Default::default(),
            taints: Vec::new(),
            capacity: Resources::default(),
            allocatable: Resources::default(),
            requested: Resources::default(),
            pods: Vec::new(),
            anti_affinity: vec![],
            schedulable: true,
        }
    }

    #[test]
    fn booking_takes_each_nominated_pods_requests_from_its_node_only() {
        let cpu = |m| Resources {
            cpu: m,
            ..Resources::default()
        };
        let mut nodes = [existing("flying"), existing("other")];
        let pods = [
            PodDemand::simple("default", "b1", cpu(1000)),
            PodDemand::simple("default", "b2", cpu(500)),
        ];
        let nominations = [
            Nomination {
                node: "flying".into(),
                pods: vec!["default/b1".into(), "default/b2".into()],
            },
            Nomination {
                node: "gone".into(),
                pods: vec!["default/b1".into()],
            },
        ];
        book(&mut nodes, &pods, &nominations);
        assert_eq!(nodes[0].requested.cpu, 1500);
        assert_eq!(nodes[0].pods.len(), 2);
        assert_eq!(nodes[1].requested.cpu, 0);
        assert!(nodes[1].pods.is_empty());
    }
}
