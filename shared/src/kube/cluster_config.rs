//! `ConfigSource` for `KubeCluster`: Karpenter's CRD objects when a NodePool CRD is
//! installed (even with no NodePool: then nothing is provisioned), else the ConfigMap,
//! else the default pool from the stack parameters.

use ::kube::api::{Api, ApiResource, DynamicObject, ListParams};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;

use super::cluster::KubeCluster;
use super::config::{
    ConfigLoad, ConfigOrigin, cluster_file, config_map_file, default_pool_inputs, holds_node_pool,
};
use super::error::KubeError;
use super::ports::ConfigSource;
use crate::api::{Inputs, Problem, validate};

/// One Karpenter kind and the versions tried, newest first. The `ApiResource`s are written
/// out rather than discovered, to save a discovery round trip on every load.
struct CrdKind {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    versions: &'static [&'static str],
}

/// The kinds whose CRD being served makes the CRDs the configuration (see DESIGN, "Where
/// the configuration comes from").
const POOL_KINDS: &[&str] = &["NodePool", "Provisioner"];

/// Classes before pools, so a legacy Provisioner's kubelet settings find their template.
const CRD_KINDS: &[CrdKind] = &[
    CrdKind {
        group: "karpenter.k8s.aws",
        kind: "AWSNodeTemplate",
        plural: "awsnodetemplates",
        versions: &["v1alpha1"],
    },
    CrdKind {
        group: "karpenter.k8s.aws",
        kind: "EC2NodeClass",
        plural: "ec2nodeclasses",
        versions: &["v1", "v1beta1"],
    },
    CrdKind {
        group: "karpenter.sh",
        kind: "Provisioner",
        plural: "provisioners",
        versions: &["v1alpha5"],
    },
    CrdKind {
        group: "karpenter.sh",
        kind: "NodePool",
        plural: "nodepools",
        versions: &["v1", "v1beta1"],
    },
    CrdKind {
        group: "karpenter.sh",
        kind: "NodeOverlay",
        plural: "nodeoverlays",
        versions: &["v1alpha1"],
    },
];

impl CrdKind {
    fn resource(&self, version: &str) -> ApiResource {
        ApiResource {
            group: self.group.into(),
            version: version.into(),
            api_version: format!("{}/{version}", self.group),
            kind: self.kind.into(),
            plural: self.plural.into(),
        }
    }
}

/// Turns a listed object into the document a user would have written: list items may lack
/// `apiVersion`/`kind`, and `status` and server-set metadata are not configuration.
fn as_document(object: &DynamicObject, resource: &ApiResource) -> Value {
    let mut doc = serde_json::Map::new();
    doc.insert("apiVersion".into(), resource.api_version.clone().into());
    doc.insert("kind".into(), resource.kind.clone().into());
    let mut metadata = serde_json::Map::new();
    metadata.insert(
        "name".into(),
        object.metadata.name.clone().unwrap_or_default().into(),
    );
    for (key, map) in [
        ("labels", &object.metadata.labels),
        ("annotations", &object.metadata.annotations),
    ] {
        if let Some(Ok(v)) = map.as_ref().map(serde_json::to_value) {
            metadata.insert(key.into(), v);
        }
    }
    doc.insert("metadata".into(), Value::Object(metadata));
    if let Some(spec) = object.data.get("spec") {
        doc.insert("spec".into(), spec.clone());
    }
    Value::Object(doc)
}

impl KubeCluster {
    /// Lists one Karpenter kind, trying its versions in order. `None` when no version is
    /// served: the CRD is not installed, which is not an error.
    async fn list_crd(
        &self,
        kind: &CrdKind,
    ) -> Result<Option<(ApiResource, Vec<DynamicObject>)>, KubeError> {
        for version in kind.versions {
            let resource = kind.resource(version);
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
            let label = format!("{}.{}/{version}", kind.plural, kind.group);
            match self.list_all(&api, ListParams::default(), &label).await {
                Ok(items) => return Ok(Some((resource, items))),
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The Karpenter objects in the cluster, and whether a NodePool kind (`NodePool` or
    /// the legacy `Provisioner`) is served at all.
    async fn load_crds(&self) -> Result<(Inputs, Vec<Problem>, bool), KubeError> {
        let mut inputs = Inputs::default();
        let mut problems = Vec::new();
        let mut pools_served = false;
        for kind in CRD_KINDS {
            let Some((resource, objects)) = self.list_crd(kind).await? else {
                continue;
            };
            pools_served |= POOL_KINDS.contains(&kind.kind);
            for object in &objects {
                let name = object.metadata.name.as_deref().unwrap_or_default();
                let file = cluster_file(kind.plural, kind.group, name);
                problems.extend(inputs.load_value(&file, 1, as_document(object, &resource)));
            }
        }
        Ok((inputs, problems, pools_served))
    }

    /// `None` when the ConfigMap does not exist.
    async fn load_config_map(&self) -> Result<Option<(Inputs, Vec<Problem>)>, KubeError> {
        let (ns, name) = (
            &self.settings.config_map_namespace,
            &self.settings.config_map_name,
        );
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let resource = format!("configmaps/{ns}/{name}");
        let Some(cm) = self
            .settings
            .retry
            .run("get", &resource, || api.get_opt(name))
            .await?
        else {
            return Ok(None);
        };
        let mut inputs = Inputs::default();
        let mut problems = Vec::new();
        for (key, text) in cm.data.iter().flatten() {
            problems.extend(inputs.load_str(&config_map_file(ns, name, key), text));
        }
        Ok(Some((inputs, problems)))
    }
}

impl ConfigSource for KubeCluster {
    /// The first source that holds a NodePool wins. Problems found in a source that was
    /// passed over (say, a ConfigMap whose only NodePool failed to parse as YAML) are kept
    /// in the result so they are still reported.
    async fn load(&self) -> Result<ConfigLoad, KubeError> {
        self.config_memo.get_or_load(self.load_uncached()).await
    }
}

impl KubeCluster {
    async fn load_uncached(&self) -> Result<ConfigLoad, KubeError> {
        let (inputs, problems, pools_served) = self.load_crds().await?;
        // With Karpenter's CRDs installed they are the whole truth, as in Karpenter: every
        // NodePool deleted means nothing is provisioned, not the stack's default pool.
        if pools_served || holds_node_pool(&inputs, &problems) {
            return Ok(finish(inputs, problems, ConfigOrigin::Crds));
        }
        let mut passed_over = problems;
        if let Some((inputs, problems)) = self.load_config_map().await? {
            if holds_node_pool(&inputs, &problems) {
                let origin = ConfigOrigin::ConfigMap {
                    namespace: self.settings.config_map_namespace.clone(),
                    name: self.settings.config_map_name.clone(),
                };
                return Ok(finish(inputs, problems, origin));
            }
            passed_over.extend(problems);
        }
        let (inputs, problems) = default_pool_inputs(&self.settings.default_pool);
        let mut load = finish(inputs, problems, ConfigOrigin::Default);
        load.problems.extend(passed_over);
        Ok(load)
    }
}

fn finish(inputs: Inputs, mut problems: Vec<Problem>, source: ConfigOrigin) -> ConfigLoad {
    problems.extend(validate(&inputs));
    ConfigLoad {
        inputs,
        problems,
        source,
    }
}
