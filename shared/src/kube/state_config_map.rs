//! nodewright's own ConfigMap of short-lived facts (`kube-system/nodewright-state`: the
//! least-privilege RBAC creates it and lets the functions read and update it, and only it;
//! with cluster-admin the first write creates it), as the store of what
//! the functions share ([`SharedState`]): unavailable offerings, and launches made outside
//! the provisioner's Lease. Writes are read-merge-replace with the
//! read's resourceVersion: a 409 (another function wrote in between, or created the map
//! first) is re-read, merged again and retried, so no writer's exclusion is lost.

use std::collections::BTreeMap;
use std::time::SystemTime;

use ::kube::Client;
use ::kube::api::{Api, PostParams};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::error::{KubeError, RetryPolicy};
use crate::provision::{
    SharedFacts, SharedState, merge_shared, merge_shared_launches, read_shared,
    read_shared_launches,
};

pub const STATE_CONFIG_MAP_NAMESPACE: &str = "kube-system";
pub const STATE_CONFIG_MAP_NAME: &str = "nodewright-state";

/// Read-merge-write rounds before giving up; each lost round means another function wrote
/// in between, which with three functions is rare past the second.
const MAX_WRITES: u32 = 5;

#[derive(Clone)]
pub struct StateConfigMap {
    api: Api<ConfigMap>,
    retry: RetryPolicy,
    resource: String,
}

impl StateConfigMap {
    pub fn new(client: Client) -> Self {
        StateConfigMap {
            api: Api::namespaced(client, STATE_CONFIG_MAP_NAMESPACE),
            retry: RetryPolicy::default(),
            resource: format!("configmaps/{STATE_CONFIG_MAP_NAMESPACE}/{STATE_CONFIG_MAP_NAME}"),
        }
    }

    async fn get(&self) -> Result<Option<ConfigMap>, KubeError> {
        self.retry
            .run("get", &self.resource, || {
                self.api.get_opt(STATE_CONFIG_MAP_NAME)
            })
            .await
    }

    async fn load_now(&self, now: SystemTime) -> Result<SharedFacts, KubeError> {
        let Some(cm) = self.get().await? else {
            return Ok(SharedFacts::default());
        };
        let data = cm.data.unwrap_or_default();
        let (exclusions, mut problems) = read_shared(&data, now);
        let (launches, more) = read_shared_launches(&data, now);
        problems.extend(more);
        for p in problems {
            tracing::warn!(
                config_map = self.resource,
                problem = p,
                "an unreadable shared fact is ignored (the next write prunes it)"
            );
        }
        Ok(SharedFacts {
            exclusions,
            launches,
        })
    }

    async fn publish_now(&self, add: &SharedFacts, now: SystemTime) -> Result<(), KubeError> {
        let merged = |data: &BTreeMap<String, String>| {
            let data = merge_shared(data, &add.exclusions, now);
            merge_shared_launches(&data, &add.launches, now)
        };
        let pp = PostParams::default();
        let mut conflicts = 0;
        loop {
            let current = self.get().await?;
            let written = match current {
                None => {
                    let cm = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(STATE_CONFIG_MAP_NAME.into()),
                            namespace: Some(STATE_CONFIG_MAP_NAMESPACE.into()),
                            ..ObjectMeta::default()
                        },
                        data: Some(merged(&BTreeMap::new())),
                        ..ConfigMap::default()
                    };
                    self.api.create(&pp, &cm).await.map(|_| ())
                }
                Some(mut cm) => {
                    let data = merged(&cm.data.clone().unwrap_or_default());
                    if cm.data.as_ref() == Some(&data) {
                        return Ok(());
                    }
                    // resourceVersion stays as read: the API server refuses the replace
                    // with 409 if anyone wrote since.
                    cm.data = Some(data);
                    self.api
                        .replace(STATE_CONFIG_MAP_NAME, &pp, &cm)
                        .await
                        .map(|_| ())
                }
            };
            match written {
                Ok(()) => return Ok(()),
                Err(::kube::Error::Api(status))
                    if status.code == 409 && conflicts + 1 < MAX_WRITES =>
                {
                    conflicts += 1;
                    tracing::debug!(
                        config_map = self.resource,
                        conflicts,
                        "written in between; merging again"
                    );
                }
                Err(source) => {
                    return Err(KubeError::Api {
                        verb: "update",
                        resource: self.resource.clone(),
                        source,
                    });
                }
            }
        }
    }
}

impl SharedState for StateConfigMap {
    fn load(&self, now: SystemTime) -> BoxFuture<'_, Result<SharedFacts, KubeError>> {
        Box::pin(self.load_now(now))
    }

    fn publish(&self, add: SharedFacts, now: SystemTime) -> BoxFuture<'_, Result<(), KubeError>> {
        Box::pin(async move { self.publish_now(&add, now).await })
    }
}
