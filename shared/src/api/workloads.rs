//! Expanding workloads read from files into the pods they would create, so that a plan can be
//! made without a cluster.
//!
//! Pods are named `<workload>-<i>` (i from 0) in the workload's namespace, carry the template's
//! labels, annotations and spec, and an ownerReference naming the workload's kind. Real
//! Deployments own their pods through a ReplicaSet; owning them directly is enough for what
//! the core reads (grouping by owner, recognising DaemonSet pods). No status is set: every pod
//! read from a file is treated as pending by its consumer.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The namespace the API server puts an object in when none is given.
pub const DEFAULT_NAMESPACE: &str = "default";

/// A bare pod, with its namespace defaulted.
pub fn bare_pod(mut pod: Pod) -> Pod {
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some(DEFAULT_NAMESPACE.into());
    }
    pod
}

/// `spec.replicas` pods (1 when unset, as the API server defaults it).
pub fn deployment_pods(d: &Deployment) -> Vec<Pod> {
    let Some(spec) = &d.spec else {
        return Vec::new();
    };
    expand(
        "apps/v1",
        "Deployment",
        &d.metadata,
        &spec.template,
        replicas(spec.replicas),
    )
}

pub fn replica_set_pods(r: &ReplicaSet) -> Vec<Pod> {
    let Some(spec) = &r.spec else {
        return Vec::new();
    };
    let template = spec.template.clone().unwrap_or_default();
    expand(
        "apps/v1",
        "ReplicaSet",
        &r.metadata,
        &template,
        replicas(spec.replicas),
    )
}

pub fn stateful_set_pods(s: &StatefulSet) -> Vec<Pod> {
    let Some(spec) = &s.spec else {
        return Vec::new();
    };
    expand(
        "apps/v1",
        "StatefulSet",
        &s.metadata,
        &spec.template,
        replicas(spec.replicas),
    )
}

/// `spec.parallelism` pods (default 1), never more than `spec.completions`: those are the pods
/// a Job runs at once when it starts.
pub fn job_pods(j: &Job) -> Vec<Pod> {
    let Some(spec) = &j.spec else {
        return Vec::new();
    };
    let parallelism = replicas(spec.parallelism);
    let count = match spec.completions {
        Some(c) => parallelism.min(c.max(0) as usize),
        None => parallelism,
    };
    expand("batch/v1", "Job", &j.metadata, &spec.template, count)
}

fn replicas(field: Option<i32>) -> usize {
    field.unwrap_or(1).max(0) as usize
}

fn expand(
    api_version: &str,
    kind: &str,
    owner: &ObjectMeta,
    template: &PodTemplateSpec,
    count: usize,
) -> Vec<Pod> {
    let name = owner.name.clone().unwrap_or_default();
    let namespace = owner
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.into());
    let template_meta = template.metadata.clone().unwrap_or_default();
    let reference = OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.clone(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    (0..count)
        .map(|i| Pod {
            metadata: ObjectMeta {
                name: Some(format!("{name}-{i}")),
                namespace: Some(namespace.clone()),
                labels: template_meta.labels.clone(),
                annotations: template_meta.annotations.clone(),
                owner_references: Some(vec![reference.clone()]),
                ..ObjectMeta::default()
            },
            spec: template.spec.clone(),
            status: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::load::parse;

    fn from_yaml<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        parse(serde_yaml::from_str(yaml).unwrap()).unwrap()
    }

    /// A pod template at the indentation of a workload's `spec` fields.
    const TEMPLATE: &str = "
  template:
    metadata: {labels: {app: web}, annotations: {note: x}}
    spec:
      containers: [{name: c, image: pause, resources: {requests: {cpu: 500m}}}]
      nodeSelector: {nodeType: network-node}";

    #[test]
    fn a_deployment_with_two_replicas_becomes_two_named_pods_in_its_namespace() {
        let d: Deployment = from_yaml(&format!(
            "metadata: {{name: nginx, namespace: nginx}}\nspec:\n  replicas: 2\n  selector: {{}}{TEMPLATE}"
        ));
        let pods = deployment_pods(&d);
        let names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["nginx-0", "nginx-1"]);
        let pod = &pods[1];
        assert_eq!(pod.metadata.namespace.as_deref(), Some("nginx"));
        assert_eq!(pod.metadata.labels.as_ref().unwrap()["app"], "web");
        assert_eq!(pod.metadata.annotations.as_ref().unwrap()["note"], "x");
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Deployment", "nginx")
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.node_selector.as_ref().unwrap()["nodeType"],
            "network-node"
        );
    }

    #[test]
    fn replicas_default_to_one_and_zero_means_no_pods() {
        let one: StatefulSet = from_yaml(&format!(
            "metadata: {{name: db}}\nspec:\n  selector: {{}}\n  serviceName: db{TEMPLATE}"
        ));
        let pods = stateful_set_pods(&one);
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.namespace.as_deref(), Some("default"));
        assert_eq!(
            pods[0].metadata.owner_references.as_ref().unwrap()[0].kind,
            "StatefulSet"
        );

        let zero: ReplicaSet = from_yaml(&format!(
            "metadata: {{name: rs}}\nspec:\n  replicas: 0\n  selector: {{}}{TEMPLATE}"
        ));
        assert!(replica_set_pods(&zero).is_empty());
    }

    #[test]
    fn a_job_runs_parallelism_pods_but_no_more_than_its_completions() {
        let job = |extra: &str| -> Job {
            from_yaml(&format!(
                "metadata: {{name: batch}}\nspec:\n  {extra}{TEMPLATE}"
            ))
        };
        assert_eq!(job_pods(&job("parallelism: 3")).len(), 3);
        assert_eq!(job_pods(&job("parallelism: 3\n  completions: 2")).len(), 2);
        assert_eq!(job_pods(&job("completions: 5")).len(), 1);
        assert_eq!(
            job_pods(&job("parallelism: 2"))[0]
                .metadata
                .owner_references
                .as_ref()
                .unwrap()[0]
                .kind,
            "Job"
        );
    }

    #[test]
    fn a_bare_pod_without_namespace_lands_in_default_and_keeps_its_spec() {
        let pod: Pod = from_yaml("metadata: {name: p}\nspec: {containers: [{name: c, image: x}]}");
        let pod = bare_pod(pod);
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        assert!(pod.metadata.owner_references.is_none());
        assert_eq!(pod.spec.unwrap().containers[0].name, "c");
    }
}
